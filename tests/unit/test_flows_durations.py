"""Durations: one parser for every duration in a flow file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flows.flowfile.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("2d", 172800),
        ("1w", 604800),
        ("250ms", 0.25),
        ("1.5h", 5400),
        ("90", 90),
        (45, 45),
        (0.5, 0.5),
    ],
)
def test_parse(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("5 min", "5m"),
        ("1 hour 30 minutes", "1h30m"),
        ("1h 30m", "1h30m"),
        ("30m1h", "1h30m"),
        ("ten minutes", None),
        ("", None),
        ("-5s", None),
    ],
)
def test_bad_durations_say_how_to_write_them(text: str, suggestion: str | None) -> None:
    with pytest.raises(DurationError, match="use 30s, 5m, 1h30m, 2d") as error:
        parse_duration(text)
    assert error.value.suggestion == suggestion


@pytest.mark.parametrize("value", [True, -1, float("inf"), float("nan"), None, [1]])
def test_non_durations(value: object) -> None:
    with pytest.raises(DurationError):
        parse_duration(value)


@pytest.mark.parametrize("value", ["36501d", "99999999999999999999w", 4e9, 10**30])
def test_a_duration_past_a_century_is_refused(value: object) -> None:
    # ttl: 99999999999999999999w made a job whose deadline no date holds: `flows job` of it
    # ended in an OverflowError.
    with pytest.raises(DurationError, match=r"longer than 36500d \(100 years\)") as error:
        parse_duration(value)
    assert error.value.hint == "use at most 36500d"
    assert parse_duration("36500d") == 36500 * 86400


@given(st.integers(min_value=0, max_value=10**12))
def test_format_then_parse_round_trips(millis: int) -> None:
    seconds = millis / 1000
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-9)


def test_format_is_canonical() -> None:
    assert [format_duration(s) for s in (0, 90, 5400, 86400 + 1.5)] == [
        "0s",
        "1m30s",
        "1h30m",
        "1d1s500ms",
    ]
