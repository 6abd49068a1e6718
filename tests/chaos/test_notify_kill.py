"""The notifications' sender killed with -9 in the middle of a delivery (``pytest -m chaos``):
every event is delivered at least once, and the one sent again carries the same id.

A run of a few failing steps, each with a webhook rule, leaves one outbox event per step (real
engine calls). The receiver holds the first POST open; the scheduler service (a real
``python -m scheduler`` process) is killed while it waits on it, then started again: it sends
what it had taken first (its consumer name is stable per host and folder), then the rest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from notify_support import Receiver, receiver_fixture

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

pytestmark = pytest.mark.chaos

STEPS = 6 if (os.environ.get("FLOWS_CHAOS") or "short") == "short" else 40
RUN = "alerts@20261128T000000Z"
DEADLINE = 60.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receiver_fixture()


def failed_steps(client: Client, receiver: Receiver) -> list[str]:
    """A run whose every job failed, each with one outbox event; returns the events' ids."""
    rule = {"on": ["failure"], "step": None, "webhook": {"url": receiver.url + "/hook"}}
    rules = [{**rule, "step": f"s{i}"} for i in range(STEPS)]
    jobs = [
        {
            "jid": f"{RUN}:s{i}",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "priority": 0,
            "tags": [],
            "retries": 0,
            "depends": [],
            "delay": 0,
            "notify": "failure",
        }
        for i in range(STEPS)
    ]
    run = {"flow": "alerts", "notify": rules}
    assert client.engine.call("flow.submit", RUN, json.dumps(run), json.dumps(jobs)) == "submitted"
    popped = json.loads(client.engine.call("pop", "q", "w", STEPS))
    for job in popped:
        client.engine.call("fail", job["jid"], "w", "boom", "it broke")
    return [
        entry_id
        for entry_id, _ in client.engine.redis.xrange(client.engine.key_prefix + "notify:outbox")
    ]


def service(server: EmbeddedServer, folder: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FLOWS_REDIS_URL": server.url}
    env.pop("FLOWS_NAMESPACE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler", "--flows-dir", str(folder), "--log-level", "WARNING"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_a_sender_killed_mid_delivery_loses_nothing(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path, receiver: Receiver
) -> None:
    client = Client(redis=redis_client)
    ids = failed_steps(client, receiver)
    assert len(ids) == STEPS
    folder = tmp_path / "flows"
    folder.mkdir()
    receiver.hold.set()
    first = service(server, folder)
    try:
        [held] = receiver.wait_for(1, DEADLINE)
        first.send_signal(signal.SIGKILL)
        first.wait(DEADLINE)
    finally:
        first.kill()
    assert first.returncode == -signal.SIGKILL
    receiver.hold.clear()
    receiver.release.set()
    second = service(server, folder)
    try:
        received = receiver.wait_for(STEPS + 1, DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while redis_client.xlen(client.engine.key_prefix + "notify:outbox") and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(DEADLINE)
    bodies = [r.json() for r in received]
    got = [body["id"] for body in bodies]
    assert sorted(set(got)) == sorted(ids)  # every event, at least once
    held_id = held.json()["id"]
    assert got.count(held_id) == 2  # the one cut short, again, with its id
    assert all(r.headers["X-Flows-Event-Id"] == r.json()["id"] for r in received)
    assert redis_client.xlen(client.engine.key_prefix + "notify:outbox") == 0
