"""Cron schedules in Redis: the registration model and the engine calls that read and change it.

Each flow file with a ``schedule:`` block is registered under its flow's name (the schedule's
name): a hash holds its :class:`Definition` (cron expressions, time zone, bounds, jitter,
policies, the file's text and content hash), the ``schedules`` sorted set its next fire time.
The engine knows no cron: this module computes fire times with :mod:`scheduler.cron` and hands
the engine each new score as a compare-and-set (``lua/commands/schedule*.lua``), so a score only
moves from the value its writer saw.

What the service needs from flows (loading a file, expanding a run) is the :class:`FlowSource`
protocol; :mod:`flows.runs.service_source` implements it, so this package never imports flows.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.cron import (
    InvalidSchedule,
    Schedule,
    Skip,
    next_fire,
)
from scheduler.engine.client import Client
from scheduler.engine.connections import TICK_DURABILITY, connected_replicas
from scheduler.engine.errors import EngineError, JobNotFound, WrongState
from scheduler.engine.limits import read_json
from scheduler.engine.scripts import Engine
from scheduler.service.records import (
    _PAGE,
    CAS_ATTEMPTS,
    BufferedEntry,
    Definition,
    DueBatch,
    DueEntry,
    FireCall,
    FlowSource,
    Indexed,
    InvalidSource,
    Registration,
    RunRequest,
    ServiceHealth,
    SkipRecord,
    _list,
    _score,
    _skip_json,
    _time,
    paused_skip,
)

# Seconds between looks at whether the server has replicas (ticks then fire in WAIT mode).
REPLICAS_RECHECK = 60.0


class Schedules:
    """The schedules of one namespace, through the engine. ``now`` is epoch seconds."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._firing: Engine | None = None
        self._firing_checked = float("-inf")

    def _call(self, command: str, *args: Any, now: float | str = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    def _fire_engine(self) -> Engine:
        """The engine that fires ticks: it waits for a replica (``WAIT``) whenever the server
        has one, even when the URL asks for no waiting, so that a tick fired on a master a
        partition cut off is refused (and fired once on the new master) rather than run twice.
        Whether the server has replicas is looked at again every minute."""
        engine = self.client.engine
        if engine.durability is not None:
            return engine
        if self._firing is None or time.monotonic() - self._firing_checked >= REPLICAS_RECHECK:
            self._firing_checked = time.monotonic()
            replicated = connected_replicas(engine.route.target()) > 0
            self._firing = engine.with_durability(TICK_DURABILITY) if replicated else engine
        return self._firing

    # -- reading ---------------------------------------------------------------------------

    def get(self, name: str, *, skips: int = 20, now: float | str = "") -> Registration | None:
        """The schedule with its newest ``skips`` skip records, or None."""
        raw = self._call("schedule.get", name, skips, now=now)
        return None if raw is None else Registration.from_reply(read_json(raw))

    def get_many(self, names: Sequence[str]) -> list[Definition]:
        """The definitions of the schedules that exist among ``names``, in one round trip."""
        pipe = self.client.engine.pipeline()
        for name in names:
            pipe.call("schedule.get", name, 0)
        out = []
        for reply in pipe.execute():
            if isinstance(reply, Exception):
                raise reply
            if reply is not None:
                out.append(Registration.from_reply(json.loads(reply)).definition)
        return out

    def index(self, *, now: float | str = "") -> dict[str, Indexed]:
        """Every registered schedule's name → what rescans compare: cheap."""
        out: dict[str, Indexed] = {}
        while True:
            raw = self._call("schedule.list", len(out), _PAGE, "1", now=now)
            page = _list(json.loads(raw))
            out.update(
                (
                    str(s["name"]),
                    Indexed(
                        str(s["hash"]),
                        str(s.get("file") or ""),
                        str(s.get("origin") or ""),
                        str(s.get("path") or ""),
                    ),
                )
                for s in page
            )
            if len(page) < _PAGE:
                return out

    def all(self, *, now: float | str = "") -> list[Registration]:
        """Every registered schedule, by name (without their sources)."""
        out: list[Registration] = []
        while True:
            page = _list(read_json(self._call("schedule.list", len(out), _PAGE, now=now)))
            out += [Registration.from_reply(raw) for raw in page]
            if len(page) < _PAGE:
                return out

    def due(
        self, now: float, *, offset: int = 0, limit: int = 500, name: str | None = None
    ) -> DueBatch:
        """A page of due schedules, and the schedules holding a buffered tick; ``name``:
        that schedule alone (read without the others)."""
        args = (offset, limit) if name is None else (offset, limit, name)
        raw = json.loads(self._call("schedule.due", *args, now=now))
        due = tuple(
            DueEntry(
                str(e["name"]),
                float(e["next"]),
                str(e["hash"]),
                bool(e["paused"]),
                e.get("last_run") or None,
                bool(e["active"]),
                _time(e.get("buffered")),
                str(e.get("origin") or ""),
            )
            for e in _list(raw.get("due"))
        )
        buffered = tuple(
            BufferedEntry(
                str(e["name"]),
                float(e["tick"]),
                str(e["hash"]),
                e.get("last_run") or None,
                bool(e["active"]),
                str(e.get("origin") or ""),
            )
            for e in _list(raw.get("buffered"))
        )
        return DueBatch(due, buffered)

    # -- registering -----------------------------------------------------------------------

    def register(
        self,
        definition: Definition,
        now: float,
        *,
        settle: Callable[[str, float], object] | None = None,
    ) -> str:
        """Register or update; 'registered', 'updated' or 'unchanged'; 'owned' (nothing
        written) when the schedule belongs to another source than ``definition.origin``.

        The new score is the definition's first fire time after ``now``, or, when the current
        score is already due, after it: ticks that came due and were not fired yet stay due
        (their catch-up policy decides). Retries when another writer changed the schedule.

        A change of when the schedule fires (cron, time zone, start, end) would pass over the
        ticks already due, which are the registered definition's, not the new one's: first
        ``settle(name, now)`` handles them as the registered definition has them (the service
        fires or skips them under its policies, moving the score past ``now``), then the new
        definition is registered from ``now``.
        """
        schedule = definition.schedule
        for _ in range(CAS_ATTEMPTS):
            current = self.get(definition.name, skips=0, now=now)
            if (
                settle is not None
                and current is not None
                and _reschedules_due(current, definition, now)
            ):
                settle(definition.name, now)
                settle = None  # once: what it could not move is passed over (it says so)
                continue
            after = now
            if current is not None and current.next is not None:
                after = min(now, math.ceil(current.next) - 1.0)
            reply = self._call(
                "schedule.register",
                definition.name,
                json.dumps(definition.to_json()),
                definition.source,
                _score(next_fire(schedule, after)),
                current.definition.hash if current else "",
                _score(current.next) if current else "",
                now=now,
            )
            if reply != "conflict":
                return str(reply)
        raise EngineError(f"schedule {definition.name}: kept changing while being registered")

    def unregister(self, name: str, expected_hash: str = "", *, now: float | str = "") -> str:
        """'unregistered', 'missing', or 'conflict' (its content is no longer ``expected_hash``)."""
        return str(self._call("schedule.unregister", name, expected_hash, now=now))

    # -- operating -------------------------------------------------------------------------

    def pause(self, name: str, note: str = "", *, now: float | str = "") -> None:
        """Stop firing: due ticks are skipped (reason ``paused``) until :meth:`resume`."""
        self._call("schedule.pause", name, note, now=now)

    def resume(self, name: str, now: float) -> str:
        """Fire again from the next tick after ``now``; ticks due meanwhile are skipped as
        paused. 'resumed' or 'not-paused'; JobNotFound when there is no such schedule."""
        for _ in range(CAS_ATTEMPTS):
            current = self.get(name, skips=0, now=now)
            if current is None:
                raise JobNotFound(f"no schedule {name}", command="schedule.resume")
            skips: list[Skip] = []
            upcoming = current.next
            if current.next is not None and current.next <= now:
                schedule = _computable(current)
                skip = paused_skip(schedule, current.next, now)
                skips = [skip] if skip else []
                upcoming = next_fire(schedule, now)
            reply = self._call(
                "schedule.resume",
                name,
                _score(current.next),
                _score(upcoming),
                json.dumps([_skip_json(s) for s in skips]),
                now=now,
            )
            if reply != "conflict":
                return str(reply)
        raise EngineError(f"schedule {name}: kept changing while being resumed")

    def fire_many(
        self,
        calls: Sequence[FireCall],
        now: float,
        ping: tuple[str, Mapping[str, Any]] | None = None,
    ) -> list[str | EngineError]:
        """Send every call in one round trip; each reply is an outcome or the refusal.
        ``ping``: a service's :meth:`ping` (its id and info), sent after them in that round
        trip; raises what it raises."""
        pipe = self._fire_engine().pipeline()
        for call in calls:
            pipe.call("schedule.fire", *call.args(), now=now)
        if ping is not None:
            pipe.call("scheduler.ping", ping[0], _info_json(ping[1]), now=now)
        replies = pipe.execute()
        if ping is not None and isinstance(pinged := replies.pop(), Exception):
            raise pinged
        out: list[str | EngineError] = []
        for reply in replies:
            if isinstance(reply, EngineError):
                out.append(reply)
            elif isinstance(reply, Exception):
                raise reply
            else:
                out.append(str(reply))
        return out

    def fire(self, call: FireCall, now: float) -> str:
        """One ``schedule.fire``; raises what the engine refuses."""
        return str(self._fire_engine().call("schedule.fire", *call.args(), now=now))

    def trigger(self, name: str, request: RunRequest, *, now: float | str = "") -> str:
        """Submit a run now, outside the ticks; it becomes the schedule's last run."""
        return str(
            self._call(
                "schedule.trigger",
                name,
                request.run_id,
                request.run_json(),
                request.jobs_json(),
                now=now,
            )
        )

    # -- health ----------------------------------------------------------------------------

    def ping(self, service_id: str, info: Mapping[str, Any], now: float) -> None:
        """Record ``now`` as the service's last tick."""
        self._call("scheduler.ping", service_id, _info_json(info), now=now)

    def forget_service(self, service_id: str) -> None:
        self._call("scheduler.forget", service_id)

    def services(self) -> list[ServiceHealth]:
        """Every service's last ping, newest first."""
        raw = _list(read_json(self._call("schedulers", 1000)))
        return [
            ServiceHealth(str(s["id"]), float(s["last_tick"]), s.get("info") or {}) for s in raw
        ]


def _reschedules_due(current: Registration, definition: Definition, now: float) -> bool:
    """Whether registering ``definition`` over ``current`` changes when the schedule fires
    while ticks of ``current`` are due at ``now``."""
    if current.next is None or current.next > now:
        return False
    old = current.definition
    return (old.cron, old.timezone, old.start, old.end) != (
        definition.cron,
        definition.timezone,
        definition.start,
        definition.end,
    )


def _info_json(info: Mapping[str, Any]) -> str:
    return json.dumps(dict(info), default=str)


def _computable(registration: Registration) -> Schedule:
    """The registration's cron arithmetic, or WrongState naming it when today's cron checks
    refuse what an older version registered (a range that runs backwards, say)."""
    try:
        return registration.definition.schedule
    except InvalidSchedule as error:
        raise WrongState(
            f"schedule {registration.name}: {error}; fix its file (the scheduler service "
            "registers it again at its next scan)",
            command="schedule.resume",
        ) from None


__all__ = [
    "BufferedEntry",
    "Definition",
    "DueBatch",
    "DueEntry",
    "FireCall",
    "FlowSource",
    "Indexed",
    "InvalidSource",
    "Registration",
    "RunRequest",
    "Schedules",
    "ServiceHealth",
    "SkipRecord",
    "paused_skip",
]
