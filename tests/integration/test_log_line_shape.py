"""A log line has one JSON shape everywhere it is given as JSON: ``flows logs RUN --json``,
``flows logs --job JID --json``, the API's page of a job's lines and its stream of them:
``step`` (the job's label in its run, null for a job of no run), ``jid``, ``attempt``, then the
line's own fields."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from ui_support import TOKEN, Api, serve

from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: shape
queue: shape
steps:
  hello:
    run: echo "hello"; echo "again"
  each:
    foreach: {items: [1]}
    run: echo "item ${{ item }}"
"""


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


def json_lines(cli: CliRunner, *args: str) -> list[dict[str, Any]]:
    result = flows(cli, "logs", *args, "--json")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def streamed(api: Api, jid: str) -> list[dict[str, Any]]:
    return [data for kind, data in api.events(f"/api/v1/jobs/{jid}/logs/stream") if kind == "line"]


def test_a_log_line_has_one_shape_in_the_cli_the_api_page_and_the_stream(
    cli: CliRunner, api: Api, tmp_path: Path
) -> None:
    path = tmp_path / "shape.yaml"
    path.write_text(FLOW)
    assert flows(cli, "run", str(path), "--run-id", "s").exit_code == 0
    of_run = json_lines(cli, "s")
    for jid, label in (("s:hello", "hello"), ("s:each[0]", "each[0]")):
        expected = [line for line in of_run if line["jid"] == jid]
        assert expected and {line["step"] for line in expected} == {label}
        assert json_lines(cli, "--job", jid) == expected
        page = api.get(f"/api/v1/jobs/{jid}/logs")
        assert page.status == 200, page.body
        assert page.body["items"] == expected
        assert streamed(api, jid) == expected
    first = of_run[0]
    assert list(first) == ["attempt", "jid", "step", "stream", "text", "time"]  # sorted keys


def test_the_lines_of_a_job_of_no_run_have_no_step(
    cli: CliRunner, api: Api, client: Client
) -> None:
    jid = client.queues["plain"].put("K", {}, jid="plain-1")
    client.engine.call("log.append", jid, 1, 0, 1, 1.0, "stdout", "", "plain line")
    line = {"time": 1.0, "stream": "stdout", "text": "plain line"}
    expected = [{"step": None, "jid": jid, "attempt": 1, **line}]
    assert json_lines(cli, "--job", jid) == expected
    assert api.get(f"/api/v1/jobs/{jid}/logs").body["items"] == expected
    text = flows(cli, "logs", "--job", jid)
    assert text.exit_code == 0 and "plain line" in text.stdout
