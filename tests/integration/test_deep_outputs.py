"""Outputs and data as deep as the engine takes are readable on every surface: a downstream
step, a shell step, the run's outputs, ``flows status --json``, ``flows job --json``, the API
and the pages; one level more is refused where it comes in (a step's result fails the step in
``bad-result`` naming the limit, a param is refused before the run is submitted)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows, status_json
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument
from scheduler.engine.limits import MAX_JSON_DEPTH, MAX_RESULT_DEPTH

FLOW = """\
    version: 1
    name: deep
    queue: deep
    params:
      levels: {type: int}
      extra: {type: array, default: []}
    steps:
      produce:
        job: TASKS.produce
        with: {levels: "${{ params.levels }}"}
      consume:
        job: TASKS.consume
        needs: [produce]
        with: {value: "${{ steps.produce.outputs.value }}"}
      shell:
        needs: [produce]
        run: echo "depth=${{ steps.produce.outputs.depth }}" >> "$FLOWS_OUTPUT"
    outputs:
      value: "${{ steps.produce.outputs.value }}"
"""

TASKS = """\
    def nested(levels):
        value = 1
        for _ in range(levels):
            value = [value]
        return value

    def produce(job):
        # The outputs object is level 1: its value nests one level less.
        levels = job.data["levels"]
        return {"value": nested(levels - 1), "depth": levels}

    def consume(job):
        value, levels = job.data["value"], 0
        while isinstance(value, list):
            value, levels = value[0], levels + 1
        return {"levels": levels}
"""


def nested(levels: int) -> Any:
    """A value ``levels`` lists deep."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def produced(document: Any) -> Any:
    """The outputs of step ``produce``'s job in a run document."""
    (step,) = [s for s in document["steps"] if s["step"] == "produce"]
    return step["jobs"][0]["outputs"]


@pytest.fixture
def cli(
    server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    return CliRunner()


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        yield Api(url, token=None)


@pytest.fixture
def flow_file(tmp_path: Path) -> Path:
    module = f"deep_{uuid.uuid4().hex[:8]}"  # workers cache imported modules
    (tmp_path / f"{module}.py").write_text(dedent(TASKS))
    path = tmp_path / "deep.yaml"
    path.write_text(dedent(FLOW).replace("TASKS.", f"{module}."))
    return path


def test_outputs_at_the_limit_are_read_on_every_surface(
    cli: CliRunner, client: Client, api: Api, flow_file: Path
) -> None:
    result = flows(cli, "run", str(flow_file), "-p", f"levels={MAX_RESULT_DEPTH}", "--run-id", "d")
    assert result.exit_code == 0, result.output
    value = nested(MAX_RESULT_DEPTH - 1)
    job = client.jobs["d:produce"]
    assert job.result == {"value": value, "depth": MAX_RESULT_DEPTH}
    assert client.jobs["d:consume"].result == {"levels": MAX_RESULT_DEPTH - 1}
    assert client.jobs["d:shell"].result == {"depth": str(MAX_RESULT_DEPTH)}

    status = status_json(cli, "d")
    assert produced(status)["value"] == value
    shown = flows(cli, "job", "d:produce", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["result"]["value"] == value

    reply = api.get("/api/v1/jobs/d:produce")
    assert reply.status == 200, reply.body
    assert reply.body["result"]["value"] == value
    run = api.get("/api/v1/runs/d")
    assert run.status == 200, run.body
    assert produced(run.body)["value"] == value
    for page in ("/runs/d", "/jobs/d:produce"):
        assert api.get(page).status == 200, page


def test_data_at_the_limit_is_read_by_the_api_and_the_command_line(
    cli: CliRunner, client: Client, api: Api
) -> None:
    data = {"value": nested(MAX_JSON_DEPTH - 1)}
    client.queues["plain"].put("tasks.t", data, jid="deep-data")
    reply = api.get("/api/v1/jobs/deep-data")
    assert reply.status == 200, reply.body
    assert reply.body["data"] == data
    shown = flows(cli, "job", "deep-data", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["data"] == data
    with assert_unchanged(client.redis), pytest.raises(InvalidArgument, match="nests more than"):
        client.queues["plain"].put("tasks.t", {"value": nested(MAX_JSON_DEPTH)}, jid="deeper")


def test_a_result_one_level_past_the_limit_fails_its_step_naming_the_limit(
    cli: CliRunner, client: Client, api: Api, flow_file: Path
) -> None:
    levels = MAX_RESULT_DEPTH + 1
    result = flows(cli, "run", str(flow_file), "-p", f"levels={levels}", "--run-id", "e")
    assert result.exit_code == 1, result.output
    job = client.jobs["e:produce"]
    assert job.state == "failed"
    assert job.failure is not None and job.failure["group"] == "bad-result"
    assert f"nests more than {MAX_RESULT_DEPTH} levels deep" in job.failure["message"]
    assert status_json(cli, "e")["status"] == "failed"
    assert api.get("/api/v1/jobs/e:produce").status == 200


def test_a_client_complete_one_level_past_the_limit_leaves_the_job_running(
    client: Client,
) -> None:
    client.queues["plain"].put("tasks.t", {}, jid="r")
    (job,) = client.queues["plain"].pop()
    with assert_unchanged(client.redis), pytest.raises(InvalidArgument) as refused:
        job.complete(result=nested(MAX_RESULT_DEPTH + 1))
    assert f"nests more than {MAX_RESULT_DEPTH} levels deep" in str(refused.value)
    assert client.jobs["r"].state == "running"
    assert job.complete(result=nested(MAX_RESULT_DEPTH)) == "complete"


def test_a_param_nested_past_the_limit_is_refused_before_anything_is_written(
    cli: CliRunner, client: Client, flow_file: Path
) -> None:
    deep = json.dumps(nested(MAX_RESULT_DEPTH + 1))
    with assert_unchanged(client.redis):
        result = flows(cli, "run", str(flow_file), "-p", "levels=2", "-p", f"extra={deep}")
    assert result.exit_code != 0
    assert f"param 'extra': nests more than {MAX_RESULT_DEPTH} levels deep" in result.output
    very_deep = "[" * 100_000 + "]" * 100_000  # deeper than Python's JSON decoder goes
    with assert_unchanged(client.redis):
        result = flows(cli, "run", str(flow_file), "-p", "levels=2", "-p", f"extra={very_deep}")
    assert result.exit_code != 0
    assert "param 'extra': nests more than" in result.output
    assert "Traceback" not in result.output
