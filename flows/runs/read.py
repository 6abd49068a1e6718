"""Reading runs back: a run as the engine's one decider sees it, in one call.

The engine decides the status of a run, of each of its steps and jobs, and the actions each
allows (``run.read``, lua/include/run_state.lua; the words are :mod:`flows.runs.statuses`). This
module only carries that reply: :func:`load_run` gives a :class:`RunView`, and
:func:`run_document` is the one JSON shape of a run that ``flows status --json`` and
``GET /api/v1/runs/{id}`` both send. A step lists a page of its jobs (``limit`` from its offset
in ``offsets``): a 10,000-item step costs the same to show as a 10-item one.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Final

from flows.runs.graph import full_graph
from flows.runs.statuses import FINISHED, RUN_STATUSES, STEP_STATUSES, Action, RunStatus, StepStatus
from scheduler.engine.client import Client
from scheduler.engine.job import Session
from scheduler.engine.limits import read_json

PAGE: Final = 100
"""Jobs of each step a read lists unless told otherwise."""

# The record's fields kept as JSON text, decoded here for the list and the detail alike (the
# engine sends `graph`, with a run read whole, as its text: decoded in Lua, a step's empty needs
# would become {}; a listing leaves it out).
_RUN_FIELDS_JSON: Final = ("params", "queues", "outputs", "notify", "graph", "parent_with")
_RUN_FIELDS_NUMBERS: Final = (
    "submitted",
    "jobs",
    "tick",
    "canceled",
    "depth",
    "deadline",
    "deadline_missed",
)

# Plain dataclasses, built from the engine's reply by the parsers below: reading a run is what
# every ``flows status`` does, and a validation library's import and model building would cost
# it a fifth of its start. The API documents the same classes (FastAPI reads dataclasses).


def _list(value: Any) -> list[Any]:
    """The engine writes an empty list as ``{}``."""
    return [] if value in ({}, None) else list(value)


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    """A time as a float (the engine's JSON writes a whole number without a point)."""
    return None if value is None or value == "" else float(value)


def _whole(value: Any) -> int:
    return 0 if value is None or value == "" else int(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class JobView:
    """One job of a step, as the engine read it (``state`` None: it no longer exists)."""

    jid: str
    state: str | None
    status: StepStatus
    attempts: int = 0
    started: float | None = None
    updated: float | None = None
    child: str | None = None
    deadline_missed: float | None = None
    """When the job was found still running past its step's ``deadline:`` (None: not missed)."""
    actions: list[Action] = field(default_factory=list)
    outputs: Any = None
    failure: dict[str, Any] | None = None
    earlier: list[dict[str, Any]] = field(default_factory=list)
    """A re-run job's earlier attempts: each ``{attempt, status, result, failure, updated}``."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> JobView:
        """The view of one job of a ``run.read`` reply."""
        failure = raw.get("failure")
        return cls(
            jid=str(raw["jid"]),
            state=_text(raw.get("state")),
            status=raw["status"],
            attempts=_whole(raw.get("attempts")),
            started=_number(raw.get("started")),
            updated=_number(raw.get("updated")),
            child=_text(raw.get("child")),
            deadline_missed=_number(raw.get("deadline_missed")),
            actions=_list(raw.get("actions")),
            outputs=_json(raw.get("outputs")),
            failure=dict(failure) if isinstance(failure, Mapping) and failure else None,
            earlier=[_attempt(kept) for kept in _list(raw.get("earlier"))],
        )


def _json(text: Any) -> Any:
    """A value the engine sends as the JSON text it keeps (a job's result: decoded in Lua, its
    empty lists would come back as {}); None for none, or for text that is not JSON."""
    if not isinstance(text, str):
        return None
    try:
        return read_json(text)
    except ValueError:
        return None


def _attempt(kept: Any) -> dict[str, Any]:
    """An earlier attempt of a re-run job: its kept record, with its number."""
    record = _json(kept.get("record")) if isinstance(kept, Mapping) else None
    attempt = kept.get("attempt") if isinstance(kept, Mapping) else None
    return {**(record if isinstance(record, dict) else {}), "attempt": attempt}


@dataclass
class StepView:
    """One step of a run (a foreach step's items together): its status, counts per status,
    times and actions, and a page of its jobs (``offset``; ``next``: the next page's offset)."""

    step: str
    status: StepStatus
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    attempts: int = 0
    started: float | None = None
    finished: float | None = None
    duration: float | None = None
    child: str | None = None
    deadline_missed: float | None = None
    """The earliest time one of its jobs was found past the step's ``deadline:``."""
    actions: list[Action] = field(default_factory=list)
    offset: int = 0
    next: int | None = None
    jobs: list[JobView] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> StepView:
        """The view of one step of a ``run.read`` reply."""
        after = raw.get("next")
        return cls(
            step=str(raw["step"]),
            status=raw["status"],
            counts={str(k): int(v) for k, v in _object(raw.get("counts")).items()},
            total=_whole(raw.get("total")),
            attempts=_whole(raw.get("attempts")),
            started=_number(raw.get("started")),
            finished=_number(raw.get("finished")),
            duration=_number(raw.get("duration")),
            child=_text(raw.get("child")),
            deadline_missed=_number(raw.get("deadline_missed")),
            actions=_list(raw.get("actions")),
            offset=_whole(raw.get("offset")),
            next=None if after is None else int(after),
            jobs=[JobView.parse(job) for job in _list(raw.get("jobs"))],
        )

    @property
    def jids(self) -> list[str]:
        """The jids of the page of jobs read."""
        return [job.jid for job in self.jobs]

    @property
    def done(self) -> int:
        return sum(self.counts.get(word, 0) for word in ("success", "cached", "skipped"))

    @property
    def progress(self) -> str:
        return f"{self.done}/{self.total}"


@dataclass
class RunView:
    """A run as the engine decided it, in the one JSON shape of a run (``flows status --json``,
    ``GET /api/v1/runs/{id}``): its record's fields (flow, submitted, trigger, params, queues,
    and in ``extra`` the others, as a child run's parent_run and parent_step), its status,
    counts per status, allowed actions, its graph as submitted (None for a run submitted
    without one) and its steps."""

    # The API's schema says what the document says: a run's other record fields come too.
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "allow"}

    id: str
    status: RunStatus
    flow: str = ""
    submitted: float | None = None
    jobs: int = 0
    trigger: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    queues: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    graph: dict[str, Any] | None = None
    steps: list[StepView] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The record's other fields (parent_run, parent_step, tick, schedule, ...), as stored.
        # Not a field: the API's schema has them at the top level, as the document does.
        self.extra: dict[str, Any] = {}

    @property
    def run_id(self) -> str:
        return self.id

    @property
    def record(self) -> dict[str, Any]:
        """The run record's fields (what the run was submitted with), a copy."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _DECIDED}
        return copy.deepcopy({**kept, **self.extra})

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def failed_jobs(self) -> list[JobView]:
        """The failed and expired jobs among those read."""
        return [j for s in self.steps for j in s.jobs if j.status in ("failed", "expired")]

    def step(self, name: str) -> StepView | None:
        return next((s for s in self.steps if s.step == name), None)


# The fields the engine decides at each read, not the run's record.
_DECIDED: Final = frozenset({"id", "status", "counts", "actions", "graph", "steps"})
# The document's first keys, in its order (the class lists `status`, which has no default,
# before `flow`); the other fields follow in the class's order, then the record's others.
_ORDER: Final = ("id", "flow", "status", "submitted", "jobs", "trigger", "params", "queues")


def run_document(view: RunView) -> dict[str, Any]:
    """The one JSON shape of a run (``flows status --json``, ``GET /api/v1/runs/{id}``): its
    fields, then the record's others; a copy, which the caller may change."""
    document = asdict(replace(view, steps=[]))
    document["steps"] = [step_document(step) for step in view.steps]
    ordered = {name: document.pop(name) for name in _ORDER}
    return {**ordered, **document, **copy.deepcopy(view.extra)}


def step_document(step: StepView) -> dict[str, Any]:
    """The one JSON shape of a step: each of a run's ``steps`` (:func:`run_document`), and a
    job's ``step`` (:func:`flows.runs.actions.job_document`); a copy."""
    return asdict(step)


def run_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A run record as JSON values: ``params``, ``queues``, ``graph`` and the other JSON fields
    decoded, times and counts numbers (the engine keeps every field of a run as text). The
    one shape of these fields, in the run listing and in :func:`parse_run`'s view."""
    record = dict(raw)
    for name in _RUN_FIELDS_JSON:
        value = record.get(name)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                record[name] = read_json(value)
    for name in _RUN_FIELDS_NUMBERS:
        value = record.get(name)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                number = float(value)
                whole = number.is_integer() and name in ("jobs", "depth")
                record[name] = int(number) if whole else number
    if "graph" in record:
        record["graph"] = full_graph(record["graph"])
    return record


def step_of(run_id: str, jid: str) -> str:
    """The step (or hook) of a job id ``<run id>:<step>`` or ``<run id>:<step>[<key>]``."""
    name = jid[len(run_id) + 1 :] if jid.startswith(f"{run_id}:") else jid.rsplit(":", 1)[-1]
    return _ITEM.sub("", name)


_ITEM = re.compile(r"\[[^\[]*\]$")


def load_run(
    client: Session, run_id: str, limit: int = PAGE, offsets: Mapping[str, int] | None = None
) -> RunView | None:
    """The run as the engine decides it (one call), or None when no run has that id."""
    args: list[Any] = [run_id, limit]
    if offsets:
        args.append(json.dumps(dict(offsets)))
    raw = client.engine.call("run.read", *args)
    return None if raw is None else parse_run(run_id, raw)


def parse_run(run_id: str, raw: str) -> RunView:
    """The view of a ``run.read`` reply (for callers that read many runs in one pipeline)."""
    reply = read_json(raw)
    # run.read sends the record's graph beside it, as its text: decoded as a listing's is.
    record = run_record({**reply["record"], "graph": reply.get("graph")})
    graph = record.get("graph")
    view = RunView(
        id=run_id,
        status=reply["status"],
        flow=str(record.get("flow") or ""),
        submitted=_number(record.get("submitted")),
        jobs=_whole(record.get("jobs")),
        trigger=_text(record.get("trigger")),
        params=_object(record.get("params")),
        queues=_list(record.get("queues")),
        counts={str(k): int(v) for k, v in _object(reply.get("counts")).items()},
        actions=_list(reply.get("actions")),
        graph=graph if isinstance(graph, dict) else None,
        steps=[StepView.parse(step) for step in _list(reply.get("steps"))],
    )
    _items_as_read(view)
    # The fields above are not repeated.
    declared = {f.name for f in fields(RunView)}
    view.extra.update((k, v) for k, v in record.items() if k not in declared)
    return view


def _items_as_read(view: RunView) -> None:
    """A foreach or matrix step's item count in the graph is the engine's, as its step says it
    (``total``): the items a fan-out made from its producer's output, and 0 for a step with no
    items (whose one job completed with the empty list). Submitted, a fan-out's count is not
    known yet; the graph says what the run page, ``flows status`` and the API say of it."""
    steps = (view.graph or {}).get("steps")
    if not isinstance(steps, dict):
        return
    for step in view.steps:
        entry = steps.get(step.step)
        if isinstance(entry, dict) and entry.get("foreach") is True:
            entry["items"] = step.total


def run_status(client: Client, run_id: str) -> str | None:
    """The run's status alone (None when there is no such run)."""
    view = load_run(client, run_id, limit=0)
    return None if view is None else view.status


def list_runs(client: Client, flow: str | None = None, count: int = 25) -> list[dict[str, Any]]:
    """Run records, newest first (as :func:`run_record` gives them)."""
    records = read_json(client.engine.call("runs", flow or "", 0, count))
    return [run_record(r) for r in records]


def list_run_statuses(
    client: Client, flow: str | None = None, offset: int = 0, count: int = 25
) -> list[dict[str, Any]]:
    """Run records with their status, newest first, in one engine call."""
    raw = read_json(client.engine.call("runs.statuses", flow or "", offset, count))
    return [run_record(r) for r in _list(raw)]


def run_outputs(client: Session, run_id: str) -> dict[str, Any]:
    """The run's outputs (its flow's ``outputs:``), read from its steps' results; {} when the
    flow declares none or there is no such run. Raises
    :class:`flows.flowfile.job_data.UnresolvedReference` when a step they read has no result
    (it failed, or has not run), :class:`~scheduler.engine.errors.EngineError` on a refusal."""
    from flows.expand.flow_outputs import RECORD_FIELD, resolve_outputs, upstream_jids
    from flows.flowfile.job_data import UpstreamJob, was_skipped

    raw = client.engine.call("run.get", run_id)
    record = read_json(raw) if raw is not None else {}
    text = record.get(RECORD_FIELD)
    if not text:
        return {}
    outputs = read_json(text) if isinstance(text, str) else text
    jids = upstream_jids(outputs)
    jobs = {
        found.jid: UpstreamJob(found.state, found.result, was_skipped(found.history))
        for found in (client.jobs.multiget(*jids) if jids else [])
    }
    return resolve_outputs(run_id, outputs, jobs)


__all__ = [
    "PAGE",
    "RUN_STATUSES",
    "STEP_STATUSES",
    "JobView",
    "RunView",
    "StepView",
    "list_run_statuses",
    "list_runs",
    "load_run",
    "parse_run",
    "run_document",
    "run_outputs",
    "run_record",
    "run_status",
    "step_of",
]
