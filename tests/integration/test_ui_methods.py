"""How ``flows ui`` answers each HTTP method, over real HTTP on a real uvicorn server: HEAD as
GET without a body (monitoring probes, ``curl -I``), and a 405's ``Allow`` naming every method
the path takes."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-methods")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


def _exchange(base: str, request: str) -> tuple[str, dict[str, str], bytes]:
    """``request`` sent on its own connection (closed after it): the status line, the headers
    (lower-cased names) and every byte that came after them."""
    parts = urlsplit(base)
    assert parts.hostname and parts.port
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return status, headers, rest


def _head(base: str, path: str) -> tuple[str, dict[str, str], bytes]:
    return _exchange(base, f"HEAD {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs",
        "/api/v1/queues",
        "/api/v1/schedules",
        "/api/v1/openapi.json",
        "/",
        "/runs",
        "/metrics",
        "/static/app.js",
    ],
)
def test_head_answers_as_get_without_a_body(api: Api, redis_client: redis.Redis, path: str) -> None:
    got = api.get(path)
    assert got.status == 200
    with assert_unchanged(redis_client):
        status, headers, body = _head(api.base, path)
    assert status == "HTTP/1.1 200 OK"
    assert body == b""
    assert headers["content-type"] == got.headers["content-type"]
    if "content-length" in {k.lower() for k in got.headers}:
        assert headers["content-length"] == got.headers["content-length"]


def test_head_of_what_is_not_there_answers_as_get(api: Api) -> None:
    status, _, body = _head(api.base, "/api/v1/runs/no-such-run")
    assert status.startswith("HTTP/1.1 404") and body == b""
    status, _, body = _head(api.base, "/nowhere")
    assert status.startswith("HTTP/1.1 404") and body == b""


def test_head_of_an_event_stream_ends_at_once(api: Api) -> None:
    started = time.monotonic()
    status, headers, body = _head(api.base, "/api/v1/events")
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-type"].startswith("text/event-stream")
    assert body == b""
    assert time.monotonic() - started < 1.5  # before the stream's first keepalive
    # its place among the open streams is given back: many probes leave room for a reader
    for _ in range(40):
        assert _head(api.base, "/api/v1/events")[0] == "HTTP/1.1 200 OK"


def test_head_of_a_path_that_only_takes_post_is_refused(api: Api) -> None:
    status, headers, _ = _head(api.base, "/api/v1/runs/r1/retry")
    assert status.startswith("HTTP/1.1 405")
    assert headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/api/v1/runs", "GET, HEAD, POST"),
        ("/api/v1/runs/r1/cancel", "POST"),
        ("/api/v1/queues", "GET, HEAD"),
        ("/runs", "GET, HEAD"),
    ],
)
def test_a_405_allows_every_method_of_the_path(
    api: Api, redis_client: redis.Redis, path: str, allowed: str
) -> None:
    with assert_unchanged(redis_client):
        reply = api.request("DELETE", path)
    assert reply.status == 405
    assert reply.headers["allow"] == allowed
    assert "Method Not Allowed" in str(reply.body)
