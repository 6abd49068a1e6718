"""A flow's recent runs side by side, and one run's steps on a time line.

:func:`flow_history` reads the newest runs of a flow with their steps' statuses in three round
trips whatever their count (the run records, every run's job list, every job: each a pipeline),
so a grid of runs by steps, as Airflow's grid view draws it, costs no call per job.
:func:`timeline` says when each step of a run could start, and when it ran, from the jobs'
histories. Statuses are :mod:`flows.runs`'s, decided there once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flows.runs import BATCH, FINAL_STATES, RunView, StepView, run_view
from scheduler.engine.client import Client
from scheduler.engine.job import Job, as_list

# Runs a grid shows at most, and jobs it reads at most (older runs are left out beyond it).
MAX_RUNS = 100
MAX_JOBS = 20_000


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
        pipe.call("run.get", run_id)
    raws: list[tuple[str, dict[str, Any]]] = []
    jids: list[str] = []
    for run_id, raw in zip(ids, _replies(pipe.execute()), strict=True):
        if raw is None:  # deleted meanwhile
            continue
        record = json.loads(raw)
        listed = [str(jid) for jid in record.get("jids") or []]
        if raws and len(jids) + len(listed) > MAX_JOBS:
            break
        raws.append((run_id, record))
        jids += listed
    jobs: dict[str, Job] = {}
    for start in range(0, len(jids), BATCH * 10):
        pipe = client.engine.pipeline()
        chunk = jids[start : start + BATCH * 10]
        for at in range(0, len(chunk), BATCH):
            pipe.call("multiget", *chunk[at : at + BATCH])
        for reply in _replies(pipe.execute()):
            jobs.update((j.jid, j) for j in (Job(client, raw) for raw in as_list(reply)))
    views = [run_view(run_id, record, jobs) for run_id, record in reversed(raws)]
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


def _put_time(step: StepView) -> float | None:
    times = []
    for job in step.jobs:
        puts = [float(e["when"]) for e in job.history if e.get("what") == "put" and "when" in e]
        if puts:
            times.append(puts[-1])
    return min(times) if times else None


def timeline(
    view: RunView, needs: Mapping[str, Sequence[str]] | None, now: float
) -> dict[str, Any]:
    """Each step's waiting and running spans: ``ready`` (when its needs had ended, or it was
    put), ``started``, ``finished``, and for a one-job step each attempt's span; times in
    epoch seconds, None where they have not happened."""
    ends = {step.step: step.finished for step in view.steps}
    rows = []
    for step in view.steps:
        put = _put_time(step)
        ready = put
        wanted = [ends.get(need) for need in (needs or {}).get(step.step, ())]
        if wanted and all(end is not None for end in wanted):
            latest = max(end for end in wanted if end is not None)
            ready = latest if ready is None else max(ready, latest)
        started = step.started
        if ready is not None and started is not None:
            ready = min(ready, started)
        single = step.jobs[0] if len(step.items) == 1 and step.jobs else None
        rows.append(
            {
                "step": step.step,
                "status": step.status,
                "items": len(step.items),
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
                        "items": len(step.items),
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
