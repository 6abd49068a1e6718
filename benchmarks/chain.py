"""How soon a step starts after the step it depends on completes, in a chain of steps.

Each round puts a chain of ``--size chain=N`` jobs (each depends on the one before) for one idle
WorkerPool worker. Each job records the moment its function starts
(:func:`benchmarks.tasks.link`, CLOCK_REALTIME); the engine records when its dependency
completed (the ``done`` entry of the dependency's history, from the server's clock: the same
clock on one machine). The figure is the median gap over every link of every round, next to
one PING round trip measured in the same rounds; the note adds the gap to the link's ``popped``
history entry (the engine's part: the release in the complete, then the worker's pop).
"""

from __future__ import annotations

import itertools
import statistics
import time
import uuid

from benchmarks import baseline
from benchmarks.context import Bench, wait_until
from benchmarks.figures import Figure, Target, percentile
from benchmarks.latency import summary
from benchmarks.processes import worker_pool
from benchmarks.tasks import STAMPS_KEY

QUEUE = "bench-chain"
KLASS = "benchmarks.tasks.link"


def _when(bench: Bench, jid: str, what: str) -> float:
    """When the latest history entry ``what`` of job ``jid`` was written (the server's clock)."""
    job = bench.client.jobs[jid]
    assert job is not None
    return max(float(entry["when"]) for entry in job.history if entry.get("what") == what)


def chain_round(bench: Bench) -> tuple[list[float], list[float]]:
    """Milliseconds from each link's dependency completing to the link's first line, and to its
    pop (both history entries: the engine's part of the gap)."""
    bench.redis.delete(STAMPS_KEY)
    length = bench.sizes.chain
    jids = [uuid.uuid4().hex for _ in range(length)]
    queue = bench.client.queues[QUEUE]
    with worker_pool(bench, QUEUE, 1):
        for index, jid in enumerate(jids):
            queue.put(KLASS, {}, jid=jid, depends=jids[index - 1 : index] if index else None)
        wait_until(lambda: bench.redis.llen(STAMPS_KEY) >= length, 600, "the chain to finish", 0.05)
        # The last link's complete, before the pool stops.
        wait_until(lambda: bench.client.jobs[jids[-1]].state == "complete", 60, "the last link")
    started = {}
    for item in bench.redis.lrange(STAMPS_KEY, 0, -1):
        jid, ns = str(item).split()
        started[jid] = int(ns) / 1e9
    gaps, pops = [], []
    for before, jid in itertools.pairwise(jids):
        done = _when(bench, before, "done")
        gaps.append((started[jid] - done) * 1000)
        pops.append((_when(bench, jid, "popped") - done) * 1000)
    return gaps, pops


def chain_figures(bench: Bench) -> list[Figure]:
    bench.fresh()
    gaps: list[float] = []
    pops: list[float] = []
    rounds: list[float] = []
    pings: list[float] = []
    for _ in range(bench.rounds):
        sample, popped = chain_round(bench)
        gaps += sample
        pops += popped
        rounds.append(statistics.median(sample))
        for _ in range(100):
            time.sleep(bench.latency_gap)
            pings.append(baseline.ping_rtt(bench.redis))
    return [
        Figure(
            key="chain_start_ms",
            label=f"chain of {bench.sizes.chain:,} steps: a step starts after its dependency "
            "completes, p50",
            unit="ms",
            value=percentile(gaps, 0.5),
            better="lower",
            baseline=statistics.median(pings),
            baseline_label="PING round trip",
            target=Target("max", 0.2),
            rounds=rounds,
            note=f"p90 {percentile(gaps, 0.9):.3f} ms, p99 {percentile(gaps, 0.99):.3f} ms; "
            f"popped (history) {percentile(pops, 0.5):.3f} ms after the done, p50",
            extra={"summary": summary(gaps), "popped_ms": summary(pops)},
        )
    ]
