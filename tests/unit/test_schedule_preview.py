"""Schedule previews: the next fire times in the zone and in UTC with DST notes, and what
catch-up fires after an outage, as the service's own arithmetic decides
(`flows validate --preview N`, `--after-outage FROM/TO`)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flows.cli import main
from scheduler.cron.catchup import OverlapPolicy
from scheduler.cron.expression import Schedule
from scheduler.cron.preview import (
    OutagePreview,
    after_outage,
    meet_overlap,
    parse_period,
    preview,
    upcoming,
)


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _spans(plan: OutagePreview) -> list[tuple[str, str, int | None, str]]:
    return [(s.first.local, s.last.local, s.count, s.reason) for s in plan.skips]


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
    assert _spans(latest) == [
        ("2026-03-03 03:15:00 CET", "2026-03-04 03:15:00 CET", 2, "outside catch-up window 12h"),
    ]
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
    for the ticks outside the window and one for those a newer run superseded (down from
    00:00 sharp, the service missed the tick at 00:00 too)."""
    schedule = Schedule("* * * * *", "UTC")
    plan = after_outage(
        schedule, "latest", 300, None, _at("2026-11-01T00:00:00"), _at("2026-11-03T00:00:00")
    )
    assert plan.missed == 2881
    assert [(t.utc, trigger) for t, trigger in plan.fires] == [
        ("2026-11-03 00:00:00 UTC", "schedule")
    ]
    assert _spans(plan) == [
        (
            "2026-11-01 00:00:00 UTC",
            "2026-11-02 23:54:00 UTC",
            2875,
            "outside catch-up window 5m",
        ),
        (
            "2026-11-02 23:55:00 UTC",
            "2026-11-02 23:59:00 UTC",
            5,
            "catch-up policy latest (superseded by a newer run)",
        ),
    ]


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
    # Two catch-up fires in one tick meet the default overlap policy, skip: the second is
    # listed as the skip it will be, and a note says why.
    assert "fires 2030-04-01" not in out
    assert "skips 2030-04-01 02:30:00 CEST  (1: overlap skip: previous run still active)" in out
    assert "(overlap skip: the catch-up runs go in one tick, so each after the first" in out


def test_a_bad_outage_is_refused_plainly(tmp_path: Path) -> None:
    flow = Path(__file__).resolve().parents[2] / "examples" / "nightly.yaml"
    result = CliRunner().invoke(main, ["validate", str(flow), "--after-outage", "yesterday"])
    assert result.exit_code == 2
    assert "expected FROM/TO" in result.output
    assert "Traceback" not in result.output


def test_a_preview_holds_to_the_bounds_and_says_where_the_schedule_ends() -> None:
    # A tick on each bound: both fire (the bounds are inclusive), none outside them.
    schedule = Schedule(
        "0 6 * * 1", "Asia/Tokyo", _at("2030-01-06T21:00:00"), _at("2030-01-13T21:00:00")
    )
    shown = upcoming(schedule, _at("2029-12-01T00:00:00"), 5)
    assert [t.utc for t in shown.times] == ["2030-01-06 21:00:00 UTC", "2030-01-13 21:00:00 UTC"]
    assert shown.cut_short and shown.end is not None
    assert shown.end.local == "2030-01-14 06:00:00 JST"
    assert shown.to_json()["times"] == [
        {
            "local": "2030-01-07 06:00:00 JST",
            "utc": "2030-01-06T21:00:00Z",
            "epoch": _at("2030-01-06T21:00:00"),
            "note": "",
        },
        {
            "local": "2030-01-14 06:00:00 JST",
            "utc": "2030-01-13T21:00:00Z",
            "epoch": _at("2030-01-13T21:00:00"),
            "note": "",
        },
    ]
    assert upcoming(schedule, _at("2030-01-13T21:00:00"), 1).times == ()


HELD = (
    "version: 1\nname: held\nschedule:\n"
    '  cron: "0 6 * * 1"\n  timezone: Asia/Tokyo\n'
    '  start: "2030-01-01"\n  end: "2030-01-20T06:00:00"\n  paused: true\n'
    "steps:\n  a: {run: echo}\n"
)
PERIOD = "2030-01-05T00:00:00Z/2030-01-16T00:00:00Z"


def test_flows_validate_previews_a_paused_schedule_up_to_its_end(tmp_path: Path) -> None:
    (tmp_path / "held.yaml").write_text(HELD)
    (tmp_path / "plain.yaml").write_text("version: 1\nname: plain\nsteps:\n  a: {run: echo}\n")
    result = CliRunner().invoke(
        main,
        [
            "validate",
            str(tmp_path / "held.yaml"),
            str(tmp_path / "plain.yaml"),
            "--preview",
            "5",
            "--after-outage",
            PERIOD,
        ],
    )
    assert result.exit_code == 0, result.output
    paused = "paused: nothing fires until its file drops schedule.paused: true"
    assert result.output.splitlines() == [
        "no problems in 2 files",
        "held: 0 6 * * 1 (Asia/Tokyo): only 2 fire times left (5 asked): "
        "the schedule ends at 2030-01-20 06:00:00 JST",
        f"  ({paused}; these are the times it would fire)",
        "  1  2030-01-07 06:00:00 JST      2030-01-06 21:00:00 UTC",
        "  2  2030-01-14 06:00:00 JST      2030-01-13 21:00:00 UTC",
        "held: 0 6 * * 1 (Asia/Tokyo): down from 2030-01-05T00:00:00Z to 2030-01-16T00:00:00Z, "
        "2 ticks missed (catch-up policy latest, window 1d)",
        f"  ({paused}; on return it skips the ticks it missed)",
        "  fires nothing on return",
        "  skips 2030-01-07 06:00:00 JST .. 2030-01-14 06:00:00 JST  (2: paused)",
        f"{tmp_path / 'plain.yaml'}: no schedule to preview",
    ]


def test_flows_validate_json_carries_the_previews(tmp_path: Path) -> None:
    flow = tmp_path / "held.yaml"
    flow.write_text(HELD)
    plain = CliRunner().invoke(main, ["validate", str(flow), "--format", "json"])
    result = CliRunner().invoke(
        main,
        ["validate", str(flow), "--format", "json", "--preview", "1", "--after-outage", PERIOD],
    )
    assert plain.exit_code == result.exit_code == 0, result.output
    report = json.loads(result.output)
    previews = report.pop("previews")
    assert report == json.loads(plain.output)  # the other keys are unchanged
    first = {
        "local": "2030-01-07 06:00:00 JST",
        "utc": "2030-01-06T21:00:00Z",
        "epoch": _at("2030-01-06T21:00:00"),
        "note": "",
    }
    end = {
        "local": "2030-01-20 06:00:00 JST",
        "utc": "2030-01-19T21:00:00Z",
        "epoch": _at("2030-01-19T21:00:00"),
        "note": "",
    }
    paused = "paused: nothing fires until its file drops schedule.paused: true"
    assert previews == [
        {
            "flow": "held",
            "file": str(flow),
            "preview": {
                "asked": 1,
                "times": [first],
                "end": end,
                "notes": [f"{paused}; these are the times it would fire"],
            },
            "after_outage": {
                "down": "2030-01-05T00:00:00Z",
                "back": "2030-01-16T00:00:00Z",
                "missed": 2,
                "fires": [],
                "skips": [
                    {
                        "first": first,
                        "last": {
                            "local": "2030-01-14 06:00:00 JST",
                            "utc": "2030-01-13T21:00:00Z",
                            "epoch": _at("2030-01-13T21:00:00"),
                            "note": "",
                        },
                        "count": 2,
                        "reason": "paused",
                    }
                ],
                "end": end,
                "notes": [f"{paused}; on return it skips the ticks it missed"],
            },
        }
    ]


@pytest.mark.parametrize(
    ("overlap", "fired", "skipped"),
    [
        (
            "skip",
            [("03", "catch-up")],
            [("04", "07", 4, "overlap skip: previous run still active")],
        ),
        (
            "buffer_one",
            [("03", "catch-up"), ("04", "buffered")],
            [("05", "07", 3, "overlap buffer_one: a run is already buffered")],
        ),
        ("allow", [(h, "catch-up") for h in ("03", "04", "05", "06", "07")], []),
        ("cancel_running", [(h, "catch-up") for h in ("03", "04", "05", "06", "07")], []),
    ],
)
def test_an_outage_plan_meets_the_overlap_policy_as_the_service_does(
    overlap: OverlapPolicy, fired: list[tuple[str, str]], skipped: list[tuple[Any, ...]]
) -> None:
    """The catch-up fires of one return go in one tick: each meets the one before it active
    (the flow tests run the service over the same outage: tests/integration)."""
    schedule = Schedule("0 * * * *")
    down, back = (datetime(2026, 3, 1, h, 30, tzinfo=UTC).timestamp() for h in (2, 7))
    plan = meet_overlap(after_outage(schedule, "all", None, None, down, back), overlap)
    hour = "%H"
    assert [(time.strftime(hour, time.gmtime(t.instant)), why) for t, why in plan.fires] == fired
    assert [
        (time.strftime(hour, time.gmtime(s.first.instant)),
         time.strftime(hour, time.gmtime(s.last.instant)), s.count, s.reason)
        for s in plan.skips
    ] == skipped  # fmt: skip
    assert plan.missed == 5


def test_a_second_catch_up_fire_buffered_with_none_skipped_is_marked_buffered() -> None:
    """Two catch-up fires under buffer_one: the second waits for the first (trigger
    ``buffered``) even though the policy skips none of them."""
    schedule = Schedule("0 * * * *")
    down, back = (datetime(2026, 3, 1, h, 30, tzinfo=UTC).timestamp() for h in (2, 4))
    plan = meet_overlap(after_outage(schedule, "all", None, None, down, back), "buffer_one")
    hour = "%H"
    assert [(time.strftime(hour, time.gmtime(t.instant)), why) for t, why in plan.fires] == [
        ("03", "catch-up"),
        ("04", "buffered"),
    ]
    assert plan.skips == ()


def test_a_preview_reaching_the_year_9999_ends_there(tmp_path: Path) -> None:
    """A yearly schedule previewed 10,000 times runs out of calendar: the fire times up to
    9999 and why there are no more, no error; an outage ending in 9999 is refused, its walks
    would leave the calendar."""
    flow = tmp_path / "yearly.yaml"
    flow.write_text(
        'version: 1\nname: yearly\nschedule:\n  cron: "0 0 1 1 *"\nsteps:\n  a: {run: echo}\n'
    )
    result = CliRunner().invoke(main, ["validate", str(flow), "--preview", "10000"])
    assert result.exit_code == 0, result.output
    assert "fire times left (10000 asked): fire times end with the year 9999" in result.output
    assert result.output.rstrip().endswith("9999-01-01 00:00:00 UTC      9999-01-01 00:00:00 UTC")
    times = upcoming(Schedule("0 0 1 1 *", "Pacific/Kiritimati"), 0, 10_000)
    assert times.cut_short and times.times[-1].local.startswith("9999-01-01 00:00:00")
    outage = "9999-12-30T00:00:00Z/9999-12-31T23:59:59Z"
    late = CliRunner().invoke(main, ["validate", str(flow), "--after-outage", outage])
    assert late.exit_code == 2
    assert "TO must be before 9999-01-01" in late.output
    assert "unexpected error" not in late.output
