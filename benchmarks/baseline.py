"""Raw-Redis baselines, on the same server with the same client library as the engine.

* :func:`lpush_each` -- one LPUSH round trip per message;
* :func:`lpush_pipelined` -- LPUSH pipelined in batches;
* :func:`reliable_drain` -- a reliable list queue drained by consumer processes: BLMOVE to a
  processing list, then LREM, per message (run as ``python -m benchmarks.baseline consume``);
* :func:`ping_rtt` -- one PING round trip.

A message is the JSON a minimal list queue would push for a job: jid, klass and data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import redis

from benchmarks.context import REPO_ROOT, Bench, wait_until
from benchmarks.processes import cpu_seconds, stop_all
from scheduler.engine.connections import connect

SOURCE = "bench:queue"
STAGING = "bench:staging"
PROCESSING = "bench:processing"
READY = "bench:consumers-ready"
KLASS = "benchmarks.tasks.noop"


def message(index: int) -> str:
    return json.dumps(
        {"jid": uuid.uuid4().hex, "klass": KLASS, "data": {"i": index}}, separators=(",", ":")
    )


def lpush_each(client: redis.Redis, count: int) -> float:
    """Messages per second, one LPUSH round trip each."""
    client.delete(SOURCE)
    start = time.perf_counter()
    for index in range(count):
        client.lpush(SOURCE, message(index))
    elapsed = time.perf_counter() - start
    client.delete(SOURCE)
    return count / elapsed


def lpush_pipelined(client: redis.Redis, count: int, batch: int) -> float:
    """Messages per second, one LPUSH per message, pipelined ``batch`` at a time."""
    client.delete(SOURCE)
    start = time.perf_counter()
    for first in range(0, count, batch):
        pipe = client.pipeline(transaction=False)
        for index in range(first, min(count, first + batch)):
            pipe.lpush(SOURCE, message(index))
        pipe.execute()
    elapsed = time.perf_counter() - start
    client.delete(SOURCE)
    return count / elapsed


def ping_rtt(client: redis.Redis) -> float:
    """One PING round trip, in milliseconds."""
    start = time.perf_counter_ns()
    client.ping()
    return (time.perf_counter_ns() - start) / 1e6


@dataclass(frozen=True)
class DrainResult:
    rate: float  # messages per second
    seconds: float
    server_cpu: float  # seconds of server CPU while draining
    consumer_cpu: float  # seconds of consumer CPU while draining


def reliable_drain(bench: Bench, count: int, consumers: int) -> DrainResult:
    """Drain ``count`` messages with ``consumers`` processes of :func:`consume`.

    The messages wait in a staging list while the consumers start; the clock starts when one
    RENAME makes them visible (blocked consumers wake at once), and stops when both the queue and
    the processing list are empty.
    """
    bench.fresh()
    client = bench.redis
    for first in range(0, count, bench.sizes.batch):
        client.lpush(
            STAGING, *(message(i) for i in range(first, min(count, first + bench.sizes.batch)))
        )
    command = [sys.executable, "-m", "benchmarks.baseline", "consume"]
    processes = [
        subprocess.Popen(command, cwd=REPO_ROOT, env=bench.child_env()) for _ in range(consumers)
    ]
    try:
        wait_until(lambda: int(client.get(READY) or 0) >= consumers, 60, "baseline consumers")
        cpu_before = sum(cpu_seconds(p.pid) for p in processes)
        server_before = _server_cpu(bench)
        start = time.perf_counter()
        client.rename(STAGING, SOURCE)
        wait_until(lambda: _empty(client), 600, "the baseline queue to drain", pause=0.01)
        elapsed = time.perf_counter() - start
        server_cpu = _server_cpu(bench) - server_before
        consumer_cpu = sum(cpu_seconds(p.pid) for p in processes) - cpu_before
    finally:
        stop_all(processes)
    return DrainResult(count / elapsed, elapsed, server_cpu, consumer_cpu)


def _empty(client: redis.Redis) -> bool:
    pipe = client.pipeline(transaction=False)
    pipe.llen(SOURCE)
    pipe.llen(PROCESSING)
    return sum(int(n) for n in pipe.execute()) == 0


def _server_cpu(bench: Bench) -> float:
    cpu = bench.server_info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def consume(url: str) -> None:
    """A reliable-queue consumer: BLMOVE each message to the processing list, then LREM it."""
    client = connect(url)
    client.incr(READY)
    while True:
        item = client.blmove(SOURCE, PROCESSING, 1, "RIGHT", "LEFT")
        if item is not None:
            client.lrem(PROCESSING, 1, str(item))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.baseline")
    parser.add_argument("command", choices=["consume"])
    parser.parse_args(argv)
    consume(os.environ["FLOWS_REDIS_URL"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
