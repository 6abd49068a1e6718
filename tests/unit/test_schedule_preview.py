"""Schedule previews: the next fire times in the zone and in UTC with DST notes, and what
catch-up fires after an outage, as the service's own arithmetic decides
(`flows validate --preview N`, `--after-outage FROM/TO`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from flows.cli import main
from scheduler.cron.expression import Schedule
from scheduler.cron.preview import after_outage, parse_period, preview


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_spring_forward_gap_is_marked() -> None:
    schedule = Schedule("30 2 * * *", "Europe/Berlin")
    times = preview(schedule, _at("2026-03-27T12:00:00"), 3)
    assert [t.local for t in times] == [
        "2026-03-28 02:30:00 CET",
        "2026-03-29 03:00:00 CEST",
        "2026-03-30 02:30:00 CEST",
    ]
    assert [t.utc for t in times] == [
        "2026-03-28 01:30:00 UTC",
        "2026-03-29 01:00:00 UTC",
        "2026-03-30 00:30:00 UTC",
    ]
    assert [t.note for t in times] == [
        "",
        "DST gap: 02:30 does not exist that night; fires here instead",
        "",
    ]


def test_a_repeated_hour_is_marked_both_times_for_an_every_hour_expression() -> None:
    schedule = Schedule("30 * * * *", "Europe/Berlin")
    times = preview(schedule, _at("2026-10-24T23:00:00"), 4)  # 01:00 CEST on the night
    assert [(t.local, t.note) for t in times] == [
        ("2026-10-25 01:30:00 CEST", ""),
        (
            "2026-10-25 02:30:00 CEST",
            "DST repeat: 02:30 occurs twice; this is the first occurrence",
        ),
        (
            "2026-10-25 02:30:00 CET",
            "DST repeat: 02:30 again, second occurrence (every-hour expression)",
        ),
        ("2026-10-25 03:30:00 CET", ""),
    ]


def test_a_daily_time_in_the_repeated_hour_fires_once() -> None:
    schedule = Schedule("30 2 * * *", "Europe/Berlin")
    times = preview(schedule, _at("2026-10-24T12:00:00"), 2)
    assert [t.utc for t in times] == ["2026-10-25 00:30:00 UTC", "2026-10-26 01:30:00 UTC"]
    assert times[0].note == "DST repeat: 02:30 occurs twice; fires once, at this first occurrence"


def test_after_an_outage_each_policy_says_what_fires() -> None:
    schedule = Schedule("15 3 * * *", "Europe/Berlin")
    down, back = parse_period("2026-03-02T12:00:00Z/2026-03-05T12:00:00Z")
    latest = after_outage(schedule, "latest", 12 * 3600, None, down, back)
    assert latest.missed == 3
    assert [(t.utc, trigger) for t, trigger in latest.fires] == [
        ("2026-03-05 02:15:00 UTC", "catch-up")
    ]
    assert latest.skips == (
        ("2026-03-03 03:15:00 CET", "2026-03-04 03:15:00 CET", 2, "outside catch-up window 12h"),
    )
    every = after_outage(schedule, "all", None, None, down, back)
    assert [t.utc for t, _ in every.fires] == [
        "2026-03-03 02:15:00 UTC",
        "2026-03-04 02:15:00 UTC",
        "2026-03-05 02:15:00 UTC",
    ]
    none = after_outage(schedule, "none", None, None, down, back)
    assert none.fires == () and none.missed == 3


def test_skipped_ticks_of_one_reason_are_one_span() -> None:
    """However many the plan records one by one: two days of a minutely schedule is one line
    for the ticks outside the window and one for those a newer run superseded."""
    schedule = Schedule("* * * * *", "UTC")
    plan = after_outage(
        schedule, "latest", 300, None, _at("2026-11-01T00:00:00"), _at("2026-11-03T00:00:00")
    )
    assert plan.missed == 2880
    assert [(t.utc, trigger) for t, trigger in plan.fires] == [
        ("2026-11-03 00:00:00 UTC", "schedule")
    ]
    assert plan.skips == (
        (
            "2026-11-01 00:01:00 UTC",
            "2026-11-02 23:54:00 UTC",
            2874,
            "outside catch-up window 5m",
        ),
        (
            "2026-11-02 23:55:00 UTC",
            "2026-11-02 23:59:00 UTC",
            5,
            "catch-up policy latest (superseded by a newer run)",
        ),
    )


def test_flows_validate_preview_and_after_outage(tmp_path: Path) -> None:
    flow = tmp_path / "night.yaml"
    flow.write_text(
        "version: 1\nname: night\nschedule:\n"
        '  cron: "30 2 * * *"\n  timezone: Europe/Berlin\n'
        '  start: "2030-03-29T00:00:00+01:00"\n'
        "  catchup: {policy: all, window: 2d}\n"
        "steps:\n  a: {run: echo}\n"
    )
    result = CliRunner().invoke(
        main,
        [
            "validate",
            str(flow),
            "--preview",
            "3",
            "--after-outage",
            "2030-03-29T12:00:00Z/2030-04-01T12:00:00Z",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "night: 30 2 * * * (Europe/Berlin): next 3 fire times" in out
    assert "  1  2030-03-29 02:30:00 CET      2030-03-29 01:30:00 UTC" in out
    assert "  2  2030-03-30 02:30:00 CET      2030-03-30 01:30:00 UTC" in out
    assert (
        "  3  2030-03-31 03:00:00 CEST     2030-03-31 01:00:00 UTC  "
        "(DST gap: 02:30 does not exist that night; fires here instead)"
    ) in out
    assert (
        "down from 2030-03-29T12:00:00Z to 2030-04-01T12:00:00Z, 3 ticks missed "
        "(catch-up policy all, window 2d)" in out
    )
    assert "fires 2030-03-31 03:00:00 CEST     2030-03-31 01:00:00 UTC  [catch-up]" in out
    assert "skips 2030-03-30 02:30:00 CET  (1: outside catch-up window 2d)" in out
    # Two fires in one tick meet the default overlap policy, skip: the note says so.
    assert "(overlap skip: these fire in one tick, so each one after the first" in out


def test_a_bad_outage_is_refused_plainly(tmp_path: Path) -> None:
    flow = Path(__file__).resolve().parents[2] / "examples" / "nightly.yaml"
    result = CliRunner().invoke(main, ["validate", str(flow), "--after-outage", "yesterday"])
    assert result.exit_code == 2
    assert "expected FROM/TO" in result.output
    assert "Traceback" not in result.output
