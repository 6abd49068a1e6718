"""A run's graph as it was submitted, kept in the run record (``graph``) so every surface draws
the run's own graph without its flow file: each step (and hook) with its needs, kind, item
count, sub-flow, wait, ``if:`` text and trigger rule, in submission order.

The record keeps each step's entry without the fields at their default
(:func:`stored_graph`): a plain step is ``{}``, a step with needs ``{"needs": [...]}``, so a
10,000-step run's record is a fifth of the size it was, for every reader. :func:`full_graph`
gives every field back; :func:`flows.runs.read.run_record` applies it, so no reader sees the
stored form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the readers import this module: no flow model or expansion for them
    from flows.expand.jobs import JobSpec
    from flows.flowfile.model import Flow, Step

#: A step's entry in the graph unless it says otherwise.
STEP_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "needs": (),
        "kind": "job",
        "items": 1,
        "foreach": False,
        "matrix": False,
        "fanout": None,
        "flow": None,
        "wait": None,
        "if": None,
        "trigger_rule": "all_success",
        "hook": False,
    }
)
_ABSENT: Final = object()
#: The defaults compared by type and value (the empty list of needs is any empty list).
_SCALAR_DEFAULTS: Final[Mapping[str, Any]] = {
    key: value for key, value in STEP_DEFAULTS.items() if not isinstance(value, tuple)
}


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
            "items": 0 if job.empty else 1,  # a foreach or matrix step with no items
            "foreach": job.index is not None or job.fanout is not None or job.empty,
            "matrix": bool(model is not None and model.matrix),
            "fanout": step_of.get(job.fanout[0]) if job.fanout else None,
            "flow": str(model.flow) if model is not None and model.flow is not None else None,
            "wait": dict(wait) if wait is not None else None,
            "if": model.if_ if model is not None else None,
            "trigger_rule": job.trigger,
            "hook": flow is not None and model is None,
        }
    return {"steps": steps}


def stored_graph(graph: Mapping[str, Any]) -> dict[str, Any]:
    """``graph`` (:func:`run_graph`) as the run record keeps it: each entry without the fields
    at their default (:data:`STEP_DEFAULTS`)."""
    steps = graph.get("steps") or {}
    return {"steps": {name: _stored_entry(entry) for name, entry in steps.items()}}


def _stored_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` without its fields at their default: needs when empty, any other field when
    of its default's type and equal to it (an item count of 1 is not ``foreach: true``)."""
    stored: dict[str, Any] = {}
    for key, value in entry.items():
        default = _SCALAR_DEFAULTS.get(key, _ABSENT)
        if default is _ABSENT:
            if key != "needs" or not isinstance(value, list | tuple) or value:
                stored[key] = value
        elif type(value) is not type(default) or value != default:
            stored[key] = value
    return stored


def full_graph(stored: Any) -> Any:
    """A stored graph with every field of each entry (what :func:`run_graph` made); anything
    that is not a graph is given back as it is (a record written by hand, an older run's full
    entries)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("steps"), dict):
        return stored
    steps: dict[str, Any] = {}
    for name, entry in stored["steps"].items():
        if isinstance(entry, dict):
            full = {key: _default(value) for key, value in STEP_DEFAULTS.items()}
            full.update(entry)
            entry = full
        steps[name] = entry
    return {**stored, "steps": steps}


def _default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


__all__ = ["STEP_DEFAULTS", "full_graph", "run_graph", "stored_graph"]
