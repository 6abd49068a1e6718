"""`flows explain RUN [STEP]`, `flows explain JID` and `GET /api/v1/.../explain`: the engine's
reasons for a real run, over the command line and real HTTP (the sentences themselves are
walked state by state in tests/lua/test_explain.py)."""

from __future__ import annotations

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


def test_unknown_targets_are_refused_plainly(server: EmbeddedServer, run_id: str) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["explain", "nope", "--redis", server.url])
    assert missing.exit_code == 1
    assert "no job or run 'nope'" in missing.output
    step = runner.invoke(main, ["explain", run_id, "shipp", "--redis", server.url])
    assert step.exit_code == 1
    assert "run g1 has no step 'shipp' (steps: build, approve)" in step.output
    assert "Traceback" not in missing.output + step.output


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
