"""``flows scheduler``, ``flows schedules`` and ``flows schedule ...`` through click's runner,
against the session's real server (time passed with the hidden ``--now`` of ``--once``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

T = 1_767_614_400.0  # 2026-01-05 12:00 UTC, a tick of */5

FLOW = """\
version: 1
name: etl
queue: q
schedule:
  cron: "*/5 * * * *"
  timezone: Europe/Berlin
  catchup: {policy: latest, window: 1h}
  overlap: skip
steps:
  extract: {run: echo extract}
  load: {run: echo load, needs: [extract]}
"""


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    (path / "etl.yaml").write_text(FLOW)
    return path


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def once(url: str, folder: Path, now: float, *extra: str) -> Result:
    return flows(
        "scheduler", "--redis", url, "--flows-dir", str(folder), "--once", "--now", str(now), *extra
    )


def test_once_fires_what_is_due(url: str, folder: Path) -> None:
    first = once(url, folder, T - 60)
    assert first.exit_code == 0, first.output
    assert first.stdout == ""
    fired = once(url, folder, T + 1)
    assert fired.exit_code == 0
    assert fired.stdout == "fired etl etl@20260105T120000Z (schedule)\n"
    assert once(url, folder, T + 2).stdout == ""


def test_once_says_a_tick_whose_run_existed_was_not_fired_again(url: str, folder: Path) -> None:
    assert once(url, folder, T - 60).exit_code == 0
    run_id = "etl@20260105T120000Z"
    job = {"jid": f"{run_id}:extract", "queue": "q", "klass": "K", "data": "{}"}
    with Client(url) as client:  # the tick's run, made before the service fires it
        client.engine.call("flow.submit", run_id, json.dumps({"flow": "etl"}), json.dumps([job]))
    fired = once(url, folder, T + 1)
    assert fired.stdout == f"fired etl {run_id} (schedule) (the run existed already)\n"
    assert "fired etl" not in once(url, folder, T + 2).stdout


def test_once_json(url: str, folder: Path) -> None:
    report = json.loads(once(url, folder, T - 60, "--json").stdout)
    assert report["registered"] == ["etl"] and report["fired"] == []
    report = json.loads(once(url, folder, T + 11 * 60 + 30, "--json").stdout)
    assert report["fired"] == [
        {
            "schedule": "etl",
            "run_id": "etl@20260105T121000Z",
            "tick": T + 600,
            "trigger": "catch-up",
            "outcome": "fired",
        }
    ]
    assert [s["reason"] for s in report["skipped"]] == [
        "catch-up policy latest (superseded by a newer run)"
    ] * 2
    assert set(report["housekeeping"]) == {
        "promoted",
        "spawned",
        "reclaimed",
        "failed",
        "queues",
        "waits_failed",
        "waits_skipped",
    }


def test_schedules_lists_next_fire_last_run_policy_paused(url: str, folder: Path) -> None:
    assert "no schedules" in flows("schedules", "--redis", url).stderr
    once(url, folder, T - 60)
    once(url, folder, T + 1)
    [row] = json.loads(flows("schedules", "--redis", url, "--json").stdout)
    assert row["name"] == "etl" and row["timezone"] == "Europe/Berlin"
    assert row["next"] == T + 300 and row["next_local"] == "2026-01-05 13:05 CET"
    assert (row["last_run"], row["last_run_status"]) == ("etl@20260105T120000Z", "running")
    assert (row["catchup"], row["overlap"], row["paused"]) == ("latest", "skip", False)
    table = flows("schedules", "--redis", url).stdout
    assert "etl" in table and "13:05 CET" in table and "running" in table


def test_show_says_a_schedule_that_never_ran_has_no_last_run(url: str, folder: Path) -> None:
    once(url, folder, T - 60)
    shown = flows("schedule", "show", "etl", "--redis", url).stdout
    [row] = [line for line in shown.splitlines() if "last run" in line]
    assert "none yet" in row and "missing" not in row
    once(url, folder, T + 1)
    shown = flows("schedule", "show", "etl", "--redis", url).stdout
    assert "etl@20260105T120000Z running" in shown


def test_pause_resume(url: str, folder: Path) -> None:
    once(url, folder, T - 60)
    assert flows("schedule", "pause", "etl", "--note", "db migration", "--redis", url).stdout == (
        "paused etl\n"
    )
    [row] = json.loads(flows("schedules", "--redis", url, "--json").stdout)
    assert row["paused"] is True and row["pause_note"] == "db migration"
    assert "skipped etl 1 tick(s): paused" in once(url, folder, T + 1).stdout
    assert flows("schedule", "resume", "etl", "--redis", url).stdout == "resumed etl\n"
    assert flows("schedule", "resume", "etl", "--redis", url).stdout == "etl was not paused\n"
    shown = json.loads(flows("schedule", "show", "etl", "--redis", url, "--json").stdout)
    assert shown["paused"] is False
    assert [s["reason"] for s in shown["skips"]] == ["paused"]
    assert "paused" in flows("schedule", "show", "etl", "--redis", url).stdout


def test_trigger_runs_now(url: str, folder: Path) -> None:
    once(url, folder, T - 60)
    result = flows("schedule", "trigger", "etl", "--redis", url)
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    # The one run id format: <flow>@<UTC time>, a manual run's with a random suffix.
    assert re.fullmatch(r"etl@\d{8}T\d{6}Z-[0-9a-f]{6}", run_id)
    assert "submitted run" in result.stderr
    status = json.loads(flows("status", run_id, "--redis", url, "--json").stdout)
    assert status["trigger"] == "manual"
    assert [s["step"] for s in status["steps"]] == ["extract", "load"]
    [row] = json.loads(flows("schedules", "--redis", url, "--json").stdout)
    assert (row["last_run"], row["triggered"]) == (run_id, 1)


@pytest.mark.parametrize("action", ["pause", "resume", "trigger", "show", "remove"])
def test_unknown_schedule(url: str, redis_client: redis.Redis, action: str) -> None:
    with assert_unchanged(redis_client):
        result = flows("schedule", action, "nope", "--redis", url)
    assert result.exit_code == 1
    assert "no schedule 'nope'" in result.stderr


@pytest.mark.parametrize("action", ["pause", "resume", "trigger", "show", "remove"])
def test_a_misspelt_schedule_is_refused_with_the_one_meant(
    url: str, folder: Path, redis_client: redis.Redis, action: str
) -> None:
    """As `flows sources remove` does: the registered name closest to the one typed."""
    assert once(url, folder, T - 60).exit_code == 0
    with assert_unchanged(redis_client):
        result = flows("schedule", action, "elt", "--redis", url)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: no schedule 'elt'; did you mean 'etl'? (see `flows schedules`)\n"
    )


def test_health(url: str, folder: Path) -> None:
    result = flows("scheduler", "--health", "--redis", url)
    assert result.exit_code == 1
    assert result.stdout == (
        "unhealthy: no scheduler service has ticked (none runs, or they stopped cleanly)\n"
    )
    other = flows("scheduler", "--health", "--id", "cli", "--redis", url)
    assert other.stdout == (
        "unhealthy: scheduler cli has not ticked (not running, or it stopped cleanly)\n"
    )
    args = ("scheduler", "--redis", url, "--flows-dir", str(folder), "--once", "--id", "cli")
    assert flows(*args).exit_code == 0  # on the server's clock: a fresh tick
    healthy = flows("scheduler", "--health", "--id", "cli", "--redis", url)
    assert healthy.exit_code == 0 and healthy.stdout.startswith("healthy: cli: last tick")
    assert flows("scheduler", "--health", "--id", "other", "--redis", url).exit_code == 1
    strict = flows("scheduler", "--health", "--id", "cli", "--max-age", "0", "--redis", url)
    assert strict.exit_code == 1


BAD = "version: 1\nname: bad\nschedule: {cron: 'x'}\nsteps:\n  a: {run: echo, needs: [b]}\n"


def test_once_prints_an_invalid_file_s_findings_and_fails_after_the_rest_of_the_pass(
    url: str, folder: Path
) -> None:
    """Run from cron or CI, --once must fail visibly: the findings on stderr as `flows validate`
    prints them (file:line:col, message, hint), exit code 1, the other files handled all the
    same."""
    bad = folder / "bad.yaml"
    bad.write_text(BAD)
    result = once(url, folder, T - 60)
    assert result.exit_code == 1
    validated = flows("validate", str(bad))
    assert validated.exit_code == 1
    findings = validated.stdout.splitlines()[:-1]  # its summary counts the one file it read
    assert [line.split(":")[:3] for line in findings if not line.startswith(" ")] == [
        [str(bad), "3", "18"],
        [str(bad), "5", "26"],
    ]
    assert result.stderr == "\n".join([*findings, "2 errors in 2 files"]) + "\n"
    assert result.stdout == ""
    # etl.yaml was registered: the next pass fires it, and fails again while bad.yaml is bad.
    fired = once(url, folder, T + 1)
    assert fired.exit_code == 1
    assert fired.stdout == "fired etl etl@20260105T120000Z (schedule)\n"
    assert "error: step 'a' needs 'b', which is not a step" in fired.stderr
    bad.unlink()
    assert once(url, folder, T + 2).exit_code == 0


def test_once_json_carries_an_invalid_file_s_findings(url: str, folder: Path) -> None:
    (folder / "bad.yaml").write_text(BAD)
    result = once(url, folder, T - 60, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["registered"] == ["etl"]
    assert list(report["invalid"]) == [str(folder / "bad.yaml")]
    assert [(f["line"], f["col"], f["code"]) for f in report["findings"]] == [
        (3, 18, "schedule"),
        (5, 26, "unknown-need"),
    ]
    assert "needs 'b', which is not a step" in result.stderr  # on stderr too


def test_once_words_a_file_that_is_not_text_as_flows_validate_does(url: str, folder: Path) -> None:
    """A file the service cannot read as UTF-8: the same finding and the same count."""
    binary = folder / "binary.yaml"
    binary.write_bytes(b"\x00\xff")
    result = once(url, folder, T - 60)
    assert result.exit_code == 1
    validated = flows("validate", str(folder))
    assert f"{binary}:1:2: error: the file is not UTF-8 text (byte 1)" in validated.stdout
    assert result.stderr == validated.stdout
    assert "codec" not in result.stderr


def test_once_says_why_a_valid_file_was_not_registered(url: str, folder: Path) -> None:
    assert once(url, folder, T - 60).exit_code == 0
    (folder / "copy.yaml").write_text(FLOW)  # a second file of flow etl
    result = once(url, folder, T - 30)
    assert result.exit_code == 1
    copy = folder / "copy.yaml"
    assert result.stderr == (
        f"{copy}: flow 'etl' is already scheduled by {folder / 'etl.yaml'}; "
        "rename one of the flows\n1 error in 2 files\n"
    )


def test_once_counts_a_file_not_registered_among_the_errors(url: str, folder: Path) -> None:
    """A flow scheduled by another file is an error as a finding is: the summary counts both
    (it said "2 errors" for the bad file's two findings alone)."""
    assert once(url, folder, T - 60).exit_code == 0
    (folder / "copy.yaml").write_text(FLOW)
    (folder / "bad.yaml").write_text(BAD)
    result = once(url, folder, T - 30)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert f"{folder / 'copy.yaml'}: flow 'etl' is already scheduled by" in result.stderr
    assert lines[-1] == "3 errors in 3 files"


def test_usage_errors(url: str, folder: Path, tmp_path: Path) -> None:
    assert flows("scheduler", "--redis", url).exit_code == 2
    assert "--flows-dir is required" in flows("scheduler", "--redis", url).stderr
    now_alone = flows("scheduler", "--redis", url, "--flows-dir", str(folder), "--now", "5")
    assert now_alone.exit_code == 2
    missing = flows("scheduler", "--flows-dir", str(tmp_path / "nope"), "--once")
    assert missing.exit_code == 2


def test_python_dash_m_scheduler_is_the_same_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: python -m scheduler [OPTIONS]")
    assert "--flows-dir" in result.stdout


def test_the_tour_s_example_fires_within_a_minute(url: str, tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    folder = tmp_path / "tour"
    folder.mkdir()
    (folder / "minutely.yaml").write_text((examples / "minutely.yaml").read_text())
    started = T + 1  # any moment: the next tick is less than a minute away
    assert once(url, folder, started).exit_code == 0
    fired = once(url, folder, started + 60)
    assert "fired minutely minutely@" in fired.stdout, fired.output


def test_a_step_typo_read_by_another_step_is_reported_without_a_traceback(
    url: str, folder: Path
) -> None:
    (folder / "typo.yaml").write_text(
        "version: 1\nname: typo\nschedule: {cron: '0 2 * * *'}\nsteps:\n"
        "  extract:\n    rnu: echo rows=3 >> $FLOWS_OUTPUT\n    outputs: [rows]\n"
        "  load:\n    run: echo ${{ steps.extract.outputs.rows }}\n"
    )
    result = once(url, folder, T - 60)
    assert result.exit_code == 1
    assert f"{folder / 'typo.yaml'}:6:5: error: unknown key 'rnu'" in result.stderr
    assert "Traceback" not in result.stderr and "NodeNotFound" not in result.stderr


def test_schedule_actions_answer_in_json_as_the_api_does(url: str, folder: Path) -> None:
    once(url, folder, T - 60)

    def as_json(*args: str) -> object:
        result = flows("schedule", *args, "--redis", url, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    assert as_json("pause", "etl", "--note", "migration") == {
        "name": "etl",
        "paused": True,
        "note": "migration",
    }
    assert as_json("resume", "etl") == {"name": "etl", "paused": False, "outcome": "resumed"}
    assert as_json("resume", "etl") == {"name": "etl", "paused": False, "outcome": "not-paused"}
    triggered = as_json("trigger", "etl")
    assert isinstance(triggered, dict)
    assert set(triggered) == {"id", "jobs", "flow", "existed"}
    assert re.fullmatch(r"etl@\d{8}T\d{6}Z-[0-9a-f]{6}", triggered["id"])
    assert (triggered["jobs"], triggered["flow"], triggered["existed"]) == (2, "etl", False)
    assert as_json("remove", "etl") == {"name": "etl", "removed": True, "source": "pipelines"}


def test_health_of_one_source(url: str, folder: Path, tmp_path: Path) -> None:
    """`--health --source S` (or `--flows-dir DIR`, whose source it is) answers for the services
    of S alone: another source's live service does not make a dead one healthy."""
    other = tmp_path / "other"
    other.mkdir()
    assert once(url, folder, time.time() - 120, "--id", "a").exit_code == 0  # too old
    assert once(url, other, time.time(), "--id", "b").exit_code == 0
    assert flows("scheduler", "--health", "--redis", url).exit_code == 0  # any service
    for where in (["--source", "pipelines"], ["--flows-dir", str(folder)]):
        result = flows("scheduler", "--health", "--redis", url, *where)
        assert result.exit_code == 1, result.output
        assert result.stdout.startswith("unhealthy: a: last tick "), result.stdout
        assert "b:" not in result.stdout
    assert flows("scheduler", "--health", "--redis", url, "--source", "other").exit_code == 0
    unknown = flows("scheduler", "--health", "--redis", url, "--source", "nosuch")
    assert (unknown.exit_code, unknown.stdout) == (
        1,
        "unhealthy: no scheduler service of source nosuch has ticked (none runs, or they stopped"
        " cleanly)\n",
    )
