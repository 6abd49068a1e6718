"""`flows schedules --preview N --after-outage FROM/TO`: what the registered schedules will do."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

from cli_support import flows
from helpers import register_legacy_cron

from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.service.loop import SchedulerService
from scheduler.service.schedules import Schedules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_registered_schedules_preview(url: str, tmp_path: Path) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    shutil.copy(EXAMPLES / "nightly.yaml", folder)
    shutil.copy(EXAMPLES / "nightly.test.yaml", folder)  # a test file is not a flow
    scanned = flows("scheduler", "--flows-dir", str(folder), "--once", "--redis", url)
    assert scanned.exit_code == 0, scanned.output
    result = flows(
        "schedules",
        "--preview",
        "2",
        "--after-outage",
        "2026-03-02T12:00:00Z/2026-03-05T12:00:00Z",
        "--redis",
        url,
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "nightly-report: 15 3 * * * (Europe/Berlin): next 2 fire times" in out
    assert out.count(" 03:15:00 CE") >= 2
    assert (
        "down from 2026-03-02T12:00:00Z to 2026-03-05T12:00:00Z, 3 ticks missed "
        "(catch-up policy latest, window 12h)"
    ) in out
    assert "fires 2026-03-05 03:15:00 CET      2026-03-05 02:15:00 UTC  [catch-up]" in out
    assert (
        "skips 2026-03-03 03:15:00 CET .. 2026-03-04 03:15:00 CET  (2: outside catch-up window 12h)"
    ) in out
    assert "nightly.test" not in out


# Bounds on two ticks: start on the first one (2030-10-25 18:00 CEST), end on the last one
# (2030-10-27 06:00 CET, just after the clocks went back). Both bounds are inclusive.
BOUNDED = """version: 1
name: bounded
queue: q
schedule:
  cron: "0 6,18 * * *"
  timezone: Europe/Berlin
  start: "2030-10-25T18:00:00"
  end: "2030-10-27T06:00:00"
  catchup: {policy: all, window: 1d}
  overlap: allow
steps:
  s: {run: echo}
"""
OUTAGE = "2030-10-25T00:00:00Z/2030-10-28T00:00:00Z"


def _registered(url: str, tmp_path: Path) -> Path:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "bounded.yaml").write_text(BOUNDED)
    scanned = flows("scheduler", "--flows-dir", str(folder), "--once", "--redis", url)
    assert scanned.exit_code == 0, scanned.output
    return folder


def _previews(*args: str) -> list[str]:
    """The lines after the `flows schedules` table."""
    result = flows("schedules", *args)
    assert result.exit_code == 0, result.output
    out = result.output
    return out[out.index("\nbounded: 0 6,18") + 1 :].splitlines()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_a_preview_lists_the_ticks_the_service_fires_between_start_and_end(
    url: str, client: Client, tmp_path: Path
) -> None:
    folder = _registered(url, tmp_path)
    assert _previews("--preview", "10", "--redis", url) == [
        "bounded: 0 6,18 * * * (Europe/Berlin): only 4 fire times left (10 asked): "
        "the schedule ends at 2030-10-27 06:00:00 CET",
        "  1  2030-10-25 18:00:00 CEST     2030-10-25 16:00:00 UTC",
        "  2  2030-10-26 06:00:00 CEST     2030-10-26 04:00:00 UTC",
        "  3  2030-10-26 18:00:00 CEST     2030-10-26 16:00:00 UTC",
        "  4  2030-10-27 06:00:00 CET      2030-10-27 05:00:00 UTC",
    ]
    # The service, ticking from before the start to past the end, fires exactly those.
    service = SchedulerService(client, FlowsSource(), folder, service_id="preview-test")
    fired = []
    for at in (
        "2030-10-25T17:59:59+02:00",
        "2030-10-25T18:00:00+02:00",
        "2030-10-26T06:00:00+02:00",
        "2030-10-26T18:00:00+02:00",
        "2030-10-27T06:00:00+01:00",
        "2030-10-27T18:00:00+01:00",
        "2030-11-01T00:00:00+01:00",
    ):
        fired += [f.run_id for f in service.tick(_epoch(at)).fired]
    assert fired == [
        "bounded@20301025T160000Z",
        "bounded@20301026T040000Z",
        "bounded@20301026T160000Z",
        "bounded@20301027T050000Z",
    ]


def test_after_an_outage_past_the_end_the_service_fires_the_plan(
    url: str, client: Client, tmp_path: Path
) -> None:
    folder = _registered(url, tmp_path)
    assert _previews("--after-outage", OUTAGE, "--redis", url) == [
        "bounded: 0 6,18 * * * (Europe/Berlin): down from 2030-10-25T00:00:00Z to "
        "2030-10-28T00:00:00Z, 4 ticks missed (catch-up policy all, window 1d)",
        "  fires 2030-10-27 06:00:00 CET      2030-10-27 05:00:00 UTC  [catch-up]",
        "  skips 2030-10-25 18:00:00 CEST .. 2030-10-26 18:00:00 CEST  "
        "(3: outside catch-up window 1d)",
        "  (the schedule ends at 2030-10-27 06:00:00 CET: nothing fires after that)",
    ]
    service = SchedulerService(client, FlowsSource(), folder, service_id="preview-test")
    report = service.tick(_epoch("2030-10-28T00:00:00+00:00"))
    assert [(f.run_id, f.trigger) for f in report.fired] == [
        ("bounded@20301027T050000Z", "catch-up")
    ]
    registration = Schedules(client).get("bounded", skips=10)
    assert registration is not None
    assert [(s.count, s.reason) for s in registration.skips] == [(3, "outside catch-up window 1d")]


def test_a_paused_schedule_says_so_and_what_resumes_it(
    url: str, client: Client, tmp_path: Path
) -> None:
    folder = _registered(url, tmp_path)
    paused = flows("schedule", "pause", "bounded", "--note", "db migration", "--redis", url)
    assert paused.exit_code == 0, paused.output
    note = "paused (db migration): nothing fires until `flows schedule resume bounded`"
    assert _previews("--preview", "2", "--after-outage", OUTAGE, "--redis", url) == [
        "bounded: 0 6,18 * * * (Europe/Berlin): next 2 fire times",
        f"  ({note}; these are the times it would fire)",
        "  1  2030-10-25 18:00:00 CEST     2030-10-25 16:00:00 UTC",
        "  2  2030-10-26 06:00:00 CEST     2030-10-26 04:00:00 UTC",
        "bounded: 0 6,18 * * * (Europe/Berlin): down from 2030-10-25T00:00:00Z to "
        "2030-10-28T00:00:00Z, 4 ticks missed (catch-up policy all, window 1d)",
        f"  ({note}; on return it skips the ticks it missed)",
        "  fires nothing on return",
        "  skips 2030-10-25 18:00:00 CEST .. 2030-10-27 06:00:00 CET  (4: paused)",
        "  (the schedule ends at 2030-10-27 06:00:00 CET: nothing fires after that)",
    ]
    # What the service does on that return: nothing fires, the four ticks are skipped.
    service = SchedulerService(client, FlowsSource(), folder, service_id="preview-test")
    assert service.tick(_epoch("2030-10-28T00:00:00+00:00")).fired == []
    registration = Schedules(client).get("bounded", skips=10)
    assert registration is not None
    assert [(s.count, s.reason) for s in registration.skips] == [(4, "paused")]


def test_a_pause_note_is_shown_as_text_not_obeyed(url: str, client: Client, tmp_path: Path) -> None:
    _registered(url, tmp_path)
    hostile = "A\x1b[2JB\x1b]0;pwned\x07C\rD"
    # `flows schedule pause` and the API refuse it now; a note stored before them is shown so
    Schedules(client).pause("bounded", hostile)
    shown = flows("schedules", "--preview", "1", "--redis", url).output
    assert "paused (A\\x1b[2JB\\x1b]0;pwned\\x07C\\x0dD)" in shown
    assert "\x1b" not in shown and "\r" not in shown


def _time(local: str, utc: str, note: str = "") -> dict[str, object]:
    return {"local": local, "utc": utc, "epoch": _epoch(utc.replace("Z", "+00:00")), "note": note}


def test_json_carries_the_previews_next_to_the_schedule(url: str, tmp_path: Path) -> None:
    _registered(url, tmp_path)
    plain = flows("schedules", "--json", "--redis", url)
    result = flows(
        "schedules", "--json", "--preview", "5", "--after-outage", OUTAGE, "--redis", url
    )
    assert plain.exit_code == result.exit_code == 0, result.output
    [schedule] = json.loads(result.output)
    [without] = json.loads(plain.output)
    preview, outage = schedule.pop("preview"), schedule.pop("after_outage")
    assert schedule == without  # the keys of a schedule are unchanged
    end = _time("2030-10-27 06:00:00 CET", "2030-10-27T05:00:00Z")
    assert preview == {
        "asked": 5,
        "times": [
            _time("2030-10-25 18:00:00 CEST", "2030-10-25T16:00:00Z"),
            _time("2030-10-26 06:00:00 CEST", "2030-10-26T04:00:00Z"),
            _time("2030-10-26 18:00:00 CEST", "2030-10-26T16:00:00Z"),
            end,
        ],
        "end": end,
        "notes": ["the schedule ends at 2030-10-27 06:00:00 CET"],
    }
    assert outage == {
        "down": "2030-10-25T00:00:00Z",
        "back": "2030-10-28T00:00:00Z",
        "missed": 4,
        "fires": [{**end, "trigger": "catch-up"}],
        "skips": [
            {
                "first": _time("2030-10-25 18:00:00 CEST", "2030-10-25T16:00:00Z"),
                "last": _time("2030-10-26 18:00:00 CEST", "2030-10-26T16:00:00Z"),
                "count": 3,
                "reason": "outside catch-up window 1d",
            }
        ],
        "end": end,
        "notes": ["the schedule ends at 2030-10-27 06:00:00 CET: nothing fires after that"],
    }


BACKWARDS = BOUNDED.replace('"0 6,18 * * *"', '"30-10 * * * *"').replace("bounded", "backwards")


def test_a_range_that_runs_backwards_is_neither_registered_nor_previewed(
    url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "backwards.yaml").write_text(BACKWARDS)
    validated = flows("validate", str(folder / "backwards.yaml"), "--preview", "3")
    assert validated.exit_code == 1
    assert "minute field: the range 30-10 runs backwards" in validated.output
    assert "fire time" not in validated.output
    flows("scheduler", "--flows-dir", str(folder), "--once", "--redis", url)
    result = flows("schedules", "--preview", "3", "--redis", url)
    assert result.exit_code == 0, result.output
    assert "backwards" not in result.output and "no schedules" in result.output


def test_a_stored_definition_the_cron_checks_now_refuse_is_not_previewed(
    url: str, client: Client, tmp_path: Path
) -> None:
    # Registered by a version that let a backwards range through: listed, not previewed.
    _registered(url, tmp_path)
    register_legacy_cron(client, "bounded", "30-10 * * * *")
    result = flows("schedules", "--preview", "3", "--after-outage", OUTAGE, "--redis", url)
    assert result.exit_code == 0, result.output
    assert "bounded" in result.output
    assert (
        "bounded: not previewed: '30-10 * * * *': minute field: the range 30-10 runs backwards"
    ) in result.output
    assert "fire time" not in result.output
    listed = flows("schedules", "--json", "--preview", "3", "--redis", url)
    [schedule] = json.loads(listed.output)
    assert schedule["not_previewed"].startswith("'30-10 * * * *': minute field: the range")
    assert "preview" not in schedule
