"""Fixtures of the bad-input tier: a namespace holding real state, and the CLI pointed at it.

Every test here sends bad input through one boundary (a flow file, a CLI argument, a Python
client call, a schedule file) and checks both the error and that not one key changed
(``helpers.assert_unchanged``). The namespace holds a submitted run, waiting, running, failed
and complete jobs and a registered schedule, so a boundary that wrote before checking would show.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules

GOOD_FLOW = """\
version: 1
name: good
queue: q
steps:
  a: {job: tasks.a, with: {n: 1}}
  b: {job: tasks.b, needs: [a]}
"""

GOOD_SCHEDULE = """\
version: 1
name: nightly
queue: q
schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
steps:
  a: {job: tasks.a}
"""


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client, worker_name="w1") as client:
        yield client


@pytest.fixture
def populated(client: Client, tmp_path: Path) -> Client:
    """Jobs in several states, a flow run and a schedule."""
    from flows.runs.service_source import FlowsSource
    from scheduler.service.loop import SchedulerService

    queue = client.queues["q"]
    queue.put("tasks.a", {"n": 1}, jid="waiting", tags=["t"])
    queue.put("tasks.a", {"n": 2}, jid="running")
    queue.put("tasks.a", {"n": 3}, jid="failing")
    queue.put("tasks.a", {"n": 4}, jid="done")
    popped = {job.jid: job for job in queue.pop(4)}
    popped["done"].complete(result={"ok": True})
    popped["failing"].fail("boom", "it broke")
    client.engine.call(
        "flow.submit",
        "run-1",
        json.dumps({"flow": "good"}),
        json.dumps([{"jid": "run-1:a", "queue": "q", "klass": "tasks.a", "data": "{}"}]),
    )
    folder = tmp_path / "registered"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(GOOD_SCHEDULE)
    SchedulerService(client, FlowsSource(), folder, service_id="fixture").scan(time.time())
    assert Schedules(client).get("nightly") is not None
    return client


@pytest.fixture
def cli(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """The CLI on the session's server (through $FLOWS_REDIS_URL)."""
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.delenv("FLOWS_NAMESPACE", raising=False)
    return CliRunner()
