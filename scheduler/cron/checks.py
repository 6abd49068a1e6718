"""The checks of a ``schedule:`` block for ``flows validate`` (:func:`validate_schedule`): errors
in any field, and warnings about daylight saving, catch-up volume, jitter, bounds, duplicates.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from typing import Literal, get_args
from zoneinfo import ZoneInfo

from croniter import croniter

from scheduler.cron.catchup import MAX_CATCHUP_RUNS, CatchupPolicy, OverlapPolicy, _fmt_duration
from scheduler.cron.expression import (
    _SHAPE_HINT,
    InvalidSchedule,
    Schedule,
    _Expr,
    _expr_problem,
    _normalise,
    _zone_problem,
)
from scheduler.cron.fire_times import (
    _SECOND,
    _fires,
    _fmt_local,
    _gap_end,
    _offset_at,
    _wall,
    next_fire,
)

__all__ = ["DST_LOOKAHEAD_YEARS", "UNREASONABLE_RUNS", "Problem", "validate_schedule"]

Severity = Literal["error", "warning"]

#: ``validate_schedule`` warns when a catch-up could enqueue more runs than this.
UNREASONABLE_RUNS = 1_000
#: How far ahead ``validate_schedule`` looks for daylight-saving transitions.
DST_LOOKAHEAD_YEARS = 3


# ------------------------------------------------------------------------ validation


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of :func:`validate_schedule`, for ``flows validate``."""

    severity: Severity
    message: str
    hint: str
    field: str


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
    """One warning per expression and kind (gap, overlap): the first case and how many more,
    among the changes while the schedule can fire (from its ``start`` when that is later than
    ``now``, up to its ``end``)."""
    since = max(now, schedule.start) if schedule.start is not None else now
    until = since + DST_LOOKAHEAD_YEARS * 365.25 * 86400
    if schedule.end is not None:
        until = min(until, schedule.end)
    changes = list(_transitions(schedule.zone, since, until))
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


def _at_most(schedule: Schedule, window: float) -> int:
    """A bound on the fire times within any ``window`` seconds, from the expressions' minute
    and hour fields alone (no walk): an expression fires at most once per listed minute of
    each clock hour the window touches, and at most once per listed hour and minute of each
    day it touches; one more per hour and day for a daylight-saving change (a gap's ticks
    fire as one, a repeated hour's every-hour ticks fall in another elapsed hour)."""
    hours, days = math.ceil(window / 3600) + 1, math.ceil(window / 86400) + 1
    total = 0
    for expr in schedule._exprs:
        minute, hour = _listed(expr.cron)
        total += min((minute + 1) * hours, (minute * (hour + 1) + 1) * days)
    return total


def _listed(cron: str) -> tuple[int, int]:
    """How many minutes and hours an expression's fields list (croniter expands ``*`` so)."""
    expanded: list[list[object]] = croniter(cron).expanded
    minutes, hours = expanded[0], expanded[1]
    return (60 if minutes == ["*"] else len(minutes)), (24 if hours == ["*"] else len(hours))


def _busiest_window(schedule: Schedule, now: float, window: float) -> int:
    """Most fire times within any ``window`` seconds, or more than ``UNREASONABLE_RUNS``.

    When :func:`_at_most` says no window can hold more than that, its bound, without walking:
    the walk of a minutely schedule is 20,000 fire times, over a second of every validation
    and of every such file a scheduler service registers.
    """
    bound = _at_most(schedule, window)
    return bound if bound <= UNREASONABLE_RUNS else _walk_busiest(schedule, now, window)


def _walk_busiest(schedule: Schedule, now: float, window: float) -> int:
    """:func:`_busiest_window` by walking the fire times (at most ``20 * UNREASONABLE_RUNS``
    of them, stopping at ``UNREASONABLE_RUNS + 1`` in one window)."""
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
