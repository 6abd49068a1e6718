"""End to end: a flow's ``flow:`` step runs a child flow on the embedded server through the
``flows`` CLI; its outputs reach a later parent step, its failure fails the step until
``flows retry PARENT`` fixes it, and canceling the parent cancels the child."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent
from typing import Any
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.runs.read import load_run
from flows.runtime.worker_hook import prepare
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.worker import Worker

CHILD = """\
version: 1
name: report
queue: reports
params:
  day: {type: date}
  n: {type: string}
steps:
  check:
    run: test -f "$MARKER" || { echo "no marker yet" >&2; exit 3; }
    env: {MARKER: "${{ params.n }}"}
  count:
    needs: [check]
    run: echo "total=counted-${{ params.day }}" >> "$FLOWS_OUTPUT"
    outputs: [total]
outputs:
  total: "${{ steps.count.outputs.total }}"
"""

PARENT = """\
version: 1
name: parent
steps:
  process:
    run: echo "marker=$MARKER_PATH" >> "$FLOWS_OUTPUT"
    env: {MARKER_PATH: "@MARKER@"}
    outputs: [marker]
  child:
    flow: report.yaml
    with: {day: "${{ run.logical_date }}", n: "${{ steps.process.outputs.marker }}"}
    needs: [process]
  use:
    needs: [child]
    run: echo "got ${{ steps.child.outputs.total }}" > used.txt
outputs:
  total: "${{ steps.child.outputs.total }}"
"""


@pytest.fixture
def cli(
    server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    return CliRunner()


def status(cli: CliRunner, run_id: str | None = None) -> dict[str, Any]:
    result = flows(cli, "status", "--json", *([run_id] if run_id else []))
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def write(folder: Path, marker: str = "MARKER") -> Path:
    (folder / "report.yaml").write_text(CHILD)
    parent = folder / "parent.yaml"
    parent.write_text(PARENT.replace("@MARKER@", str(folder / marker)))
    return parent


def steps(run: dict[str, Any]) -> dict[str, str]:
    return {s["step"]: s["status"] for s in run["steps"]}


def test_the_child_runs_and_its_outputs_reach_a_later_parent_step(
    cli: CliRunner, tmp_path: Path
) -> None:
    parent = write(tmp_path)
    (tmp_path / "MARKER").touch()
    result = flows(cli, "run", str(parent), "--logical-time", "2026-03-01T02:00:00Z")
    assert result.exit_code == 0, result.output
    run_id = result.output.split("submitted run ")[1].split()[0]
    assert (tmp_path / "used.txt").read_text() == "got counted-2026-03-01\n"

    parent_run = status(cli, run_id)
    child_id = f"{run_id}.child"
    assert parent_run["status"] == "succeeded"
    step = next(s for s in parent_run["steps"] if s["step"] == "child")
    assert step["child"] == child_id and step["attempts"] == 1
    assert f"step child: child run {child_id}" in flows(cli, "status", run_id).output

    child = status(cli, child_id)
    assert child["status"] == "succeeded"
    assert child["parent_run"] == run_id and child["parent_step"] == "child"
    assert child["params"] == {"day": "2026-03-01", "n": str(tmp_path / "MARKER")}
    assert f"child run of {run_id} (step child)" in flows(cli, "status", child_id).output
    job = json.loads(flows(cli, "job", f"{run_id}:child", "--json").stdout)
    assert job["result"] == {"total": "counted-2026-03-01"}

    # the child run is counted under its parent, listed with --all; status shows the parent
    listed = json.loads(flows(cli, "runs", "--json").stdout)
    assert [(r["id"], r["children"]) for r in listed] == [(run_id, 1)]
    everything = json.loads(flows(cli, "runs", "--all", "--json").stdout)
    assert {r["id"] for r in everything} == {run_id, child_id}
    assert status(cli)["id"] == run_id


def test_a_failed_child_fails_its_step_until_a_retry_of_the_parent_after_the_fix(
    cli: CliRunner, tmp_path: Path
) -> None:
    parent = write(tmp_path)
    run_id = "it's-1"  # the retry it names is pasted into a shell: quoted
    result = flows(cli, "run", "--run-id", run_id, str(parent))
    assert result.exit_code == 1, result.output
    child_id = f"{run_id}.child"
    assert steps(status(cli, run_id)) == {
        "process": "success",
        "child": "failed",
        "use": "upstream_failed",
    }
    assert steps(status(cli, child_id)) == {"check": "failed", "count": "upstream_failed"}
    job = json.loads(flows(cli, "job", f"{run_id}:child", "--json").stdout)
    assert job["failure"]["group"] == "subflow-failed"
    message = job["failure"]["message"]
    assert f"child run {child_id} failed" in message
    # the child's failed step in its own terms: its exit code and what it wrote, no traceback
    assert "  step check failed (exit-code-3):\n    command exited with code 3" in message
    assert "    no marker yet" in message and "Traceback" not in message
    assert "fix the cause, then: flows retry 'it'\"'\"'s-1'" in message

    (tmp_path / "MARKER").touch()  # the child's cause fixed
    again = flows(cli, "retry", run_id)
    assert again.exit_code == 0, again.output
    assert steps(status(cli, run_id)) == {
        "process": "success",
        "child": "success",
        "use": "success",
    }
    assert status(cli, child_id)["status"] == "succeeded"
    assert (tmp_path / "used.txt").read_text().startswith("got counted-")


@pytest.fixture
def parent_worker(server: EmbeddedServer) -> Iterator[None]:
    """A worker for the parent's queue only: its sub-flow step starts the child, whose jobs
    (queue reports) nobody takes."""
    worker = Worker(Client(server.url), ["default"], prepare=prepare, poll_interval=0.1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield
    worker.stop()
    thread.join(10)


def until(check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_canceling_the_parent_cancels_the_child(
    cli: CliRunner, client: Client, tmp_path: Path, parent_worker: None
) -> None:
    parent = write(tmp_path)
    run_id = flows(cli, "run", "--detach", str(parent)).stdout.strip()
    child_id = f"{run_id}.child"

    def waiting_for_child() -> bool:
        view = load_run(client, run_id)
        return view is not None and any(s.child and s.status == "running" for s in view.steps)

    until(waiting_for_child)
    assert status(cli, child_id)["status"] == "running"
    assert status(cli, run_id)["status"] == "running"
    result = flows(cli, "cancel", run_id)
    assert result.exit_code == 0, result.output
    assert status(cli, run_id)["status"] == "canceled"
    assert status(cli, child_id)["status"] == "canceled"
    assert client.queues["reports"].counts()["waiting"] == 0


def test_a_child_that_is_not_a_valid_flow_refuses_the_parent_before_anything_runs(
    cli: CliRunner, redis_client: redis.Redis, tmp_path: Path
) -> None:
    parent = write(tmp_path)
    (tmp_path / "report.yaml").write_text(dedent(CHILD).replace("day: {type: date}", "day: {}x"))
    with assert_unchanged(redis_client):
        result = flows(cli, "run", str(parent))
    assert result.exit_code == 1
    assert f"{tmp_path / 'report.yaml'}:" in result.output
    assert "parent.yaml:9:11: error: step 'child': sub-flow" in result.output


def test_params_known_only_at_run_time_are_checked_then(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(
        "version: 1\nname: child\nparams:\n  count: {type: int}\nsteps:\n  a: {run: 'true'}\n"
    )
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "version: 1\nname: parent\nsteps:\n"
        '  size:\n    run: echo count=many >> "$FLOWS_OUTPUT"\n'
        "  child:\n    flow: child.yaml\n    needs: [size]\n"
        "    with: {count: '${{ steps.size.outputs.count }}'}\n"
    )
    assert flows(cli, "validate", str(parent)).exit_code == 0
    result = flows(cli, "run", str(parent))
    assert result.exit_code == 1
    run_id = result.output.split("submitted run ")[1].split()[0]
    job = json.loads(flows(cli, "job", f"{run_id}:child", "--json").stdout)
    assert job["failure"]["group"] == "subflow-invalid"
    assert "param 'count'" in job["failure"]["message"]
    # which file's param: the step's child file, as validation names it
    assert f"of {tmp_path / 'child.yaml'} cannot be built" in job["failure"]["message"]
    assert flows(cli, "status", f"{run_id}.child").exit_code == 1  # nothing was submitted


@pytest.mark.slow  # a killed idle worker holds what is handed to it until its lease is reaped
def test_a_worker_killed_while_the_child_runs_loses_nothing(
    server: EmbeddedServer, cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    """The step waits in the engine, not in a worker: kill -9 of the worker that started the
    child changes nothing, and a worker that comes later finishes the run."""
    parent = write(tmp_path)
    (tmp_path / "MARKER").touch()
    run_id = flows(cli, "run", "--detach", str(parent)).stdout.strip()
    command = [str(Path(sys.executable).parent / "flows"), "worker", "--redis", server.url]
    first = subprocess.Popen([*command, "-q", "default"], cwd=tmp_path)  # not the child's queue
    try:

        def waiting_for_child() -> bool:
            view = load_run(client, run_id)
            return view is not None and any(s.child and s.status == "running" for s in view.steps)

        until(waiting_for_child)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    second = subprocess.Popen([*command, "-q", "default,reports"], cwd=tmp_path)
    try:
        until(lambda: status(cli, run_id)["status"] != "running", timeout=90)
    finally:
        second.terminate()
        second.wait(20)
    assert status(cli, run_id)["status"] == "succeeded"
    assert (tmp_path / "used.txt").read_text().startswith("got counted-")


def test_run_with_logs_streams_the_child_runs_lines_too(cli: CliRunner, tmp_path: Path) -> None:
    parent = write(tmp_path)
    result = flows(cli, "run", str(parent), "--logs")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert any(line.endswith(" child/check | no marker yet") for line in lines), result.stdout


def test_a_rerun_whose_step_gives_the_child_other_params_fails_it_saying_so(
    cli: CliRunner, tmp_path: Path
) -> None:
    """A re-run runs the child run as it was submitted: when the step's `with` now resolves to
    other params (an upstream step re-run with another output), the step fails and says so,
    rather than run the child with the params it had (a deploy to the region of before)."""
    (tmp_path / "deploy.yaml").write_text(
        "version: 1\nname: deploy\nparams:\n  region: {type: string}\nsteps:\n"
        '  push:\n    run: echo "$REGION" >> pushed.txt\n'
        '    env: {REGION: "${{ params.region }}"}\n'
    )
    (tmp_path / "region.txt").write_text("us\n")
    parent = tmp_path / "release.yaml"
    parent.write_text(
        "version: 1\nname: release\nsteps:\n"
        '  pick:\n    run: echo "region=$(cat region.txt)" >> "$FLOWS_OUTPUT"\n'
        "    outputs: [region]\n"
        "  deploy:\n    flow: deploy.yaml\n    needs: [pick]\n"
        "    with: {region: '${{ steps.pick.outputs.region }}'}\n"
    )
    first = flows(cli, "run", str(parent))
    assert first.exit_code == 0, first.output
    run_id = first.output.split("submitted run ")[1].split()[0]
    assert (tmp_path / "pushed.txt").read_text() == "us\n"
    assert status(cli, f"{run_id}.deploy")["parent_with"] == {"region": "us"}

    (tmp_path / "region.txt").write_text("eu\n")
    again = flows(cli, "rerun", run_id, "pick", "--downstream")
    assert again.exit_code == 1, again.output
    assert (tmp_path / "pushed.txt").read_text() == "us\n"  # not pushed to us a second time
    job = json.loads(flows(cli, "job", f"{run_id}:deploy", "--json").stdout)
    assert job["failure"]["group"] == "subflow-invalid"
    message = job["failure"]["message"]
    assert f"run {run_id}.deploy was submitted with other params" in message
    assert "region: 'us' then, 'eu' now" in message
    assert "start a new run" in message
    # Its params unchanged, the step runs the child again as a re-run does.
    (tmp_path / "region.txt").write_text("us\n")
    assert flows(cli, "rerun", run_id, "pick", "--downstream").exit_code == 0
    assert (tmp_path / "pushed.txt").read_text() == "us\nus\n"


WAITING_CHILD = """\
version: 1
name: gate
queue: gates
steps:
  ok:
    wait: {signal: ok}
"""

WAITING_PARENT = """\
version: 1
name: parent
steps:
  process: {run: 'true'}
  child: {flow: gate.yaml, needs: [process]}
"""


def _waiting_child(cli: CliRunner, client: Client, tmp_path: Path) -> tuple[str, str]:
    """Start a parent run whose child run waits for a signal: the two run ids, the child's
    once it is there."""
    (tmp_path / "gate.yaml").write_text(WAITING_CHILD)
    (tmp_path / "parent.yaml").write_text(WAITING_PARENT)
    run_id = flows(cli, "run", "--detach", str(tmp_path / "parent.yaml")).stdout.strip()
    child_id = f"{run_id}.child"
    until(lambda: load_run(client, child_id) is not None)
    return run_id, child_id


def test_a_wait_in_a_child_run_is_signaled_by_its_label_in_the_parent(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path, parent_worker: None
) -> None:
    # flows run and flows status name such a wait 'child/ok', as flows logs takes it.
    run_id, child_id = _waiting_child(cli, client, tmp_path)
    for label, message in [
        ("chld/ok", f"run {run_id} has no step 'chld' (did you mean 'child'?)"),
        ("process/ok", f"run {run_id}: step 'process' started no child run"),
        ("child/k", f"run {child_id} has no step 'k' (did you mean 'ok'?)"),
    ]:
        with assert_unchanged(redis_client, f"*{run_id}*"):  # (the worker writes its own keys)
            refused = flows(cli, "approve", run_id, label)
        assert refused.exit_code == 1, refused.output
        assert message in refused.output
        assert "Arg" not in refused.output
    result = flows(cli, "approve", run_id, "child/ok", "--note", "fine")
    assert result.exit_code == 0, result.output
    assert f"run {child_id}: step ok signaled" in result.output
    assert steps(status(cli, child_id)) == {"ok": "success"}


def test_a_sub_flow_steps_job_gives_its_step_as_the_run_does_child_run_included(
    cli: CliRunner, client: Client, tmp_path: Path, parent_worker: None
) -> None:
    """``GET /api/v1/jobs/{jid}`` (and ``flows job --json``) of the job of a sub-flow step:
    its step as the run's JSON gives it, the child run's id and the step's status with it."""
    run_id, child_id = _waiting_child(cli, client, tmp_path)
    jid = f"{run_id}:child"

    def job_and_step() -> tuple[dict[str, Any], dict[str, Any]]:
        with serve(client, Auth(TOKEN, reads_open=True)) as url:
            job = Api(url).get(f"/api/v1/jobs/{jid}")
            run = Api(url).get(f"/api/v1/runs/{run_id}?limit=0")
        assert job.status == run.status == 200, (job.body, run.body)
        [step] = [s for s in run.body["steps"] if s["step"] == "child"]
        return job.body, step

    job, step = job_and_step()
    assert job["step"] == step and job["state"] == "depends"  # waiting for its child run
    assert (step["child"], step["status"]) == (child_id, "running")
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        page = Api(url).get(f"/jobs/{jid}").body  # the job page says it too, linking both
    assert f'id="job-step" href="/runs/{quote(run_id)}/steps/child">child</a>' in page
    assert 'class="badge st-running"' in page
    assert f'id="job-child" href="/runs/{quote(child_id)}">{child_id}</a>' in page
    assert json.loads(flows(cli, "job", jid, "--json").stdout)["step"] == step
    assert flows(cli, "approve", run_id, "child/ok").exit_code == 0
    until(lambda: status(cli, run_id)["status"] == "succeeded")
    job, step = job_and_step()
    assert job["step"] == step and (step["child"], step["status"]) == (child_id, "success")
    client.queues["plain"].put("K", {}, jid="plain-job")
    assert json.loads(flows(cli, "job", "plain-job", "--json").stdout)["step"] is None


def test_explain_takes_a_child_runs_step_by_its_label_too(
    cli: CliRunner, client: Client, tmp_path: Path, parent_worker: None
) -> None:
    run_id, child_id = _waiting_child(cli, client, tmp_path)
    result = flows(cli, "explain", run_id, "child/ok")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"run {child_id} is running\n  ok (awaiting)\n")
    assert "It awaits the signal 'ok'" in result.output
    refused = flows(cli, "explain", run_id, "process/ok")
    assert refused.exit_code == 1
    assert f"run {run_id}: step 'process' started no child run" in refused.output


def _cancel_the_child_or_its_step(run_id: str) -> str:
    """The hint a refused cancel of a job of run_id's child run gives: what to cancel instead."""
    return (
        f"cancel the child run instead (`flows cancel {run_id}.child`: the step then fails) or"
        f" the step that started it (`flows cancel {run_id}:child`: the child run with it)"
    )


def test_every_command_naming_a_step_takes_a_child_runs_step_by_its_label(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path, parent_worker: None
) -> None:
    # Each acts on the child run's step as it would on the child run itself (RUN.child).
    run_id, child_id = _waiting_child(cli, client, tmp_path)
    for args, message in [
        (
            ["rerun", run_id, "child/ok", "--detach"],
            f"run {child_id} has status running: rerun is not allowed",
        ),
        (["rerun", run_id, "child/k", "--detach"], f"run {child_id} has no step 'k' (did"),
        (["rerun", run_id, "chld/ok", "--detach"], f"run {run_id} has no step 'chld' (did"),
        (
            ["retry", f"{run_id}:child/ok", "--detach"],
            f"job {child_id}:ok has status awaiting: retry is not allowed (allowed: signal",
        ),
        (["retry", f"{run_id}:process/ok"], f"run {run_id}: step 'process' started no child run"),
        (["cancel", f"{run_id}:child/k"], f"run {child_id} has no step 'k' (did you mean 'ok'?)"),
        (["cancel", f"{run_id}:child/ok"], f"{run_id}:child is a dependent of {child_id}:ok"),
        (["cancel", f"{run_id}:child/ok"], _cancel_the_child_or_its_step(run_id)),
        (
            ["kick", "--step", f"{run_id}:child/ok"],
            f"step ok of run {child_id} has status awaiting: kick is not",
        ),
    ]:
        with assert_unchanged(redis_client, f"*{run_id}*"):
            refused = flows(cli, *args)
        assert refused.exit_code == 1, (args, refused.output)
        assert message in refused.output, (args, refused.output)
        assert "Traceback" not in refused.output and "Usage" not in refused.output
    with (
        serve(client, Auth(TOKEN, reads_open=False)) as url,
        assert_unchanged(redis_client, f"*{run_id}*"),
    ):
        reply = Api(url).post(f"/api/v1/jobs/{child_id}:ok/cancel")
    assert reply.status == 409, reply.body
    assert reply.body["detail"].endswith(_cancel_the_child_or_its_step(run_id)), reply.body
    assert flows(cli, "approve", run_id, "child/ok").exit_code == 0
    until(lambda: status(cli, child_id)["status"] == "succeeded")
    again = flows(cli, "rerun", run_id, "child/ok", "--detach")
    assert again.exit_code == 0, again.output
    assert f"run {child_id}: 1 job(s) of ok put back to run again" in again.output
    assert steps(status(cli, child_id)) == {"ok": "awaiting"}
