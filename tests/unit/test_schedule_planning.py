"""scheduler.service.planning.decide and start_delay: what one engine call does for a due
schedule."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from flows.expand.run_ids import run_id_for
from scheduler.cron import Skip, jitter_for, missed_ticks, next_fire
from scheduler.service.planning import Decision, _two_from, decide, fire_after, start_delay
from scheduler.service.records import Definition, DueEntry

T = datetime(2026, 1, 5, 12, 0, tzinfo=UTC).timestamp()  # a tick of */5
MIN = 60.0

BASE = Definition(
    name="f",
    file="/flows/f.yaml",
    hash="h",
    source="",
    cron=("*/5 * * * *",),
    catchup="latest",
    window=3600.0,
    overlap="skip",
)


def entry(score: float = T, **changes: object) -> DueEntry:
    base = DueEntry("f", score, "h", False, None, False, None)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_run_id_is_the_flow_and_the_utc_fire_time() -> None:
    assert run_id_for("nightly", T) == "nightly@20260105T120000Z"


def test_an_on_time_tick_fires() -> None:
    assert decide(BASE, entry(), T + 2) == Decision("fire", T + 5 * MIN, (), T, "schedule")


def test_a_tick_past_the_grace_period_is_a_catch_up() -> None:
    decision = decide(BASE, entry(), T + 61)
    assert (decision.action, decision.tick, decision.trigger) == ("fire", T, "catch-up")


def test_latest_fires_the_newest_missed_tick_and_skips_the_rest_in_one_call() -> None:
    decision = decide(BASE, entry(), T + 12 * MIN)  # ticks T, +5, +10 missed
    assert (decision.action, decision.tick, decision.trigger) == ("fire", T + 10 * MIN, "catch-up")
    assert decision.skips == (
        Skip(T, T, 1, "catch-up policy latest (superseded by a newer run)"),
        Skip(T + 5 * MIN, T + 5 * MIN, 1, "catch-up policy latest (superseded by a newer run)"),
    )
    assert decision.next == T + 15 * MIN


def test_none_skips_missed_ticks_but_fires_the_on_time_one() -> None:
    definition = replace(BASE, catchup="none")
    decision = decide(definition, entry(), T + 10 * MIN + 5)
    assert (decision.action, decision.tick, decision.trigger) == ("fire", T + 10 * MIN, "schedule")
    assert [s.reason for s in decision.skips] == ["catch-up policy none"] * 2
    late = decide(definition, entry(), T + 12 * MIN)
    assert late.action == "skip" and late.next == T + 15 * MIN and len(late.skips) == 3


def test_all_fires_oldest_kept_tick_first_and_plans_again_from_the_next() -> None:
    definition = replace(BASE, catchup="all", max_runs=2)
    now = T + 22 * MIN  # ticks T .. T+20 (5 of them) missed
    first = decide(definition, entry(), now)
    assert (first.tick, first.next) == (T + 15 * MIN, T + 20 * MIN)
    assert [s.first for s in first.skips] == [T, T + 5 * MIN, T + 10 * MIN]
    assert {s.reason for s in first.skips} == {"max_runs 2 reached"}
    second = decide(definition, entry(first.next or 0), now)
    assert (second.tick, second.skips, second.next) == (T + 20 * MIN, (), T + 25 * MIN)


def test_ticks_outside_the_window_are_skipped_with_that_reason() -> None:
    definition = replace(BASE, catchup="all", window=10 * MIN)
    decision = decide(definition, entry(), T + 22 * MIN)
    assert decision.tick == T + 15 * MIN
    assert [s.reason for s in decision.skips] == ["outside catch-up window 10m"] * 3


def test_a_paused_schedule_skips_every_due_tick_at_once() -> None:
    decision = decide(BASE, entry(paused=True), T + 12 * MIN)
    assert decision == Decision("skip", T + 15 * MIN, (Skip(T, T + 10 * MIN, 3, "paused"),))


@pytest.mark.parametrize(
    ("overlap", "buffered", "action", "reason"),
    [
        ("skip", None, "skip", "overlap skip: previous run still active"),
        ("buffer_one", None, "buffer", "overlap buffer_one: waits for the previous run to end"),
        ("buffer_one", T - 300, "skip", "overlap buffer_one: a run is already buffered"),
        ("cancel_running", None, "fire", "overlap cancel_running: previous run cancelled"),
        ("allow", None, "fire", None),
    ],
)
def test_overlap_with_an_active_last_run(
    overlap: str, buffered: float | None, action: str, reason: str | None
) -> None:
    definition = replace(BASE, overlap=overlap)  # type: ignore[arg-type]
    due = entry(last_run="f@prev", active=True, buffered=buffered)
    decision = decide(definition, due, T + 1)
    assert (decision.action, decision.note) == (action, reason)
    assert decision.next == T + 5 * MIN
    if action == "skip":
        assert decision.skips == (Skip(T, T, 1, reason or ""),)
    assert decision.cancel == ("f@prev" if overlap == "cancel_running" else None)


def test_every_policy_fires_when_the_last_run_is_done() -> None:
    for overlap in ("skip", "buffer_one", "cancel_running", "allow"):
        definition = replace(BASE, overlap=overlap)  # type: ignore[arg-type]
        decision = decide(definition, entry(last_run="f@prev", active=False), T + 1)
        assert (decision.action, decision.cancel) == ("fire", None)


def test_the_last_tick_before_the_end_leaves_no_next() -> None:
    definition = replace(BASE, end=T + 60)
    assert decide(definition, entry(), T + 1).next is None


def test_a_score_that_is_no_tick_moves_on_without_firing() -> None:
    # Registered before a change of cron: the old score is not a tick of the new expression.
    decision = decide(BASE, entry(T + 60), T + 90)
    assert decision == Decision("skip", T + 5 * MIN, ())


def test_start_delay_is_the_jitter_less_the_lateness() -> None:
    definition = replace(BASE, jitter=30.0)
    jitter = jitter_for("f", T, 30.0)
    assert 0 <= jitter < 30
    assert start_delay(definition, T, T) == pytest.approx(jitter)
    assert start_delay(definition, T, T + 100) == 0.0
    assert start_delay(BASE, T, T) == 0.0


@pytest.mark.parametrize(
    ("cron", "zone", "end"),
    [
        ("* * * * *", "Europe/Berlin", None),  # across the spring-forward night
        ("30 2 * * *", "Europe/Berlin", None),  # a wall time in the gap, and repeated
        ("*/7 * * * *", "America/New_York", None),
        ("0 * * * *", "UTC", datetime(2026, 3, 29, 5, tzinfo=UTC).timestamp()),  # an end
    ],
)
def test_on_time_planning_answers_from_its_block_as_the_cron_walk_does(
    cron: str, zone: str, end: float | None
) -> None:
    """The on-time path reads a block of upcoming fire times; every answer is the one a fresh
    walk gives, inside a block, at its edges and past it, going forward or back."""
    definition = replace(BASE, cron=(cron,), timezone=zone, end=end)
    schedule = definition.schedule
    start = datetime(2026, 3, 28, 20, tzinfo=UTC).timestamp()
    ticks = missed_ticks(schedule, start, start + 40 * 86400, limit=600)
    for tick in [*ticks, *reversed(ticks[:200]), ticks[len(ticks) // 2] + 0.5]:
        expected = missed_ticks(schedule, math.ceil(tick) - 1.0, math.inf, limit=2)
        assert _two_from(schedule, tick) == tuple(expected)


@pytest.mark.parametrize(
    ("cron", "zone"),
    [("* * * * *", "Europe/Berlin"), ("30 2 * * *", "Europe/Berlin"), ("0 * * * *", "UTC")],
)
def test_fire_after_is_the_next_fire_time_strictly_after(cron: str, zone: str) -> None:
    schedule = replace(BASE, cron=(cron,), timezone=zone).schedule
    start = datetime(2026, 3, 28, 20, tzinfo=UTC).timestamp()
    ticks = missed_ticks(schedule, start, start + 10 * 86400, limit=600)
    for moment in [*ticks, *(t - 0.5 for t in ticks[:50]), *(t + 0.25 for t in ticks[:50])]:
        assert fire_after(schedule, moment) == next_fire(schedule, moment)
