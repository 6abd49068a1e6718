"""Pure tests of scheduler.cron: next-fire, DST rule, catch-up, overlap, jitter, validation.

Every time is explicit (ISO strings in UTC unless a zone is named); no clock, no sleeps.
Transition days used below:
    Europe/Berlin     2026-03-29 / 2026-10-25, 2027-03-28 / 2027-10-31, at 01:00 UTC
    America/New_York  2026-03-08 / 2026-11-01, 2027-03-14 / 2027-11-07, at 07:00 / 06:00 UTC
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scheduler import cron
from scheduler.cron import (
    CatchupPlan,
    Fire,
    InvalidSchedule,
    Schedule,
    Skip,
    catchup,
    decide_overlap,
    describe,
    fire_times,
    jitter_for,
    missed_ticks,
    next_fire,
    plan_catchup,
    prev_fire,
    validate_schedule,
)


def u(text: str) -> float:
    """Epoch seconds of a UTC ISO time ``2026-03-29T01:00`` (seconds optional)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def iso(instant: float | None) -> str | None:
    if instant is None:
        return None
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M")


def fires(schedule: Schedule, after: float, count: int) -> list[str | None]:
    out: list[str | None] = []
    at: float | None = after
    for _ in range(count):
        at = next_fire(schedule, at) if at is not None else None
        out.append(iso(at))
    return out


def fires_until(schedule: Schedule, after: float, until: float) -> list[float]:
    out = []
    at = next_fire(schedule, after)
    while at is not None and at <= until:
        out.append(at)
        at = next_fire(schedule, at)
    return out


# ------------------------------------------------------------------ plain and merged


@pytest.mark.parametrize(
    ("exprs", "after", "expected"),
    [
        ("0 2 * * *", "2026-01-01T00:00", ["2026-01-01T02:00", "2026-01-02T02:00"]),
        ("0 2 * * *", "2026-01-01T02:00", ["2026-01-02T02:00", "2026-01-03T02:00"]),
        ("*/20 * * * *", "2026-01-01T00:05:30", ["2026-01-01T00:20", "2026-01-01T00:40"]),
        ("0 0 1 * *", "2026-01-15T00:00", ["2026-02-01T00:00", "2026-03-01T00:00"]),
        ("0 0 29 2 *", "2026-01-01T00:00", ["2028-02-29T00:00", "2032-02-29T00:00"]),
        ("0 0 L * *", "2026-02-01T00:00", ["2026-02-28T00:00", "2026-03-31T00:00"]),
        ("0 9 * * mon-fri", "2026-01-02T10:00", ["2026-01-05T09:00", "2026-01-06T09:00"]),
        ("0 0 * * 7", "2026-01-01T00:00", ["2026-01-04T00:00", "2026-01-11T00:00"]),
        # both day fields restricted: either one matches (Vixie cron semantics)
        ("0 0 13 * 5", "2026-02-01T00:00", ["2026-02-06T00:00", "2026-02-13T00:00"]),
        ("@hourly", "2026-01-01T00:30", ["2026-01-01T01:00", "2026-01-01T02:00"]),
        ("@daily", "2026-01-01T00:30", ["2026-01-02T00:00", "2026-01-03T00:00"]),
        ("@weekly", "2026-01-01T00:00", ["2026-01-04T00:00", "2026-01-11T00:00"]),
        ("@monthly", "2026-01-01T00:00", ["2026-02-01T00:00", "2026-03-01T00:00"]),
        ("@yearly", "2026-01-01T00:00", ["2027-01-01T00:00", "2028-01-01T00:00"]),
        # several expressions merge in time order
        (
            ("0 9 * * 1-5", "0 12 * * 6,0"),
            "2026-01-02T00:00",
            ["2026-01-02T09:00", "2026-01-03T12:00", "2026-01-04T12:00", "2026-01-05T09:00"],
        ),
        # an instant two expressions name fires once
        (
            ("0 * * * *", "0 */2 * * *", "@hourly"),
            "2026-01-01T00:00",
            ["2026-01-01T01:00", "2026-01-01T02:00", "2026-01-01T03:00"],
        ),
    ],
)
def test_next_fire_utc(exprs: str | tuple[str, ...], after: str, expected: list[str]) -> None:
    assert fires(Schedule(exprs), u(after), len(expected)) == expected


def test_fractional_after_and_zone_offsets() -> None:
    assert iso(next_fire(Schedule("0 2 * * *"), u("2026-01-01T01:59:59") + 0.999)) == (
        "2026-01-01T02:00"
    )
    assert next_fire(Schedule("0 2 * * *"), u("2026-01-01T02:00") - 0.001) == u("2026-01-01T02:00")
    # Asia/Kolkata is UTC+05:30, Asia/Kathmandu UTC+05:45, no DST
    assert fires(Schedule("0 9 * * *", "Asia/Kolkata"), u("2026-06-01T00:00"), 1) == [
        "2026-06-01T03:30"
    ]
    assert fires(Schedule("0 9 * * *", "Asia/Kathmandu"), u("2026-06-01T00:00"), 1) == [
        "2026-06-01T03:15"
    ]


# ----------------------------------------------------------------------- DST rule

DST_CASES = [
    # daily 02:30: gap -> 03:00 local once; overlap -> first occurrence only
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00", ["2026-03-29T01:00", "2026-03-30T00:30"]),
    ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00", ["2026-10-25T00:30", "2026-10-26T01:30"]),
    ("30 2 * * *", "Europe/Berlin", "2027-03-27T12:00", ["2027-03-28T01:00", "2027-03-29T00:30"]),
    ("30 2 * * *", "Europe/Berlin", "2027-10-30T12:00", ["2027-10-31T00:30", "2027-11-01T01:30"]),
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00",
        ["2026-03-08T07:00", "2026-03-09T06:30"],
    ),
    (
        "30 2 * * *",
        "America/New_York",
        "2027-03-13T12:00",
        ["2027-03-14T07:00", "2027-03-15T06:30"],
    ),
    # New York repeats 01:00-02:00, so its 02:30 is unaffected in the fall; 01:30 is repeated
    (
        "30 2 * * *",
        "America/New_York",
        "2026-10-31T12:00",
        ["2026-11-01T07:30", "2026-11-02T07:30"],
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00",
        ["2026-11-01T05:30", "2026-11-02T06:30"],
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2027-11-06T12:00",
        ["2027-11-07T05:30", "2027-11-08T06:30"],
    ),
    # the shifted tick and a regular tick at the same instant fire once
    (
        "0 2,3 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00",
        ["2026-03-29T01:00", "2026-03-30T00:00", "2026-03-30T01:00"],
    ),
    (
        ("30 2 * * *", "0 3 * * *"),
        "Europe/Berlin",
        "2026-03-28T12:00",
        ["2026-03-29T01:00", "2026-03-30T00:30", "2026-03-30T01:00"],
    ),
    # a fixed hour with several minutes: all gap ticks collapse; repeats fire once
    ("*/15 2 * * *", "Europe/Berlin", "2026-03-28T12:00", ["2026-03-29T01:00", "2026-03-30T00:00"]),
    (
        "*/15 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00",
        [
            "2026-10-25T00:00",
            "2026-10-25T00:15",
            "2026-10-25T00:30",
            "2026-10-25T00:45",
            "2026-10-26T01:00",
        ],
    ),
    # hourly: the missing 02:00 merges with 03:00; the repeated hour fires both times
    (
        "0 * * * *",
        "Europe/Berlin",
        "2026-03-28T23:30",
        ["2026-03-29T00:00", "2026-03-29T01:00", "2026-03-29T02:00"],
    ),
    (
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-24T22:30",
        [
            "2026-10-24T23:00",
            "2026-10-25T00:00",
            "2026-10-25T01:00",
            "2026-10-25T02:00",
        ],
    ),
    (
        "0 * * * *",
        "America/New_York",
        "2026-03-08T05:30",
        ["2026-03-08T06:00", "2026-03-08T07:00", "2026-03-08T08:00"],
    ),
    (
        "0 * * * *",
        "America/New_York",
        "2026-11-01T03:30",
        ["2026-11-01T04:00", "2026-11-01T05:00", "2026-11-01T06:00", "2026-11-01T07:00"],
    ),
    # every 15 minutes keeps its real-time cadence through both changes
    (
        "*/15 * * * *",
        "Europe/Berlin",
        "2026-03-29T00:30",
        ["2026-03-29T00:45", "2026-03-29T01:00", "2026-03-29T01:15"],
    ),
    (
        "*/15 * * * *",
        "Europe/Berlin",
        "2026-10-25T00:40",
        [
            "2026-10-25T00:45",
            "2026-10-25T01:00",
            "2026-10-25T01:15",
            "2026-10-25T01:30",
            "2026-10-25T01:45",
            "2026-10-25T02:00",
        ],
    ),
    (
        "*/15 * * * *",
        "America/New_York",
        "2027-11-07T05:40",
        ["2027-11-07T05:45", "2027-11-07T06:00", "2027-11-07T06:15"],
    ),
    # an every-hour expression off the hour: 02:30 (missing) fires at 03:00, then 03:30
    (
        "30 * * * *",
        "Europe/Berlin",
        "2026-03-29T00:00",
        ["2026-03-29T00:30", "2026-03-29T01:00", "2026-03-29T01:30"],
    ),
    # a zone that changes at midnight
    ("0 0 * * *", "America/Santiago", "2026-09-05T12:00", ["2026-09-06T04:00", "2026-09-07T03:00"]),
]


@pytest.mark.parametrize(("exprs", "zone", "after", "expected"), DST_CASES)
def test_dst_next_fire(
    exprs: str | tuple[str, ...], zone: str, after: str, expected: list[str]
) -> None:
    assert fires(Schedule(exprs, zone), u(after), len(expected)) == expected


@pytest.mark.parametrize(("exprs", "zone", "after", "expected"), DST_CASES)
def test_dst_prev_fire_mirrors_next_fire(
    exprs: str | tuple[str, ...], zone: str, after: str, expected: list[str]
) -> None:
    schedule = Schedule(exprs, zone)
    ticks = [u(t) for t in expected]
    for earlier, later in pairwise(ticks):
        assert prev_fire(schedule, later) == later
        assert prev_fire(schedule, later - 1) == earlier
        assert prev_fire(schedule, later - 0.5) == earlier
    assert prev_fire(schedule, ticks[0] - 1) is not None
    assert prev_fire(schedule, ticks[0] - 1) <= u(after)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("expr", "zone", "day", "count"),
    [
        ("0 * * * *", "Europe/Berlin", "2026-03-29", 23),
        ("0 * * * *", "Europe/Berlin", "2026-10-25", 25),
        ("0 * * * *", "Europe/Berlin", "2027-03-28", 23),
        ("0 * * * *", "Europe/Berlin", "2027-10-31", 25),
        ("0 * * * *", "America/New_York", "2026-03-08", 23),
        ("0 * * * *", "America/New_York", "2026-11-01", 25),
        ("0 * * * *", "America/New_York", "2027-03-14", 23),
        ("0 * * * *", "America/New_York", "2027-11-07", 25),
        ("*/15 * * * *", "Europe/Berlin", "2026-03-29", 92),
        ("*/15 * * * *", "Europe/Berlin", "2026-10-25", 100),
        ("*/15 * * * *", "America/New_York", "2027-03-14", 92),
        ("*/15 * * * *", "America/New_York", "2027-11-07", 100),
        ("30 * * * *", "Europe/Berlin", "2026-03-29", 24),
        ("30 * * * *", "Europe/Berlin", "2026-10-25", 25),
        ("30 2 * * *", "Europe/Berlin", "2026-03-29", 1),
        ("30 2 * * *", "Europe/Berlin", "2026-10-25", 1),
        ("30 1 * * *", "America/New_York", "2026-11-01", 1),
        ("30 2 * * *", "America/New_York", "2026-03-08", 1),
        ("*/15 2 * * *", "Europe/Berlin", "2026-03-29", 1),
        ("*/15 2 * * *", "Europe/Berlin", "2026-10-25", 4),
        ("0 * * * *", "UTC", "2026-03-29", 24),
        # "every hour" is about the hour field's values, however it is spelled
        ("0 0-23 * * *", "Europe/Berlin", "2026-10-25", 25),
        ("0 */1 * * *", "Europe/Berlin", "2026-10-25", 25),
        ("0 */2 * * *", "Europe/Berlin", "2026-10-25", 12),
        ("0 */2 * * *", "Europe/Berlin", "2026-03-29", 12),
    ],
)
def test_fires_per_local_day(expr: str, zone: str, day: str, count: int) -> None:
    tz = ZoneInfo(zone)
    first = date.fromisoformat(day)
    begin = datetime.combine(first, datetime.min.time(), tz).timestamp()
    end = datetime.combine(first + timedelta(days=1), datetime.min.time(), tz).timestamp()
    assert len(fires_until(Schedule(expr, zone), begin - 1, end - 1)) == count


# The rule restated from the UTC side, minute by minute, as an independent reference:
# a minute fires if its wall-clock time matches and it is that time's first occurrence
# (or any occurrence, for an every-hour expression), or if it ends a gap holding a match.


def _field_match(spec: str, value: int, low: int) -> bool:
    for part in spec.split(","):
        base, _, step = part.partition("/")
        if base == "*":
            first, last = low, 59
        elif "-" in base:
            first, last = (int(x) for x in base.split("-"))
        else:
            first = last = int(base)
            if step:
                last = 59
        if first <= value <= last and (value - first) % int(step or 1) == 0:
            return True
    return False


def _matches(expr: str, wall: datetime) -> bool:
    minute, hour, dom, month, dow = expr.split()
    assert (dom, month, dow) == ("*", "*", "*")  # enough for the expressions used here
    return _field_match(minute, wall.minute, 0) and _field_match(hour, wall.hour, 0)


def reference_fires(expr: str, zone: str, after: float, until: float) -> list[float]:
    tz = ZoneInfo(zone)
    every_hour = expr.split()[1] == "*"
    out = []
    minute = (int(after) // 60 + 1) * 60
    while minute <= until:
        local = datetime.fromtimestamp(minute, tz)
        wall = local.replace(tzinfo=None, fold=0)
        fired = _matches(expr, wall) and (local.fold == 0 or every_hour)
        jump = local.utcoffset() - datetime.fromtimestamp(minute - 1, tz).utcoffset()  # type: ignore[operator]
        if jump > timedelta(0):  # this instant ends a gap
            skipped = wall - jump
            while skipped < wall and not fired:
                fired = _matches(expr, skipped)
                skipped += timedelta(minutes=1)
        if fired:
            out.append(float(minute))
        minute += 60
    return out


TRANSITIONS = [
    ("Europe/Berlin", "2026-03-29T01:00"),
    ("Europe/Berlin", "2026-10-25T01:00"),
    ("Europe/Berlin", "2027-03-28T01:00"),
    ("Europe/Berlin", "2027-10-31T01:00"),
    ("America/New_York", "2026-03-08T07:00"),
    ("America/New_York", "2026-11-01T06:00"),
    ("America/New_York", "2027-03-14T07:00"),
    ("America/New_York", "2027-11-07T06:00"),
]
PROPERTY_EXPRS = [
    "30 2 * * *",
    "30 1 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "30 * * * *",
    "*/15 2 * * *",
    "*/20 1-3 * * *",
    "0 */2 * * *",
    "5 1,2,3 * * *",
    "*/7 * * * *",
]


def check_never_twice(expr: str, zone: str, after: float, until: float) -> None:
    schedule = Schedule(expr, zone)
    got = fires_until(schedule, after, until)
    assert got == reference_fires(expr, zone, after, until)
    assert all(a < b for a, b in pairwise(got))  # strictly increasing
    tz = ZoneInfo(zone)
    walls = [datetime.fromtimestamp(t, tz) for t in got]
    if schedule._exprs[0].every_hour:
        # a repeated wall time may fire twice, once per real occurrence, never more
        keyed = [(w.replace(tzinfo=None, fold=0), w.utcoffset()) for w in walls]
        assert len(set(keyed)) == len(keyed)
    else:
        naive = [w.replace(tzinfo=None, fold=0) for w in walls]
        assert len(set(naive)) == len(naive)  # no wall-clock tick fires twice
    for earlier, later in pairwise(got):
        assert prev_fire(schedule, later - 1) == earlier


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    transition=st.sampled_from(TRANSITIONS),
    expr=st.sampled_from(PROPERTY_EXPRS),
    offset=st.floats(min_value=-30 * 3600, max_value=6 * 3600),
)
def test_never_twice_around_transitions(
    transition: tuple[str, str], expr: str, offset: float
) -> None:
    zone, at = transition
    after = u(at) + offset
    check_never_twice(expr, zone, after, after + 30 * 3600)


@settings(max_examples=40, deadline=None)
@given(
    zone=st.sampled_from(["Europe/Berlin", "America/New_York"]),
    expr=st.sampled_from(PROPERTY_EXPRS),
    after=st.floats(min_value=u("2026-01-01T00:00"), max_value=u("2027-12-29T00:00")),
)
def test_never_twice_anywhere_in_dst_years(zone: str, expr: str, after: float) -> None:
    check_never_twice(expr, zone, after, after + 36 * 3600)


def _transitions_2026(zone: str) -> list[float]:
    tz = ZoneInfo(zone)
    out = []
    at = u("2026-01-01T00:00")
    while at < u("2027-01-01T00:00"):
        if (
            datetime.fromtimestamp(at, tz).utcoffset()
            != datetime.fromtimestamp(at + 900, tz).utcoffset()
        ):
            out.append(at)
        at += 900
    return out


@pytest.mark.parametrize(
    "zone",
    [
        "Australia/Lord_Howe",  # 30-minute daylight saving
        "Pacific/Chatham",  # UTC+12:45 / +13:45
        "Europe/Dublin",  # "negative" DST in tzdata: winter is the saving time
        "America/Havana",  # changes at midnight
        "Africa/Casablanca",  # leaves and re-enters its offset around Ramadan
    ],
)
def test_never_twice_in_unusual_zones(zone: str) -> None:
    changes = _transitions_2026(zone)
    assert changes
    for change in changes:
        for expr in ("30 2 * * *", "0 * * * *", "*/15 * * * *", "30 1 * * *", "0 0 * * *"):
            check_never_twice(expr, zone, change - 20 * 3600, change + 10 * 3600)


# -------------------------------------------------------------------- start and end


def test_start_and_end_bounds_are_inclusive() -> None:
    schedule = Schedule("0 * * * *", start=u("2026-01-01T10:30"), end=u("2026-01-01T13:00"))
    assert iso(next_fire(schedule, u("2025-06-01T00:00"))) == "2026-01-01T11:00"
    assert iso(next_fire(schedule, u("2026-01-01T12:00"))) == "2026-01-01T13:00"
    assert next_fire(schedule, u("2026-01-01T13:00")) is None
    assert iso(prev_fire(schedule, u("2026-02-01T00:00"))) == "2026-01-01T13:00"
    assert prev_fire(schedule, u("2026-01-01T10:59")) is None
    on_tick = Schedule("0 * * * *", start=u("2026-01-01T11:00"))
    assert iso(next_fire(on_tick, 0)) == "2026-01-01T11:00"
    assert [iso(t) for t in missed_ticks(schedule, 0, u("2026-02-01T00:00"))] == [
        "2026-01-01T11:00",
        "2026-01-01T12:00",
        "2026-01-01T13:00",
    ]
    with pytest.raises(InvalidSchedule, match="start is after its end"):
        Schedule("0 * * * *", start=u("2026-01-02T00:00"), end=u("2026-01-01T00:00"))


def _plain_field(low: int, high: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """One cron field of plain values: ``*``, a step of it, or a list of numbers, ranges
    (with steps) and names."""
    value = st.integers(low, high)
    part = st.one_of(
        value.map(str),
        st.tuples(value, value).map(lambda ends: f"{min(ends)}-{max(ends)}"),
        st.tuples(value, value, st.integers(1, 9)).map(
            lambda t: f"{min(t[0], t[1])}-{max(t[0], t[1])}/{t[2]}"
        ),
        *([st.sampled_from(names)] if names else []),
    )
    return st.one_of(
        st.just("*"),
        st.integers(1, high - low + 1).map(lambda step: f"*/{step}"),
        st.lists(part, min_size=1, max_size=3).map(",".join),
    )


_MONTH_NAMES = ("jan", "feb", "apr", "jul", "oct", "dec")
_WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@settings(max_examples=400, deadline=None)
@given(
    minute=_plain_field(0, 59),
    hour=_plain_field(0, 23),
    day=_plain_field(1, 31),
    month=_plain_field(1, 12, _MONTH_NAMES),
    weekday=_plain_field(0, 7, _WEEKDAY_NAMES),
    after=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)),
)
def test_plain_expressions_are_walked_as_croniter_walks_them(
    minute: str, hour: str, day: str, month: str, weekday: str, after: datetime
) -> None:
    """An expression of plain values is walked without croniter, tick for tick as croniter's
    get_next walks it (the day-of-month / weekday rule, months, names, month ends, leap days,
    a start between two minutes)."""
    text = f"{minute} {hour} {day} {month} {weekday}"
    try:
        [expr] = Schedule(text)._exprs
    except InvalidSchedule:
        assume(False)  # a backwards range, a day no month has: refused before any walk
        return
    assert expr.plain is not None
    walker = croniter(expr.cron, after)
    expected = [walker.get_next(datetime) for _ in range(40)]
    assert list(islice(fire_times._wall_ticks_after(expr, after), 40)) == expected


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("0 0 L * *", False),
        ("0 0 15W * *", False),
        ("0 0 * * 1#2", False),
        ("0 0 ? * *", False),
        ("0 0 * jul wed", True),
        ("@weekly", True),
    ],
)
def test_only_plain_values_skip_croniter(text: str, plain: bool) -> None:
    """``L``, ``W``, ``#`` and ``?`` are croniter's to walk; names are plain values."""
    [expr] = Schedule(text)._exprs
    assert (expr.plain is not None) is plain


def test_missed_ticks_window_and_limit() -> None:
    hourly = Schedule("0 * * * *")
    got = missed_ticks(hourly, u("2026-01-01T00:00"), u("2026-01-01T03:00"))
    assert [iso(t) for t in got] == ["2026-01-01T01:00", "2026-01-01T02:00", "2026-01-01T03:00"]
    assert len(missed_ticks(hourly, u("2026-01-01T00:00"), u("2026-02-01T00:00"), limit=5)) == 5
    assert missed_ticks(hourly, u("2026-01-01T00:00"), u("2026-01-01T00:59")) == []


# --------------------------------------------------------------------------- catch-up


def hour(h: int, m: int = 0, s: int = 0) -> float:
    return u(f"2026-01-01T{h:02}:{m:02}:{s:02}")


NONE = "catch-up policy none"
LATEST = "catch-up policy latest (superseded by a newer run)"


def one(tick: float, reason: str) -> Skip:
    return Skip(tick, tick, 1, reason)


CATCHUP_CASES = [
    # (policy, window, max_runs, expected, now, fires, skips)
    ("none", None, None, hour(0), hour(5, 0, 10), [(5, "schedule")], [(h, NONE) for h in range(5)]),
    (
        "latest",
        None,
        None,
        hour(0),
        hour(5, 0, 10),
        [(5, "schedule")],
        [(h, LATEST) for h in range(5)],
    ),
    (
        "all",
        None,
        None,
        hour(0),
        hour(5, 0, 10),
        [(h, "catch-up") for h in range(5)] + [(5, "schedule")],
        [],
    ),
    (
        "all",
        2 * 3600,
        None,
        hour(0),
        hour(5, 0, 10),
        [(4, "catch-up"), (5, "schedule")],
        [(h, "outside catch-up window 2h") for h in range(4)],
    ),
    (
        "all",
        None,
        3,
        hour(0),
        hour(5, 0, 10),
        [(3, "catch-up"), (4, "catch-up"), (5, "schedule")],
        [(h, "max_runs 3 reached") for h in range(3)],
    ),
    (
        "all",
        3 * 3600,
        2,
        hour(0),
        hour(5, 0, 10),
        [(4, "catch-up"), (5, "schedule")],
        [(h, "outside catch-up window 3h") for h in range(3)] + [(3, "max_runs 2 reached")],
    ),
    # woken late: nothing is on time
    ("none", None, None, hour(0), hour(5, 30), [], [(h, NONE) for h in range(6)]),
    (
        "latest",
        None,
        None,
        hour(0),
        hour(5, 30),
        [(5, "catch-up")],
        [(h, LATEST) for h in range(5)],
    ),
    (
        "latest",
        12 * 3600,
        None,
        hour(0),
        hour(5, 30),
        [(5, "catch-up")],
        [(h, LATEST) for h in range(5)],
    ),
    (
        "latest",
        600,
        None,
        hour(0),
        hour(5, 30),
        [],
        [(h, "outside catch-up window 10m") for h in range(6)],
    ),
    (
        "all",
        5400,
        None,
        hour(0),
        hour(5, 30),
        [(4, "catch-up"), (5, "catch-up")],
        [(h, "outside catch-up window 1h30m") for h in range(4)],
    ),
    # on time, nothing missed; the grace boundary
    ("none", None, None, hour(0), hour(0), [(0, "schedule")], []),
    ("none", None, None, hour(0), hour(0, 1, 0), [(0, "schedule")], []),
    ("none", None, None, hour(0), hour(0, 1, 1), [], [(0, NONE)]),
    # a window shorter than the grace does not make the on-time tick a skip
    (
        "all",
        0,
        None,
        hour(0),
        hour(2, 0, 30),
        [(2, "schedule")],
        [(h, "outside catch-up window 0s") for h in range(2)],
    ),
    # the stored score was a registration time, not a tick
    ("latest", None, None, hour(0, 10), hour(2, 0, 5), [(2, "schedule")], [(1, LATEST)]),
]


@pytest.mark.parametrize(
    ("policy", "window", "max_runs", "expected", "now", "want_fires", "want_skips"),
    CATCHUP_CASES,
)
def test_plan_catchup_hourly(
    policy: cron.CatchupPolicy,
    window: float | None,
    max_runs: int | None,
    expected: float,
    now: float,
    want_fires: list[tuple[int, str]],
    want_skips: list[tuple[int, str]],
) -> None:
    plan = plan_catchup(Schedule("0 * * * *"), policy, window, max_runs, expected, now)
    assert plan.fires == tuple(Fire(hour(h), trigger) for h, trigger in want_fires)  # type: ignore[arg-type]
    assert plan.skips == tuple(one(hour(h), reason) for h, reason in want_skips)
    assert plan.next_score == next_fire(Schedule("0 * * * *"), now)
    assert plan.skipped == len(want_skips)


def test_plan_catchup_nothing_due_keeps_the_score() -> None:
    plan = plan_catchup(Schedule("0 * * * *"), "all", None, None, hour(6), hour(5, 59))
    assert plan == CatchupPlan((), (), hour(6))


def test_plan_catchup_after_the_end_clears_the_score() -> None:
    schedule = Schedule("0 * * * *", end=hour(3))
    plan = plan_catchup(schedule, "latest", None, None, hour(2), hour(4))
    assert plan.fires == (Fire(hour(3), "catch-up"),)
    assert plan.skips == (one(hour(2), LATEST),)
    assert plan.next_score is None


def test_plan_catchup_daily_across_spring_gap() -> None:
    schedule = Schedule("30 2 * * *", "Europe/Berlin")
    # due: 03-28 02:30 CET, 03-29 03:00 CEST (the shifted 02:30), 03-30 02:30 CEST
    plan = plan_catchup(
        schedule, "latest", 12 * 3600, None, u("2026-03-28T01:30"), u("2026-03-30T06:00")
    )
    assert plan.fires == (Fire(u("2026-03-30T00:30"), "catch-up"),)
    assert plan.skips == (
        one(u("2026-03-28T01:30"), "outside catch-up window 12h"),
        one(u("2026-03-29T01:00"), "outside catch-up window 12h"),
    )
    assert plan.next_score == u("2026-03-31T00:30")
    every = plan_catchup(schedule, "all", None, None, u("2026-03-28T01:30"), u("2026-03-30T00:30"))
    assert [(iso(f.tick), f.trigger) for f in every.fires] == [
        ("2026-03-28T01:30", "catch-up"),
        ("2026-03-29T01:00", "catch-up"),
        ("2026-03-30T00:30", "schedule"),
    ]


def test_plan_catchup_groups_skips_past_the_record_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catchup, "SKIP_RECORD_LIMIT", 10)
    start, now = hour(0), u("2026-01-04T00:00:05")  # 72 missed hourly ticks, then 01-04 00:00
    plan = plan_catchup(Schedule("0 * * * *"), "none", None, None, start, now)
    assert plan.fires == (Fire(u("2026-01-04T00:00"), "schedule"),)
    singles = [s for s in plan.skips if s.first == s.last]
    grouped = [s for s in plan.skips if s.first != s.last]
    assert len(singles) == 10  # the newest ten, one record each
    assert grouped == [Skip(hour(0), u("2026-01-03T13:00"), 62, NONE)]
    assert plan.skipped == 72


def test_plan_catchup_enumeration_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catchup, "SKIP_RECORD_LIMIT", 10)
    monkeypatch.setattr(catchup, "MAX_ENUMERATED", 50)
    start, now = hour(0), u("2026-01-04T00:00:05")
    plan = plan_catchup(Schedule("0 * * * *"), "none", None, None, start, now)
    grouped = [s for s in plan.skips if s.first != s.last]
    # 50 walked (10 singles + 40 grouped), the rest not counted: the group says so with None
    assert grouped == [Skip(hour(0), u("2026-01-03T13:00"), None, NONE)]


def test_plan_catchup_cap_without_max_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catchup, "MAX_CATCHUP_RUNS", 4)
    plan = plan_catchup(Schedule("0 * * * *"), "all", None, None, hour(0), hour(9, 30))
    assert [iso(f.tick) for f in plan.fires] == [
        "2026-01-01T06:00",
        "2026-01-01T07:00",
        "2026-01-01T08:00",
        "2026-01-01T09:00",
    ]
    assert {s.reason for s in plan.skips} == {"catch-up cap 4 reached"}
    assert plan.skipped == 6


def test_plan_catchup_a_year_of_minutes_is_bounded() -> None:
    every_minute = Schedule("* * * * *")
    plan = plan_catchup(
        every_minute, "all", None, None, u("2025-01-01T00:00"), u("2026-01-01T00:00:05")
    )
    assert len(plan.fires) == cron.MAX_CATCHUP_RUNS
    assert plan.fires[-1] == Fire(u("2026-01-01T00:00"), "schedule")
    assert len(plan.skips) <= cron.SKIP_RECORD_LIMIT + 1
    uncounted = [s for s in plan.skips if s.count is None]
    assert len(uncounted) == 1
    assert uncounted[0].first == u("2025-01-01T00:00")
    assert uncounted[0].reason == f"catch-up cap {cron.MAX_CATCHUP_RUNS} reached"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sometimes", None, None), "unknown catch-up policy"),
        (("all", -1.0, None), "window"),
        (("all", None, 0), "max_runs"),
    ],
)
def test_plan_catchup_refuses_bad_arguments(
    args: tuple[str, float | None, int | None], message: str
) -> None:
    policy, window, max_runs = args
    with pytest.raises(ValueError, match=message):
        plan_catchup(Schedule("0 * * * *"), policy, window, max_runs, hour(0), hour(1))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- overlap


@pytest.mark.parametrize(
    ("policy", "active", "buffered", "action", "reason"),
    [
        ("skip", False, False, "fire", None),
        ("skip", True, False, "skip", "overlap skip: previous run still active"),
        ("buffer_one", False, False, "fire", None),
        ("buffer_one", True, False, "buffer", "overlap buffer_one: waits for the previous run"),
        ("buffer_one", True, True, "skip", "overlap buffer_one: a run is already buffered"),
        ("allow", True, True, "fire", None),
        ("cancel_running", False, False, "fire", None),
        ("cancel_running", True, False, "cancel_and_fire", "overlap cancel_running"),
    ],
)
def test_decide_overlap(
    policy: cron.OverlapPolicy, active: bool, buffered: bool, action: str, reason: str | None
) -> None:
    decision = decide_overlap(policy, active, buffered)
    assert decision.action == action
    if reason is None:
        assert decision.reason is None
    else:
        assert decision.reason is not None and decision.reason.startswith(reason)


def test_decide_overlap_refuses_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown overlap policy"):
        decide_overlap("queue", True, False)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- jitter


def test_jitter_is_deterministic_and_in_range() -> None:
    tick = u("2026-01-01T02:00")
    first = jitter_for("sales-etl", tick, 30)
    assert first == jitter_for("sales-etl", tick, 30)
    assert first == jitter_for("sales-etl", int(tick), 30)  # int and float ticks agree
    values = [jitter_for("sales-etl", tick + 3600 * i, 30) for i in range(2000)]
    assert all(0 <= v < 30 for v in values)
    assert all(v == round(v, 3) for v in values)  # millisecond resolution
    assert 12 < sum(values) / len(values) < 18  # spread over the range
    assert len({jitter_for(f"flow-{i}", tick, 30) for i in range(50)}) > 45
    assert jitter_for("sales-etl", tick, 0) == 0.0
    assert jitter_for("sales-etl", tick, -5) == 0.0
    assert 0 <= jitter_for("x", tick, 0.0005) < 0.0005


def test_jitter_value_is_pinned() -> None:
    # the hash input and algorithm are a contract: two services, or two releases, must agree
    assert jitter_for("sales-etl", u("2026-01-01T02:00"), 30) == 5.542


# ------------------------------------------------------------------------- validation

NOW = u("2026-01-01T00:00")


@pytest.mark.parametrize(
    ("cron_exprs", "zone", "kwargs", "severity", "field", "message"),
    [
        ("* * * *", "UTC", {}, "error", "schedule.cron", "4 fields, expected 5"),
        ("0 0 * * * *", "UTC", {}, "error", "schedule.cron", "seconds are not supported"),
        ("0 25 * * *", "UTC", {}, "error", "schedule.cron", "hour value 25 is out of range 0-23"),
        ("60 * * * *", "UTC", {}, "error", "schedule.cron", "minute value 60 is out of range"),
        ("0 0 0 * *", "UTC", {}, "error", "schedule.cron", "day-of-month value 0 is out of range"),
        ("0 0 * 13 *", "UTC", {}, "error", "schedule.cron", "month value 13 is out of range 1-12"),
        ("0 0 * * 8", "UTC", {}, "error", "schedule.cron", "day-of-week value 8 is out of range"),
        ("0 0 * foo *", "UTC", {}, "error", "schedule.cron", "unknown month name 'foo'"),
        ("*/0 * * * *", "UTC", {}, "error", "schedule.cron", "step '0'"),
        ("0 0 * * 5L", "UTC", {}, "error", "schedule.cron", "day-of-week field '5L' is not valid"),
        ("H * * * *", "UTC", {}, "error", "schedule.cron", "(H, R) are not supported"),
        ("R 2 * * *", "UTC", {}, "error", "schedule.cron", "(H, R) are not supported"),
        ("@reboot", "UTC", {}, "error", "schedule.cron", "unknown alias '@reboot'"),
        ("0 0 30 2 *", "UTC", {}, "error", "schedule.cron", "never fires"),
        ("0 0 31 4,6 *", "UTC", {}, "error", "schedule.cron", "never fires"),
        (["0 2 * * *", "61 * * * *"], "UTC", {}, "error", "schedule.cron[1]", "minute value 61"),
        ([], "UTC", {}, "error", "schedule.cron", "no cron expression"),
        ("0 2 * * *", "Europe/Berln", {}, "error", "schedule.timezone", "unknown time zone"),
        (
            ["0 2 * * *", "0 2 * * *"],
            "UTC",
            {},
            "warning",
            "schedule.cron[1]",
            "repeats schedule.cron[0]",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            {},
            "warning",
            "schedule.cron",
            "02:30 does not exist on 2026-03-29 (clocks jump from 02:00 to 03:00): fires once "
            "at 03:00 CEST (01:00 UTC)",
        ),
        (
            "30 2 * * *",
            "Europe/Berlin",
            {},
            "warning",
            "schedule.cron",
            "02:30 occurs twice on 2026-10-25 (clocks go back from 03:00 to 02:00): fires "
            "once, at the first occurrence (02:30 CEST = 00:30 UTC)",
        ),
        (
            ["0 9 * * *", "30 1 * * *"],
            "America/New_York",
            {},
            "warning",
            "schedule.cron[1]",
            "01:30 occurs twice on 2026-11-01",
        ),
        (
            "0 2,3 * * *",
            "Europe/Berlin",
            {},
            "warning",
            "schedule.cron",
            "together with the regular 03:00 tick",
        ),
        (
            "30 * * * *",
            "Europe/Berlin",
            {},
            "warning",
            "schedule.cron",
            "02:30 does not exist on 2026-03-29",
        ),
        (
            "* * * * *",
            "UTC",
            {"catchup_policy": "all", "catchup_window": 86400},
            "warning",
            "schedule.catchup",
            "can enqueue more than 1000 runs",
        ),
        (
            "0 2 * * *",
            "UTC",
            {"catchup_policy": "all"},
            "warning",
            "schedule.catchup",
            "neither window nor max_runs",
        ),
        (
            "0 2 * * *",
            "UTC",
            {"catchup_policy": "all", "max_runs": 5000},
            "warning",
            "schedule.catchup",
            "max_runs 5000",
        ),
        (
            "0 2 * * *",
            "UTC",
            {"catchup_policy": "most"},
            "error",
            "schedule.catchup.policy",
            "most",
        ),
        (
            "0 2 * * *",
            "UTC",
            {"catchup_window": -5},
            "error",
            "schedule.catchup.window",
            "negative",
        ),
        ("0 2 * * *", "UTC", {"max_runs": 0}, "error", "schedule.catchup.max_runs", "at least 1"),
        ("0 2 * * *", "UTC", {"overlap": "queue"}, "error", "schedule.overlap", "'queue'"),
        ("0 2 * * *", "UTC", {"jitter": -1}, "error", "schedule.jitter", "negative"),
        ("0 * * * *", "UTC", {"jitter": 3600}, "warning", "schedule.jitter", "not shorter"),
        ("0 2 * * *", "UTC", {"end": NOW - 1}, "warning", "schedule.end", "no fire time after now"),
        (
            "0 2 * * *",
            "UTC",
            {"start": NOW + 10, "end": NOW},
            "error",
            "schedule.start",
            "start is after its end",
        ),
    ],
)
def test_validate_schedule_finds(
    cron_exprs: str | list[str],
    zone: str,
    kwargs: dict[str, object],
    severity: str,
    field: str,
    message: str,
) -> None:
    problems = validate_schedule(cron_exprs, zone, now=NOW, **kwargs)  # type: ignore[arg-type]
    matching = [p for p in problems if p.field == field and message in p.message]
    assert matching, problems
    assert matching[0].severity == severity
    assert matching[0].hint


@pytest.mark.parametrize(
    ("zone", "hint"),
    [
        ("Europe/Berln", "did you mean 'Europe/Berlin'?"),
        ("europe/berlin", "did you mean 'Europe/Berlin'?"),
        ("Berlin", "did you mean 'Europe/Berlin'?"),
        ("new york", "did you mean 'America/New_York'?"),
        ("Mars/Olympus_Mons", "use an IANA name"),
        ("", "use an IANA name"),
    ],
)
def test_validate_unknown_zone_did_you_mean(zone: str, hint: str) -> None:
    (problem,) = validate_schedule("0 2 * * *", zone, now=NOW)
    assert (problem.severity, problem.field) == ("error", "schedule.timezone")
    assert hint in problem.hint


@pytest.mark.parametrize(
    ("cron_exprs", "zone", "kwargs"),
    [
        ("0 2 * * *", "UTC", {}),
        ("30 2 * * *", "Asia/Tokyo", {}),
        ("0 * * * *", "Europe/Berlin", {}),  # every-hour: nothing surprising to report
        ("*/15 * * * *", "America/New_York", {}),
        ("0 4 * * *", "Europe/Berlin", {}),
        ("@daily", "Europe/Berlin", {"catchup_policy": "all", "catchup_window": 30 * 86400}),
        ("*/5 * * * *", "UTC", {"catchup_policy": "all", "catchup_window": 12 * 3600}),
        ("* * * * *", "UTC", {"catchup_policy": "all", "max_runs": 10, "jitter": 30}),
        (["0 9 * * 1-5", "0 12 * * 6,0"], "UTC", {"overlap": "buffer_one"}),
    ],
)
def test_validate_schedule_clean(
    cron_exprs: str | list[str], zone: str, kwargs: dict[str, object]
) -> None:
    assert validate_schedule(cron_exprs, zone, now=NOW, **kwargs) == []  # type: ignore[arg-type]


def test_validate_catchup_finds_the_busiest_window_not_just_the_next() -> None:
    # every minute of the 1st of each month: 1440 ticks in one day, none in the next two weeks
    kwargs = {"catchup_policy": "all", "catchup_window": 86400.0}
    (problem,) = validate_schedule("* * 1 * *", "UTC", now=u("2026-01-15T00:00"), **kwargs)  # type: ignore[arg-type]
    assert "can enqueue more than 1000 runs" in problem.message
    assert validate_schedule("* * 1 * *", "UTC", now=NOW, catchup_policy="all", max_runs=5) == []


def test_validate_reports_errors_first_and_counts_repeats() -> None:
    problems = validate_schedule(["30 2 * * *", "0 25 * * *"], "Europe/Berlin", now=NOW)
    assert [p.severity for p in problems] == ["error"]  # DST analysis needs valid expressions
    (gap, overlap) = validate_schedule("30 2 * * *", "Europe/Berlin", now=NOW)
    assert "(and 2 more within 3 years)" in gap.message
    assert "(and 2 more within 3 years)" in overlap.message


def test_dst_warnings_cover_only_the_time_a_schedule_can_fire() -> None:
    # NOW is in 2026: the changes of 2026 to 2028 are warned of, not those outside the bounds.
    start, end = u("2031-01-01T00:00"), u("2031-06-01T00:00")
    (gap,) = validate_schedule("30 2 * * *", "Europe/Berlin", now=NOW, start=start, end=end)
    assert "on 2031-03-30" in gap.message and "more" not in gap.message
    ended = u("2026-02-01T00:00")
    assert validate_schedule("30 2 * * *", "Europe/Berlin", now=NOW, end=ended) == []
    far = u("2040-01-01T00:00")
    gap, overlap = validate_schedule("30 2 * * *", "Europe/Berlin", now=NOW, start=far)
    assert "2040-03-25" in gap.message and "2040-10-28" in overlap.message


def test_schedule_normalises_its_expressions() -> None:
    schedule = Schedule(["0 2 * * *", "@hourly"], "Europe/Berlin")
    assert schedule.cron == ("0 2 * * *", "@hourly")
    assert schedule.expressions == ("0 2 * * *", "@hourly")
    assert schedule == Schedule(("0 2 * * *", "@hourly"), "Europe/Berlin")
    assert hash(schedule) == hash(Schedule(("0 2 * * *", "@hourly"), "Europe/Berlin"))
    assert Schedule("0 2 * * *").cron == ("0 2 * * *",)


@pytest.mark.parametrize(
    ("exprs", "zone", "message"),
    [
        ("0 0 30 2 *", "UTC", "never fires"),
        ("0 0 * * * *", "UTC", "seconds are not supported"),
        ("0 2 * * *", "Europe/Berln", "did you mean 'Europe/Berlin'"),
        ((), "UTC", "no cron expression"),
    ],
)
def test_schedule_refuses_what_validation_calls_an_error(
    exprs: str | tuple[str, ...], zone: str, message: str
) -> None:
    with pytest.raises(InvalidSchedule, match=message):
        Schedule(exprs, zone)


# --------------------------------------------------------------------------- describe


@pytest.mark.parametrize(
    ("schedule", "now", "text"),
    [
        (
            Schedule("0 2 * * *", "Europe/Berlin"),
            "2026-11-22T20:00",
            "next 2026-11-23 02:00 CET (in 5h)",
        ),
        (
            Schedule("0 2 * * *", "Europe/Berlin"),
            "2026-06-22T20:00",
            "next 2026-06-23 02:00 CEST (in 4h)",
        ),
        (
            Schedule("30 2 * * *", "Europe/Berlin"),
            "2026-03-28T12:00",
            "next 2026-03-29 03:00 CEST (in 13h)",
        ),
        (Schedule("*/15 * * * *"), "2026-01-01T00:14:15", "next 2026-01-01 00:15 UTC (in 45s)"),
        (Schedule("*/15 * * * *"), "2026-01-01T00:03:00", "next 2026-01-01 00:15 UTC (in 12m)"),
        (Schedule("0 6 * * 1"), "2026-01-01T01:30", "next 2026-01-05 06:00 UTC (in 4d 4h)"),
        (Schedule("0 6 * * *"), "2026-01-01T00:40", "next 2026-01-01 06:00 UTC (in 5h 20m)"),
        (
            Schedule("0 6 * * *", end=u("2026-01-01T06:00")),
            "2026-01-01T07:00",
            "no further fire times (ended 2026-01-01 06:00 UTC)",
        ),
    ],
)
def test_describe(schedule: Schedule, now: str, text: str) -> None:
    assert describe(schedule, u(now)) == text


def test_a_bound_a_hair_before_a_spring_forward_keeps_the_tick_the_gap_moves_there() -> None:
    """02:30 Europe/Berlin on 2026-03-29 does not exist and fires at 03:00 CEST (01:00 UTC);
    asking for the next fire a fraction of a microsecond before that instant must give it."""
    schedule = Schedule(("30 2 * * *",), "Europe/Berlin")
    transition = u("2026-03-29T01:00")
    assert next_fire(schedule, transition - 1.192092896e-07) == transition
    assert next_fire(schedule, transition - 1) == transition
    assert next_fire(schedule, transition) == u("2026-03-30T00:30")


# The days before each daylight-saving change of 2026 in these zones.
_CHANGES = {
    "Europe/Berlin": ("2026-03-28T00:00", "2026-10-24T00:00"),
    "America/New_York": ("2026-03-07T00:00", "2026-10-31T00:00"),
    "Australia/Lord_Howe": ("2026-04-04T00:00", "2026-10-03T00:00"),  # 30-minute changes
    "UTC": ("2026-02-28T00:00", "2026-06-01T00:00"),
}


@pytest.mark.parametrize(
    ("expr", "zone"),
    [
        ("* * * * *", "Europe/Berlin"),
        ("*/7 * * * *", "America/New_York"),
        ("0,15,30,45 * * * *", "Australia/Lord_Howe"),
        ("* 2 * * *", "Europe/Berlin"),  # every minute of the hour that springs forward
        ("*/5 1-3 * * *", "America/New_York"),
        ("0 * * * *", "Europe/Berlin"),
        ("* * 1 * *", "UTC"),
        ("30 2 * * *", "Europe/Berlin"),
    ],
)
def test_the_busiest_window_s_bound_holds_across_daylight_saving_changes(
    expr: str, zone: str
) -> None:
    """The bound that spares validation its walk of the fire times is never below what the
    walk finds, over two days around each change of a year."""
    from scheduler.cron.checks import _at_most
    from scheduler.cron.fire_times import _fires

    schedule = Schedule(expr, zone)
    for start in _CHANGES[zone]:
        ticks: list[float] = []
        for tick in _fires(schedule, u(start), True):
            if tick > u(start) + 2 * 86400:
                break
            ticks.append(tick)
        for window in (59.0, 3600.0, 5400.0, 7200.0, 86400.0):
            busiest, first = 0, 0
            for last, tick in enumerate(ticks):
                while ticks[first] < tick - window:
                    first += 1
                busiest = max(busiest, last - first + 1)
            assert busiest <= _at_most(schedule, window), (start, window, busiest)


def test_a_minutely_catch_up_all_with_a_window_validates_without_walking_its_ticks() -> None:
    """Ten files of a minutely schedule, catch-up all in a 2h window: each validated in a
    blink (it took over a second each, walking 20,000 fire times, so a folder of such files
    kept a scheduler service from registering anything for minutes). Counted in this process's
    CPU time, which other processes' load does not stretch as it stretches wall time (a busy
    machine took 2.6 s of wall time for 0.15 s of CPU)."""
    began = time.process_time()
    for _ in range(10):
        problems = validate_schedule(
            "* * * * *", "Europe/Berlin", now=NOW, catchup_policy="all", catchup_window=7200.0
        )
        assert problems == []
    assert time.process_time() - began < 5.0


def test_wall_instants_map_a_wall_clock_time_as_ticks_are_mapped() -> None:
    """What `flows backfill --from/--to` read a time without an offset as: where a tick at
    that wall-clock time fires (in a gap: 03:00 CEST, not Python's 03:30 or 01:30 CET)."""
    berlin = ZoneInfo("Europe/Berlin")
    gap = datetime(2026, 3, 29, 2, 30)
    spring = datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp()
    assert cron.wall_instants(gap, berlin) == (spring, spring)
    assert cron.next_fire(cron.Schedule("30 2 * * *", "Europe/Berlin"), spring - 1) == spring
    repeated = datetime(2026, 10, 25, 2, 30)
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC).timestamp()
    assert cron.wall_instants(repeated, berlin) == (first, first + 3600)
    plain = datetime(2026, 6, 1, 12, 0)
    noon = datetime(2026, 6, 1, 10, 0, tzinfo=UTC).timestamp()
    assert cron.wall_instants(plain, berlin) == (noon, noon)
