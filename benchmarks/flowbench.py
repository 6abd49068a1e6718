"""A 10,000-step flow (validate + expand + submit, then run by 2 processes), and cron firing."""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from benchmarks import flowgen
from benchmarks.context import Bench, wait_until
from benchmarks.figures import Figure, Target
from benchmarks.processes import worker_pool
from flows import gc_pause
from flows.flowfile.templates import forget_kept_parses
from flows.runs.build import assemble_run
from flows.runs.submit import submit

FLOW_QUEUE = "bench-flow"
PREPARE = "flows.runtime.worker_hook:prepare"
SERVICE_MODULE = "scheduler.service.loop"
NO_SERVICE = "n/a (no service yet)"


def _unfinished(bench: Bench) -> int:
    counts = bench.client.queues[FLOW_QUEUE].counts()
    return sum(
        int(counts.get(state) or 0)
        for state in ("waiting", "running", "depends", "scheduled", "stalled")
    )


def flow_round(bench: Bench, index: int) -> dict[str, Any]:
    """Validate, expand and submit a layered flow; then time 2 worker processes running it."""
    bench.fresh()
    steps = bench.sizes.flow
    text = flowgen.layered_flow("bench-flow", steps, FLOW_QUEUE)
    run_id = f"bench-flow-{index}"
    forget_kept_parses()  # each round as cold as a `flows run` of the file
    with worker_pool(bench, FLOW_QUEUE, 2, prepare=PREPARE):
        # As `flows run` does: no cyclic collection from loading the file to the run's JSON
        # (only here: the scheduler service, measured by cron, never pauses it).
        gc_pause.enable()
        try:
            # CPU seconds of this process too: on a busy machine they vary far less than the time.
            start, start_cpu = time.perf_counter(), time.process_time()
            with gc_pause.gc_paused():
                flow = flowgen.validated(text)
                validated, validated_cpu = time.perf_counter(), time.process_time()
                puts = flowgen.expanded(flow, run_id)
                expanded, expanded_cpu = time.perf_counter(), time.process_time()
                built = assemble_run(run_id, flow.name, puts, params={})
            submit(bench.client, built)
            submitted, submitted_cpu = time.perf_counter(), time.process_time()
        finally:
            gc_pause.disable()
        wait_until(lambda: _unfinished(bench) == 0, 3600, "the flow run to finish", pause=0.05)
        finished = time.perf_counter()
    failed = bench.client.failed()
    if failed:
        raise RuntimeError(f"the benchmark flow had failures: {failed}")
    return {
        "validate_s": validated - start,
        "expand_s": expanded - validated,
        "submit_s": submitted - expanded,
        "total_s": submitted - start,
        "validate_cpu_s": validated_cpu - start_cpu,
        "expand_cpu_s": expanded_cpu - validated_cpu,
        "submit_cpu_s": submitted_cpu - expanded_cpu,
        "run_s": finished - submitted,
        "jobs": len(puts),
        # What flow.submit is sent (the texts are made once, before the clock stopped).
        "submit_bytes": len(built.request.run_json()) + len(built.request.jobs_json()),
    }


def flow_figures(bench: Bench) -> list[Figure]:
    rounds = [flow_round(bench, index) for index in range(bench.rounds)]
    steps = bench.sizes.flow
    totals = sorted(rounds, key=lambda r: r["total_s"])
    middle = totals[len(totals) // 2]
    runs = sorted(r["run_s"] for r in rounds)
    return [
        Figure(
            key="flow_submit_s",
            label=f"{steps:,}-step flow: validate + expand + submit",
            unit="s",
            value=middle["total_s"],
            better="lower",
            target=Target("below", 0.5),
            rounds=[r["total_s"] for r in rounds],
            note=(
                f"validate {middle['validate_s']:.2f} s, expand {middle['expand_s']:.2f} s, "
                f"submit {middle['submit_s']:.2f} s "
                f"({middle['submit_bytes'] / 1e6:.2f} MB sent)"
            ),
            extra={"rounds": rounds},
        ),
        Figure(
            key="flow_run_s",
            label=f"{steps:,}-step flow: run time with 2 worker processes",
            unit="s",
            value=runs[len(runs) // 2],
            better="lower",
            rounds=[r["run_s"] for r in rounds],
            note=f"{steps / runs[len(runs) // 2]:,.0f} jobs/s; layers of 10 steps, each needing 2",
            extra={"rounds": rounds},
        ),
    ]


def cron_figures(bench: Bench) -> list[Figure]:
    """``sizes.schedules`` cron schedules due in the same minute: one service fires them all.

    Needs the scheduler service (``scheduler/service/loop.py``); without it the figure is
    'n/a (no service yet)'. See :func:`fire_due_schedules` for what is measured.
    """
    count = bench.sizes.schedules
    value: float | None = None
    note = NO_SERVICE
    extra: dict[str, Any] = {}
    if importlib.util.find_spec(SERVICE_MODULE) is not None:
        extra = fire_due_schedules(bench, count)
        value = extra["tick_s"]
        note = (
            f"{extra['fired']:,} runs fired by one tick; registering the {count:,} files "
            f"(one scan) took {extra['scan_s']:.2f} s"
        )
    return [
        Figure(
            key="cron_fire_s",
            label=f"{count:,} cron schedules due in the same minute: one service fires them all",
            unit="s",
            value=value,
            better="lower",
            target=Target("below", 10.0),
            note=note,
            extra=extra,
        )
    ]


CRON_FLOW = """version: 1
name: {name}
queue: bench-cron
schedule: {{cron: "{minute} {hour} * * *"}}
steps:
  only: {{job: benchmarks.tasks.noop}}
"""


def fire_due_schedules(bench: Bench, count: int) -> dict[str, Any]:
    """Seconds for one scheduler service's tick to fire ``count`` schedules due in one minute.

    Writes ``count`` flow files whose cron names the same minute (a few minutes ahead of the
    server's clock), registers them with one ``scan`` 30 s before that minute, then times one
    ``tick`` 1 s after it: every schedule is due and each fires one run. Time is passed to the
    service explicitly, as its tests do, so nothing waits for the wall clock.
    """
    service_module = importlib.import_module(SERVICE_MODULE)
    source_module = importlib.import_module("flows.runs.service_source")
    bench.fresh()
    seconds, _ = bench.redis.time()
    due = (int(seconds) // 60 + 3) * 60
    minute, hour = time.gmtime(due).tm_min, time.gmtime(due).tm_hour
    folder = bench.workdir / f"schedules-{due}"
    folder.mkdir()
    for index in range(count):
        text = CRON_FLOW.format(name=f"cron-{index}", minute=minute, hour=hour)
        (folder / f"cron-{index}.yaml").write_text(text)
    service = service_module.SchedulerService(bench.client, source_module.FlowsSource(), folder)
    start = time.perf_counter()
    service.scan(float(due - 30))
    scanned = time.perf_counter()
    report = service.tick(float(due + 1))
    ticked = time.perf_counter()
    fired = len(report.fired)
    if fired != count or report.errors:
        raise RuntimeError(f"cron: {fired} of {count} fired; errors: {report.errors[:3]}")
    return {"scan_s": scanned - start, "tick_s": ticked - scanned, "fired": fired}
