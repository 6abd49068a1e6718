"""What the schedule registry holds, as plain data: definitions, registrations, due entries,
skip records and the run a tick makes (named by the flow source: :meth:`FlowSource.run_id`).
No I/O: the calls that read and write them are :class:`scheduler.service.schedules.Schedules`;
the catch-up planning (:mod:`scheduler.service.planning`) and the flows that build runs take
these types from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, cast
from zoneinfo import ZoneInfo

from scheduler.cron import (
    MAX_ENUMERATED,
    CatchupPolicy,
    OverlapPolicy,
    Schedule,
    Skip,
    missed_ticks,
    prev_fire,
)

FireAction = Literal["fire", "skip", "buffer", "buffered"]

PAUSED = "paused"
#: Compare-and-set attempts of one registration or resume before giving up (each lost attempt
#: means another writer made progress).
CAS_ATTEMPTS = 20
_PAGE = 500
#: Seconds since its last tick within which a scheduler service is alive: ``flows scheduler
#: --health``'s default ``--max-age``, the one notion of a live service (a service pings at each
#: tick, every ``--tick-interval``: a second by default). A catalogue source is live while one
#: of its services is (:mod:`scheduler.service.catalog`).
LIVE_TICK_AGE = 60.0


def _time(value: Any) -> float | None:
    """A time the engine sent as exact text ('' or absent: none)."""
    if value is None or value == "":
        return None
    return float(value)


def _score(value: float | None) -> str:
    """A score as the engine takes it: exact (repr round-trips a float), '' for none."""
    return "" if value is None else repr(float(value))


def _list(value: Any) -> list[Any]:
    """cjson writes an empty list as ``{}``."""
    return value if isinstance(value, list) else []


# ------------------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Definition:
    """What one flow file's ``schedule:`` registers.

    ``name`` is the flow's name; ``file`` the file's absolute path; ``hash`` its content hash;
    ``source`` its text (kept in Redis, so any service fires exactly the registered version);
    ``params`` the params of every scheduled run (the flow's defaults fill the rest);
    ``paused`` whether the file itself says ``paused: true``; ``origin`` the source (a
    service's folder of flow files, by name) it belongs to, and ``path`` its file there:
    services fire only the schedules of their own source.
    """

    name: str
    file: str
    hash: str
    source: str = field(repr=False)
    cron: tuple[str, ...]
    timezone: str = "UTC"
    start: float | None = None
    end: float | None = None
    jitter: float = 0.0
    catchup: CatchupPolicy = "latest"
    window: float | None = None
    max_runs: int | None = None
    overlap: OverlapPolicy = "skip"
    params: Mapping[str, Any] = field(default_factory=dict)
    paused: bool = False
    origin: str = ""
    path: str = ""

    @property
    def timing(self) -> str:
        """Its cron expressions and time zone as people read them: ``15 3 * * * (UTC)``."""
        return f"{' | '.join(self.cron)} ({self.timezone})"

    @cached_property
    def schedule(self) -> Schedule:
        """The cron arithmetic's view (raises InvalidSchedule for a bad definition)."""
        return Schedule(self.cron, self.timezone, self.start, self.end, self.jitter)

    @cached_property
    def zone(self) -> ZoneInfo:
        """The time zone its times are shown in, also when today's cron checks refuse its
        expressions (registered by an older version: listed, not planned)."""
        return ZoneInfo(self.timezone)

    def to_json(self) -> dict[str, Any]:
        """What the engine stores as the definition (everything but the source)."""
        return {
            "flow": self.name,
            "file": self.file,
            "hash": self.hash,
            "cron": list(self.cron),
            "timezone": self.timezone,
            "start": self.start,
            "end": self.end,
            "jitter": self.jitter,
            "catchup": self.catchup,
            "window": self.window,
            "max_runs": self.max_runs,
            "overlap": self.overlap,
            "params": dict(self.params),
            "paused": self.paused,
            "origin": self.origin,
            "path": self.path,
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any], source: str) -> Definition:
        """The inverse of :meth:`to_json`."""
        return cls(
            name=name,
            file=str(data.get("file", "")),
            hash=str(data["hash"]),
            source=source,
            cron=tuple(data["cron"]),
            timezone=str(data.get("timezone", "UTC")),
            start=data.get("start"),
            end=data.get("end"),
            jitter=float(data.get("jitter") or 0.0),
            catchup=cast(CatchupPolicy, data.get("catchup", "latest")),
            window=data.get("window"),
            max_runs=data.get("max_runs"),
            overlap=cast(OverlapPolicy, data.get("overlap", "skip")),
            params=dict(data.get("params") or {}),
            paused=bool(data.get("paused", False)),
            origin=str(data.get("origin") or ""),
            path=str(data.get("path") or ""),
        )


@dataclass(frozen=True, slots=True)
class SkipRecord:
    """Skipped ticks ``first``..``last`` (``count`` of them, None: too many to count), why, when."""

    first: float
    last: float
    count: int | None
    reason: str
    at: float


@dataclass(frozen=True)
class Registration:
    """A registered schedule as Redis holds it: its definition and its state."""

    definition: Definition
    next: float | None
    """The next fire time (the score), None when the schedule has none left."""
    paused: bool
    """Paused by an operator (``flows schedule pause``)."""
    pause_note: str
    last_run: str | None
    last_run_status: str
    """running, succeeded, failed, canceled, blocked, expired, or missing (no run yet)."""
    last_tick: float | None
    last_fired_at: float | None
    fired: int
    skipped: int
    triggered: int
    buffered: float | None
    """A tick held back until the last run ends (overlap buffer_one)."""
    ended: float | None
    registered: float | None
    skips: tuple[SkipRecord, ...] = ()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def is_paused(self) -> bool:
        """Paused by an operator or by its file."""
        return self.paused or self.definition.paused

    def local(self, when: float | None) -> str:
        """An epoch time in the schedule's time zone ('' for none)."""
        if when is None:
            return ""
        return datetime.fromtimestamp(when, self.definition.zone).strftime("%Y-%m-%d %H:%M %Z")

    def as_json(self) -> dict[str, Any]:
        """The one JSON shape of a schedule (``flows schedules --json``, the REST API)."""
        d = self.definition
        return {
            "name": self.name,
            "source": d.origin or None,
            "file": d.file,
            "cron": list(d.cron),
            "timezone": d.timezone,
            "next": self.next,
            "next_local": self.local(self.next),
            "paused": self.is_paused,
            "paused_in_file": d.paused,
            "pause_note": self.pause_note,
            "catchup": d.catchup,
            "window": d.window,
            "max_runs": d.max_runs,
            "overlap": d.overlap,
            "jitter": d.jitter,
            "last_run": self.last_run,
            "last_run_status": self.last_run_status,
            "last_tick": self.last_tick,
            "fired": self.fired,
            "skipped": self.skipped,
            "triggered": self.triggered,
            "buffered": self.buffered,
            "skips": [
                {"first": s.first, "last": s.last, "count": s.count, "reason": s.reason, "at": s.at}
                for s in self.skips
            ],
        }

    @classmethod
    def from_reply(cls, raw: Mapping[str, Any]) -> Registration:
        definition = Definition.from_json(
            str(raw["name"]), json.loads(raw["definition"]), str(raw.get("source", ""))
        )
        return cls(
            definition=definition,
            next=_time(raw.get("next")),
            paused=bool(raw.get("paused")),
            pause_note=str(raw.get("pause_note", "")),
            last_run=raw.get("last_run") or None,
            last_run_status=str(raw.get("last_run_status", "missing")),
            last_tick=_time(raw.get("last_tick")),
            last_fired_at=_time(raw.get("last_fired_at")),
            fired=int(raw.get("fired", 0)),
            skipped=int(raw.get("skipped", 0)),
            triggered=int(raw.get("triggered", 0)),
            buffered=_time(raw.get("buffered")),
            ended=_time(raw.get("ended")),
            registered=_time(raw.get("registered")),
            skips=tuple(
                SkipRecord(
                    float(s["first"]),
                    float(s["last"]),
                    None if s.get("count") is None else int(s["count"]),
                    str(s["reason"]),
                    float(s["at"]),
                )
                for s in _list(raw.get("skips"))
            ),
        )


@dataclass(frozen=True, slots=True)
class DueEntry:
    """A schedule whose score is due: what the engine says about it at this moment."""

    name: str
    next: float
    hash: str
    paused: bool
    last_run: str | None
    active: bool
    """The last run still waits, is scheduled or runs (only checked unless overlap is allow)."""
    buffered: float | None
    origin: str = ""
    """The source it belongs to ('' for a schedule registered without one)."""


@dataclass(frozen=True, slots=True)
class Indexed:
    """A registered schedule as rescans see it: content hash, file, source and path there."""

    hash: str
    file: str
    origin: str
    path: str


@dataclass(frozen=True, slots=True)
class BufferedEntry:
    """A schedule holding ``tick`` back until its last run ends."""

    name: str
    tick: float
    hash: str
    last_run: str | None
    active: bool
    origin: str = ""


@dataclass(frozen=True, slots=True)
class DueBatch:
    due: tuple[DueEntry, ...]
    buffered: tuple[BufferedEntry, ...]


@dataclass(frozen=True)
class RunRequest:
    """A run ready for the engine: its id, record fields, and its jobs as the JSON array
    ``flow.submit`` takes (encoded once, by the builder: :mod:`flows.runs.build`)."""

    run_id: str
    run: Mapping[str, Any]
    jobs_text: str
    job_count: int
    _run_text: str | None = field(default=None, init=False, repr=False, compare=False)

    def run_json(self) -> str:
        """The record as JSON, encoded once (the record is not changed after it is built)."""
        text = self._run_text
        if text is None:
            # Compact: a large run's graph is a tenth smaller (the engine keeps fields
            # re-encoded).
            text = json.dumps(dict(self.run), default=str, separators=(",", ":"))
            object.__setattr__(self, "_run_text", text)  # a memo, not a change: frozen stays
        return text

    def jobs_json(self) -> str:
        return self.jobs_text


@dataclass(frozen=True)
class FireCall:
    """One ``schedule.fire``: move ``name``'s score from ``expected`` to ``next`` and act."""

    name: str
    hash: str
    expected: float
    next: float | None
    action: FireAction
    tick: float | None = None
    skips: tuple[Skip, ...] = ()
    run: RunRequest | None = None
    cancel: str | None = None

    def args(self) -> list[Any]:
        skips = [_skip_json(s) for s in self.skips]
        args: list[Any] = [
            self.name,
            self.hash,
            _score(self.expected),
            _score(self.next),
            self.action,
            _score(self.tick),
            json.dumps(skips),
        ]
        if self.run is not None:
            args += [
                self.run.run_id,
                self.run.run_json(),
                self.run.jobs_json(),
            ]
            if self.cancel:
                args.append(self.cancel)
        return args


# ------------------------------------------------------------------------ the flow source


class InvalidSource(ValueError):
    """A flow file that cannot be registered; the message lists every error. ``findings``
    holds them as the source made them (the flow layer's own, opaque here), for a caller that
    prints them as that layer's tools do (``flows scheduler --once``). ``name`` is the flow's
    name as the file still declares it (None when it cannot be read): a file moved and broken
    in one change keeps the schedule of that name until it validates again."""

    def __init__(
        self, message: str, findings: Sequence[object] = (), name: str | None = None
    ) -> None:
        super().__init__(message)
        self.findings = tuple(findings)
        self.name = name


class FlowSource(Protocol):
    """What the scheduler needs from the flow layer (implemented by
    :mod:`flows.runs.service_source`)."""

    def load(self, path: Path, text: str, now: float) -> Definition | None:
        """The definition of the flow file at ``path`` (content ``text``); None when the file
        has no schedule. Raises :class:`InvalidSource` when it does not validate."""
        ...

    def channels(self, path: Path, text: str) -> Sequence[Mapping[str, Any]]:
        """The notification rules of the flow file at ``path`` (content ``text``), the flow's
        and its steps', each as its runs carry it; empty when it has none or does not
        validate."""
        ...

    def run_id(self, flow: str, tick: float) -> str:
        """The id of the run ``flow``'s ``tick`` makes: the same every time it is asked, so that
        firing a tick twice (two services, a retried call, a backfill of a tick that ran on
        schedule) names one run."""
        ...

    def build(
        self, definition: Definition, run_id: str, tick: float, trigger: str, delay: float
    ) -> RunRequest:
        """The run of ``definition`` standing for ``tick``, its first jobs delayed ``delay``
        seconds (jitter). Raises ValueError when it cannot be expanded."""
        ...


# -------------------------------------------------------------------- the engine calls


@dataclass(frozen=True, slots=True)
class ServiceHealth:
    """A scheduler service's last ping."""

    id: str
    last_tick: float
    info: Mapping[str, Any]

    def alive(self, now: float, max_age: float = LIVE_TICK_AGE) -> bool:
        """Whether it ticked within ``max_age`` seconds of ``now`` (the server's clock)."""
        return now - self.last_tick <= max_age

    @property
    def source(self) -> str | None:
        """The source it publishes and fires (its ``--source``), as its ping says."""
        source = self.info.get("source")
        return source if isinstance(source, str) else None


def paused_skip(schedule: Schedule, first_due: float, now: float) -> Skip | None:
    """The ticks in ``[first_due, now]`` as one skip with reason ``paused`` (None: no tick)."""
    ticks = missed_ticks(schedule, math.ceil(first_due) - 1.0, now, limit=MAX_ENUMERATED + 1)
    if not ticks:
        return None
    if len(ticks) > MAX_ENUMERATED:  # too many to count: one group up to the newest
        return Skip(ticks[0], prev_fire(schedule, now) or ticks[-1], None, PAUSED)
    return Skip(ticks[0], ticks[-1], len(ticks), PAUSED)


def _skip_json(skip: Skip) -> dict[str, Any]:
    return {"first": skip.first, "last": skip.last, "count": skip.count, "reason": skip.reason}
