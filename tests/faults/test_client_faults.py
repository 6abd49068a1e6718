"""The Python client under faults: each raises its :mod:`scheduler.engine.errors` class (also the
redis-py class it replaces), with a message naming the server and never the password, and
changes nothing; reads keep working where the server allows them."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import redis
from fault_support import Valkey, acl_users, populate
from helpers import assert_unchanged

import scheduler
from scheduler.engine.backoff import transient
from scheduler.engine.client import Client
from scheduler.engine.errors import ServerError
from scheduler.engine.faults import (
    AuthenticationFailed,
    PermissionDenied,
    ServerOutOfMemory,
    ServerReadOnly,
    ServerUnavailable,
    access_refused,
    one_line,
)


def test_an_unreachable_server() -> None:
    client = Client("redis://someone:s3cret@127.0.0.1:1/0")
    with pytest.raises(ServerUnavailable) as raised:
        client.queues["q"].put("tasks.a", {})
    assert isinstance(raised.value, ServerError | redis.ConnectionError)
    assert "cannot reach Redis at 127.0.0.1:1 (namespace ql:)" in str(raised.value)
    assert "s3cret" not in str(raised.value) and raised.value.command == "put"
    # Given as an argument of the Python API: no command-line flag to check.
    assert "check the host and port in the URL given to Client()" in str(raised.value)
    assert "--redis" not in str(raised.value)


def test_a_url_from_the_environment_is_named_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", "redis://127.0.0.1:1/0")
    client = scheduler.Client()
    with pytest.raises(ServerUnavailable, match=r"check the host and port in \$FLOWS_REDIS_URL$"):
        client.jobs.get("a")


def test_a_wrong_password_and_a_missing_permission(servers: list[Valkey], tmp_path: Path) -> None:
    password = secrets.token_urlsafe(16)
    acl = tmp_path / "users.acl"
    acl.write_text("\n".join(acl_users({"flows-viewer": password})) + "\n")
    server = Valkey(tmp_path / "acl", [f"aclfile {acl}"])
    servers.append(server)
    populate(server.url())
    with assert_unchanged(server.admin()):
        wrong = Client(server.url("flows-viewer", "not-it"))
        with pytest.raises(AuthenticationFailed, match="refused the login as user 'flows-viewer'"):
            wrong.jobs.get("waiting")
        viewer = Client(server.url("flows-viewer", password))
        assert viewer.jobs["waiting"].state == "waiting"
        with pytest.raises(PermissionDenied, match="may not run Redis command 'zpopmin'") as denied:
            viewer.queues["q"].put("tasks.a", {})
        assert denied.value.command == "zpopmin"
        assert isinstance(denied.value, redis.exceptions.NoPermissionError)
        # A login refused to a command sent outside the engine (redis-py raises it as a
        # ConnectionError) was worded "cannot reach Redis ...; start the server".
        with pytest.raises(redis.exceptions.AuthenticationError) as refused:
            wrong.redis.ping()
        said = one_line(refused.value)
        assert said.startswith("Redis refused the login"), said
        assert "check the user name and password" in said and "start the server" not in said
        assert not transient(refused.value) and access_refused(refused.value)


def test_a_full_server_reads_and_refuses_writes(populated: Valkey) -> None:
    client = Client(populated.url())
    populated.fill_memory()
    with assert_unchanged(populated.admin()):
        with pytest.raises(ServerOutOfMemory, match="is out of memory") as raised:
            client.queues["q"].put("tasks.a", {})
        assert raised.value.command == "put"
        assert client.jobs["failed"].state == "failed"
        assert {q["name"] for q in client.queues.counts()} == {"q"}
        pipe = client.engine.pipeline()
        pipe.call("get", "waiting").call("cancel", "waiting")
        got, refused = pipe.execute()
        assert '"waiting"' in got and isinstance(refused, ServerOutOfMemory)


def test_a_read_only_replica_reads_and_refuses_writes(
    populated: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    replica = Valkey(tmp_path / "replica")
    servers.append(replica)
    replica.replica_of(populated)
    client = Client(replica.url())
    with assert_unchanged(replica.admin()):
        with pytest.raises(ServerReadOnly, match="read-only replica"):
            client.jobs["waiting"].cancel()
        assert client.jobs["waiting"].state == "waiting"
