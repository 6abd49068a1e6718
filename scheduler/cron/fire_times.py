"""Fire times of a schedule: next, previous and missed ticks, under the daylight-saving rule.

Nothing here touches Redis, files or the clock: every function takes its times as arguments.
At the boundary a time is epoch seconds (``float``, UTC); inside, wall-clock times are naive
``datetime`` values in the schedule's zone, mapped to UTC with :mod:`zoneinfo` and ``fold``.

Daylight-saving rule (docs/pages/scheduling.md quotes this paragraph)
    An expression names wall-clock times in the schedule's time zone; each one fires once,
    at one UTC instant:

    - **Gap** (clocks spring forward): a wall-clock time that does not exist fires once, at
      the first valid instant after the gap. ``30 2 * * *`` in Europe/Berlin fires on
      2026-03-29 at 03:00 CEST (01:00 UTC). Every tick inside one gap, and a regular tick at
      that same instant (``0 3``), collapse into that single firing.
    - **Overlap** (clocks fall back): a wall-clock time that occurs twice fires once, at its
      *first* occurrence (the daylight-saving side). ``30 2 * * *`` in Europe/Berlin fires
      on 2026-10-25 at 02:30 CEST (00:30 UTC) and not again at 02:30 CET.
    - **Every-hour expressions** (hour field ``*``, ``*/1`` or ``0-23``, e.g. ``0 * * * *``
      or ``*/15 * * * *``): the repeated hour is a real hour of elapsed time, so they fire
      at *both* occurrences and keep their cadence: ``0 * * * *`` fires 25 times on the
      25-hour day (and 23 times on the 23-hour day, its 02:00 tick merging with 03:00).
      The gap rule applies to them as to any expression: ``30 * * * *`` fires its missing
      02:30 at 03:00, then 03:30 as usual.

    Each UTC instant fires at most once, whatever the number of expressions. No wall-clock
    tick is ever dropped, none crashes, and, except for the second occurrence of a repeated
    hour in an every-hour expression, no wall-clock time fires twice.

croniter is used on naive wall-clock times only: with an aware start (croniter 7) it fires a
fixed time such as ``30 2 * * *`` at *both* occurrences of a repeated hour, against the rule.
Walking forward, an expression of plain values (no ``L``, ``W``, ``#``, ``?``) is not given to
croniter at all: its fields, as croniter expands them, are walked a day at a time
(:func:`_wall_ticks_after`), the same wall-clock ticks several times faster.

Jitter
    The sorted-set score and the run id use the tick itself; the run is put at
    ``tick + jitter_for(schedule_id, tick, schedule.jitter)``, the same on every service.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, tzinfo
from itertools import islice, takewhile
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from scheduler.cron.expression import Schedule, _Expr, _Plain

__all__ = [
    "MAX_ENUMERATED",
    "describe",
    "jitter_for",
    "missed_ticks",
    "next_fire",
    "prev_fire",
    "wall_instants",
]

#: Most ticks one catch-up plan enumerates per segment; beyond it skips are not counted.
MAX_ENUMERATED = 10_000

_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)


# --------------------------------------------------------------- wall clock <-> UTC


def _wall(instant: float, tz: ZoneInfo) -> datetime:
    """The naive wall-clock time at ``instant`` in ``tz``."""
    return datetime.fromtimestamp(instant, tz).replace(tzinfo=None, fold=0)


def _offset_s(wall: datetime, tz: ZoneInfo, fold: int) -> float:
    offset = wall.replace(tzinfo=tz, fold=fold).utcoffset()
    assert offset is not None  # a ZoneInfo always has an offset
    return offset.total_seconds()


def _offset_at(instant: float, tz: ZoneInfo) -> float:
    offset = datetime.fromtimestamp(instant, tz).utcoffset()
    assert offset is not None
    return offset.total_seconds()


def _overlap_length(wall: datetime, tz: ZoneInfo) -> timedelta:
    """How long ``wall``'s repeated period lasts if ``wall`` occurs twice, else zero."""
    return timedelta(seconds=max(0.0, _offset_s(wall, tz, 0) - _offset_s(wall, tz, 1)))


def _gap_end(tz: ZoneInfo, lo: float, hi: float) -> float:
    """The first instant in ``(lo, hi]`` already in the offset in force at ``hi``."""
    target = _offset_at(hi, tz)
    below, above = math.floor(lo), math.ceil(hi)
    while above - below > 1:  # zone transitions fall on whole seconds
        middle = (below + above) // 2
        if _offset_at(middle, tz) == target:
            above = middle
        else:
            below = middle
    return float(above)


def _resolve(wall: datetime, tz: ZoneInfo) -> tuple[float, float | None]:
    """The UTC instants of one wall-clock time: ``(first, second occurrence or None)``.

    A time in a gap maps to the first instant after the gap; a repeated time maps to its
    first occurrence plus, as the second value, its repeat (used by every-hour expressions).
    """
    naive = (wall - _EPOCH) / _SECOND
    before, after = _offset_s(wall, tz, 0), _offset_s(wall, tz, 1)
    if before == after:
        return naive - before, None
    if before > after:  # overlap: fold 0 is the earlier, daylight-saving side
        return naive - before, naive - after
    return _gap_end(tz, naive - after, naive - before), None


def wall_instants(wall: datetime, tz: ZoneInfo) -> tuple[float, float]:
    """The first and last UTC instants (epoch seconds) of the wall-clock time ``wall`` (naive)
    in ``tz``, as the daylight-saving rule maps a tick at that time: in a gap, the first
    instant after it, twice (02:30 Europe/Berlin on 2026-03-29: 03:00 CEST, where a ``30 2``
    tick fires); repeated, its first and second occurrences; else its one instant, twice.

    A range of wall-clock times (``flows backfill --from/--to``) read so holds exactly the
    ticks whose wall-clock times lie in it, where the schedule fires them."""
    first, repeat = _resolve(wall.replace(tzinfo=None, fold=0), tz)
    return first, first if repeat is None else repeat


def _croniter_ticks(step: Callable[[type[datetime]], datetime]) -> Iterator[datetime]:
    """The wall-clock ticks croniter's ``get_next`` or ``get_prev`` gives, until none is left."""
    while True:
        try:
            yield step(datetime)
        except (CroniterBadDateError, OverflowError, ValueError):
            # No tick before the calendar ends: croniter's date arithmetic past year 9999
            # raises ValueError (a yearly schedule previewed 10,000 times gets there).
            return


#: Days in a row a plain expression may match none of before its walk gives up, as croniter
#: gives up after 50 years (the longest real gap, between two 29 Februaries, is 8 years).
_MAX_BARREN_DAYS = 50 * 366


def _wall_ticks_after(expr: _Expr, after: datetime) -> Iterator[datetime]:
    """The wall-clock ticks of ``expr`` strictly after ``after`` (naive), in order, as
    croniter's ``get_next`` gives them. An expression of plain values is walked over its
    fields, a month or a day at a time (a tick costs a few comparisons: croniter's date
    arithmetic cost 50 µs a tick, the most of a minutely flow test's run build); any other
    goes to croniter."""
    plain = expr.plain
    if plain is None:
        yield from _croniter_ticks(croniter(expr.cron, after).get_next)
        return
    first = after.replace(second=0, microsecond=0) + _MINUTE  # croniter's minute after it
    day: date | None = first.date()
    hour_from, minute_from = first.hour, first.minute
    barren = 0  # days passed since the last one that fired
    while day is not None and barren <= _MAX_BARREN_DAYS:
        if plain.months is not None and day.month not in plain.months:
            following = _first_of_next_month(day)
        else:
            if _day_fires(plain, day):
                barren = 0
                for hour in plain.hours:
                    if hour < hour_from:
                        continue
                    for minute in plain.minutes:
                        if hour > hour_from or minute >= minute_from:
                            yield datetime(day.year, day.month, day.day, hour, minute)
            following = day + _DAY if day < date.max else None
        hour_from = minute_from = 0
        if following is not None:
            barren += (following - day).days
        day = following  # None: the calendar ends, as croniter's does at year 9999


def _first_of_next_month(day: date) -> date | None:
    if day.month < 12:
        return date(day.year, day.month + 1, 1)
    return date(day.year + 1, 1, 1) if day.year < date.max.year else None


def _day_fires(plain: _Plain, day: date) -> bool:
    """Whether ``plain`` fires on ``day`` of a month it allows: by its day of the month and
    its weekday, as :class:`~scheduler.cron.expression._Plain` says."""
    days, weekdays = plain.days, plain.weekdays
    in_days = days is None or day.day in days
    in_weekdays = weekdays is None or day.isoweekday() % 7 in weekdays
    if days is not None and weekdays is not None:
        return in_days or in_weekdays
    return in_days and in_weekdays


def _expr_instants(expr: _Expr, tz: ZoneInfo, bound: float, forward: bool) -> Iterator[float]:
    """Fire instants of one expression: ``> bound`` ascending, or ``<= bound`` descending.

    Walks wall-clock ticks with croniter (naive, so no DST logic of its own) and maps each
    to UTC by :func:`_resolve`. The mapping is monotone except for the second occurrence of
    a repeated hour, so instants wait in a small heap until no later wall tick can precede
    them.
    """
    # From the whole second at or before `bound` (fire times are whole seconds): the wall time
    # of `bound` itself would be rounded to the microsecond, and a bound a hair before a
    # spring-forward instant would round past it and skip the tick that the gap moves there.
    wall = _wall(math.floor(bound), tz)
    # The repeat of an earlier wall time can still lie after `bound` (and a later one
    # before it, walking back), so start one repeated period further out.
    shift = _overlap_length(wall, tz)
    sign = 1.0 if forward else -1.0
    if forward:
        ticks = _wall_ticks_after(expr, wall - shift - _SECOND)
    else:
        ticks = _croniter_ticks(croniter(expr.cron, wall + shift + _SECOND).get_prev)
    pending: list[float] = []  # sign * instant, so the heap pops in walking order
    last: float | None = None
    for tick in ticks:
        first, repeat = _resolve(tick, tz)
        instants = [first] if repeat is None or not expr.every_hour else [first, repeat]
        for instant in instants:
            if (instant > bound) if forward else (instant <= bound):
                heapq.heappush(pending, sign * instant)
        # Later wall ticks fire no earlier than `first` (walking back: no later than the
        # last instant of this tick), so anything up to that frontier is final.
        frontier = sign * (instants[0] if forward else instants[-1])
        while pending and pending[0] <= frontier:
            instant = sign * heapq.heappop(pending)
            if instant != last:
                last = instant
                yield instant
    while pending:
        instant = sign * heapq.heappop(pending)
        if instant != last:
            last = instant
            yield instant


def _fires(schedule: Schedule, bound: float, forward: bool) -> Iterator[float]:
    """All fire times of ``schedule``: ``> bound`` ascending, or ``<= bound`` descending."""
    start, end = schedule.start, schedule.end
    if forward and start is not None:
        bound = max(bound, math.ceil(start) - 1.0)  # fire times are whole seconds
    if not forward and end is not None:
        bound = min(bound, math.floor(end))
    streams = [_expr_instants(e, schedule.zone, bound, forward) for e in schedule._exprs]
    last: float | None = None
    for instant in heapq.merge(*streams, reverse=not forward):
        if instant == last:
            continue
        if forward and end is not None and instant > end:
            return
        if not forward and start is not None and instant < start:
            return
        last = instant
        yield instant


def next_fire(schedule: Schedule, after: float) -> float | None:
    """The first fire time strictly after ``after``, or None when the schedule has ended.

    Expressions are merged and de-duplicated (two hitting one instant fire once); fire times
    before ``schedule.start`` or after ``schedule.end`` do not exist. Daylight saving follows
    the module's rule: a wall-clock time in a spring-forward gap fires once at the first
    instant after the gap (02:30 Europe/Berlin on 2026-03-29 fires at 03:00 CEST, 01:00 UTC;
    if that instant is also a regular tick it still fires once); a wall-clock time repeated
    when clocks fall back fires once, at its first occurrence, except that an every-hour
    expression (hour field ``*``) fires at both occurrences so that every real hour fires.
    """
    return next(_fires(schedule, after, forward=True), None)


def prev_fire(schedule: Schedule, at: float) -> float | None:
    """The last fire time at or before ``at``, or None if there is none (before ``start``)."""
    return next(_fires(schedule, at, forward=False), None)


def missed_ticks(
    schedule: Schedule,
    last_fired_or_registered: float,
    now: float,
    *,
    limit: int = MAX_ENUMERATED,
) -> list[float]:
    """Fire times in ``(last_fired_or_registered, now]``, oldest first, at most ``limit``.

    To learn whether the list was cut short, ask for one more than you need.
    """
    ticks = takewhile(lambda t: t <= now, _fires(schedule, last_fired_or_registered, True))
    return list(islice(ticks, max(0, limit)))


# ---------------------------------------------------------------------------- jitter


def jitter_for(schedule_id: str, tick: float, jitter_seconds: float) -> float:
    """A delay in ``[0, jitter_seconds)``, milliseconds resolution, from a hash of id and tick.

    Deterministic, so every scheduler service delays the same tick alike; ``tick`` is taken
    as a float, so ``1700000000`` and ``1700000000.0`` agree. Jitter only delays: a run never
    starts before its tick.
    """
    if not jitter_seconds > 0:
        return 0.0
    digest = hashlib.sha256(f"{schedule_id}\x1f{float(tick)!r}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return math.floor(fraction * jitter_seconds * 1000) / 1000


# -------------------------------------------------------------------------- describe


def _fmt_local(instant: float, tz: tzinfo, fmt: str = "%H:%M %Z") -> str:
    return datetime.fromtimestamp(instant, tz).strftime(fmt)


def _fmt_in(seconds: float) -> str:
    """``45s``, ``12m``, ``5h``, ``5h 20m``, ``3d 4h``: the two largest units, zeros dropped."""
    left = max(0, math.ceil(seconds))
    if left < 60:
        return f"{left}s"
    amounts = [(left // 86400, "d"), (left % 86400 // 3600, "h"), (left % 3600 // 60, "m")]
    first = next(i for i, (amount, _) in enumerate(amounts) if amount)
    return " ".join(f"{amount}{unit}" for amount, unit in amounts[first : first + 2] if amount)


def describe(schedule: Schedule, now: float) -> str:
    """One line for ``flows schedules``: ``next 2026-11-23 02:00 CET (in 5h)``."""
    upcoming = next_fire(schedule, now)
    if upcoming is None:
        if schedule.end is not None:
            ended = _fmt_local(schedule.end, schedule.zone, "%Y-%m-%d %H:%M %Z")
            return f"no further fire times (ended {ended})"
        return "no further fire times"
    when = _fmt_local(upcoming, schedule.zone, "%Y-%m-%d %H:%M %Z")
    return f"next {when} (in {_fmt_in(upcoming - now)})"
