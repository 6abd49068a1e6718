"""What watching costs: step log capture in the worker, and one Prometheus scrape.

* ``logs_1``: the drain rate of no-op jobs that print one line each, against the same drain of
  jobs that print nothing (same run, same worker pool settings): the capture's overhead.
* ``logs_flood``: the drain rate of no-op jobs on a worker with 2 threads while its other thread
  runs a job printing 100,000 lines (captured: 10,000 stored, the rest counted), against the
  same drain beside a job writing the same lines to /dev/null: what capture adds to a flood.
* ``scrape_ms``: one scrape of the metrics (flows.ui.metrics.read) on a namespace of 10 queues
  holding the drain's jobs, with its engine calls.
"""

from __future__ import annotations

import time

from benchmarks.context import Bench, wait_until
from benchmarks.figures import Figure, Target, compared
from benchmarks.measure import Sample, completed, measured
from benchmarks.processes import worker_pool
from flows.ui import metrics
from scheduler.engine.queue import NewJob

QUEUE = "bench-logs"
FLOOD_LINES = 100_000


def _put(bench: Bench, queue: str, klass: str, count: int) -> None:
    for first in range(0, count, 1000):
        bench.client.queues[queue].put_many(
            [NewJob(klass, {}) for _ in range(min(1000, count - first))]
        )


def _drain(
    bench: Bench, klass: str, count: int, *, threads: int = 1, flood: str | None = None
) -> Sample:
    """``count`` jobs of ``klass`` drained by one worker process; ``flood``: the klass of a job
    printing 100,000 lines put ahead of them (the clock stops when the others are done)."""
    bench.fresh()
    queue = bench.client.queues[QUEUE]
    queue.pause()
    if flood:
        queue.put(flood, {"lines": FLOOD_LINES}, priority=-1, jid="flood")
    _put(bench, QUEUE, klass, count)
    with worker_pool(bench, QUEUE, 1, threads=threads):

        def drain() -> None:
            queue.unpause()
            wait_until(lambda: _others_done(bench, count, flood), 600, "the jobs", pause=0.01)

        sample = measured(bench, count, drain)
        if flood:
            wait_until(lambda: completed(bench) >= count + 1, 600, "the flood", pause=0.05)
        return sample


def _others_done(bench: Bench, count: int, flood: str | None) -> bool:
    done = completed(bench)
    if flood and bench.redis.zscore(bench.client.prefix + "completed", "flood") is not None:
        done -= 1
    return done >= count


def log_figures(bench: Bench) -> list[Figure]:
    count = bench.sizes.drain
    said: list[float] = []
    silent: list[float] = []
    flooded: list[float] = []
    quiet: list[float] = []
    for _ in range(bench.rounds):
        silent.append(_drain(bench, "benchmarks.tasks.noop", count).rate)
        said.append(_drain(bench, "benchmarks.tasks.say", count).rate)
        noop, raw = "benchmarks.tasks.noop", "benchmarks.tasks.flood_devnull"
        quiet.append(_drain(bench, noop, count, threads=2, flood=raw).rate)
        flooded.append(_drain(bench, noop, count, threads=2, flood="benchmarks.tasks.flood").rate)
    return [
        compared(
            "logs_1",
            "drain of jobs printing one line each (step logs), 1 process",
            "jobs/s",
            said,
            silent,
            "the same drain of jobs printing nothing",
            Target("ratio-min", 0.7),
        ),
        compared(
            "logs_flood",
            f"drain beside a job printing {FLOOD_LINES:,} captured lines, 1 process, 2 threads",
            "jobs/s",
            flooded,
            quiet,
            "the same drain beside the same lines written to /dev/null",
            Target("ratio-min", 0.8),
        ),
        scrape_figure(bench),
    ]


def scrape_figure(bench: Bench) -> Figure:
    """Milliseconds per scrape with 10 queues holding ``sizes.drain`` jobs between them."""
    bench.fresh()
    count = bench.sizes.drain
    for index in range(10):
        _put(bench, f"bench-scrape-{index}", "benchmarks.tasks.noop", count // 10)
    rounds: list[float] = []
    calls = 0
    for _ in range(max(5, bench.rounds)):
        start = time.perf_counter()
        calls = metrics.read(bench.client).calls
        rounds.append((time.perf_counter() - start) * 1000)
    rounds.sort()
    return Figure(
        "scrape_ms",
        f"one metrics scrape, 10 queues, {count:,} jobs",
        "ms",
        rounds[len(rounds) // 2],
        better="lower",
        target=Target("max", 50),
        rounds=rounds,
        extra={"engine_calls": calls},
    )
