"""``flows ui`` while its Redis server is away: each request that needs the server is answered
503 saying so (never a 500 "internal error"), the log says when the fault starts and when it is
over (no traceback per request), and the server answers again by itself once Redis is back."""

from __future__ import annotations

import json
import logging
import secrets
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from fault_support import Valkey, acl_users
from ui_support import serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client


def _get(url: str, accept: str = "application/json") -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, _lower(reply.headers), reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers), error.read().decode()


def _lower(headers: Message) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def test_requests_while_redis_is_away_are_503_and_logged_once(
    servers: list[Valkey], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers.append(Valkey(tmp_path / "redis"))
    client = Client(servers[0].url())
    with caplog.at_level(logging.INFO), serve(client, Auth(None, reads_open=True)) as base:
        assert _get(f"{base}/api/v1/runs")[0] == 200
        servers[0].stop()
        for path in ("/api/v1/runs", "/metrics", "/api/v1/queues"):
            status, headers, body = _get(base + path)
            assert status == 503, (path, body)
            assert headers.get("retry-after") == "5"
            detail = json.loads(body)["detail"]
            assert detail.startswith("the Redis server cannot be used now"), detail
        status, _, page = _get(f"{base}/", accept="text/html")
        assert status == 503 and "the Redis server cannot be used now" in page
        time.sleep(1.5)  # away longer than a dropped connection: an outage (real time)
        for path in ("/api/v1/runs", "/metrics"):
            assert _get(base + path)[0] == 503
        servers.append(Valkey(tmp_path / "redis"))  # back, at the same address
        assert _get(f"{base}/api/v1/runs")[0] == 200
        assert _get(f"{base}/metrics")[0] == 200
    said = [r.getMessage() for r in caplog.records if r.name == "flows.ui"]
    faults = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(faults) == 1, faults
    assert faults[0].startswith(f"flows ui: lost the connection to Redis at {servers[0].socket}")
    assert "cannot reach Redis" in faults[0], faults
    assert faults[0].endswith("(requests are answered 503 until it is back)"), faults
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    assert [m for m in said if "is back after" in m] != [], said
    assert not any("working again" in m for m in said), said
    client.close()


def test_requests_while_redis_refuses_the_login_are_503_saying_why(
    servers: list[Valkey], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The server restarted without its ACL users: an engine call answered 500 "internal error"
    # with a traceback in the log; a read outside the engine, 503 logged as "start the server".
    password = secrets.token_urlsafe(16)
    folder = tmp_path / "acl"
    folder.mkdir()
    (folder / "users.acl").write_text("\n".join(acl_users({"flows-viewer": password})) + "\n")
    servers.append(Valkey(folder, [f"aclfile {folder / 'users.acl'}"]))
    admin = Client(servers[0].url())
    admin.engine.load()  # as the operator does: the viewer may not
    client = Client(servers[0].url("flows-viewer", password))
    with caplog.at_level(logging.INFO), serve(client, Auth(None, reads_open=True)) as base:
        assert _get(f"{base}/api/v1/runs")[0] == 200
        admin.redis.execute_command("ACL", "DELUSER", "flows-viewer")
        for path in ("/api/v1/runs", "/metrics", "/api/v1/queues"):
            status, _, body = _get(base + path)
            assert status == 503, (path, body)
            assert json.loads(body)["detail"].startswith("the Redis server cannot be used now")
        admin.redis.execute_command("ACL", "LOAD")  # the operator puts the users back
        assert _get(f"{base}/api/v1/runs")[0] == 200
    said = [r for r in caplog.records if r.name == "flows.ui"]
    faults = [r.getMessage() for r in said if r.levelno >= logging.WARNING]
    assert faults and "refused the login as user 'flows-viewer'" in faults[0], faults
    assert not any("start the server" in line for line in faults), faults
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    assert any("working again" in r.getMessage() for r in said)
    client.close()
    admin.close()
