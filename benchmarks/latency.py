"""Put-to-start latency with an idle worker, next to one PING round trip.

A WorkerPool with one worker process waits on an empty queue. Each sample puts one job and
measures from just before the put call to the first line of the job function
(:func:`benchmarks.tasks.stamp`, which reports CLOCK_MONOTONIC through a Redis list). PING
samples are interleaved with put samples, with the same pause before each, so both see the same
machine: idle CPUs between samples (unless ``--busy``).

Then, with the server's SLOWLOG recording every command (after the timed samples, so that its own
cost stays out of them), the server time of such a put, handed straight to the idle worker, next
to a put into a queue nobody waits on, each after the same pause: what the hand-off adds to a put.
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
# Nobody works this queue: a put there is an ordinary put, with no hand-off.
UNWATCHED = "bench-latency-unwatched"
KLASS = "benchmarks.tasks.stamp"
WARMUP = 20
# Samples of the server-time comparison at most (each a hand-off and an ordinary put).
SERVER_SAMPLES = 300


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


def summary(samples: list[float]) -> dict[str, float]:
    """Min, p50, p90, p99, max and mean of latency samples."""
    return {
        "min": min(samples),
        "p50": percentile(samples, 0.5),
        "p90": percentile(samples, 0.9),
        "p99": percentile(samples, 0.99),
        "max": max(samples),
        "mean": statistics.fmean(samples),
    }


def _put_durations(bench: Bench) -> dict[str, float]:
    """Microseconds the server spent in the last put calls (SLOWLOG), by queue."""
    durations: dict[str, float] = {}
    for entry in bench.redis.slowlog_get(64):
        # FCALL <function> <numkeys> [<prefix>] put <now> <worker> <queue> ... ('' for now)
        words = entry["command"].split(b" ")
        if words[0].upper() != b"FCALL" or len(words) < 8:
            continue
        at = 3 + int(words[2])
        if words[at] == b"put":
            durations.setdefault(words[at + 3].decode(), float(entry["duration"]))
    return durations


def handoff_server_time(bench: Bench, samples: int) -> tuple[list[float], list[float]]:
    """(hand-off, ordinary) server µs of puts, each made after the same pause as the latency
    samples. The idle worker of :data:`QUEUE` must be running."""
    redis = bench.redis
    saved = {str(name): str(value) for name, value in redis.config_get("slowlog-*").items()}
    redis.config_set("slowlog-log-slower-than", 0)
    redis.config_set("slowlog-max-len", 1024)
    handed: list[float] = []
    ordinary: list[float] = []
    try:
        for index in range(WARMUP + samples):
            got: dict[str, float] = {}
            for queue in (QUEUE, UNWATCHED):
                time.sleep(bench.latency_gap)
                if queue == QUEUE:
                    put_to_start(bench)
                else:
                    bench.client.queues[queue].put(KLASS, {})
                got.update(_put_durations(bench))
                redis.slowlog_reset()
            if index >= WARMUP and QUEUE in got and UNWATCHED in got:
                handed.append(got[QUEUE])
                ordinary.append(got[UNWATCHED])
    finally:
        for name, value in saved.items():
            redis.config_set(name, value)
    return handed, ordinary


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
        handed, ordinary = handoff_server_time(bench, min(SERVER_SAMPLES, count))
    ours, base = summary(puts), summary(pings)
    extra = {"put_to_start_ms": ours, "ping_ms": base, "samples": count, "gap_s": bench.latency_gap}
    server = {"handed_us": summary(handed), "ordinary_us": summary(ordinary)}
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
    ] + [
        compared(
            "handoff_server_us",
            "server time of a put handed to the idle worker, p50 (SLOWLOG)",
            "µs",
            [server["handed_us"]["p50"]],
            [server["ordinary_us"]["p50"]],
            "an ordinary put, nobody waiting, p50",
            Target("ratio-max", 2.0),
            better="lower",
            extra={**server, "samples": len(handed), "gap_s": bench.latency_gap},
        )
    ]
