"""Fan-out from an output: the engine call that completes a producer whose output lists
``sizes.fanout`` items, which makes one waiting job per item; next to submitting as many static
steps (one ``flow.submit``)."""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks import flowgen
from benchmarks.context import Bench
from benchmarks.figures import Figure
from flows.runs.build import assemble_run
from flows.runs.submit import submit

FANOUT_QUEUE = "bench-fanout"
WORKER = "bench-fanout-worker"

FLOW = """version: 1
name: bench-fanout
queue: {queue}
steps:
  list: {{job: benchmarks.tasks.noop, outputs: [files]}}
  process:
    needs: [list]
    foreach: {{items: "${{{{ steps.list.outputs.files }}}}", as: f, max_parallel: 4}}
    job: benchmarks.tasks.noop
    with: {{name: "${{{{ f }}}}"}}
  report:
    needs: [process]
    job: benchmarks.tasks.noop
"""


def _waiting(bench: Bench) -> int:
    return int(bench.client.queues[FANOUT_QUEUE].counts().get("waiting") or 0)


def fanout_round(bench: Bench, index: int) -> dict[str, Any]:
    """Submit the fan-out flow, pop its producer, and time the complete that expands it."""
    items = bench.sizes.fanout
    bench.fresh()
    flow = flowgen.validated(FLOW.format(queue=FANOUT_QUEUE))
    run_id = f"bench-fanout-{index}"
    submit(bench.client, assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={}))
    producer = f"{run_id}:list"
    popped = bench.client.engine.call("pop", FANOUT_QUEUE, WORKER, 1)
    if producer not in popped:
        raise RuntimeError(f"fan-out: expected to pop {producer}, got {popped!r}")
    result = json.dumps({"files": [f"file-{i:05d}.csv" for i in range(items)]})
    start = time.perf_counter()
    bench.client.engine.call("complete", producer, WORKER, FANOUT_QUEUE, "", "result", result)
    expand_s = time.perf_counter() - start
    # max_parallel parks nothing yet: every item is waiting once the call returned.
    if _waiting(bench) != items:
        raise RuntimeError(f"fan-out: {_waiting(bench)} items waiting, expected {items}")

    bench.fresh()
    static = flowgen.validated(flowgen.independent_flow("bench-static", items, FANOUT_QUEUE))
    static_id = f"bench-static-{index}"
    built = assemble_run(static_id, static.name, flowgen.expanded(static, static_id), params={})
    start = time.perf_counter()
    submit(bench.client, built)
    submit_s = time.perf_counter() - start
    return {"expand_s": expand_s, "submit_s": submit_s, "items": items}


def fanout_figures(bench: Bench) -> list[Figure]:
    rounds = [fanout_round(bench, index) for index in range(bench.rounds)]
    items = bench.sizes.fanout
    expands = sorted(r["expand_s"] for r in rounds)
    submits = sorted(r["submit_s"] for r in rounds)
    middle = len(rounds) // 2
    return [
        Figure(
            key="fanout_expand_s",
            label=f"fan-out of {items:,} items: the producer's complete call",
            unit="s",
            value=expands[middle],
            better="lower",
            baseline=submits[middle],
            baseline_label=f"flow.submit of {items:,} static steps",
            rounds=[r["expand_s"] for r in rounds],
            baseline_rounds=[r["submit_s"] for r in rounds],
            note=(
                f"one call puts {items:,} waiting jobs and rewires the step's dependents; "
                f"{items / expands[middle]:,.0f} items/s"
            ),
            extra={"rounds": rounds},
        )
    ]
