"""Comparing what a case observed with its ``expect:``, and the diff a failure prints.

Only what the expectation names is compared (a step left out, or a field of it, may be anything).
A failure reads like pytest's: each mismatch on one line with its place, then the expected and
the observed values side by side as ``-``/``+`` lines.
"""

from __future__ import annotations

import difflib
import json
from datetime import UTC, datetime
from typing import Any

from flows.flowfile.cases import Case
from flows.testing.driver import Observed


def _subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` holds what ``expected`` says (mappings: the keys named; lists and
    scalars: equal, a number equal to a number of the same value)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    number_and_text = (_number(expected) and isinstance(actual, str)) or (
        _number(actual) and isinstance(expected, str)
    )
    if number_and_text:
        try:  # a shell step's outputs are text: 40 and "40" are the same output, either way
            return float(actual) == float(expected)
        except ValueError:
            return False
    return bool(expected == actual)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _aligned(expected: Any, actual: Any) -> Any:
    """``actual`` with each value that matches ``expected`` written as expected: the diff then
    shows only what differs (40 against "40" is no difference)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {key: _aligned(expected.get(key), value) for key, value in actual.items()}
    return expected if _subset(expected, actual) else actual


def expected_view(case: Case) -> dict[str, Any]:
    """The case's expectation as the JSON shape :func:`observed_view` has."""
    expect = case.expect
    view: dict[str, Any] = {}
    if expect.status is not None:
        view["status"] = expect.status
    steps: dict[str, Any] = {}
    for step, spec in expect.steps.items():
        fields: dict[str, Any] = {}
        if spec.status is not None:
            fields["status"] = spec.status
        if spec.attempts is not None:
            fields["attempts"] = spec.attempts
        if spec.has_outputs:
            fields["outputs"] = spec.outputs
        steps[step] = fields
    if steps:
        view["steps"] = steps
    if expect.order is not None:
        view["order"] = list(expect.order)
    if expect.runs is not None:
        view["runs"] = expect.runs
    if expect.outputs is not None:
        view["outputs"] = dict(expect.outputs)
    return view


def observed_view(case: Case, observed: Observed) -> dict[str, Any]:
    """What happened, cut down to what the expectation names."""
    expected = expected_view(case)
    view: dict[str, Any] = {}
    if "status" in expected:
        view["status"] = observed.status
    if "steps" in expected:
        view["steps"] = {
            step: {
                key: _named(
                    value, (observed.steps.get(step) or {}).get(key, "(not a step of the run)")
                )
                for key, value in fields.items()
            }
            for step, fields in expected["steps"].items()
        }
    if "order" in expected:
        # The steps named, in the order they first started.
        named = set(expected["order"])
        seen: list[str] = []
        for step in observed.order:
            if step in named and step not in seen:
                seen.append(step)
        view["order"] = seen
    if "runs" in expected:
        view["runs"] = observed.runs
    if "outputs" in expected:
        got = observed.outputs
        view["outputs"] = None if got is None else {k: got.get(k) for k in expected["outputs"]}
    return view


def _named(expected: Any, actual: Any) -> Any:
    """``actual`` cut down to the keys ``expected`` names, in mappings at any depth (a foreach
    step's list of outputs too): the keys it leaves out are not compared, so not shown."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return {key: _named(value, actual[key]) for key, value in expected.items() if key in actual}
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [_named(e, a) for e, a in zip(expected, actual, strict=True)]
    return actual


def mismatches(expected: Any, actual: Any, path: str = "expect") -> list[str]:
    """One line per value that differs: ``expect.steps.load.attempts: expected 2, got 3``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines: list[str] = []
        for key, value in expected.items():
            lines.extend(mismatches(value, actual.get(key), f"{path}.{key}"))
        return lines
    if _subset(expected, actual):
        return []
    return [f"{path}: expected {_short(expected)}, got {_short(actual)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def diff(case: Case, observed: Observed) -> list[str]:
    """The failure's text (empty when the case passed)."""
    expected = expected_view(case)
    actual = observed_view(case, observed)
    problems = mismatches(expected, actual)
    if not problems:
        return []
    left = json.dumps(expected, indent=2, sort_keys=True, default=str).splitlines()
    shown = _aligned(expected, actual)
    right = json.dumps(shown, indent=2, sort_keys=True, default=str).splitlines()
    lines = [*problems]
    if "runs" in expected and actual.get("runs") != expected["runs"]:
        lines.append(fired_ticks(observed.ticks))
    lines.extend(["", "- expected", "+ observed"])
    lines.extend(line for line in difflib.ndiff(left, right) if not line.startswith("?"))
    return lines


#: Ticks a failing schedule case lists at each end of what it fired.
SHOWN_TICKS = 6


def fired_ticks(ticks: list[float]) -> str:
    """The ticks a schedule case fired, in UTC, the first and last few: a count alone does not
    say which tick an overlap, catch-up or DST rule fired or skipped."""
    if not ticks:
        return "  no tick fired"

    def utc(tick: float) -> str:
        return datetime.fromtimestamp(tick, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    if len(ticks) <= 2 * SHOWN_TICKS:
        shown = [utc(t) for t in ticks]
    else:
        left_out = len(ticks) - 2 * SHOWN_TICKS
        shown = [
            *(utc(t) for t in ticks[:SHOWN_TICKS]),
            f"... {left_out} more ...",
            *(utc(t) for t in ticks[-SHOWN_TICKS:]),
        ]
    return "  ticks fired (UTC): " + ", ".join(shown)
