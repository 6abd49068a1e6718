"""Reading runs back: a run as the engine's one decider sees it, in one call.

The engine decides the status of a run, of each of its steps and jobs, and the actions each
allows (``run.read``, lua/include/run_state.lua; the words are :mod:`flows.statuses`). This module
only carries that reply: :func:`load_run` gives a :class:`RunView`, and
:func:`run_document` is the one JSON shape of a run that ``flows status --json`` and
``GET /api/v1/runs/{id}`` both send. A step lists a page of its jobs (``limit`` from its offset
in ``offsets``): a 10,000-item step costs the same to show as a 10-item one.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from flows.statuses import FINISHED, RUN_STATUSES, STEP_STATUSES
from scheduler.engine.client import Client

PAGE: Final = 100
"""Jobs of each step a read lists unless told otherwise."""

_RUN_FIELDS_JSON: Final = ("params", "queues", "outputs")
_RUN_FIELDS_NUMBERS: Final = ("submitted", "jobs", "tick", "canceled", "depth")


def _list(value: Any) -> list[Any]:
    """The engine writes an empty list as ``{}``."""
    return [] if value in ({}, None) else list(value)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class JobView:
    """One job of a step, as the engine read it (``state`` None: it no longer exists)."""

    jid: str
    state: str | None
    status: str
    attempts: int
    started: float | None
    updated: float | None
    child: str | None
    actions: tuple[str, ...]
    outputs: Any
    failure: dict[str, Any] | None

    @classmethod
    def from_reply(cls, raw: Mapping[str, Any]) -> JobView:
        failure = raw.get("failure")
        return cls(
            jid=str(raw["jid"]),
            state=raw.get("state"),
            status=str(raw["status"]),
            attempts=int(raw.get("attempts") or 0),
            started=_number(raw.get("started")),
            updated=_number(raw.get("updated")),
            child=raw.get("child"),
            actions=tuple(_list(raw.get("actions"))),
            outputs=raw.get("outputs"),
            failure=dict(failure) if isinstance(failure, Mapping) else None,
        )

    def document(self) -> dict[str, Any]:
        return {
            "jid": self.jid,
            "state": self.state,
            "status": self.status,
            "attempts": self.attempts,
            "started": self.started,
            "updated": self.updated,
            "child": self.child,
            "actions": list(self.actions),
            "outputs": self.outputs,
            "failure": self.failure,
        }


@dataclass
class StepView:
    """One step of a run (a foreach step's items together): its status, counts per status,
    times and actions, and a page of its jobs (``offset``; ``next``: the next page's offset)."""

    step: str
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    attempts: int = 0
    started: float | None = None
    finished: float | None = None
    duration: float | None = None
    child: str | None = None
    actions: tuple[str, ...] = ()
    jobs: list[JobView] = field(default_factory=list)
    offset: int = 0
    next: int | None = None

    @classmethod
    def from_reply(cls, raw: Mapping[str, Any]) -> StepView:
        counts = raw.get("counts") or {}
        return cls(
            step=str(raw["step"]),
            status=str(raw["status"]),
            counts={str(k): int(v) for k, v in dict(counts).items()},
            total=int(raw.get("total") or 0),
            attempts=int(raw.get("attempts") or 0),
            started=_number(raw.get("started")),
            finished=_number(raw.get("finished")),
            duration=_number(raw.get("duration")),
            child=raw.get("child"),
            actions=tuple(_list(raw.get("actions"))),
            jobs=[JobView.from_reply(job) for job in _list(raw.get("jobs"))],
            offset=int(raw.get("offset") or 0),
            next=raw.get("next"),
        )

    @property
    def jids(self) -> list[str]:
        """The jids of the page of jobs read."""
        return [job.jid for job in self.jobs]

    @property
    def done(self) -> int:
        return self.counts.get("success", 0) + self.counts.get("skipped", 0)

    @property
    def progress(self) -> str:
        return f"{self.done}/{self.total}"

    def document(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "counts": dict(self.counts),
            "total": self.total,
            "attempts": self.attempts,
            "started": self.started,
            "finished": self.finished,
            "duration": self.duration,
            "child": self.child,
            "actions": list(self.actions),
            "offset": self.offset,
            "next": self.next,
            "jobs": [job.document() for job in self.jobs],
        }


@dataclass
class RunView:
    """A run as the engine decided it: its record, status, counts per status, allowed actions,
    its graph as submitted (None for a run submitted without one) and its steps."""

    run_id: str
    record: dict[str, Any]
    status: str
    steps: list[StepView]
    counts: dict[str, int] = field(default_factory=dict)
    actions: tuple[str, ...] = ()
    graph: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def failed_jobs(self) -> list[JobView]:
        """The failed and expired jobs among those read."""
        return [j for s in self.steps for j in s.jobs if j.status in ("failed", "expired")]

    @property
    def queues(self) -> list[str]:
        queues = self.record.get("queues")
        return [str(q) for q in queues] if isinstance(queues, list) else []

    def step(self, name: str) -> StepView | None:
        return next((s for s in self.steps if s.step == name), None)


def run_document(view: RunView) -> dict[str, Any]:
    """The one JSON shape of a run (``flows status --json``, ``GET /api/v1/runs/{id}``)."""
    return {
        **view.record,
        "id": view.run_id,
        "status": view.status,
        "counts": dict(view.counts),
        "actions": list(view.actions),
        "graph": view.graph,
        "steps": [step.document() for step in view.steps],
    }


def run_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A run record as JSON values: ``params`` and ``queues`` decoded, times and counts numbers
    (the engine keeps every field of a run as text)."""
    record = dict(raw)
    for name in _RUN_FIELDS_JSON:
        value = record.get(name)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                record[name] = json.loads(value)
    for name in _RUN_FIELDS_NUMBERS:
        value = record.get(name)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                number = float(value)
                whole = number.is_integer() and name in ("jobs", "depth")
                record[name] = int(number) if whole else number
    return record


def step_of(run_id: str, jid: str) -> str:
    """The step (or hook) of a job id ``<run id>:<step>`` or ``<run id>:<step>[<key>]``."""
    name = jid[len(run_id) + 1 :] if jid.startswith(f"{run_id}:") else jid.rsplit(":", 1)[-1]
    return _ITEM.sub("", name)


_ITEM = re.compile(r"\[[^\[]*\]$")


def load_run(
    client: Client, run_id: str, limit: int = PAGE, offsets: Mapping[str, int] | None = None
) -> RunView | None:
    """The run as the engine decides it (one call), or None when no run has that id."""
    args: list[Any] = [run_id, limit]
    if offsets:
        args.append(json.dumps(dict(offsets)))
    raw = client.engine.call("run.read", *args)
    if raw is None:
        return None
    reply = json.loads(raw)
    record = run_record(reply["record"])
    record.pop("id", None)
    graph = reply.get("graph")
    return RunView(
        run_id=run_id,
        record=record,
        status=str(reply["status"]),
        steps=[StepView.from_reply(step) for step in _list(reply.get("steps"))],
        counts={str(k): int(v) for k, v in dict(reply.get("counts") or {}).items()},
        actions=tuple(_list(reply.get("actions"))),
        graph=graph if isinstance(graph, dict) else None,
    )


def run_status(client: Client, run_id: str) -> str | None:
    """The run's status alone (None when there is no such run)."""
    view = load_run(client, run_id, limit=0)
    return None if view is None else view.status


def list_runs(client: Client, flow: str | None = None, count: int = 25) -> list[dict[str, Any]]:
    """Run records, newest first (as :func:`run_record` gives them)."""
    records = json.loads(client.engine.call("runs", flow or "", 0, count))
    return [run_record(r) for r in records]


def list_run_statuses(
    client: Client, flow: str | None = None, offset: int = 0, count: int = 25
) -> list[dict[str, Any]]:
    """Run records with their status, newest first, in one engine call."""
    raw = json.loads(client.engine.call("runs.statuses", flow or "", offset, count))
    return [run_record(r) for r in _list(raw)]


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
    "run_document",
    "run_record",
    "run_status",
    "step_of",
]
