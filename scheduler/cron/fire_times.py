"""Pure cron arithmetic for the scheduler service: fire times, catch-up, overlap, jitter, checks.

Nothing here touches Redis, files or the clock: every function takes its times as arguments.
At the boundary a time is epoch seconds (``float``, UTC); inside, wall-clock times are naive
``datetime`` values in the schedule's zone, mapped to UTC with :mod:`zoneinfo` and ``fold``.

Expressions
    Five fields, ``minute hour day-of-month month day-of-week``, with croniter's syntax
    (lists, ranges, steps, month and weekday names, ``L``, ``W``, ``#``; day-of-week 0 and 7
    are Sunday; when both day fields are restricted a day matching either one fires, as in
    Vixie cron), plus the aliases ``@hourly @daily @midnight @weekly @monthly @yearly
    @annually``. Six- and seven-field expressions (seconds, years) are refused: a flow run is
    too heavy for sub-minute ticks, and croniter reads a sixth field as seconds *last* while
    Quartz and Spring put it first, so the same text would mean different schedules to
    different readers. ``H`` and ``R`` (hashed and random values) are refused too: two
    scheduler services must compute the same fire times.

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

Catch-up after downtime (:func:`plan_catchup`)
    ``none`` skips every missed tick, ``latest`` fires the most recent missed tick once,
    ``all`` fires every missed tick in the window, at most ``max_runs`` runs per plan (the
    newest are kept). A tick no more than ``grace_seconds`` old is on time: it fires with
    trigger ``"schedule"`` under every policy. Every skipped tick is reported with its
    reason; past :data:`SKIP_RECORD_LIMIT` individual records, skips are grouped per reason
    with a count, and a plan walks at most :data:`MAX_ENUMERATED` skipped ticks per segment
    (inside the window, outside it): a longer stretch becomes one group with count None.

Jitter
    The sorted-set score and the run id use the tick itself; the run is put at
    ``tick + jitter_for(schedule_id, tick, schedule.jitter)``, the same on every service.
"""

from __future__ import annotations

import difflib
import hashlib
import heapq
import math
import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import cache, lru_cache
from itertools import islice, pairwise, takewhile
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

__all__ = [
    "ALIASES",
    "DEFAULT_GRACE_SECONDS",
    "MAX_CATCHUP_RUNS",
    "MAX_ENUMERATED",
    "SKIP_RECORD_LIMIT",
    "UNREASONABLE_RUNS",
    "CatchupPlan",
    "CatchupPolicy",
    "Fire",
    "InvalidSchedule",
    "OverlapAction",
    "OverlapDecision",
    "OverlapPolicy",
    "Problem",
    "Schedule",
    "Skip",
    "decide_overlap",
    "describe",
    "jitter_for",
    "missed_ticks",
    "next_fire",
    "plan_catchup",
    "prev_fire",
    "validate_schedule",
]

CatchupPolicy = Literal["none", "latest", "all"]
OverlapPolicy = Literal["skip", "buffer_one", "allow", "cancel_running"]
OverlapAction = Literal["fire", "skip", "buffer", "cancel_and_fire"]
Trigger = Literal["schedule", "catch-up"]
Severity = Literal["error", "warning"]

#: A tick at most this old when the service handles it is on time, not a catch-up.
DEFAULT_GRACE_SECONDS = 60.0
#: Most ticks one catch-up plan enumerates per segment; beyond it skips are not counted.
MAX_ENUMERATED = 10_000
#: Skipped ticks reported one record each; later ones are grouped per reason with a count.
SKIP_RECORD_LIMIT = 100
#: Most runs one plan fires under policy ``all`` when ``max_runs`` is not set.
MAX_CATCHUP_RUNS = 1_000
#: ``validate_schedule`` warns when a catch-up could enqueue more runs than this.
UNREASONABLE_RUNS = 1_000
#: How far ahead ``validate_schedule`` looks for daylight-saving transitions.
DST_LOOKAHEAD_YEARS = 3

ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_NAMES: dict[int, frozenset[str]] = {
    3: frozenset(
        {"jan", "feb", "mar", "apr", "may", "jun"} | {"jul", "aug", "sep", "oct", "nov", "dec"}
    ),
    4: frozenset({"sun", "mon", "tue", "wed", "thu", "fri", "sat"}),
}
_HASHED = re.compile(r"[hr](\(\d+-\d+\))?(/\d+)?", re.IGNORECASE)
_SHAPE_HINT = (
    "5 fields: minute hour day-of-month month day-of-week, e.g. '30 2 * * *' "
    "(or @hourly, @daily, @weekly, @monthly, @yearly)"
)
_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)


class InvalidSchedule(ValueError):
    """A schedule that cannot be built: bad cron expression, unknown zone, bad bounds."""


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True, slots=True)
class _Expr:
    """One compiled expression: as written, as given to croniter, and its DST class."""

    source: str
    cron: str
    every_hour: bool


@dataclass(frozen=True)
class Schedule:
    """When a flow fires: cron expressions in a time zone, optional bounds and jitter.

    ``cron`` is one expression or several, stored as a tuple (their fire times merge; an
    instant named by two expressions fires once). ``start`` and ``end`` are inclusive epoch
    bounds on the fire times; ``jitter`` is the most seconds a run may be delayed (see
    :func:`jitter_for`). Construction raises :class:`InvalidSchedule` for anything
    :func:`validate_schedule` reports as an error in these fields.
    """

    cron: str | Sequence[str]
    timezone: str = "UTC"
    start: float | None = None
    end: float | None = None
    jitter: float = 0.0
    _exprs: tuple[_Expr, ...] = field(init=False, repr=False, compare=False)
    _tz: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exprs = (self.cron,) if isinstance(self.cron, str) else tuple(self.cron)
        object.__setattr__(self, "cron", exprs)
        if not exprs:
            raise InvalidSchedule("schedule has no cron expression")
        compiled = []
        for expr in exprs:
            problem = _expr_problem(expr)
            if problem is not None:
                raise InvalidSchedule(f"{expr!r}: {problem[0]}")
            compiled.append(_compile(expr))
        zone_problem = _zone_problem(self.timezone)
        if zone_problem is not None:
            raise InvalidSchedule(zone_problem[0] + (f" ({zone_problem[1]})"))
        if self.start is not None and self.end is not None and self.start > self.end:
            raise InvalidSchedule("schedule start is after its end")
        if not self.jitter >= 0:  # also refuses NaN
            raise InvalidSchedule(f"jitter must be >= 0 seconds, got {self.jitter}")
        object.__setattr__(self, "_exprs", tuple(compiled))
        object.__setattr__(self, "_tz", ZoneInfo(self.timezone))

    @property
    def expressions(self) -> tuple[str, ...]:
        """The cron expressions as written (a single string becomes a 1-tuple)."""
        return tuple(e.source for e in self._exprs)

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return self._tz


def _normalise(expr: str) -> str:
    text = " ".join(expr.split())
    return ALIASES.get(text.lower(), text)


def _compile(expr: str) -> _Expr:
    cron = _normalise(expr)
    hours = croniter.expand(cron)[0][1]
    return _Expr(source=expr, cron=cron, every_hour=hours == ["*"])


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
        walker = croniter(expr.cron, wall - shift - _SECOND)
        step = walker.get_next
    else:
        walker = croniter(expr.cron, wall + shift + _SECOND)
        step = walker.get_prev
    pending: list[float] = []  # sign * instant, so the heap pops in walking order
    last: float | None = None
    while True:
        try:
            tick: datetime = step(datetime)
        except (CroniterBadDateError, OverflowError):
            break
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


# -------------------------------------------------------------------------- catch-up


@dataclass(frozen=True, slots=True)
class Fire:
    """A tick to fire: ``trigger`` is ``"schedule"`` on time, ``"catch-up"`` when late."""

    tick: float
    trigger: Trigger


@dataclass(frozen=True, slots=True)
class Skip:
    """Skipped ticks ``first``..``last`` (equal for one tick), ``count`` of them, and why.

    ``count`` is None when the group was too large to count (see :data:`MAX_ENUMERATED`).
    """

    first: float
    last: float
    count: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class CatchupPlan:
    """What to do with the ticks due at ``now``: fires and skips oldest first.

    ``next_score`` is the tick to store as the schedule's score after this plan (None: the
    schedule has ended, remove it).
    """

    fires: tuple[Fire, ...]
    skips: tuple[Skip, ...]
    next_score: float | None

    @property
    def skipped(self) -> int:
        """How many ticks were skipped (a lower bound when a group was not counted)."""
        return sum(s.count or 1 for s in self.skips)


class _SkipLog:
    """Collects skips: one record per tick up to a limit, then one group per reason."""

    def __init__(self) -> None:
        self._records: list[Skip] = []
        self._groups: dict[str, tuple[float, float, int | None]] = {}

    def add(self, tick: float, reason: str) -> None:
        if len(self._records) < SKIP_RECORD_LIMIT:
            self._records.append(Skip(tick, tick, 1, reason))
        else:
            self._group(tick, tick, 1, reason)

    def add_uncounted(self, first: float, last: float, reason: str) -> None:
        self._group(first, last, None, reason)

    def _group(self, first: float, last: float, count: int | None, reason: str) -> None:
        if reason in self._groups:
            old_first, old_last, old_count = self._groups[reason]
            first, last = min(first, old_first), max(last, old_last)
            count = None if count is None or old_count is None else count + old_count
        self._groups[reason] = (first, last, count)

    def skips(self) -> tuple[Skip, ...]:
        groups = [Skip(f, la, c, r) for r, (f, la, c) in self._groups.items()]
        return tuple(sorted(self._records + groups, key=lambda s: (s.first, s.last)))


def _ticks_between(schedule: Schedule, lowest: float, highest: float) -> Iterator[float]:
    """Fire times in ``[lowest, highest]``, newest first."""
    return takewhile(lambda t: t >= lowest, _fires(schedule, highest, forward=False))


def _skip_segment(
    schedule: Schedule,
    ticks: Iterator[float],
    lowest: float,
    reason: str,
    log: _SkipLog,
) -> None:
    """Log newest-first ``ticks`` (all ``>= lowest``) as skipped, enumerating a bounded few."""
    for tick in islice(ticks, MAX_ENUMERATED):
        log.add(tick, reason)
    rest = next(ticks, None)
    if rest is not None:  # too many to walk: one uncounted group down to the oldest tick
        oldest = next_fire(schedule, math.ceil(lowest) - 1.0)
        log.add_uncounted(rest if oldest is None else oldest, rest, reason)


def plan_catchup(
    schedule: Schedule,
    policy: CatchupPolicy,
    window_seconds: float | None,
    max_runs: int | None,
    expected_tick: float,
    now: float,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> CatchupPlan:
    """Decide which of the ticks due in ``[expected_tick, now]`` fire and which are skipped.

    ``expected_tick`` is the score the service stored (the tick it meant to fire next). The
    newest due tick fires on time (trigger ``"schedule"``) if it is at most ``grace_seconds``
    old. Of the rest (the missed ticks): ``none`` skips all; ``latest`` fires the newest one
    in the window unless an on-time tick fired; ``all`` fires those in the window, newest
    first up to ``max_runs`` runs in total (or :data:`MAX_CATCHUP_RUNS` if unset). A tick
    older than ``now - window_seconds`` is outside the window (None: no window; ``none``
    ignores the window). Skip reasons: ``"catch-up policy none"``, ``"catch-up policy latest
    (superseded by a newer run)"``, ``"outside catch-up window 12h"``, ``"max_runs 3
    reached"``, ``"catch-up cap 1000 reached"``.
    """
    if policy not in get_args(CatchupPolicy):
        raise ValueError(f"unknown catch-up policy {policy!r}")
    if window_seconds is not None and not window_seconds >= 0:
        raise ValueError(f"catch-up window must be >= 0 seconds, got {window_seconds}")
    if max_runs is not None and max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, got {max_runs}")
    if expected_tick > now:
        return CatchupPlan((), (), expected_tick)

    next_score = next_fire(schedule, now)
    fires: list[Fire] = []
    log = _SkipLog()
    newest = prev_fire(schedule, now)
    if newest is None or newest < expected_tick:
        return CatchupPlan((), (), next_score)
    highest = now  # newest missed tick still to place
    if now - newest <= grace_seconds:
        fires.append(Fire(newest, "schedule"))
        highest = newest - 1.0  # fire times are whole seconds

    if policy == "none" or window_seconds is None:
        cutoff = expected_tick
    else:
        cutoff = max(expected_tick, now - window_seconds)
    if policy == "none":
        quota, reason = 0, "catch-up policy none"
    elif policy == "latest":
        quota, reason = 1 - len(fires), "catch-up policy latest (superseded by a newer run)"
    elif max_runs is not None:
        quota, reason = max_runs - len(fires), f"max_runs {max_runs} reached"
    else:
        quota, reason = MAX_CATCHUP_RUNS - len(fires), f"catch-up cap {MAX_CATCHUP_RUNS} reached"

    recent = _ticks_between(schedule, cutoff, highest)
    fires.extend(Fire(tick, "catch-up") for tick in islice(recent, max(0, quota)))
    _skip_segment(schedule, recent, cutoff, reason, log)
    if cutoff > expected_tick:
        window = f"outside catch-up window {_fmt_duration(window_seconds or 0.0)}"
        older = _ticks_between(schedule, expected_tick, min(highest, math.ceil(cutoff) - 1.0))
        _skip_segment(schedule, older, expected_tick, window, log)
    return CatchupPlan(tuple(sorted(fires, key=lambda f: f.tick)), log.skips(), next_score)


# --------------------------------------------------------------------------- overlap


@dataclass(frozen=True, slots=True)
class OverlapDecision:
    """What to do with a tick given the previous run: ``action`` and, if not plain, why."""

    action: OverlapAction
    reason: str | None = None


def decide_overlap(
    policy: OverlapPolicy, previous_run_active: bool, buffered: bool
) -> OverlapDecision:
    """Apply the overlap policy to a tick whose previous run may still be active.

    ``skip`` drops the tick; ``buffer_one`` keeps one run waiting for the active one to end
    (a second tick while one waits is dropped); ``allow`` runs both; ``cancel_running``
    cancels the active run, then fires. With no active run every policy fires.
    """
    if policy not in get_args(OverlapPolicy):
        raise ValueError(f"unknown overlap policy {policy!r}")
    if not previous_run_active or policy == "allow":
        return OverlapDecision("fire")
    if policy == "skip":
        return OverlapDecision("skip", "overlap skip: previous run still active")
    if policy == "cancel_running":
        return OverlapDecision("cancel_and_fire", "overlap cancel_running: previous run cancelled")
    if buffered:
        return OverlapDecision("skip", "overlap buffer_one: a run is already buffered")
    return OverlapDecision("buffer", "overlap buffer_one: waits for the previous run to end")


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


# ------------------------------------------------------------------------ validation


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of :func:`validate_schedule`, for ``flows validate``."""

    severity: Severity
    message: str
    hint: str
    field: str


def _field_problem(index: int, text: str) -> str | None:
    """Out-of-range values, unknown names, bad steps and hashed values in one cron field."""
    name, low, high = _FIELDS[index]
    for part in text.split(","):
        if not part:
            return f"empty value in the {name} field (stray comma?)"
        if _HASHED.fullmatch(part):
            return f"{name} field: hashed or random values (H, R) are not supported"
        base, slash, step = part.partition("/")
        if slash and (not step.isdigit() or int(step) == 0):
            return f"{name} field: step {step!r} must be a whole number of at least 1"
        for token in base.split("#")[0].split("-"):
            lowered = token.lower()
            if lowered.isdigit() and not low <= int(lowered) <= high:
                return f"{name} value {int(lowered)} is out of range {low}-{high}"
            known = _NAMES.get(index, frozenset()) | {"l", "w"}
            if lowered.isalpha() and index in _NAMES and lowered not in known:
                return f"unknown {name} name {token!r}"
    return None


def _expr_problem(expr: object) -> tuple[str, str] | None:
    """``(message, hint)`` for an expression this module cannot schedule, else None."""
    if not isinstance(expr, str):
        return f"a cron expression must be a string, got {type(expr).__name__}", _SHAPE_HINT
    return _text_problem(expr)


@lru_cache(maxsize=1024)
def _text_problem(expr: str) -> tuple[str, str] | None:
    if not expr.strip():
        return "empty cron expression", _SHAPE_HINT
    text = _normalise(expr)
    if text.startswith("@"):
        return f"unknown alias {text!r}", _SHAPE_HINT
    fields = text.split()
    if len(fields) == 6:
        return (
            "6 fields: seconds are not supported (the smallest period is one minute)",
            _SHAPE_HINT,
        )
    if len(fields) != 5:
        return f"{len(fields)} fields, expected 5", _SHAPE_HINT
    for index, part in enumerate(fields):
        name, low, high = _FIELDS[index]
        message = _field_problem(index, part)
        if message is None:
            # croniter's own messages do not say which field it refused: ask field by field
            probe = ["*"] * 5
            probe[index] = part
            try:
                croniter.expand(" ".join(probe))
            except CroniterError:
                message = f"{name} field {part!r} is not valid"
        if message is not None:
            return message, f"{name} takes {low}-{high}; {_SHAPE_HINT}"
    try:
        croniter.expand(text)
        # croniter gives up after 50 years without a match: the expression never fires.
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        return (
            "never fires: no date matches its day-of-month and month",
            "check the day and month fields (February has no 30th; April has no 31st)",
        )
    except CroniterError as exc:
        detail = re.sub(r"^\[.*?\]\s*(is not acceptable[.,]?\s*)?", "", str(exc)) or "invalid"
        return f"invalid cron expression: {detail}", _SHAPE_HINT
    return None


@cache
def _zone_names() -> dict[str, str]:
    """Every zone name, and every last path component, lower-cased to its zone name."""
    names: dict[str, str] = {}
    for zone in sorted(available_timezones()):
        names.setdefault(zone.rsplit("/", 1)[-1].lower(), zone)
    for zone in available_timezones():
        names[zone.lower()] = zone
    return names


def _zone_problem(name: str) -> tuple[str, str] | None:
    """``(message, hint)`` for a time zone name zoneinfo cannot load, with a did-you-mean."""
    try:
        ZoneInfo(name)
        return None
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        pass
    names = _zone_names()
    key = str(name).strip().replace(" ", "_").lower()
    guesses = [names[key]] if key in names else []
    guesses += [names[m] for m in difflib.get_close_matches(key, list(names), n=1, cutoff=0.7)]
    if guesses:
        hint = f"did you mean {guesses[0]!r}?"
    else:
        hint = "use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'"
    return f"unknown time zone {name!r}", hint


def _transitions(tz: ZoneInfo, since: float, until: float) -> Iterator[tuple[float, float, float]]:
    """``(instant, offset before, offset after)`` of each UTC-offset change in the range."""
    step = 6 * 3600.0  # no zone changes its offset twice within six hours
    at, offset = since, _offset_at(since, tz)
    while at < until:
        probe = min(at + step, until)
        new = _offset_at(probe, tz)
        if new != offset:
            yield _gap_end(tz, at, probe), offset, new
            offset = new
        at = probe


def _naive_ticks(cron: str, lo: datetime, hi: datetime) -> list[datetime]:
    """Wall-clock ticks of ``cron`` in ``[lo, hi)``."""
    walker = croniter(cron, lo - _SECOND)
    ticks: list[datetime] = []
    while True:
        tick: datetime = walker.get_next(datetime)
        if tick >= hi:
            return ticks
        ticks.append(tick)


def _fmt_local(instant: float, tz: tzinfo, fmt: str = "%H:%M %Z") -> str:
    return datetime.fromtimestamp(instant, tz).strftime(fmt)


def _fmt_times(ticks: Sequence[datetime]) -> str:
    shown = [f"{t:%H:%M}" for t in ticks[:3]]
    more = f" and {len(ticks) - 3} more" if len(ticks) > 3 else ""
    return ", ".join(shown) + more


def _dst_message(
    expr: _Expr, tz: ZoneInfo, change: tuple[float, float, float]
) -> tuple[str, str] | None:
    """``(kind, what happens)`` to ``expr``'s ticks at one transition, None if unremarkable."""
    instant, before, after = change
    if after > before:  # gap: wall times [instant+before, instant+after) do not exist
        lo = _wall(instant - 1, tz) + _SECOND
        hi = _wall(instant, tz)
        ticks = _naive_ticks(expr.cron, lo, hi)
        regular = bool(_naive_ticks(expr.cron, hi, hi + _SECOND))
        if not ticks or (expr.every_hour and regular):
            return None
        verb = "does not exist" if len(ticks) == 1 else "do not exist"
        also = f", together with the regular {hi:%H:%M} tick" if regular else ""
        return "gap", (
            f"{_fmt_times(ticks)} {verb} on {hi:%Y-%m-%d} (clocks jump from {lo:%H:%M} to "
            f"{hi:%H:%M}): fires once at {_fmt_local(instant, tz)} "
            f"({_fmt_local(instant, UTC, '%H:%M')} UTC){also}"
        )
    if expr.every_hour:
        return None  # every real hour fires: nothing a user of `0 * * * *` must know
    lo = _wall(instant, tz)
    hi = lo + timedelta(seconds=before - after)
    ticks = _naive_ticks(expr.cron, lo, hi)
    if not ticks:
        return None
    first = instant - (hi - ticks[0]) / _SECOND
    verb = "occurs" if len(ticks) == 1 else "occur"
    return "overlap", (
        f"{_fmt_times(ticks)} {verb} twice on {lo:%Y-%m-%d} (clocks go back from "
        f"{hi:%H:%M} to {lo:%H:%M}): fires once, at the first occurrence "
        f"({_fmt_local(first, tz)} = {_fmt_local(first, UTC, '%H:%M')} UTC)"
    )


def _dst_problems(schedule: Schedule, now: float, fields: Sequence[str]) -> list[Problem]:
    """One warning per expression and kind (gap, overlap): the first case and how many more."""
    until = now + DST_LOOKAHEAD_YEARS * 365.25 * 86400
    changes = list(_transitions(schedule.zone, now, until))
    problems = []
    for expr, where in zip(schedule._exprs, fields, strict=True):
        by_kind: dict[str, list[str]] = {}
        for change in changes:
            found = _dst_message(expr, schedule.zone, change)
            if found is not None:
                by_kind.setdefault(found[0], []).append(found[1])
        for messages in by_kind.values():
            more = len(messages) - 1
            later = f" (and {more} more within {DST_LOOKAHEAD_YEARS} years)" if more else ""
            problems.append(
                Problem(
                    "warning",
                    f"{expr.source!r} in {schedule.timezone}: {messages[0]}{later}",
                    "pick a time outside the daylight-saving change, or use timezone UTC, "
                    "if that is not what you want",
                    where,
                )
            )
    return problems


def _busiest_window(schedule: Schedule, now: float, window: float) -> int:
    """Most fire times within any ``window`` seconds, scanning a bounded stretch ahead.

    Stops counting at ``UNREASONABLE_RUNS + 1``.
    """
    horizon = now + max(62 * 86400.0, 2 * window)
    recent: deque[float] = deque()
    busiest = 0
    for tick in islice(_fires(schedule, now, True), 20 * UNREASONABLE_RUNS):
        if tick > horizon:
            break
        recent.append(tick)
        while recent[0] < tick - window:
            recent.popleft()
        busiest = max(busiest, len(recent))
        if busiest > UNREASONABLE_RUNS:
            break
    return busiest


def _fmt_duration(seconds: float) -> str:
    """Compact duration: ``12h``, ``1d12h``, ``1m30s``, ``0s``."""
    left = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


def _policy_problems(
    schedule: Schedule | None,
    now: float,
    catchup_policy: str,
    catchup_window: float | None,
    max_runs: int | None,
    overlap: str,
) -> list[Problem]:
    problems = []
    if catchup_policy not in get_args(CatchupPolicy):
        problems.append(
            Problem(
                "error",
                f"unknown catch-up policy {catchup_policy!r}",
                "one of: " + ", ".join(get_args(CatchupPolicy)),
                "schedule.catchup.policy",
            )
        )
    if overlap not in get_args(OverlapPolicy):
        problems.append(
            Problem(
                "error",
                f"unknown overlap policy {overlap!r}",
                "one of: " + ", ".join(get_args(OverlapPolicy)),
                "schedule.overlap",
            )
        )
    if catchup_window is not None and not catchup_window >= 0:
        problems.append(
            Problem(
                "error",
                f"catch-up window must not be negative, got {catchup_window}",
                "a duration such as 12h",
                "schedule.catchup.window",
            )
        )
        catchup_window = None
    if max_runs is not None and max_runs < 1:
        problems.append(
            Problem(
                "error",
                f"max_runs must be at least 1, got {max_runs}",
                "omit it for no limit, or set a small number such as 10",
                "schedule.catchup.max_runs",
            )
        )
        max_runs = None
    if catchup_policy != "all" or schedule is None:
        return problems
    if max_runs is not None:
        if max_runs > UNREASONABLE_RUNS:
            problems.append(
                _too_many(f"max_runs {max_runs} lets one catch-up enqueue that many runs")
            )
    elif catchup_window is None:
        problems.append(
            _too_many(
                "catch-up policy all with neither window nor max_runs fires every tick missed "
                f"during a downtime (up to the service cap of {MAX_CATCHUP_RUNS})"
            )
        )
    elif _busiest_window(schedule, now, catchup_window) > UNREASONABLE_RUNS:
        problems.append(
            _too_many(
                f"catch-up policy all can enqueue more than {UNREASONABLE_RUNS} runs: the cron "
                f"fires that often within the {_fmt_duration(catchup_window)} window"
            )
        )
    return problems


def _too_many(message: str) -> Problem:
    return Problem(
        "warning",
        message,
        "set catchup.max_runs (e.g. 10), shorten catchup.window, or use policy latest",
        "schedule.catchup",
    )


def _bounds_problems(
    schedule: Schedule, now: float, end: float | None, jitter: float
) -> list[Problem]:
    problems = []
    if end is not None and next_fire(schedule, now) is None:
        problems.append(
            Problem(
                "warning",
                "the schedule has no fire time after now (its end has passed)",
                "move schedule.end later or remove the schedule",
                "schedule.end",
            )
        )
    if jitter > 0:
        ticks = list(islice(_fires(schedule, now, True), 200))
        gaps = [b - a for a, b in pairwise(ticks)]
        if gaps and jitter >= min(gaps):
            problems.append(
                Problem(
                    "warning",
                    f"jitter {_fmt_duration(jitter)} is not shorter than the "
                    f"{_fmt_duration(min(gaps))} between ticks: runs may start out of order",
                    "use a jitter well below the interval between ticks",
                    "schedule.jitter",
                )
            )
    return problems


def validate_schedule(
    cron_exprs: str | Sequence[str],
    timezone: str = "UTC",
    *,
    now: float,
    catchup_policy: str = "none",
    catchup_window: float | None = None,
    max_runs: int | None = None,
    overlap: str = "skip",
    jitter: float = 0.0,
    start: float | None = None,
    end: float | None = None,
) -> list[Problem]:
    """Everything wrong or surprising about a ``schedule:`` block, errors first.

    ``cron_exprs`` is the YAML value: a string (field ``schedule.cron``) or a list (fields
    ``schedule.cron[0]``...). Errors: bad expressions (field count, out-of-range values by
    field name, never fires), unknown time zone (with did-you-mean), bad policies, window,
    max_runs, jitter or bounds. Warnings: a wall-clock time in a daylight-saving gap or
    overlap within :data:`DST_LOOKAHEAD_YEARS` years of ``now`` (saying what happens), a
    catch-up that can enqueue more than :data:`UNREASONABLE_RUNS` runs, jitter not shorter
    than the interval between ticks, an end already past, duplicate expressions.
    """
    if isinstance(cron_exprs, str):
        exprs, fields = [cron_exprs], ["schedule.cron"]
    else:
        exprs = list(cron_exprs)
        fields = [f"schedule.cron[{i}]" for i in range(len(exprs))]
    problems: list[Problem] = []
    if not exprs:
        problems.append(Problem("error", "no cron expression", _SHAPE_HINT, "schedule.cron"))
    seen: dict[str, str] = {}
    for expr, where in zip(exprs, fields, strict=True):
        found = _expr_problem(expr)
        if found is not None:
            problems.append(Problem("error", f"{expr!r}: {found[0]}", found[1], where))
            continue
        key = _normalise(expr)
        if key in seen:
            problems.append(
                Problem(
                    "warning",
                    f"{expr!r} repeats {seen[key]}: it fires once",
                    "remove the duplicate",
                    where,
                )
            )
        seen.setdefault(key, where)
    zone = _zone_problem(timezone)
    if zone is not None:
        problems.append(Problem("error", zone[0], zone[1], "schedule.timezone"))
    if not jitter >= 0:
        problems.append(
            Problem(
                "error", f"jitter must not be negative, got {jitter}", "e.g. 30s", "schedule.jitter"
            )
        )
    if start is not None and end is not None and start > end:
        problems.append(
            Problem("error", "schedule start is after its end", "swap them", "schedule.start")
        )

    schedule = None
    if all(p.severity == "warning" for p in problems):
        try:
            schedule = Schedule(tuple(exprs), timezone, start, end, jitter)
        except InvalidSchedule as exc:  # every error above should have caught it first
            problems.append(Problem("error", str(exc), _SHAPE_HINT, "schedule"))
    if schedule is not None:
        problems += _dst_problems(schedule, now, fields)
        problems += _bounds_problems(schedule, now, end, jitter)
    problems += _policy_problems(schedule, now, catchup_policy, catchup_window, max_runs, overlap)
    order = {name: index for index, name in enumerate(fields)}
    return sorted(problems, key=lambda p: (p.severity != "error", order.get(p.field, len(order))))


# -------------------------------------------------------------------------- describe


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
