"""Backfills: one run per past tick of a schedule, submitted as earlier runs finish.

A backfill is created once with every tick of its range (:func:`backfill_ticks`, the same
enumeration the service's catch-up walks) and then *advanced* in small steps by whoever calls
:func:`advance`: the scheduler service in its housekeeping (every service, every few seconds),
and ``flows backfill`` once right after creating it. Each step asks the engine which ticks may
start now (``backfill.due``: its own ``max_active`` and the flow's ``max_active_runs`` leave room
for them), builds their runs with the service's :class:`~scheduler.service.records.FlowSource`
and hands each to ``backfill.submit``, which submits it in the same call that moves the
backfill past its tick (compare-and-set: two services never handle a tick twice). A tick's run
id is the one the schedule gives the tick (the flow source's ``run_id``), so a
tick that ran on schedule is not run again, and a scheduled tick that was backfilled finds its
run existing. A tick whose run exists canceled (the engine's run status) is still to run: it
is offered as a new one is, and ``backfill.resume`` resumes its run as ``flows retry RUN``
would, with no run built. Keys and replies: ``lua/commands/backfill.lua``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.cron import Schedule, missed_ticks
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError
from scheduler.engine.limits import read_json
from scheduler.service.records import Definition, FlowSource, _list

log = logging.getLogger("flows.scheduler")

#: Most ticks one backfill may cover.
MAX_TICKS = 10_000
#: Most active runs a backfill's own limit may name (``--max-active``).
MAX_ACTIVE_LIMIT = 10_000
#: Active backfills one step of :func:`advance` looks at.
DUE_BATCH = 100
#: The trigger recorded in a backfilled run.
TRIGGER = "backfill"
#: The engine's status of a run that does not exist.
MISSING = "missing"

BackfillState = str  # active, done, canceled


class TooManyTicks(ValueError):
    """The range holds more than :data:`MAX_TICKS` ticks."""


def backfill_ticks(schedule: Schedule, first: float, last: float) -> list[float]:
    """The fire times of ``schedule`` in ``[first, last]``, oldest first: exactly the ticks the
    service's catch-up would see due over that range (:func:`scheduler.cron.missed_ticks`, DST
    and the schedule's start and end included). Raises :class:`TooManyTicks` beyond
    :data:`MAX_TICKS`."""
    ticks = missed_ticks(schedule, math.ceil(first) - 1.0, last, limit=MAX_TICKS + 1)
    if len(ticks) > MAX_TICKS:
        raise TooManyTicks(
            f"the range holds more than {MAX_TICKS:,} ticks (the most one backfill covers): "
            "split it into several backfills"
        )
    return ticks


@dataclass(frozen=True)
class Backfill:
    """A backfill as the engine holds it (``backfill.get``, ``backfill.list``)."""

    id: str
    flow: str
    state: BackfillState
    total: int
    next: int
    """Ticks handled so far (submitted, resumed, existing or failed): the index of the next
    one."""
    submitted: int
    existed: int
    failed: int
    max_active: int
    flow_max: int
    first: float
    last: float
    created: float
    updated: float
    file: str = ""
    start: float | None = None  # the range asked for (--from)
    end: float | None = None  # (--to)
    last_error: str = ""
    canceled: float | None = None
    active: tuple[str, ...] = ()
    """Its runs that were active when it was last advanced."""
    resumed: int = 0
    """Ticks whose run existed canceled, resumed (not counted in ``submitted``)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """The params of its every run (``flows backfill -p``, else the schedule's)."""

    @property
    def pending(self) -> int:
        return self.total - self.next

    @classmethod
    def from_reply(cls, raw: Mapping[str, Any]) -> Backfill:
        def time(name: str) -> float | None:
            value = raw.get(name)
            return None if value is None or value == "" else float(value)

        return cls(
            id=str(raw["id"]),
            flow=str(raw["flow"]),
            state=str(raw["state"]),
            total=int(raw["total"]),
            next=int(raw["next"]),
            submitted=int(raw.get("submitted", 0)),
            existed=int(raw.get("existed", 0)),
            failed=int(raw.get("failed", 0)),
            max_active=int(raw.get("max_active", 0)),
            flow_max=int(raw.get("flow_max", 0)),
            first=float(raw["first"]),
            last=float(raw["last"]),
            created=float(raw["created"]),
            updated=float(raw["updated"]),
            file=str(raw.get("file") or ""),
            start=time("from"),
            end=time("to"),
            last_error=str(raw.get("last_error") or ""),
            canceled=time("canceled"),
            active=tuple(str(r) for r in _list(raw.get("active"))),
            resumed=int(raw.get("resumed") or 0),
            params=_params(raw.get("params")),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "flow": self.flow,
            "state": self.state,
            "ticks": self.total,
            "handled": self.next,
            "pending": self.pending,
            "submitted": self.submitted,
            "resumed": self.resumed,
            "existed": self.existed,
            "failed": self.failed,
            "active": list(self.active),
            "max_active": self.max_active or None,
            "flow_max_active_runs": self.flow_max or None,
            "first_tick": self.first,
            "last_tick": self.last,
            "from": self.start,
            "to": self.end,
            "created": self.created,
            "updated": self.updated,
            "canceled": self.canceled,
            "last_error": self.last_error or None,
            "file": self.file,
            "params": dict(self.params),
        }


def _params(text: Any) -> dict[str, Any]:
    """A backfill's params as stored (JSON text; none in a backfill made before they were)."""
    try:
        value = read_json(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Canceled:
    """What ``backfill.cancel`` did; ``changed`` False (nothing done) when the backfill was no
    longer active, ``state`` being what it is (done, canceled)."""

    state: str
    changed: bool
    runs: int
    jobs: int
    pending: int


@dataclass
class AdvanceReport:
    """What one step of :func:`advance` did: runs submitted, canceled runs resumed, ticks whose
    run existed already, ticks whose run could not be built or resumed, and compare-and-set
    races lost to another advancer (or a run dropped meanwhile: offered again next step)."""

    submitted: list[str] = field(default_factory=list)
    existed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    conflicts: int = 0
    resumed: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.submitted or self.resumed or self.existed or self.failed)

    def add(self, reply: str, run_id: str) -> None:
        """Count one reply of ``backfill.submit``, ``backfill.resume`` or ``backfill.skip``."""
        if reply == "submitted":
            self.submitted.append(run_id)
        elif reply == "resumed":
            self.resumed.append(run_id)
        elif reply == "exists":
            self.existed.append(run_id)
        elif reply == "skipped":
            self.failed.append(run_id)
        elif reply in ("conflict", "missing"):
            self.conflicts += 1


class Backfills:
    """The backfills of one namespace, through the engine."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _call(self, command: str, *args: Any, now: float | str = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    def create(
        self,
        backfill_id: str,
        definition: Definition,
        ticks: Sequence[float],
        run_ids: Sequence[str],
        *,
        max_active: int = 0,
        flow_max: int = 0,
        start: float | None = None,
        end: float | None = None,
        now: float | str = "",
    ) -> str:
        """Store a new backfill of ``definition`` over ``ticks`` (``run_ids``: their runs' ids,
        in the same order): 'created', or 'exists'."""
        if len(run_ids) != len(ticks):
            raise ValueError(f"{len(ticks)} ticks but {len(run_ids)} run ids")
        record = {
            "flow": definition.name,
            "definition": definition.to_json(),
            "hash": definition.hash,
            "file": definition.file,
            "max_active": max_active,
            "flow_max": flow_max,
            "from": start,
            "to": end,
            "params": dict(definition.params),
        }
        return str(
            self._call(
                "backfill.create",
                backfill_id,
                json.dumps(record, default=str),
                definition.source,
                json.dumps(list(ticks)),
                json.dumps(list(run_ids)),
                now=now,
            )
        )

    def get(self, backfill_id: str) -> Backfill | None:
        raw = self._call("backfill.get", backfill_id)
        return None if raw is None else Backfill.from_reply(read_json(raw))

    def recent(self, offset: int = 0, count: int = 100) -> list[Backfill]:
        """Backfills, newest first."""
        raw = _list(read_json(self._call("backfill.list", offset, count)))
        return [Backfill.from_reply(b) for b in raw]

    def cancel(self, backfill_id: str, *, now: float | str = "") -> Canceled:
        """Stop submitting and cancel its active runs (JobNotFound: no such backfill)."""
        raw = json.loads(self._call("backfill.cancel", backfill_id, now=now))
        return Canceled(
            str(raw["state"]),
            bool(raw["changed"]),
            int(raw["runs"]),
            int(raw["jobs"]),
            int(raw["pending"]),
        )

    def run_statuses(self, run_ids: Sequence[str]) -> list[str]:
        """Each run's status (``missing`` when there is no such run), 1,000 a call."""
        out: list[str] = []
        for start in range(0, len(run_ids), 1000):
            page = run_ids[start : start + 1000]
            out += [str(s) for s in _list(json.loads(self._call("backfill.runs", *page)))]
        return out


def advance(
    client: Client,
    source: FlowSource,
    now: float | None = None,
    *,
    backfill_id: str | None = None,
    batch: int = DUE_BATCH,
) -> AdvanceReport:
    """One bounded step: submit the next ticks' runs of every active backfill (or just
    ``backfill_id``), or resume those that exist canceled, as far as their limits allow, in one
    round trip for the submissions."""
    at: float | str = "" if now is None else now
    report = AdvanceReport()
    due = _list(json.loads(client.engine.call("backfill.due", batch, backfill_id or "", now=at)))
    calls = [call for entry in due for call in _calls(entry, source)]
    if not calls:
        return report
    pipe = client.engine.pipeline()
    for call in calls:
        pipe.call(call.command, *call.args, now=at)
    refused: list[_Call] = []
    for call, reply in zip(calls, pipe.execute(), strict=True):
        if isinstance(reply, EngineError):
            # The engine refused the run (a job id taken by hand, say): the tick is handed
            # over with the engine's reason instead of being offered again forever. The ticks
            # after it in this step lost their compare-and-set: the next step offers them.
            log.error("backfill %s: run %s refused: %s", call.args[0], call.run_id, reply)
            reason = f"run {call.run_id} refused by the engine: {reply}"
            refused.append(_Call("backfill.skip", [*call.args[:2], reason[:1000]], call.run_id))
        elif isinstance(reply, Exception):
            raise reply
        else:
            report.add(str(reply), call.run_id)
    for call in refused:
        client.engine.call(call.command, *call.args, now=at)
        report.failed.append(call.run_id)
    return report


@dataclass(frozen=True, slots=True)
class _Call:
    command: str
    args: list[Any]
    run_id: str


def _calls(entry: Mapping[str, Any], source: FlowSource) -> list[_Call]:
    """The submit (or skip) of each tick ``backfill.due`` offered in ``entry``; for a tick
    whose run exists (canceled: to be resumed), its resume, with no run built."""
    name, index = str(entry["flow"]), int(entry["next"])
    definition = Definition.from_json(name, json.loads(entry["definition"]), entry["source"])
    calls = []
    ticks, runs = _list(entry["ticks"]), _list(entry["runs"])
    statuses = _list(entry.get("statuses")) or [MISSING] * len(runs)
    for offset, (text, run_id, status) in enumerate(zip(ticks, runs, statuses, strict=True)):
        tick = float(text)
        position = [entry["id"], index + offset]
        if status != MISSING:  # the engine decides again in the call: resumed, or it ran
            calls.append(_Call("backfill.resume", [*position, run_id], run_id))
            continue
        try:
            request = source.build(definition, run_id, tick, TRIGGER, 0.0)
        except Exception as error:  # params, expansion, a stored flow that no longer loads
            reason = f"cannot build the run of {run_id}: {error}"[:1000]
            log.error("backfill %s: %s", entry["id"], reason)
            calls.append(_Call("backfill.skip", [*position, reason], run_id))
            continue
        record = json.dumps({**request.run, "backfill": entry["id"]}, default=str)
        calls.append(
            _Call("backfill.submit", [*position, run_id, record, request.jobs_json()], run_id)
        )
    return calls


__all__ = [
    "MAX_ACTIVE_LIMIT",
    "MAX_TICKS",
    "MISSING",
    "AdvanceReport",
    "Backfill",
    "Backfills",
    "Canceled",
    "TooManyTicks",
    "advance",
    "backfill_ticks",
]
