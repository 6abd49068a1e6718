"""A run's graph as it was submitted, kept in the run record (``graph``) so every surface draws
the run's own graph without its flow file: each step (and hook) with its needs, kind, item
count, sub-flow, wait, ``if:`` text and trigger rule, in submission order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flows.expand.jobs import JobSpec
from flows.flowfile.model import Flow, Step


def _kind(step: Step | None, job: JobSpec) -> str:
    if job.wait is not None:
        return "wait"
    if step is not None and step.flow is not None:
        return "flow"
    if step is not None and step.run is not None:
        return "run"
    return "job"


def run_graph(jobs: Sequence[JobSpec], flow: Flow | None = None) -> dict[str, Any]:
    """``{"steps": {step: {needs, kind, items, foreach, fanout, flow, wait, if,
    trigger_rule}}}`` of a run's expanded jobs (``flow``, when known, adds what only the flow
    file says: sub-flow paths, ``if:`` text, whether items come from a foreach or a matrix)."""
    step_of = {job.jid: job.step for job in jobs}
    steps: dict[str, dict[str, Any]] = {}
    for job in jobs:
        entry = steps.get(job.step)
        if entry is not None:
            entry["items"] += 1
            continue
        model = flow.steps.get(job.step) if flow is not None else None
        if model is not None:
            needs = list(model.needs)
        else:
            needs = list(dict.fromkeys(step_of.get(jid, jid) for jid in job.depends))
        wait: Mapping[str, Any] | None = job.wait
        steps[job.step] = {
            "needs": needs,
            "kind": _kind(model, job),
            "items": 1,
            "foreach": job.index is not None or job.fanout is not None,
            "matrix": bool(model is not None and model.matrix),
            "fanout": step_of.get(job.fanout[0]) if job.fanout else None,
            "flow": str(model.flow) if model is not None and model.flow is not None else None,
            "wait": dict(wait) if wait is not None else None,
            "if": model.if_ if model is not None else None,
            "trigger_rule": job.trigger,
            "hook": flow is not None and model is None,
        }
    return {"steps": steps}


__all__ = ["run_graph"]
