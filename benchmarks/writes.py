"""What a job writes: bytes of append-only file per job, against a raw list queue's.

Each write an engine call makes is its own entry in the append-only file and in the replicas'
stream (scripts replicate their effects), so the bytes a job adds to the file are also what its
life costs a replica's link and the disk. Measured on the benchmark's server (appendonly yes), as
the growth of ``aof_current_size``, with automatic rewrites held off meanwhile:

* a plain job put, popped (``pop.lean``) and completed, one call each;
* a job of a flow of ``sizes.writes`` steps in layers of 10 (each needing two of the layer
  before), submitted, then popped and completed 64 at a time as a busy worker does;

both against the same message through a reliable list queue in the same run (``LPUSH``, then
``LMOVE`` to a processing list and ``LREM`` from it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import flowgen
from benchmarks.baseline import PROCESSING, SOURCE, message
from benchmarks.context import Bench, wait_until
from benchmarks.figures import Figure, compared, median
from benchmarks.measure import command_stats
from benchmarks.throughput import KLASS
from flows.runs.build import assemble_run
from flows.runs.submit import submit

PLAIN_QUEUE = "bench-writes"
FLOW_QUEUE = "bench-writes-flow"
#: Jobs per ``pop.lean`` and per ``complete.many`` of the flow's drain: a worker's prefetch.
DRAIN_BATCH = 64
BASELINE_LABEL = "LPUSH, LMOVE, LREM of the message"


def aof_size(bench: Bench) -> int:
    """The file's size once the server has written what it holds back (everysec can defer a
    write while the previous fsync runs)."""
    wait_until(
        lambda: int(bench.server_info("persistence").get("aof_buffer_length", 0)) == 0,
        10,
        "the append-only file to be written",
    )
    return int(bench.server_info("persistence")["aof_current_size"])


@contextmanager
def no_rewrites(bench: Bench) -> Iterator[None]:
    """Automatic rewrites held off (a rewrite in the middle would shrink the file)."""
    kept = str(bench.redis.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"])
    wait_until(
        lambda: int(bench.server_info("persistence")["aof_rewrite_in_progress"]) == 0,
        60,
        "a rewrite of the append-only file to end",
    )
    bench.redis.config_set("auto-aof-rewrite-percentage", 0)
    try:
        yield
    finally:
        bench.redis.config_set("auto-aof-rewrite-percentage", kept)


def written(bench: Bench, count: int, work: Callable[[], Any]) -> dict[str, float]:
    """Bytes of append-only file and commands run (reads and writes) per job of ``work``."""
    bench.redis.config_resetstat()
    before = aof_size(bench)
    work()
    grown = aof_size(bench) - before
    stats = command_stats(bench)
    calls = sum(s["calls"] for name, s in stats.items() if not name.startswith("fcall"))
    return {"aof_bytes": grown / count, "commands": calls / count}


def plain_round(bench: Bench) -> dict[str, float]:
    bench.fresh()
    count = bench.sizes.writes
    engine, worker = bench.client.engine, bench.client.worker_name

    def work() -> None:
        queue = bench.client.queues[PLAIN_QUEUE]
        for index in range(count):
            queue.put(KLASS, {"i": index})
        for _ in range(count):
            [job] = json.loads(engine.call("pop.lean", PLAIN_QUEUE, worker, 1))
            engine.call("complete", job["jid"], worker, PLAIN_QUEUE, "")

    return written(bench, count, work)


def flow_round(bench: Bench, index: int) -> dict[str, float]:
    bench.fresh()
    steps = bench.sizes.writes
    engine, worker = bench.client.engine, bench.client.worker_name
    flow = flowgen.validated(flowgen.layered_flow("bench-writes", steps, FLOW_QUEUE))
    run_id = f"bench-writes-{index}"
    built = assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={})

    def work() -> None:
        submit(bench.client, built)
        done = 0
        while done < steps:
            jobs = json.loads(engine.call("pop.lean", FLOW_QUEUE, worker, DRAIN_BATCH))
            if not jobs:
                raise RuntimeError("writes: the flow's queue ran dry early")
            results = [(job["jid"], FLOW_QUEUE, '{"n": 1}') for job in jobs]
            engine.call("complete.many", worker, *(part for r in results for part in r))
            done += len(jobs)

    return written(bench, steps, work)


def baseline_round(bench: Bench) -> dict[str, float]:
    bench.fresh()
    count = bench.sizes.writes
    redis = bench.redis

    def work() -> None:
        for index in range(count):
            redis.lpush(SOURCE, message(index))
        for _ in range(count):
            moved = redis.lmove(SOURCE, PROCESSING, "RIGHT", "LEFT")
            redis.lrem(PROCESSING, 1, str(moved))

    return written(bench, count, work)


def write_figures(bench: Bench) -> list[Figure]:
    if int(bench.server_info("persistence")["aof_enabled"]) != 1:
        note = "the server keeps no append-only file"
        return [Figure("aof_bytes_plain", "append-only file per job", "bytes", None, note=note)]
    with no_rewrites(bench):
        baseline, plain, flow = [], [], []
        for index in range(bench.rounds):
            baseline.append(baseline_round(bench))
            plain.append(plain_round(bench))
            flow.append(flow_round(bench, index))
    raw = [r["aof_bytes"] for r in baseline]
    figures = [
        compared(
            "aof_bytes_plain",
            "append-only file per job, put + pop.lean + complete",
            "bytes",
            [r["aof_bytes"] for r in plain],
            raw,
            BASELINE_LABEL,
            None,
            better="lower",
            extra={"rounds": plain, "baseline_rounds": baseline},
        ),
        compared(
            "aof_bytes_flow",
            f"append-only file per job of a {bench.sizes.writes:,}-step layered flow, submitted "
            f"and drained {DRAIN_BATCH} at a time",
            "bytes",
            [r["aof_bytes"] for r in flow],
            raw,
            BASELINE_LABEL,
            None,
            better="lower",
            extra={"rounds": flow},
        ),
    ]
    listed = median([r["commands"] for r in baseline])
    for figure, rounds in zip(figures, (plain, flow), strict=True):
        figure.note = (
            f"{median([r['commands'] for r in rounds]):.1f} commands a job, reads and writes "
            f"(the list queue: {listed:.1f})"
        )
    return figures
