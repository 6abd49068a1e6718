"""How ``flows ui`` answers each HTTP method, over real HTTP on a real uvicorn server: HEAD as
GET without a body (monitoring probes, ``curl -I``), a 405's ``Allow`` naming every method the
path takes, and a body that is not sent as JSON refused with the content type it needs."""

from __future__ import annotations

import html
import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.ui import events
from flows.ui.api import PREFIX
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
    length = {k.lower(): v for k, v in got.headers.items()}.get("content-length")
    if length is not None and path != "/metrics":  # the metrics' numbers move between asks
        assert headers["content-length"] == length


def test_head_of_what_is_not_there_answers_as_get(api: Api) -> None:
    status, _, body = _head(api.base, "/api/v1/runs/no-such-run")
    assert status.startswith("HTTP/1.1 404") and body == b""
    status, _, body = _head(api.base, "/nowhere")
    assert status.startswith("HTTP/1.1 404") and body == b""


def test_head_of_an_event_stream_ends_at_once(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    # a minute between keepalives: a HEAD answered at the first one would outlast the socket's
    # 10 s timeout, so this one's ending at all says it ended with its headers
    monkeypatch.setattr(events, "KEEPALIVE", 60.0)
    status, headers, body = _head(api.base, "/api/v1/events")
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-type"].startswith("text/event-stream")
    assert body == b""
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
    # the API's JSON, or a page's error page, in the same words
    assert f"DELETE is not taken by {path}: it takes {allowed}" in str(reply.body)


@pytest.mark.parametrize("path", ["/api/v1/run", "/api/v2/runs", "/api/v1/runs/r1/steps"])
def test_a_path_that_is_not_there_is_named(api: Api, path: str) -> None:
    reply = api.get(path)
    assert reply.status == 404
    assert reply.body == {
        "detail": f"no path {path} here: GET /api/v1/openapi.json lists the API's paths"
    }


@pytest.mark.parametrize(
    ("method", "path", "meant", "takes"),
    [
        ("POST", "/api/v1/runs/", "/api/v1/runs", "GET, HEAD, POST"),
        ("GET", "/api/v1/runs/", "/api/v1/runs", "GET, HEAD, POST"),
        ("POST", "/api/v1/runs/r1/cancel/", "/api/v1/runs/r1/cancel", "POST"),
        ("GET", "/runs//", "/runs", "GET, HEAD"),
    ],
)
def test_a_path_with_a_trailing_slash_is_refused_naming_the_path_to_use(
    api: Api, redis_client: redis.Redis, method: str, path: str, meant: str, takes: str
) -> None:
    """Not a redirect (no body, not documented, and not followed on POST by most clients): a
    404 in the one refusal shape, naming the path without the slash and what it takes."""
    with assert_unchanged(redis_client):
        reply = api.request(method, path, {} if method == "POST" else None)
    assert reply.status == 404, reply
    assert reply.body == {
        "detail": f"no path {path} here: {meant}, without the trailing slash, takes {takes}"
    }


@pytest.mark.parametrize("path", ["/runs/", "/run"])
def test_a_browser_asking_for_a_page_that_is_not_there_gets_the_error_page(
    api: Api, path: str
) -> None:
    """A mistyped dashboard address in a browser gets the dashboard's error page, with the
    same words as the JSON refusal; the API's paths answer JSON whoever asks."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    reply = api.get(path, headers=browser)
    assert reply.status == 404
    assert reply.headers["content-type"].startswith("text/html"), reply
    assert html.escape(f"no path {path} here") in reply.body
    assert api.get("/api/v1/run", headers=browser).body == {
        "detail": "no path /api/v1/run here: GET /api/v1/openapi.json lists the API's paths"
    }


# Every POST route that takes a JSON body, with a body it would take.
BODIES = {
    "/api/v1/runs": {"flow": "nightly"},
    "/api/v1/runs/r1/steps/load/rerun": {"downstream": True},
    "/api/v1/runs/r1/steps/load/signal": {"data": {}},
    "/api/v1/runs/r1/steps/load/approve": {"note": "ok"},
    "/api/v1/schedules/nightly/pause": {"note": "maintenance"},
    "/api/v1/failures/boom/unfail": {"queue": "q1"},
    "/api/v1/flows/nightly/runs": {"params": {}},
    "/api/v1/sources/s1/remove": {"force": True},
}


def test_every_route_with_a_body_is_listed(api: Api) -> None:
    schema = api.get(f"{PREFIX}/openapi.json").body
    with_body = {
        path
        for path, operations in schema["paths"].items()
        if "requestBody" in operations.get("post", {})
    }
    listed = {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}/steps/{step}/rerun",
        "/api/v1/runs/{run_id}/steps/{step}/signal",
        "/api/v1/runs/{run_id}/steps/{step}/approve",
        "/api/v1/schedules/{name}/pause",
        "/api/v1/failures/{group}/unfail",
        "/api/v1/flows/{flow}/runs",
        "/api/v1/sources/{source}/remove",
    }
    assert with_body == listed  # a new one belongs in BODIES


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_sent_as_json_is_refused_naming_the_type(
    api: Api, redis_client: redis.Redis, path: str, content_type: str
) -> None:
    raw = json.dumps(BODIES[path]).encode()
    with assert_unchanged(redis_client):
        reply = api.request("POST", path, raw=raw, headers={"Content-Type": content_type})
    assert reply.status == 415
    assert reply.body == {
        "detail": f"the body must be JSON, sent with Content-Type: application/json "
        f"(this request's: {content_type})"
    }


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_body_without_a_content_type_is_refused_naming_the_type(
    api: Api, redis_client: redis.Redis, path: str
) -> None:
    raw = json.dumps(BODIES[path])
    with assert_unchanged(redis_client):
        status, _, body = _exchange(
            api.base,
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n{raw}",
        )
    assert status.startswith("HTTP/1.1 415")
    assert json.loads(body) == {
        "detail": "the body must be JSON, sent with Content-Type: application/json "
        "(this request's: none)"
    }


def test_json_by_any_of_its_names_is_read(api: Api) -> None:
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        reply = api.request(
            "POST",
            "/api/v1/runs",
            raw=b'{"flow": "nightly"}',
            headers={"Content-Type": content_type},
        )
        assert reply.status == 404, reply.body  # read: no such flow is registered
    # no body at all needs no type
    assert api.request("POST", "/api/v1/schedules/nightly/pause", raw=b"").status == 404


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"flow": "nightly",}', "line 1, column 20: Expecting property name enclosed in double"),
        (b'{\n  "flow": nightly\n}', "line 2, column 11: Expecting value"),
        (b"", None),  # no body: a body is required here, and said so
    ],
)
def test_a_body_that_is_not_json_is_refused_saying_where(
    api: Api, redis_client: redis.Redis, raw: bytes, where: str | None
) -> None:
    with assert_unchanged(redis_client):
        reply = api.request("POST", "/api/v1/runs", raw=raw)
    assert reply.status == 422
    if where is None:
        assert reply.body == {"detail": "body: Field required"}
    else:
        assert reply.body["detail"].startswith(f"body: not JSON, at {where}"), reply.body


@pytest.mark.parametrize(
    ("raw", "offset"),
    [
        (b'{"flow": "nightly\xff"}', 17),  # a byte no UTF-8 text has
        (b'{"flow": "caf\xe9"}', 13),  # Latin-1
        ('{"flow": "nightly"}'.encode("utf-16"), 0),  # JSON, but not sent as UTF-8
    ],
)
def test_a_body_that_is_not_utf8_is_refused_saying_where(
    api: Api, redis_client: redis.Redis, raw: bytes, offset: int
) -> None:
    """JSON is exchanged as UTF-8 (RFC 8259): anything else is a 422 in the one refusal shape,
    with the offset of the first byte that is not, as the document promises."""
    with assert_unchanged(redis_client):
        reply = api.request("POST", "/api/v1/runs", raw=raw)
    assert reply.status == 422, reply
    assert reply.body == {
        "detail": f"body: not UTF-8 text: the byte at offset {offset} "
        f"(0x{raw[offset]:02x}) does not fit; send JSON as UTF-8"
    }


def test_a_body_nested_too_deeply_is_refused_saying_so(api: Api, redis_client: redis.Redis) -> None:
    with assert_unchanged(redis_client):
        reply = api.request("POST", "/api/v1/runs", raw=b"[" * 30_000 + b"]" * 30_000)
    assert reply.status == 422, reply
    assert reply.body["detail"].startswith("body: "), reply


@pytest.mark.parametrize(
    ("path", "raw", "content_type"),
    [
        ("/api/v1/runs", b'{"flow": "nightly"}', "text/plain"),  # 415 to one who may
        ("/api/v1/runs", b'{"flow": ', "application/json"),  # not JSON
        ("/api/v1/runs", b'{"flow": "caf\xe9"}', "application/json"),  # not UTF-8
        ("/api/v1/runs?stauts=failed", b'{"flow": "nightly"}', "application/json"),
        ("/api/v1/runs", b'{"flow": 3}', "application/json"),  # not the body's shape
    ],
    ids=["type", "json", "utf8", "query", "shape"],
)
def test_a_write_without_the_token_is_refused_before_its_request_is_read(
    api: Api, redis_client: redis.Redis, path: str, raw: bytes, content_type: str
) -> None:
    """Whoever may not write is told only that (401), whatever is wrong with the request besides:
    what a route takes and how it reads it are for those it admits."""
    with assert_unchanged(redis_client):
        reply = api.request(
            "POST", path, raw=raw, headers={"Content-Type": content_type}, token=None
        )
    assert reply.status == 401, reply
    assert reply.headers.get("www-authenticate") == "Bearer", reply


def test_no_operation_tells_one_without_the_token_what_is_wrong_with_a_request(
    client: Client, redis_client: redis.Redis
) -> None:
    """Every operation of the document, reads closed: a request with an unknown query parameter
    and a body sent as text is refused 401 for its missing token, and nothing else is said. (A
    webhook has no token: its signature over the body is checked by the operation itself.)"""
    with serve(client, Auth(TOKEN, reads_open=False)) as base:
        closed = Api(base, token=None)
        document = Api(base).get(f"{PREFIX}/openapi.json").body
        operations = [
            (method.upper(), path.replace("{", "").replace("}", ""))
            for path, item in document["paths"].items()
            for method in item
            if not path.startswith(f"{PREFIX}/hooks/")
        ]
        assert len(operations) > 40
        with assert_unchanged(redis_client):
            answered = {
                (method, path): closed.request(
                    method, f"{path}?zzz=1", raw=b"{", headers={"Content-Type": "text/plain"}
                ).status
                for method, path in operations
            }
    assert {operation: status for operation, status in answered.items() if status != 401} == {}
