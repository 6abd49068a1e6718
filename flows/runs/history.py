"""A flow's recent runs side by side, and one run's steps on a time line.

:func:`flow_history` reads the newest runs of a flow with their steps' statuses in two round
trips whatever their size (the run list, then every run's ``run.read`` without jobs in one
pipeline), so a grid of runs by steps, as Airflow's grid view draws it, costs no call per job.
:func:`timeline` says when each step of a run could start, and when it ran; a one-job step's
attempts come from its job's history. Statuses are the engine's (``run.read``), decided once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flows.runs.read import RunView, load_run, parse_run
from scheduler.engine.client import Client
from scheduler.engine.job import Job
from scheduler.engine.replies import as_list

MAX_RUNS = 100
"""Runs a grid shows at most."""
FINAL_STATES = frozenset({"complete", "failed", "expired"})


@dataclass(frozen=True)
class FlowHistory:
    """The newest runs of a flow, oldest first, and the steps they have, in the flow's order
    (the newest run's, then those only older runs had)."""

    flow: str
    runs: list[RunView]
    steps: list[str]


def _replies(results: Sequence[Any]) -> list[Any]:
    for result in results:
        if isinstance(result, Exception):
            raise result
    return list(results)


def flow_history(client: Client, flow: str, count: int = 25) -> FlowHistory:
    """The newest ``count`` runs of ``flow`` (at most :data:`MAX_RUNS`) with their steps."""
    count = max(0, min(count, MAX_RUNS))
    ids = [str(r["id"]) for r in as_list(client.engine.call("runs", flow, 0, count)) if "id" in r]
    pipe = client.engine.pipeline()
    for run_id in ids:
        pipe.call("run.read", run_id, 0)  # statuses, counts and times; no jobs
    views = [
        parse_run(run_id, raw)
        for run_id, raw in reversed(list(zip(ids, _replies(pipe.execute()), strict=True)))
        if raw is not None  # deleted meanwhile
    ]
    steps: list[str] = []
    for view in reversed(views):
        steps += [step.step for step in view.steps if step.step not in steps]
    return FlowHistory(flow, views, steps)


def run_span(view: RunView) -> tuple[float | None, float | None]:
    """When the run's first step started, and when its last ended (None while it runs)."""
    starts = [s.started for s in view.steps if s.started is not None]
    ends = [s.finished for s in view.steps if s.finished is not None]
    start = min(starts) if starts else None
    return start, (max(ends) if ends and view.finished and start is not None else None)


def run_duration(view: RunView) -> float | None:
    start, end = run_span(view)
    return None if start is None or end is None else max(0.0, end - start)


# -- a run's time line ----------------------------------------------------------------------------

_ENDS = frozenset(
    {
        "done",
        "failed",
        "retried",
        "timed-out",
        "reclaimed",
        "released",
        "expired",
        "buried",
        "skipped",
        "put",
    }
)


def attempts(job: Job) -> list[tuple[float, float | None]]:
    """The spans the job ran since its latest put, each from a pop to what ended it (its end,
    a failure, a retry, a lost lock); the last one open (None) while it runs."""
    history = job.history
    since = max((i for i, e in enumerate(history) if e.get("what") == "put"), default=0)
    spans: list[tuple[float, float | None]] = []
    start: float | None = None
    for entry in history[since:]:
        what, when = entry.get("what"), float(entry.get("when") or 0)
        if what in ("popped", "awaiting"):
            if start is not None:  # popped again without an end: its lock was lost
                spans.append((start, when))
            start = when
        elif what in _ENDS and start is not None and what != "put":
            spans.append((start, when))
            start = None
    if start is not None:
        spans.append((start, job.updated if job.state in FINAL_STATES else None))
    return spans


def _single_jobs(client: Client, view: RunView) -> dict[str, Job]:
    """The job of each one-job step, by step (one job read per step: a run's size is no cost)."""
    if any(step.total == 1 and not step.jobs for step in view.steps):
        view = load_run(client, view.run_id, limit=1) or view
    jids = {step.step: step.jobs[0].jid for step in view.steps if step.total == 1 and step.jobs}
    found = {job.jid: job for job in client.jobs.multiget(*jids.values())} if jids else {}
    return {step: found[jid] for step, jid in jids.items() if jid in found}


def timeline(
    client: Client, view: RunView, needs: Mapping[str, Sequence[str]] | None, now: float
) -> dict[str, Any]:
    """Each step's waiting and running spans: ``ready`` (when its needs had ended, or the run
    was submitted), ``started``, ``finished``, and for a one-job step each attempt's span;
    times in epoch seconds, None where they have not happened."""
    ends = {step.step: step.finished for step in view.steps}
    singles = _single_jobs(client, view)
    submitted = view.submitted
    rows = []
    for step in view.steps:
        ready = submitted
        wanted = [ends.get(need) for need in (needs or {}).get(step.step, ())]
        if wanted and all(end is not None for end in wanted):
            latest = max(end for end in wanted if end is not None)
            ready = latest if ready is None else max(ready, latest)
        started = step.started
        if ready is not None and started is not None:
            ready = min(ready, started)
        single = singles.get(step.step)
        rows.append(
            {
                "step": step.step,
                "status": step.status,
                "items": step.total,
                "ready": ready if step.status != "skipped" else None,
                "started": started,
                "finished": step.finished,
                "duration": step.duration,
                "attempts": [list(span) for span in attempts(single)] if single else [],
            }
        )
    return {
        "id": view.run_id,
        "status": view.status,
        "submitted": view.record.get("submitted"),
        "now": now,
        "steps": rows,
    }


def history_json(history: FlowHistory) -> dict[str, Any]:
    """The grid as JSON: the steps (rows) and the runs (columns, oldest first)."""
    return {
        "flow": history.flow,
        "steps": history.steps,
        "runs": [
            {
                "id": view.run_id,
                "status": view.status,
                "submitted": view.record.get("submitted"),
                "duration": run_duration(view),
                "steps": {
                    step.step: {
                        "status": step.status,
                        "duration": step.duration,
                        "items": step.total,
                    }
                    for step in view.steps
                },
            }
            for view in history.runs
        ],
    }


__all__ = [
    "FlowHistory",
    "attempts",
    "flow_history",
    "history_json",
    "run_duration",
    "run_span",
    "timeline",
]
