"""A flow's ``concurrency.max_active_runs`` holds for every way a run is started by hand:
``flows run``, ``flows schedule trigger``, ``POST /api/v1/flows/{flow}/runs`` and
``POST /api/v1/runs`` are refused at the limit, naming it and the active runs, and change
nothing; once a run ends there is room again."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.cli import main
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: limited
queue: lim
schedule: {cron: "0 3 * * *"}
concurrency: {max_active_runs: 1}
steps:
  a: {run: 'true'}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    (path / "limited.yaml").write_text(FLOW)
    return path


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def refused(message: str, active: str) -> None:
    assert "limited is at its concurrency.max_active_runs (1)" in message, message
    assert f"active: {active}" in message, message
    assert "not submitted" in message, message


def test_every_manual_start_is_refused_at_the_limit(
    url: str, folder: Path, redis_client: redis.Redis
) -> None:
    file = str(folder / "limited.yaml")
    first = flows("run", file, "--detach", "--redis", url)
    assert first.exit_code == 0, first.output
    active = first.stdout.strip()
    # The scheduler service registers the flow, so it can be triggered by name too.
    assert flows("scheduler", "--redis", url, "--flows-dir", str(folder), "--once").exit_code == 0

    with assert_unchanged(redis_client):
        again = flows("run", file, "--detach", "--redis", url)
        assert again.exit_code == 1
        refused(again.stderr, active)
        assert "Traceback" not in again.output
        triggered = flows("schedule", "trigger", "limited", "--redis", url)
        assert triggered.exit_code == 1
        refused(triggered.stderr, active)

    client = Client(url)
    with serve(client, Auth(TOKEN, reads_open=True), flows_dir=folder) as base:
        http = Api(base)
        with assert_unchanged(redis_client):
            started = http.post("/api/v1/flows/limited/runs", {"params": {}})
            assert started.status == 409, started.body
            refused(started.body["detail"], active)
            started = http.post("/api/v1/runs", {"flow": "limited"})
            assert started.status == 409, started.body
            refused(started.body["detail"], active)

        # Once the active run ends, there is room again.
        assert flows("cancel", active, "--redis", url).exit_code == 0
        started = http.post("/api/v1/flows/limited/runs", {"params": {}})
        assert started.status == 201, started.body
