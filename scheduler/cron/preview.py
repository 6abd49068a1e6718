"""What a schedule will do: its next fire times, and what catch-up fires after an outage.

Pure arithmetic over :mod:`scheduler.cron.fire_times` (the instants the service fires) and
:func:`scheduler.cron.catchup.plan_catchup` (the plan the service makes when it comes back), so
a preview says exactly what the service will do. Each fire time is given in the schedule's zone
and in UTC, with a note where a daylight-saving change moves or repeats it. Fire times outside the
schedule's ``start`` and ``end`` bounds (inclusive) do not exist, here as for the service.

The JSON of a preview (``--json``, ``--format json``) is the ``to_json`` of these dataclasses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import croniter

from scheduler.cron.catchup import (
    DEFAULT_GRACE_SECONDS,
    CatchupPlan,
    CatchupPolicy,
    OverlapPolicy,
    Skip,
    decide_overlap,
    plan_catchup,
)
from scheduler.cron.expression import Schedule
from scheduler.cron.fire_times import _fires, _resolve, _wall, next_fire

_SECOND = timedelta(seconds=1)
_LAST_YEAR = datetime(9999, 1, 1, tzinfo=UTC).timestamp()
"""The start of the calendar's last year: an outage must end before it."""
MAX_PREVIEW = 10_000


@dataclass(frozen=True, slots=True)
class PreviewTime:
    """One fire time: ``instant`` (epoch seconds), its local and UTC text, and a DST note."""

    instant: float
    local: str
    utc: str
    note: str = ""

    def to_json(self) -> dict[str, object]:
        """``local`` (in the schedule's zone), ``utc`` (ISO 8601), ``epoch``, ``note``."""
        return {
            "local": self.local,
            "utc": iso_utc(self.instant),
            "epoch": self.instant,
            "note": self.note,
        }


def _local(schedule: Schedule, instant: float) -> str:
    return datetime.fromtimestamp(instant, schedule.zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def _utc(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_utc(instant: float) -> str:
    """``2030-03-29T01:30:00Z``: an epoch time as ISO 8601 UTC."""
    return datetime.fromtimestamp(instant, UTC).isoformat().replace("+00:00", "Z")


def _time(schedule: Schedule, instant: float) -> PreviewTime:
    return PreviewTime(instant, _local(schedule, instant), _utc(instant), _note(schedule, instant))


def _end(schedule: Schedule) -> PreviewTime | None:
    """The schedule's end bound (no DST note: it is a bound, not a fire time)."""
    end = schedule.end
    return None if end is None else PreviewTime(end, _local(schedule, end), _utc(end))


def _gap_ticks(schedule: Schedule, instant: float) -> list[datetime]:
    """Wall-clock ticks that do not exist because clocks jumped forward to ``instant``."""
    zone = schedule.zone
    before = datetime.fromtimestamp(instant - 1, zone).utcoffset()
    after = datetime.fromtimestamp(instant, zone).utcoffset()
    if before is None or after is None or after <= before:
        return []
    lo, hi = _wall(instant - 1, zone) + _SECOND, _wall(instant, zone)
    ticks: list[datetime] = []
    for expr in schedule._exprs:
        walker = croniter(expr.cron, lo - _SECOND)
        while (tick := walker.get_next(datetime)) < hi:
            ticks.append(tick)
    return sorted(set(ticks))


def _note(schedule: Schedule, instant: float) -> str:
    """Why a DST change matters to this fire time (empty when it does not)."""
    skipped = _gap_ticks(schedule, instant)
    if skipped:
        shown = ", ".join(f"{t:%H:%M}" for t in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        verb = "does" if len(skipped) == 1 else "do"
        return f"DST gap: {shown}{more} {verb} not exist that night; fires here instead"
    wall = _wall(instant, schedule.zone)
    _, repeat = _resolve(wall, schedule.zone)
    if repeat is None:
        return ""
    if instant == repeat:
        return f"DST repeat: {wall:%H:%M} again, second occurrence (every-hour expression)"
    every_hour = any(e.every_hour for e in schedule._exprs)
    if every_hour:
        return f"DST repeat: {wall:%H:%M} occurs twice; this is the first occurrence"
    return f"DST repeat: {wall:%H:%M} occurs twice; fires once, at this first occurrence"


def preview(schedule: Schedule, after: float, count: int) -> list[PreviewTime]:
    """The next ``count`` fire times strictly after ``after`` (fewer when the schedule ends
    first: none after its ``end``, as :func:`~scheduler.cron.fire_times.next_fire` says)."""
    out: list[PreviewTime] = []
    for instant in _fires(schedule, after, forward=True):
        if len(out) >= min(count, MAX_PREVIEW):
            break
        out.append(_time(schedule, instant))
    return out


@dataclass(frozen=True, slots=True)
class UpcomingPreview:
    """The next fire times after ``after``: ``asked`` for, ``times`` found (fewer when the
    schedule ends first), and the schedule's ``end`` bound (None: it has none)."""

    after: float
    asked: int
    times: tuple[PreviewTime, ...]
    end: PreviewTime | None

    @property
    def cut_short(self) -> bool:
        """Fewer fire times remain than were asked for."""
        return len(self.times) < self.asked

    def to_json(self) -> dict[str, object]:
        return {
            "asked": self.asked,
            "times": [t.to_json() for t in self.times],
            "end": None if self.end is None else self.end.to_json(),
        }


def upcoming(schedule: Schedule, after: float, count: int) -> UpcomingPreview:
    """:func:`preview`, with how many were asked for and where the schedule ends."""
    return UpcomingPreview(after, count, tuple(preview(schedule, after, count)), _end(schedule))


@dataclass(frozen=True, slots=True)
class SkippedTicks:
    """Skipped ticks ``first``..``last`` (one tick: equal), ``count`` of them (None: too many
    to count), and why."""

    first: PreviewTime
    last: PreviewTime
    count: int | None
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "first": self.first.to_json(),
            "last": self.last.to_json(),
            "count": self.count,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class OutagePreview:
    """What the service does when it comes back at ``back`` after being down since ``down``:
    the ticks it fires (with their trigger) and those it skips, with why; ``missed`` counts
    both (None: too many to count); ``end`` is the schedule's end bound (None: it has none)."""

    down: float
    back: float
    missed: int | None
    fires: tuple[tuple[PreviewTime, str], ...]
    skips: tuple[SkippedTicks, ...]
    end: PreviewTime | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "down": iso_utc(self.down),
            "back": iso_utc(self.back),
            "missed": self.missed,
            "fires": [{**t.to_json(), "trigger": trigger} for t, trigger in self.fires],
            "skips": [s.to_json() for s in self.skips],
            "end": None if self.end is None else self.end.to_json(),
        }


def meet_overlap(plan: OutagePreview, overlap: OverlapPolicy) -> OutagePreview:
    """``plan`` as the engine fires it: the catch-up runs go in one tick of the service, one
    after the other, each meeting the one before it still active (none ends within a tick), so
    the overlap policy decides each (:func:`~scheduler.cron.catchup.decide_overlap`): under
    ``skip`` the first runs and the others are skipped, under ``buffer_one`` the second waits
    for the first to end (trigger ``buffered``) and the rest are skipped; ``allow`` and
    ``cancel_running`` fire all (the latter canceling each run for the next)."""
    fires: list[tuple[PreviewTime, str]] = []
    held: list[tuple[PreviewTime, str]] = []  # skipped by the policy, with its reason
    active = buffered = False
    for time, trigger in plan.fires:
        decision = decide_overlap(overlap, active, buffered)
        if decision.action == "skip":
            held.append((time, decision.reason or "overlap"))
            continue
        buffered = buffered or decision.action == "buffer"
        fires.append((time, "buffered" if decision.action == "buffer" else trigger))
        active = True
    if not held:  # nothing skipped, but a buffered fire's trigger still says it waits
        return dataclasses.replace(plan, fires=tuple(fires))
    spans: list[SkippedTicks] = []
    for time, reason in held:
        last = spans[-1] if spans else None
        if last is not None and last.reason == reason:
            spans[-1] = SkippedTicks(last.first, time, (last.count or 0) + 1, reason)
        else:
            spans.append(SkippedTicks(time, time, 1, reason))
    skips = sorted((*plan.skips, *spans), key=lambda s: s.first.instant)
    return dataclasses.replace(plan, fires=tuple(fires), skips=tuple(skips))


def outage_due(schedule: Schedule, down: float, back: float) -> float | None:
    """The first tick the service missed, down from ``down`` (a tick at that very instant is
    missed: the service is down then, as a flow test's ``outage:`` has it) until ``back``
    (None: nothing was missed)."""
    expected = next_fire(schedule, math.ceil(down) - 1.0)  # fire times are whole seconds
    return None if expected is None or expected > back else expected


def outage_preview(
    schedule: Schedule, down: float, back: float, plan: CatchupPlan | None
) -> OutagePreview:
    """A plan for the return at ``back`` (None: nothing was due), as a preview."""
    if plan is None:
        return OutagePreview(down, back, 0, (), (), _end(schedule))
    fires = tuple((_time(schedule, f.tick), f.trigger) for f in plan.fires)
    skips = tuple(
        SkippedTicks(_time(schedule, s.first), _time(schedule, s.last), s.count, s.reason)
        for s in _folded(plan.skips, [f.tick for f in plan.fires])
    )
    counted: Sequence[int | None] = [s.count for s in plan.skips]
    missed: int | None = (
        None
        if any(c is None for c in counted)
        else (len(plan.fires) + sum(c or 0 for c in counted))
    )
    return OutagePreview(down, back, missed, fires, skips, _end(schedule))


def after_outage(
    schedule: Schedule,
    policy: CatchupPolicy,
    window: float | None,
    max_runs: int | None,
    down: float,
    back: float,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> OutagePreview:
    """The service's catch-up plan on its return at ``back``: its next tick was the first fire
    time at or after ``down`` (:func:`outage_due`), as it had stored it before going down."""
    expected = outage_due(schedule, down, back)
    if expected is None:
        return outage_preview(schedule, down, back, None)
    plan = plan_catchup(
        schedule, policy, window, max_runs, expected, back, grace_seconds=grace_seconds
    )
    return outage_preview(schedule, down, back, plan)


def _folded(skips: Sequence[Skip], fired: Sequence[float]) -> list[Skip]:
    """Skips of one reason next to each other, with no fire between them, as one: the plan
    records the newest skipped ticks one by one (the service logs each), a reader wants spans."""
    out: list[Skip] = []
    for skip in skips:
        last = out[-1] if out else None
        if (
            last is not None
            and last.reason == skip.reason
            and not any(last.last < tick < skip.first for tick in fired)
        ):
            count = None if last.count is None or skip.count is None else last.count + skip.count
            out[-1] = Skip(last.first, skip.last, count, skip.reason)
        else:
            out.append(skip)
    return out


def parse_time(text: str) -> float:
    """An ISO 8601 time (``Z`` or an offset; a naive one is UTC) as epoch seconds."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def parse_period(text: str) -> tuple[float, float]:
    """``FROM/TO``, two ISO 8601 times, as epoch seconds (``--after-outage``, ``outage:``)."""
    parts = text.split("/")
    if len(parts) != 2:
        raise ValueError(f"{text!r}: expected FROM/TO, two ISO 8601 times joined by '/'")
    try:
        start, end = (parse_time(part) for part in parts)
    except ValueError:
        raise ValueError(
            f"{text!r}: FROM and TO are ISO 8601 times, e.g. 2026-11-01T03:00:00Z"
        ) from None
    if end <= start:
        raise ValueError(f"{text!r}: TO must be after FROM")
    if end >= _LAST_YEAR:  # the walks around TO, in any zone, must stay inside the calendar
        raise ValueError(f"{text!r}: TO must be before 9999-01-01")
    return start, end
