"""A complete while a big run ages out, next to a complete with nothing to drop.

Every ``complete`` drops up to a hundred completed jobs older than ``jobs-history`` (a week by
default), so once a big run's jobs pass that age, the completes of the whole namespace drop
them, a hundred each. The figure is the time of such a complete (a plain job's, put and popped
just before) while a run of ``sizes.retention`` completed jobs ages out, against the same
complete once nothing is left to drop, in the same round. Time is passed in (every engine call
takes ``now``): the run completes at one moment and the completes come eight days later.
"""

from __future__ import annotations

import json
import statistics
import time

from benchmarks import flowgen
from benchmarks.context import Bench
from benchmarks.figures import Figure, compared
from flows.runs.build import assemble_run

RUN_QUEUE = "bench-retention"
PLAIN_QUEUE = "bench-retention-plain"
WORKER = "bench-retention-worker"
#: Completed jobs a complete drops at most (lua/commands/complete.lua).
SWEEP = 100
#: Completes timed on each side.
SAMPLES = 20
#: The moment the run completes, and eight days later (past the default week of jobs-history).
T0 = 1_800_000_000.0
LATER = T0 + 8 * 86400


def _aged_run(bench: Bench, index: int) -> None:
    """A run of ``sizes.retention`` independent steps, submitted and completed at T0."""
    engine = bench.client.engine
    steps = bench.sizes.retention
    flow = flowgen.validated(flowgen.independent_flow("bench-retention", steps, RUN_QUEUE))
    run_id = f"bench-retention-{index}"
    request = assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={}).request
    engine.call("flow.submit", run_id, request.run_json(), request.jobs_json(), now=T0)
    while jobs := json.loads(engine.call("pop.lean", RUN_QUEUE, WORKER, 500, now=T0)):
        pipe = engine.pipeline()
        for job in jobs:
            pipe.call("complete", job["jid"], WORKER, RUN_QUEUE, "", now=T0)
        pipe.execute()


def _timed_completes(bench: Bench, count: int, tag: str) -> list[float]:
    """Milliseconds of ``count`` completes of plain jobs, each put and popped just before."""
    engine = bench.client.engine
    times = []
    for n in range(count):
        jid = f"{tag}-{n}"
        engine.call("put", WORKER, PLAIN_QUEUE, jid, "benchmarks.tasks.noop", "{}", 0, now=LATER)
        engine.call("pop.lean", PLAIN_QUEUE, WORKER, 1, now=LATER)
        start = time.perf_counter()
        engine.call("complete", jid, WORKER, PLAIN_QUEUE, "", now=LATER)
        times.append((time.perf_counter() - start) * 1000)
    return times


def retention_round(bench: Bench, index: int) -> tuple[float, float]:
    """The median complete (ms) while the run's jobs are dropped, and once none is left."""
    bench.fresh()
    _aged_run(bench, index)
    dropping = max(1, min(SAMPLES, bench.sizes.retention // SWEEP))
    aging = _timed_completes(bench, dropping, f"aging-{index}")
    rest = bench.sizes.retention // SWEEP + 1
    _timed_completes(bench, rest, f"rest-{index}")  # drops what is left of the run
    left = bench.redis.zcard(bench.client.engine.key_prefix + "completed") - dropping - rest
    if left:  # the completed jobs kept are the plain ones alone
        raise RuntimeError(f"{left} of the run's completed jobs left after retention")
    quiet = _timed_completes(bench, SAMPLES, f"quiet-{index}")
    return statistics.median(aging), statistics.median(quiet)


def retention_figures(bench: Bench) -> list[Figure]:
    rounds = [retention_round(bench, index) for index in range(bench.rounds)]
    size = bench.sizes.retention
    return [
        compared(
            "retention_complete_ms",
            f"a complete while a {size:,}-job run ages out (each drops {SWEEP} of its jobs)",
            "ms",
            [aging for aging, _ in rounds],
            [quiet for _, quiet in rounds],
            "a complete with nothing to drop",
            None,
            better="lower",
        )
    ]
