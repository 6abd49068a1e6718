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
#: Each field and what a value at its default is when :func:`run_graph` made it (needs: a list).
_COMPARED: Final = tuple(
    (key, list(value) if isinstance(value, tuple) else value)
    for key, value in STEP_DEFAULTS.items()
)


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
    graph: dict[str, Any] = full_graph(stored_run_graph(jobs, flow))
    return graph


def stored_run_graph(jobs: Sequence[JobSpec], flow: Flow | None = None) -> dict[str, Any]:
    """:func:`stored_graph` of :func:`run_graph`, made without the whole entries (a run's
    record is built so, an entry for each step of a large run)."""
    firsts: dict[str, JobSpec] = {}
    counts: dict[str, int] = {}
    for job in jobs:
        if job.step in counts:
            counts[job.step] += 1
        else:
            firsts[job.step] = job
            counts[job.step] = 0 if job.empty else 1  # a foreach or matrix step with no items
    step_of = {job.jid: job.step for job in jobs}
    steps: dict[str, dict[str, Any]] = {}
    for step, job in firsts.items():
        model = flow.steps.get(step) if flow is not None else None
        values = _values(job, model, counts[step], flow is not None, step_of)
        steps[step] = {
            key: value
            for (key, default), value in zip(_COMPARED, values, strict=True)
            if value != default
        }
    return {"steps": steps}


def _values(
    job: JobSpec, model: Step | None, items: int, hook: bool, step_of: Mapping[str, str]
) -> tuple[Any, ...]:
    """The fields of the entry of ``job``'s step, in the order of :data:`STEP_DEFAULTS`
    (``hook``: whether a job of no step of the flow is a hook's)."""
    if model is not None:
        needs = list(model.needs)
    else:
        needs = list(dict.fromkeys(step_of.get(jid, jid) for jid in job.depends))
    wait: Mapping[str, Any] | None = job.wait
    return (
        needs,
        _kind(model, job),
        items,
        job.index is not None or job.fanout is not None or job.empty,
        bool(model is not None and model.matrix),
        step_of.get(job.fanout[0]) if job.fanout else None,
        str(model.flow) if model is not None and model.flow is not None else None,
        dict(wait) if wait is not None else None,
        model.if_ if model is not None else None,
        job.trigger,
        hook and model is None,
    )


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


__all__ = ["STEP_DEFAULTS", "full_graph", "run_graph", "stored_graph", "stored_run_graph"]
