"""``flows backfill``, ``flows backfills`` and ``flows cancel --backfill`` through click's runner
against the session's real server; the service's steps run with ``flows scheduler --once
--now``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis
from cli_support import flows
from helpers import assert_unchanged, register_legacy_cron

from flows.expand.run_ids import run_id_for
from scheduler.engine.client import Client

# 2026-01-05 00:00 UTC: long past when the suite runs, so every tick here is a past tick.
T = 1_767_571_200.0
H = 3600.0

FLOW = """\
version: 1
name: hourly
queue: q
schedule: {cron: "0 * * * *", timezone: UTC}
steps:
  a: {run: echo a}
"""


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    path = tmp_path / "hourly.yaml"
    path.write_text(FLOW)
    return path


def ids(first: float, count: int) -> list[str]:
    return [run_id_for("hourly", first + i * H) for i in range(count)]


def work_all(client: Client) -> int:
    jobs = client.queues["q"].pop(1000)
    for job in jobs:
        job.complete()
    return len(jobs)


def test_dry_run_lists_the_ticks_and_those_that_ran_and_stores_nothing(
    url: str, client: Client, redis_client: redis.Redis, flow: Path
) -> None:
    ran = run_id_for("hourly", T + 2 * H)
    client.engine.call(
        "flow.submit",
        ran,
        json.dumps({"flow": "hourly"}),
        json.dumps([{"jid": f"{ran}:a", "queue": "q", "klass": "K", "data": "{}"}]),
    )
    args = ["backfill", str(flow), "--from", "2026-01-05T00:00", "--to", "2026-01-05T04:00"]
    with assert_unchanged(redis_client):
        result = flows(*args, "--dry-run", "--redis", url, "--json")
        text = flows(*args, "--dry-run", "--redis", url)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [t["run_id"] for t in out["ticks"]] == ids(T, 5)
    assert [t["status"] for t in out["ticks"]] == ["missing"] * 2 + ["running"] + ["missing"] * 2
    assert out["to_run"] == 4
    assert text.exit_code == 0
    assert "exists (running)" in text.output and "5 tick(s), 4 to run" in text.output


def test_backfill_submits_max_active_then_the_service_the_rest(
    url: str, client: Client, flow: Path, tmp_path: Path
) -> None:
    result = flows(
        "backfill", str(flow), "--from", "2026-01-05", "--to", "2026-01-05T03:00",
        "--max-active", "2", "--redis", url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    backfill_id = result.stdout.strip().splitlines()[-1]
    assert "4 tick(s) of hourly" in result.stderr
    assert "submitted 2 run(s) now" in result.stderr
    assert f"flows cancel --backfill {backfill_id}" in result.stderr
    listing = json.loads(flows("backfills", "--json", "--redis", url).output)
    assert [(b["id"], b["state"], b["submitted"], b["pending"]) for b in listing] == [
        (backfill_id, "active", 2, 2)
    ]
    assert work_all(client) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    once = flows(
        "scheduler", "--flows-dir", str(empty), "--once", "--now", str(T + 10 * H), "--redis", url
    )
    assert once.exit_code == 0, once.output
    assert once.stdout.splitlines() == [f"backfill submitted {r}" for r in ids(T + 2 * H, 2)]
    assert work_all(client) == 2
    flows(
        "scheduler", "--flows-dir", str(empty), "--once", "--now", str(T + 11 * H), "--redis", url
    )
    one = json.loads(flows("backfills", backfill_id, "--json", "--redis", url).output)
    assert (one["state"], one["submitted"], one["handled"]) == ("done", 4, 4)
    table = flows("backfills", backfill_id, "--redis", url)
    assert "4 run(s) submitted" in table.output
    # Again: every tick ran, nothing is submitted twice.
    again = flows("backfill", str(flow), "--from", "2026-01-05", "--to", "2026-01-05T03:00",
                  "--redis", url)  # fmt: skip
    assert "submitted 0 run(s) now, 4 tick(s) had run already" in again.stderr
    assert "nothing is left to submit" in again.stderr


def test_backfill_json(url: str, flow: Path) -> None:
    result = flows(
        "backfill", str(flow), "--from", "2026-01-05T01:00Z", "--to", "2026-01-05T02:30+00:00",
        "--max-active", "1", "--json", "--redis", url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["flow"], out["ticks"], out["submitted"], out["pending"]) == ("hourly", 2, 1, 1)
    assert (out["first_tick"], out["last_tick"]) == (T + H, T + 2 * H)
    assert out["active"] == [run_id_for("hourly", T + H)]


def test_cancel_backfill(url: str, client: Client, flow: Path) -> None:
    result = flows(
        "backfill", str(flow), "--from", "2026-01-05", "--to", "2026-01-05",
        "--max-active", "3", "--redis", url,
    )  # fmt: skip
    backfill_id = result.stdout.strip()
    assert "24 tick(s)" in result.stderr
    shown = json.loads(flows("backfills", backfill_id, "--json", "--redis", url).output)
    assert (shown["ticks"], shown["submitted"], len(shown["active"])) == (24, 3, 3)
    canceled = flows("cancel", "--backfill", backfill_id, "--redis", url)
    assert canceled.exit_code == 0, canceled.output
    assert "canceled 3 active run(s) (3 job(s)); 21 tick(s) will not be submitted" in (
        canceled.output
    )
    assert client.queues["q"].pop(10) == []
    again = flows("cancel", "--backfill", backfill_id, "--redis", url)
    assert again.exit_code == 0 and "canceled already" in again.output
    missing = flows("cancel", "--backfill", "nope", "--redis", url)
    assert missing.exit_code == 1 and "no backfill nope" in missing.output


def test_a_canceled_backfill_started_again_resumes_the_canceled_ticks(
    url: str, client: Client, redis_client: redis.Redis, flow: Path, tmp_path: Path
) -> None:
    args = ["backfill", str(flow), "--from", "2026-01-05", "--to", "2026-01-05T03:00"]
    first = flows(*args, "--max-active", "2", "--redis", url).stdout.strip().splitlines()[-1]
    assert work_all(client) == 2
    empty = tmp_path / "empty"  # no flow files: the service step advances backfills only
    empty.mkdir()
    once = ["scheduler", "--flows-dir", str(empty), "--once", "--redis", url]
    flows(*once, "--now", str(T + 10 * H))  # ticks 2 and 3 submitted
    assert "canceled 2 active run(s)" in flows("cancel", "--backfill", first, "--redis", url).output

    with assert_unchanged(redis_client):
        dry = flows(*args, "--dry-run", "--json", "--redis", url)
        text = flows(*args, "--dry-run", "--redis", url)
    assert dry.exit_code == 0, dry.output
    out = json.loads(dry.output)
    assert [t["status"] for t in out["ticks"]] == ["succeeded"] * 2 + ["canceled"] * 2
    assert [t["resume"] for t in out["ticks"]] == [False, False, True, True]
    assert (out["to_run"], out["to_resume"]) == (2, 2)
    assert text.exit_code == 0, text.output
    assert "4 tick(s), 2 to run, 2 of them canceled runs to resume" in text.output
    assert text.output.count("resume (canceled)") == 2
    assert text.output.count("exists (succeeded)") == 2

    again = flows(*args, "--max-active", "1", "--redis", url)
    assert again.exit_code == 0, again.output
    backfill_id = again.stdout.strip().splitlines()[-1]
    assert "submitted 0 run(s) now, resumed 1 canceled run(s), 2 tick(s) had run already" in (
        again.stderr
    )
    assert work_all(client) == 1
    step = flows(*once, "--now", str(T + 11 * H))
    assert step.stdout.splitlines() == [f"backfill resumed {ids(T + 3 * H, 1)[0]}"]
    assert work_all(client) == 1
    flows(*once, "--now", str(T + 12 * H))
    one = json.loads(flows("backfills", backfill_id, "--json", "--redis", url).output)
    assert (one["state"], one["resumed"], one["submitted"], one["existed"]) == ("done", 2, 0, 2)
    shown = flows("backfills", backfill_id, "--redis", url).output
    assert "0 run(s) submitted, 2 canceled run(s) resumed, 2 had run already" in shown
    statuses = json.loads(flows(*args, "--dry-run", "--json", "--redis", url).output)
    assert [t["status"] for t in statuses["ticks"]] == ["succeeded"] * 4


def test_a_range_of_too_many_ticks_is_one_line_and_changes_nothing(
    url: str, redis_client: redis.Redis, flow: Path
) -> None:
    """Two years of an hourly schedule: more than one backfill covers."""
    with assert_unchanged(redis_client):
        result = flows(
            "backfill", str(flow), "--from", "2024-01-01", "--to", "2025-12-31", "--redis", url
        )
    assert result.exit_code == 1, result.output
    assert result.output.strip() == (
        "Error: the range holds more than 10,000 ticks (the most one backfill covers): "
        "split it into several backfills"
    )


def test_the_last_day_of_the_calendar_ends_a_range(
    url: str, redis_client: redis.Redis, flow: Path
) -> None:
    """``--to 9999-12-31`` (the whole day, as any date) means up to now: its end is the day's
    last second, though the calendar has no next day to count back from."""
    dry = ("--dry-run", "--json", "--redis")
    start = time.strftime("%Y-%m-%dT%H:00Z", time.gmtime(time.time() - 3 * H))
    with assert_unchanged(redis_client):
        result = flows("backfill", str(flow), "--from", start, "--to", "9999-12-31", *dry, url)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["ticks"]) in (3, 4)


def test_a_stored_definition_the_cron_checks_now_refuse_is_refused_in_one_line(
    url: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # Registered by a version that let a backwards range through: refused, nothing stored.
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "hourly.yaml").write_text(FLOW)
    scanned = flows("scheduler", "--flows-dir", str(folder), "--once", "--redis", url)
    assert scanned.exit_code == 0, scanned.output
    register_legacy_cron(client, "hourly", "1-0 * * * *")
    args = ["backfill", "hourly", "--from", "2026-01-05", "--to", "2026-01-05T03:00"]
    with assert_unchanged(redis_client):
        result = flows(*args, "--redis", url)
        dry = flows(*args, "--dry-run", "--redis", url)
    for refused in (result, dry):
        assert refused.exit_code == 1, refused.output
        assert "unexpected" not in refused.output
        assert refused.output.strip() == (
            "Error: hourly: the registered schedule cannot be backfilled: '1-0 * * * *': "
            "minute field: the range 1-0 runs backwards (a range does not wrap around); fix "
            "its file (the scheduler service registers it again at its next scan)"
        )


PARAMS_FLOW = """\
version: 1
name: regional
queue: q
params:
  region: {type: string, default: eu}
  batch: {type: int, default: 10}
schedule: {cron: "0 * * * *", timezone: UTC}
steps:
  a: {run: "echo ${{ params.region }} ${{ params.batch }}"}
"""


def test_params_given_to_a_backfill_reach_every_run_it_submits(
    url: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Airflow's backfill takes a run configuration: `flows backfill` had no -p, so a past
    range could only be run again with the schedule's own params."""
    path = tmp_path / "regional.yaml"
    path.write_text(PARAMS_FLOW)
    span = ["--from", "2026-01-05T00:00Z", "--to", "2026-01-05T01:00Z", "--redis", url]
    with assert_unchanged(redis_client):
        unknown = flows("backfill", str(path), *span, "-p", "regoin=us")
        typed = flows("backfill", str(path), *span, "-p", "batch=many", "--dry-run")
        malformed = flows("backfill", str(path), *span, "-p", "region")
    assert unknown.exit_code == typed.exit_code == malformed.exit_code == 2
    assert "unknown param 'regoin'" in unknown.stderr and "region" in unknown.stderr
    assert "batch" in typed.stderr and "many" in typed.stderr
    assert "'region' is not name=value" in malformed.stderr
    result = flows("backfill", str(path), *span, "-p", "region=us", "--max-active", "1", "--json")
    assert result.exit_code == 0, result.output
    made = json.loads(result.stdout)
    assert made["params"] == {"region": "us"}
    [first] = made["active"]
    assert run_params(client, first) == {"region": "us", "batch": 10}
    # The service submits the rest with the same params.
    (tmp_path / "empty").mkdir()
    assert work_all(client) == 1
    flows("scheduler", "--flows-dir", str(tmp_path / "empty"), "--once", "--now", str(T + 9 * H),
          "--redis", url)  # fmt: skip
    assert run_params(client, run_id_for("regional", T + H)) == {"region": "us", "batch": 10}
    listed = json.loads(flows("backfills", made["id"], "--json", "--redis", url).stdout)
    assert listed["params"] == {"region": "us"}
    assert "  params: region=us\n" in flows("backfills", made["id"], "--redis", url).stdout


def run_params(client: Client, run_id: str) -> object:
    return json.loads(json.loads(client.engine.call("run.get", run_id))["params"])
