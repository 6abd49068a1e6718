"""Durations in flow files: ``30s``, ``5m``, ``1h30m``, ``2d``, ``250ms``, or a number of seconds.

This module is the one place that knows the syntax; the model, the JSON Schema and the command
line all use :func:`parse_duration` and :data:`DURATION_PATTERN`.
"""

from __future__ import annotations

import math
import re

UNIT_SECONDS: dict[str, float] = {
    "w": 604800.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 0.001,
}

_NUMBER = r"\d+(?:\.\d+)?"
# Units from largest to smallest, each at most once; `m(?!s)` keeps `5ms` from reading as `5m` + s.
# Plain groups only (no named groups), so the same text works as an ECMA regex in JSON Schema.
DURATION_PATTERN = (
    rf"^(?:{_NUMBER}"
    rf"|(?=\d)(?:{_NUMBER}w)?(?:{_NUMBER}d)?(?:{_NUMBER}h)?(?:{_NUMBER}m(?!s))?"
    rf"(?:{_NUMBER}s)?(?:{_NUMBER}ms)?)$"
)
_DURATION = re.compile(DURATION_PATTERN)
_PART = re.compile(rf"({_NUMBER})(ms|w|d|h|m|s)")

# Spelled-out units people type, for the suggestion in the error message (`5 min` → `5m`).
_UNIT_WORDS: dict[str, str] = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), "ms"),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "s"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "w"),
}
_WORDY_PART = re.compile(rf"\s*({_NUMBER})\s*([a-z]+)\s*(?:,|and)?")

DURATION_EXAMPLES = "30s, 5m, 1h30m, 2d, 250ms or a number of seconds"
MAX_DURATION_DAYS = 36_500
"""The longest duration, a century: every moment a flow's durations set (a ttl's deadline, a
delay's start) then stays a date the calendar holds."""
MAX_DURATION = MAX_DURATION_DAYS * UNIT_SECONDS["d"]


class DurationError(ValueError):
    """A duration that cannot be read. ``suggestion`` is a corrected spelling when one is clear;
    ``hint`` what to do when it is not a matter of spelling."""

    def __init__(self, message: str, suggestion: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.suggestion = suggestion
        self.hint = hint


def parse_duration(value: object) -> float:
    """Seconds in ``value``: a non-negative number, or text such as ``1h30m`` (see module doc)."""
    if isinstance(value, bool):
        raise DurationError(f"expected a duration ({DURATION_EXAMPLES}), got a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise DurationError(f"a duration must be a finite number >= 0, got {value}")
        return _bounded(float(value), value)
    if not isinstance(value, str):
        raise DurationError(f"expected a duration ({DURATION_EXAMPLES})")
    text = value.strip()
    if not text or not _DURATION.match(text):
        suggestion = _suggest(text)
        raise DurationError(
            f"invalid duration {value!r}: use {DURATION_EXAMPLES} (no spaces)", suggestion
        )
    if re.fullmatch(_NUMBER, text):
        return _bounded(float(text), value)
    parts = _PART.findall(text)
    return _bounded(sum(float(number) * UNIT_SECONDS[unit] for number, unit in parts), value)


def _bounded(seconds: float, value: object) -> float:
    if seconds > MAX_DURATION:
        raise DurationError(
            f"{value!r} is longer than {MAX_DURATION_DAYS}d (100 years), the longest duration",
            hint=f"use at most {MAX_DURATION_DAYS}d",
        )
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest canonical spelling of ``seconds``, e.g. ``5400`` → ``1h30m``; ``0`` → ``0s``."""
    if seconds < 0 or not math.isfinite(seconds):
        raise DurationError(f"cannot format {seconds} as a duration")
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    parts: list[str] = []
    for unit in ("w", "d", "h", "m", "s", "ms"):
        size = round(UNIT_SECONDS[unit] * 1000)
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _suggest(text: str) -> str | None:
    """``5 min`` → ``5m``, ``1 hour 30 minutes`` → ``1h30m``; None when nothing sensible fits."""
    lowered = text.lower()
    if re.fullmatch(rf"(?:{_NUMBER}(?:ms|w|d|h|m|s))+", lowered):  # units out of order: 30m1h
        return format_duration(sum(float(n) * UNIT_SECONDS[u] for n, u in _PART.findall(lowered)))
    parts: list[str] = []
    position = 0
    while position < len(lowered):
        match = _WORDY_PART.match(lowered, position)
        if match is None or match.group(2) not in _UNIT_WORDS:
            return None
        parts.append(match.group(1) + _UNIT_WORDS[match.group(2)])
        position = match.end()
    suggestion = "".join(parts)
    return suggestion if parts and _DURATION.match(suggestion) else None


def spelled(seconds: float | str | None) -> str:
    """A duration kept in seconds (a `deadline:`, as a record's number or text) as a flow file
    spells it, for people: what every surface shows; '?' for a value that is not one."""
    try:
        return format_duration(float(seconds if seconds is not None else "nan"))
    except ValueError:
        return "?"
