"""`flows explain RUN [STEP]`, `flows explain JID` and `GET /api/v1/.../explain`: the engine's
reasons for a real run, over the command line and real HTTP (the sentences themselves are
walked state by state in tests/lua/test_explain.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.cli import main
from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.ui.auth import Auth
from flows.validation.validate import validate_text
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

FLOW = """\
version: 1
name: gate
queue: gate
steps:
  build:
    run: echo built
  approve:
    needs: [build]
    wait: {signal: approve}
"""


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="explain-test")


@pytest.fixture
def run_id(client: Client) -> str:
    result = validate_text(dedent(FLOW), file="gate.yaml", flow_dir=Path("."))
    assert result.flow is not None
    requests = expand(result.flow, run_id="g1", logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run("g1", "gate", requests, params={}))
    return "g1"


def test_the_command_explains_a_run_a_step_and_a_job(
    server: EmbeddedServer, run_id: str, redis_client: redis.Redis
) -> None:
    runner = CliRunner()
    with assert_unchanged(redis_client):  # explaining only reads
        whole = runner.invoke(main, ["explain", run_id, "--redis", server.url])
        step = runner.invoke(main, ["explain", run_id, "approve", "--redis", server.url])
        job = runner.invoke(main, ["explain", "g1:build", "--redis", server.url])
    assert whole.exit_code == 0, whole.output
    assert whole.output.splitlines() == [
        "run g1 is running",
        "  build (waiting)",
        "    No live worker listens on its queue gate; none has ever registered for it "
        "(start one: flows worker -q gate).",
        "  approve (waiting)",
        "    It waits for its dependencies (trigger rule all_success): g1:build (waiting).",
    ]
    assert step.output.splitlines()[1:] == [
        "  approve (waiting)",
        "    It waits for its dependencies (trigger rule all_success): g1:build (waiting).",
    ]
    assert job.output.startswith("g1:build: No live worker listens on its queue gate")


def test_a_burst_worker_that_just_stopped_is_named_as_the_last_one(
    server: EmbeddedServer, client: Client, run_id: str
) -> None:
    """A worker that stops cleanly deregisters; the no-worker reason still names it."""
    env = {**os.environ, "FLOWS_REDIS_URL": server.url}
    command = [sys.executable, "-c", "from flows.cli import main; main()", "worker"]
    worker = subprocess.run(
        [*command, "-q", "gate", "--burst", "--processes", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    done = client.jobs["g1:build"]
    assert done is not None and done.state == "complete" and done.ran_by is not None
    assert client.workers.registry("gate") == []  # it deregistered on its way out
    later = validate_text(dedent(FLOW), file="gate.yaml", flow_dir=Path("."))
    assert later.flow is not None
    requests = expand(later.flow, run_id="g2", logical_time=datetime(2026, 1, 2, tzinfo=UTC))
    submit(client, assemble_run("g2", "gate", requests, params={}))

    shown = CliRunner().invoke(main, ["explain", "g2", "build", "--redis", server.url])
    assert shown.exit_code == 0, shown.output
    name = re.escape(done.ran_by.worker)
    expected = (
        rf"No live worker listens on its queue gate; the last one, {name}, "
        r"was seen \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+s ago\)\."
    )
    assert re.fullmatch(expected, shown.output.splitlines()[-1].strip()), shown.output
    assert "none has ever registered" not in shown.output
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        reply = Api(base).get("/api/v1/jobs/g2:build/explain").body
    assert (reply["reason"], reply["last"]) == ("no-worker", done.ran_by.worker)
    assert re.fullmatch(expected, reply["sentence"]), reply


def test_a_finished_run_is_said_in_its_own_word(server: EmbeddedServer, run_id: str) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["cancel", run_id, "--redis", server.url]).exit_code == 0
    shown = runner.invoke(main, ["explain", run_id, "--redis", server.url])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines() == [f"run {run_id} canceled", "  every step has finished"]


def test_unknown_targets_are_refused_plainly(server: EmbeddedServer, run_id: str) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["explain", "nope", "--redis", server.url])
    assert missing.exit_code == 1
    assert "no job or run 'nope'" in missing.output
    step = runner.invoke(main, ["explain", run_id, "shipp", "--redis", server.url])
    assert step.exit_code == 1
    assert "run g1 has no step 'shipp' (its steps: build, approve)" in step.output
    # A misspelt step is answered with the one likely meant, as `flows logs` answers it.
    typo = runner.invoke(main, ["explain", run_id, "biuld", "--redis", server.url])
    assert typo.exit_code == 1
    assert "run g1 has no step 'biuld' (did you mean 'build'?)" in typo.output
    assert "Traceback" not in missing.output + step.output + typo.output
    # A job with a STEP: refused, not answered as if STEP were not there.
    job_step = runner.invoke(main, ["explain", f"{run_id}:build", "build", "--redis", server.url])
    assert job_step.exit_code == 2
    assert "'g1:build' is a job, not a run: STEP goes with a run" in job_step.output


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


def test_the_api_explains_a_job_and_a_run(api: Api, run_id: str) -> None:
    job = api.get("/api/v1/jobs/g1:build/explain")
    assert job.status == 200
    assert job.body["reason"] == "no-worker"
    assert job.body["sentence"].startswith("No live worker listens on its queue gate")
    run = api.get(f"/api/v1/runs/{run_id}/explain?step=approve")
    assert run.status == 200
    assert [s["step"] for s in run.body["steps"]] == ["approve"]
    assert run.body["steps"][0]["jobs"][0]["reason"] == "dependencies"
    assert api.get("/api/v1/jobs/nope/explain").status == 404
    assert api.get(f"/api/v1/runs/{run_id}/explain?step=x").status == 404


def test_a_canceled_step_says_it_was_canceled(
    server: EmbeddedServer, run_id: str, client: Client
) -> None:
    """Canceling deletes the jobs: a step asked about still says how it ended, over the command
    line and to the dashboard's "why?", where an empty answer read as nothing holding it."""
    runner = CliRunner()
    assert runner.invoke(main, ["cancel", run_id, "--redis", server.url]).exit_code == 0
    shown = runner.invoke(main, ["explain", run_id, "approve", "--redis", server.url])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[1:] == [
        "  approve (canceled)",
        "    It was canceled (or deleted): it runs only if the run is retried (flows retry).",
    ]
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        reply = Api(base).get(f"/api/v1/runs/{run_id}/explain?step=approve").body
    assert [(j["jid"], j["reason"]) for j in reply["steps"][0]["jobs"]] == [
        ("g1:approve", "canceled")
    ]


def test_a_wide_step_is_explained_a_page_at_a_time(server: EmbeddedServer, client: Client) -> None:
    items = ", ".join(str(i) for i in range(25))
    flow = (
        "version: 1\nname: wide\nqueue: wide\nsteps:\n  each:\n"
        f"    foreach: {{items: [{items}]}}\n"
        '    run: echo "${{ item }}"\n'
    )
    result = validate_text(flow, file="wide.yaml", flow_dir=Path("."))
    assert result.flow is not None
    requests = expand(result.flow, run_id="w1", logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run("w1", "wide", requests, params={}))
    out = CliRunner().invoke(main, ["explain", "w1", "--redis", server.url]).output
    lines = out.splitlines()
    assert lines[1] == "  each (waiting)"
    assert sum(1 for line in lines if "No live worker listens on its queue wide" in line) == 20
    assert lines[-1] == "    ... and 5 more jobs of this step"
