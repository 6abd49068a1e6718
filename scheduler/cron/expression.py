"""Cron expressions and the schedule built from them: parsing, and the checks (with their
messages and hints) that refuse what cannot be scheduled.

Expressions
    Five fields, ``minute hour day-of-month month day-of-week``, with croniter's syntax
    (lists, ranges, steps, month and weekday names, ``L``, ``W``, ``#``; day-of-week 0 and 7
    are Sunday; when both day fields are restricted a day matching either one fires, as in
    Vixie cron), plus the aliases ``@hourly @daily @midnight @weekly @monthly @yearly
    @annually``. A range runs from low to high: croniter reads ``22-2`` as wrapping around and
    ``1-0`` as the whole field, seldom what was meant, so a backwards range is refused with the
    two ranges to write instead. Six- and seven-field expressions (seconds, years) are refused:
    a flow run is too heavy for sub-minute ticks, and croniter reads a sixth field as seconds
    *last* while Quartz and Spring put it first, so the same text would mean different
    schedules to different readers. ``H`` and ``R`` (hashed and random values) are refused too: two
    scheduler services must compute the same fire times.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache, lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

__all__ = ["ALIASES", "InvalidSchedule", "Schedule"]

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
# The names of month and day-of-week values, in order from the field's lowest value.
_ORDERED_NAMES: dict[int, tuple[str, ...]] = {
    3: ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    4: ("sun", "mon", "tue", "wed", "thu", "fri", "sat"),
}
_NAMES: dict[int, frozenset[str]] = {index: frozenset(n) for index, n in _ORDERED_NAMES.items()}
_HASHED = re.compile(r"[hr](\(\d+-\d+\))?(/\d+)?", re.IGNORECASE)
_SHAPE_HINT = (
    "5 fields: minute hour day-of-month month day-of-week, e.g. '30 2 * * *' "
    "(or @hourly, @daily, @weekly, @monthly, @yearly)"
)


class InvalidSchedule(ValueError):
    """A schedule that cannot be built: bad cron expression, unknown zone, bad bounds."""


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True, slots=True)
class _Plain:
    """What each field of an expression of plain values (numbers, names, ranges, steps, lists,
    ``*``: no ``L``, ``W``, ``#`` or ``?``) allows, as croniter expands it: the minutes and hours
    in order, and the days of the month, months and weekdays (0 is Sunday) that fire, None for
    a field of ``*``. A day fires when it is in ``days`` and in ``weekdays``, or when both are
    restricted, in either one (croniter's rule, Vixie cron's)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int] | None
    months: frozenset[int] | None
    weekdays: frozenset[int] | None


@dataclass(frozen=True, slots=True)
class _Expr:
    """One compiled expression: as written, as given to croniter, its DST class, and its
    fields when they are plain values (walked without croniter: :mod:`.fire_times`)."""

    source: str
    cron: str
    every_hour: bool
    plain: _Plain | None = None


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
    expanded, nth_weekdays = croniter.expand(cron)
    plain = None if nth_weekdays else _plain(cron.split(), expanded)
    return _Expr(source=expr, cron=cron, every_hour=expanded[1] == ["*"], plain=plain)


_PLAIN_FIELD = re.compile(r"[0-9*,/-]+")


def _plain(fields: list[str], expanded: list[list[int | str]]) -> _Plain | None:
    """The fields croniter expanded, when each is written in plain values (a month's or
    weekday's name counts as one), else None."""
    for index, text in enumerate(fields):
        lowered = text.lower()
        for name in _ORDERED_NAMES.get(index, ()):
            lowered = lowered.replace(name, "0")
        if not _PLAIN_FIELD.fullmatch(lowered):
            return None
        if "*" in expanded[index] and len(expanded[index]) > 1:
            return None  # `*` listed with values (`*,5`): croniter's own reading of that

    def allowed(index: int, low: int, high: int) -> tuple[int, ...]:
        values = expanded[index]
        return tuple(range(low, high + 1)) if values == ["*"] else tuple(sorted(map(int, values)))

    def matching(index: int) -> frozenset[int] | None:
        values = expanded[index]
        return None if values == ["*"] else frozenset(map(int, values))

    return _Plain(allowed(0, 0, 59), allowed(1, 0, 23), matching(2), matching(3), matching(4))


# ----------------------------------------------------------------- expression checks


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


def _backwards_range(index: int, text: str) -> tuple[str, str] | None:
    """``(message, hint)`` for a range whose start is past its end (``22-2``): croniter reads
    it as wrapping around, or as the whole field (``1-0``), which the docs never promise and
    the writer seldom means."""
    name, low, high = _FIELDS[index]
    high = 6 if index == 4 else high  # day-of-week 7 is Sunday again: the week ends at 6
    for part in text.split(","):
        base, slash, step = part.partition("/")
        ends = base.split("-")
        if len(ends) != 2:
            continue
        start, end = (_field_value(index, end) for end in ends)
        if start is None or end is None or start <= end:
            continue
        by_name = ends[0].isalpha()
        each = f"/{step}" if slash else ""
        upper = _span(ends[0], _shown(index, high, by_name), each)
        lower = _span(_shown(index, low, by_name), ends[1], each)
        return (
            f"{name} field: the range {base} runs backwards (a range does not wrap around)",
            f"write it as two ranges: {upper},{lower}",
        )
    return None


def _field_value(index: int, token: str) -> int | None:
    """The number a range's end stands for (a month's or weekday's name too), None if other."""
    lowered = token.lower()
    if lowered.isdigit():
        value = int(lowered)
        return 0 if index == 4 and value == 7 else value  # 7-1 is Sunday to Monday
    names = _ORDERED_NAMES.get(index, ())
    if lowered in names:
        return names.index(lowered) + _FIELDS[index][1]
    return None


def _shown(index: int, value: int, by_name: bool) -> str:
    """``value`` of field ``index`` as the range wrote its ends: a number or a name."""
    names = _ORDERED_NAMES.get(index)
    return names[value - _FIELDS[index][1]] if by_name and names else str(value)


def _span(first: str, last: str, each: str) -> str:
    return first if first == last else f"{first}-{last}{each}"


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
        found = _one_field_problem(index, part)
        if found is not None:
            return found
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


def _one_field_problem(index: int, part: str) -> tuple[str, str] | None:
    """``(message, hint)`` for field ``index`` of an expression, else None."""
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
    return _backwards_range(index, part)


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
