"""A worker ends on a fetch refused for a reason waiting cannot mend (errors.md, "Workers and the
scheduler service"), instead of retrying it every 2 s for ever; faults of the server that pass
(away, full, read-only) are still waited out (test_worker_supervision, the fault tiers)."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import redis
from test_worker import put

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.faults import PermissionDenied
from scheduler.worker import Worker

USER = "flows-gives-up-test"


@pytest.fixture
def worker_url(server: EmbeddedServer, redis_client: redis.Redis) -> Iterator[str]:
    """A URL of an ACL user that may do everything, until the test takes it away."""
    password = secrets.token_urlsafe(16)
    redis_client.execute_command("ACL", "SETUSER", USER, "on", f">{password}", "~*", "&*", "+@all")
    try:
        yield f"unix://{USER}:{quote(password, safe='')}@{server.socket_path}"
    finally:
        redis_client.execute_command("ACL", "DELUSER", USER)


def test_a_permission_taken_away_ends_the_worker_with_it(
    worker_url: str, redis_client: redis.Redis
) -> None:
    client = Client(worker_url, worker_name="gives-up")
    worker = Worker(client, ["q"], poll_interval=0.1, shutdown_grace=1.0)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=run, name="worker-gives-up", daemon=True)
    thread.start()
    try:
        admin = Client(redis=redis_client, worker_name="admin")
        deadline = time.monotonic() + 10
        while "gives-up" not in {w["name"] for w in admin.workers.documents()}:
            assert time.monotonic() < deadline, "the worker did not register"
            time.sleep(0.05)
        # Every entry to the engine's calls taken away (its event channel stays allowed).
        entries = ("fcall", "fcall_ro", "evalsha", "evalsha_ro", "eval", "eval_ro")
        redis_client.execute_command("ACL", "SETUSER", USER, *(f"-{name}" for name in entries))
        thread.join(15)
        assert not thread.is_alive(), "the worker kept retrying a fetch it may not make"
    finally:
        worker.stop()
        thread.join(15)
        client.close()
    assert len(raised) == 1 and isinstance(raised[0], PermissionDenied), raised


def test_a_user_without_subscribe_still_works_its_jobs(
    worker_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock-lost messages only hasten what a heartbeat finds: a worker whose user may not
    subscribe says so once, runs its jobs and stops as any worker does; its listener waits the
    refusal out instead of dying on it."""
    redis_client.execute_command("ACL", "SETUSER", USER, "-subscribe")
    admin = Client(redis=redis_client, worker_name="admin")
    jids = [put(admin, "q", "echo", {"value": n}) for n in range(3)]
    client = Client(worker_url, worker_name="no-subscribe")
    worker = Worker(client, ["q"], poll_interval=0.05)
    thread = threading.Thread(target=worker.run, name="worker-no-subscribe", daemon=True)

    def refused() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "lock-lost messages" in r.getMessage()]

    def refusals() -> int:
        """The server's count of this user's refused SUBSCRIBEs (its ACL log)."""
        entries = redis_client.execute_command("ACL", "LOG")
        return sum(
            int(e["count"]) for e in entries if e["username"] == USER and e["object"] == "subscribe"
        )

    already = refusals()
    with caplog.at_level(logging.WARNING, logger="flows.worker"):
        thread.start()
        try:
            deadline = time.monotonic() + 15
            # Three refusals in a row are still said once: the listener retried, unheard.
            while (
                refusals() < already + 3
                or not refused()
                or any(admin.jobs[j].state != "complete" for j in jids)
            ):
                assert time.monotonic() < deadline, ([admin.jobs[j].state for j in jids], refused())
                time.sleep(0.05)
            assert "flows-listener" in {t.name for t in threading.enumerate()}
        finally:
            worker.stop()
            thread.join(15)
            client.close()
    assert not thread.is_alive()
    [said] = refused()
    assert "subscribe" in said.getMessage()
    assert "flows-listener" not in {t.name for t in threading.enumerate()}
