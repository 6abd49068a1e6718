"""Put-to-start latency with an idle worker, next to one PING round trip.

A WorkerPool with one worker process waits on an empty queue. Each sample puts one job and
measures from just before the put call to the first line of the job function
(:func:`benchmarks.tasks.stamp`, which reports CLOCK_MONOTONIC through a Redis list). PING
samples are interleaved with put samples, with the same pause before each, so both see the same
machine: idle CPUs between samples (unless ``--busy``).
"""

from __future__ import annotations

import statistics
import time
import uuid

from benchmarks import baseline
from benchmarks.context import Bench
from benchmarks.figures import Figure, Target, compared, percentile
from benchmarks.processes import worker_pool
from benchmarks.tasks import STAMPS_KEY

QUEUE = "bench-latency"
KLASS = "benchmarks.tasks.stamp"
WARMUP = 20


def put_to_start(bench: Bench) -> float:
    """Milliseconds from the put call to the job function's first line."""
    jid = uuid.uuid4().hex
    queue = bench.client.queues[QUEUE]
    start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    queue.put(KLASS, {}, jid=jid)
    reply = bench.redis.blpop([STAMPS_KEY], timeout=30)
    if reply is None:
        raise TimeoutError(f"job {jid} did not start within 30 s")
    got, started = str(reply[1]).split()
    if got != jid:
        raise RuntimeError(f"expected a stamp of {jid}, got one of {got}")
    return (int(started) - start) / 1e6


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "min": min(samples),
        "p50": percentile(samples, 0.5),
        "p90": percentile(samples, 0.9),
        "p99": percentile(samples, 0.99),
        "max": max(samples),
        "mean": statistics.fmean(samples),
    }


def latency_figures(bench: Bench) -> list[Figure]:
    count = bench.sizes.latency * bench.rounds
    bench.fresh()
    puts: list[float] = []
    pings: list[float] = []
    with worker_pool(bench, QUEUE, 1):
        for index in range(WARMUP + count):
            time.sleep(bench.latency_gap)
            ping = baseline.ping_rtt(bench.redis)
            time.sleep(bench.latency_gap)
            put = put_to_start(bench)
            if index >= WARMUP:
                pings.append(ping)
                puts.append(put)
    ours, base = _summary(puts), _summary(pings)
    extra = {"put_to_start_ms": ours, "ping_ms": base, "samples": count, "gap_s": bench.latency_gap}
    return [
        compared(
            f"latency_{name}",
            f"put-to-start latency, idle worker, {name}",
            "ms",
            [ours[name]],
            [base[name]],
            f"PING round trip, {name}",
            Target("ratio-max", limit),
            better="lower",
            extra=extra,
        )
        for name, limit in (("p50", 2.0), ("p99", 4.0))
    ]
