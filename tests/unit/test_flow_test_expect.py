"""A case's expectation against what it observed: what matches, and what the diff shows."""

from __future__ import annotations

from datetime import UTC, datetime

from flows.flowfile.cases import Case, Expect, StepExpect
from flows.testing.driver import Observed
from flows.testing.expect import diff


def case(expect: Expect) -> Case:
    return Case("c", 1, {}, datetime(2026, 1, 1, tzinfo=UTC), {}, False, None, {}, expect)


def test_a_number_and_its_text_match_either_way_and_show_no_difference() -> None:
    expected = Expect(
        status="succeeded",
        steps={"count": StepExpect(outputs={"total": 40, "rows": "3"}, has_outputs=True)},
    )
    observed = Observed(
        "r", "failed", {"count": {"outputs": {"total": "40", "rows": 3}}}, [], outputs={}
    )
    lines = diff(case(expected), observed)
    assert lines[0] == 'expect.status: expected "succeeded", got "failed"'
    assert len([line for line in lines if line.startswith("expect.")]) == 1
    changed = [line for line in lines if line.startswith(("- ", "+ ")) and '"' in line[2:]]
    assert changed == ['-   "status": "succeeded",', '+   "status": "failed",']


def test_the_runs_outputs_are_compared_by_the_keys_named() -> None:
    expected = Expect(outputs={"total": "40"})
    assert diff(case(expected), Observed("r", outputs={"total": "40", "day": "x"})) == []
    lines = diff(case(expected), Observed("r", outputs=None))
    assert lines[0] == 'expect.outputs: expected {"total": "40"}, got null'


def test_a_schedule_case_with_other_runs_lists_the_ticks_it_fired() -> None:
    """A count alone does not say which tick an overlap or catch-up rule fired or skipped."""
    start = datetime(2026, 5, 1, tzinfo=UTC).timestamp()
    ticks = [start + 90 * i for i in range(3)]
    lines = diff(case(Expect(runs=5)), Observed(runs=3, ticks=ticks))
    assert lines[:2] == [
        "expect.runs: expected 5, got 3",
        "  ticks fired (UTC): 2026-05-01T00:00:00Z, 2026-05-01T00:01:30Z, 2026-05-01T00:03:00Z",
    ]
    many = [start + 60 * i for i in range(20)]
    [_, listed] = diff(case(Expect(runs=5)), Observed(runs=20, ticks=many))[:2]
    assert "2026-05-01T00:05:00Z, ... 8 more ..., 2026-05-01T00:14:00Z" in listed
    assert diff(case(Expect(runs=0)), Observed(runs=2, ticks=many[:2]))[1].endswith("00:01:00Z")
    assert diff(case(Expect(runs=1)), Observed(runs=0))[1] == "  no tick fired"
