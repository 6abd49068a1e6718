"""End to end: ``wait:`` steps through ``flows run``, ``flows signal`` / ``flows approve``,
``flows retry`` and the scheduler service's housekeeping."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from scheduler_support import make_service
from test_flows_run import flows, status_json, write_flow

from flows.runs.read import load_run
from scheduler.embedded import EmbeddedServer
from scheduler.engine import doctor
from scheduler.engine.client import Client

WAIT_FLOW = """
    version: 1
    name: gate
    queue: gate
    defaults: {retry: {attempts: 1, delay: 0}}
    steps:
      build: {job: flowtasks.build}
      approve:
        needs: [build]
        wait: {signal: approve, timeout: 1h, on_timeout: ON_TIMEOUT}
        outputs: [note]
      ship:
        needs: [approve]
        job: flowtasks.ship
        with: {note: "${{ steps.approve.outputs.note }}"}
      report:
        needs: [approve]
        trigger_rule: all_done
        job: flowtasks.ship
        with: {note: "${{ steps.approve.status }}"}
"""

TASKS = """
    def build(job):
        return {"artifact": "a1"}

    def ship(job):
        return {"shipped": job.data["note"]}
"""


def wait_flow(folder: Path, on_timeout: str = "fail") -> Path:
    return write_flow(folder, WAIT_FLOW.replace("ON_TIMEOUT", on_timeout), TASKS)


def statuses(cli: CliRunner, run_id: str) -> dict[str, str]:
    steps = status_json(cli, run_id)["steps"]
    return {s["step"]: s["status"] for s in steps}  # type: ignore[attr-defined]


def result_of(client: Client, jid: str) -> object:
    job = client.jobs[jid]
    return job.result if job is not None else None


def work(cli: CliRunner, folder: Path) -> None:
    """One worker in this process until the queue is empty."""
    result = flows(
        cli, "worker", "-q", "gate", "--burst", "--processes", "0", "--path", str(folder)
    )
    assert result.exit_code == 0, result.output


def test_detach_then_signal_then_a_worker_finishes_the_run(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = wait_flow(tmp_path)
    assert flows(cli, "run", "--detach", "--run-id", "r1", str(path)).exit_code == 0

    # Not ready yet: refused, naming the run, the step and its state; nothing changed.
    with assert_unchanged(redis_client):
        early = flows(cli, "approve", "r1", "approve", "--note", "too soon")
    assert early.exit_code == 1
    assert "run r1, step approve" in early.output and "state depends" in early.output
    assert "Traceback" not in early.output

    work(cli, tmp_path)  # build runs; approve awaits its signal, never popped
    assert statuses(cli, "r1") == {
        "build": "success",
        "approve": "awaiting",
        "ship": "waiting",
        "report": "waiting",
    }
    view = load_run(client, "r1")
    assert view is not None and view.status == "running"
    shown = flows(cli, "status", "r1")
    assert "approve: awaiting signal 'approve', times out (fail) in" in shown.output
    assert "flows approve r1 approve --note TEXT" in shown.output
    report = doctor.check(client, deep=True)
    assert report.clean, report.findings  # an awaiting job is in no queue index, and that is right

    refused = {
        ("signal", "r1", "build"): "not a wait step (state complete)",
        ("signal", "r1", "nope"): "has no step 'nope'",
        ("signal", "r9", "approve"): "no run r9",
        ("signal", "r1", "approve", "--data", '{"approved": true}'): 'lacks "note"',
        ("signal", "r1", "approve", "--data", "[1]"): "JSON object",
    }
    for args, words in refused.items():
        with assert_unchanged(redis_client):
            result = flows(cli, *args)
        # --data that is no JSON object is a usage error; the others are refused by the engine
        assert result.exit_code == (2 if "[1]" in args else 1), (args, result.output)
        assert words in result.output, (args, result.output)

    signaled = flows(cli, "approve", "r1", "approve", "--note", "ship it")
    assert signaled.exit_code == 0, signaled.output
    assert "step approve signaled" in signaled.output
    # The same call released both dependents: they wait in their queue for a worker.
    assert statuses(cli, "r1")["ship"] == "waiting"
    assert client.jobs["r1:ship"].state == "waiting"  # type: ignore[union-attr]
    assert result_of(client, "r1:approve") == {"note": "ship it", "approved_by": "ada"}

    with assert_unchanged(redis_client):
        again = flows(cli, "signal", "r1", "approve")
    assert again.exit_code == 1 and "already done (state complete)" in again.output

    work(cli, tmp_path)
    assert result_of(client, "r1:ship") == {"shipped": "ship it"}
    assert result_of(client, "r1:report") == {"shipped": "success"}
    assert status_json(cli, "r1")["status"] == "succeeded"


def test_signal_data_json_readers_cannot_hold_is_a_usage_error_naming_where(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A number past a double's range (1e999, a 400-digit integer: infinity to every JSON
    reader) and a lone surrogate (no UTF-8 text) are refused as any bad --data is: exit 2,
    naming the option, where in the data, and what is wrong; nothing changed. Before, the
    first ended in Python's "Out of range float values are not JSON compliant" (exit 1), the
    others in the engine's "invalid unicode escape" or "NaN and Infinity"."""
    path = wait_flow(tmp_path)
    assert flows(cli, "run", "--detach", "--run-id", "r1", str(path)).exit_code == 0
    past = "past what JSON readers hold (a double: about 1.8e308 either way"
    refused = {
        '{"note": 1e999}': f"at note: a number {past}",
        '{"note": {"n": [-1e400]}}': f"at note.n[0]: a number {past}",
        '{"note": ' + "1" * 400 + "}": f"at note: an integer of the order of 1e399, {past}",
        '{"note": "\\ud800"}': 'at note: text with a lone surrogate ("\\ud800"), which',
        '{"a b": {"\\udcff": 1}}': 'at ["a b"]: a key that is text with a lone surrogate',
    }
    for data, words in refused.items():
        with assert_unchanged(redis_client):
            result = flows(cli, "signal", "r1", "approve", "--data", data)
        assert result.exit_code == 2, (data, result.output)
        assert f"Invalid value for '--data': {words}" in result.output, (data, result.output)
    # A note that is no UTF-8 text (bytes the shell gave that are not): the option is named.
    with assert_unchanged(redis_client):
        result = flows(cli, "approve", "r1", "approve", "--note", "ok \udcff")
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--note': text with a lone surrogate" in result.output


def test_a_wait_canceled_with_its_run_is_refused_as_canceled_not_missing(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = wait_flow(tmp_path)
    assert flows(cli, "run", "--detach", "--run-id", "c1", str(path)).exit_code == 0
    work(cli, tmp_path)
    assert flows(cli, "cancel", "c1").exit_code == 0
    with assert_unchanged(redis_client):
        refused = flows(cli, "approve", "c1", "approve", "--note", "late")
    assert refused.exit_code == 1, refused.output
    assert "run c1, step approve: not awaiting a signal (it is canceled)" in refused.output
    assert "`flows retry c1` puts it back" in refused.output
    assert "has no step" not in refused.output
    assert flows(cli, "retry", "c1", "--detach").exit_code == 0
    assert flows(cli, "approve", "c1", "approve", "--note", "now").exit_code == 0


def test_flows_run_in_the_background_finishes_once_signaled(
    client: Client, server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = wait_flow(tmp_path)
    env = {**os.environ, "FLOWS_REDIS_URL": server.url, "FLOWS_USER": "grace"}
    command = [sys.executable, "-c", "from flows.cli import main; main()", "run", "--run-id"]
    process = subprocess.Popen(
        [*command, "bg", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (job := client.jobs.get("bg:approve")) is None or job.state != "awaiting":
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the wait never became ready"
            time.sleep(0.05)  # the run's own worker is working `build`
        signal = subprocess.run(
            [
                sys.executable,
                "-c",
                "from flows.cli import main; main()",
                "signal",
                "bg",
                "approve",
                "--data",
                '{"note": "from the test"}',
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert signal.returncode == 0, signal.stdout + signal.stderr
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert "run bg succeeded" in output
    assert result_of(client, "bg:ship") == {"shipped": "from the test"}
    history = client.jobs["bg:approve"].history  # type: ignore[union-attr]
    assert history[-1]["what"] == "signaled" and history[-1]["by"] == "grace"


def test_the_service_fails_a_wait_past_its_timeout_and_retry_makes_it_wait_again(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = wait_flow(tmp_path)
    assert flows(cli, "run", "--detach", "--run-id", "r2", str(path)).exit_code == 0
    work(cli, tmp_path)
    awaiting = client.jobs["r2:approve"]
    assert awaiting is not None and awaiting.state == "awaiting"
    service = make_service(client, tmp_path)
    start = time.time()

    assert service.housekeep(now=start + 3000).waits_failed == 0  # not yet
    report = service.housekeep(now=start + 3700)
    assert (report.waits_failed, report.waits_skipped) == (1, 0)
    failed = client.jobs["r2:approve"]
    assert failed is not None and failed.state == "failed"
    assert failed.failure is not None and failed.failure["group"] == "wait-timeout"
    assert statuses(cli, "r2")["ship"] == "upstream_failed"
    # The refusal names the command to paste, with the run's own id (it said `flows retry RUN`).
    with assert_unchanged(redis_client):
        refused = flows(cli, "approve", "r2", "approve", "--note", "late")
    assert refused.exit_code == 1, refused.output
    assert (
        "run r2, step approve: failed (state failed: it timed out); `flows retry r2` makes it "
        "wait again"
    ) in refused.output

    retried = flows(cli, "retry", "--detach", "r2")
    assert retried.exit_code == 0, retried.output
    assert statuses(cli, "r2")["approve"] == "awaiting"
    assert flows(cli, "approve", "r2", "approve", "--note", "late").exit_code == 0
    work(cli, tmp_path)
    assert result_of(client, "r2:ship") == {"shipped": "late"}


def test_on_timeout_skip_skips_the_wait_and_its_all_success_dependents(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = wait_flow(tmp_path, on_timeout="skip")
    assert flows(cli, "run", "--detach", "--run-id", "r3", str(path)).exit_code == 0
    work(cli, tmp_path)
    report = make_service(client, tmp_path).housekeep(now=time.time() + 3700)
    assert (report.waits_failed, report.waits_skipped) == (0, 1)
    assert statuses(cli, "r3") == {
        "build": "success",
        "approve": "skipped",
        "ship": "skipped",
        "report": "waiting",
    }
    work(cli, tmp_path)
    assert result_of(client, "r3:report") == {"shipped": "skipped"}
    assert status_json(cli, "r3")["status"] == "succeeded"
    assert json.loads(flows(cli, "status", "--json", "r3").stdout)["status"] == "succeeded"
