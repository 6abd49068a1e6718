"""Workers, the worker pool and the scheduler service refuse a server that may evict jobs, and
say how to fix it (``scheduler/engine/safety.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged

from flows.cli import main
from flows.cli.run import work_run
from flows.runs.service_source import FlowsSource
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.safety import UnsafeServer, check_eviction_policy
from scheduler.service.loop import SchedulerService
from scheduler.worker import Worker, WorkerPool


@pytest.fixture
def evicting(server: EmbeddedServer, redis_client: redis.Redis) -> Iterator[Client]:
    """The session's server with ``allkeys-lru`` for the test (restored after), and a job."""
    redis_client.config_set("maxmemory-policy", "allkeys-lru")
    client = Client(redis=redis_client)
    client.queues["q"].put("tasks.a", {}, jid="job-1")
    try:
        yield client
    finally:
        redis_client.config_set("maxmemory-policy", "noeviction")


def assert_explains(message: str) -> None:
    assert "allkeys-lru" in message and "noeviction" in message, message
    assert "CONFIG SET maxmemory-policy noeviction" in message, message


def test_the_check_passes_on_noeviction(redis_client: redis.Redis) -> None:
    assert check_eviction_policy(redis_client) == "noeviction"


def test_a_worker_refuses_and_takes_no_job(evicting: Client) -> None:
    with pytest.raises(UnsafeServer) as refused:
        Worker(evicting, ["q"], burst=True).run()
    assert_explains(str(refused.value))
    assert evicting.jobs["job-1"].state == "waiting"


def test_a_pool_refuses_before_starting_a_process(evicting: Client, server: EmbeddedServer) -> None:
    pool = WorkerPool(server.url, ["q"], processes=2, burst=True)
    with pytest.raises(UnsafeServer) as refused:
        pool.run()
    assert_explains(str(refused.value))
    assert pool._children == {}
    assert evicting.jobs["job-1"].state == "waiting"


def test_the_service_refuses(evicting: Client, tmp_path: Path) -> None:
    service = SchedulerService(evicting, FlowsSource(), tmp_path, service_id="unsafe")
    with pytest.raises(UnsafeServer) as refused:
        service.run(install_signals=False)
    assert_explains(str(refused.value))


def test_the_commands_exit_with_the_fix_and_no_traceback(
    evicting: Client, server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    for args in (
        ["worker", "-q", "q", "--processes", "0", "--burst"],
        ["worker", "-q", "q", "--processes", "2", "--burst"],
        ["scheduler", "--flows-dir", str(tmp_path)],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 78, (args, result.output)  # no restart mends it
        assert_explains(result.output)
        assert "Traceback" not in result.output
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["FLOWS_REDIS_URL"] = server.url
    child = subprocess.run(
        [sys.executable, "-m", "scheduler.worker", "-q", "q", "--burst"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 78, child.stderr
    assert_explains(child.stderr)
    assert "Traceback" not in child.stderr
    assert evicting.jobs["job-1"].state == "waiting"


FLOW = "version: 1\nname: safe\nqueue: safe\nsteps:\n  a: {run: 'true'}\n"


@pytest.mark.timeout(60)  # before the refusal, `flows run` followed its unworked run forever
def test_working_a_run_here_is_refused_before_anything_changes(
    evicting: Client,
    redis_client: redis.Redis,
    server: EmbeddedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    flow = tmp_path / "safe.yaml"
    flow.write_text(FLOW)
    runner = CliRunner()
    running = runner.invoke(main, ["run", "--detach", str(flow)])  # workers elsewhere: allowed
    assert running.exit_code == 0, running.output
    finished = runner.invoke(main, ["run", "--detach", str(flow)]).stdout.strip()
    for job in evicting.queues["safe"].pop(count=2):
        if job.jid == f"{finished}:a":
            job.complete()
    assert evicting.jobs[f"{finished}:a"].state == "complete"
    for args in (
        ["run", str(flow)],
        ["retry", running.stdout.strip()],
        ["rerun", finished, "a"],
    ):
        with assert_unchanged(redis_client):
            result = runner.invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert_explains(result.output)
        assert f"flows {args[0]} refuses to run" in result.output
        assert "Traceback" not in result.output


@pytest.mark.timeout(60)
def test_a_local_worker_that_cannot_work_ends_the_follow_with_its_error(
    evicting: Client, server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    flow = tmp_path / "safe.yaml"
    flow.write_text(FLOW)
    run_id = CliRunner().invoke(main, ["run", "--detach", str(flow)]).stdout.strip()
    with pytest.raises(UnsafeServer) as refused:
        work_run(evicting, run_id, ["safe"], threads=1)
    assert_explains(str(refused.value))
