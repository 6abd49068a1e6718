"""``flows ui`` against hostile clients, over real HTTP on a real uvicorn server: event streams
whose clients vanish, foreign Host and Origin headers, wrong tokens, oversized chunked bodies,
and the headers every response carries."""

from __future__ import annotations

import gc
import re
import socket
import struct
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.ui import events, guard
from flows.ui.auth import Auth
from flows.ui.refusals import MAX_BODY
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-hardening")


@pytest.fixture
def base(client: Client) -> Iterator[str]:
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        yield url


def _address(base: str) -> tuple[str, int]:
    parts = urlsplit(base)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


def _raw(base: str, request: bytes) -> socket.socket:
    sock = socket.create_connection(_address(base), timeout=10)
    sock.sendall(request)
    return sock


def _head(sock: socket.socket) -> bytes:
    """The response's status line and headers (and whatever came with them)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _open_stream(base: str) -> tuple[socket.socket, bytes]:
    host, port = _address(base)
    sock = _raw(base, f"GET /api/v1/events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return sock, _head(sock)


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends a RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("close", [_reset, socket.socket.close], ids=["reset", "close"])
def test_event_stream_places_come_back_once_their_clients_leave(base: str, close: object) -> None:
    # whatever the garbage collector does: here, nothing (the server runs in this process)
    gc.disable()
    try:
        _streams_come_back(base, close)
    finally:
        gc.enable()


def _streams_come_back(base: str, close: object) -> None:
    opened = [_open_stream(base) for _ in range(events.MAX_STREAMS)]
    assert all(head.startswith(b"HTTP/1.1 200") for _, head in opened)
    extra, head = _open_stream(base)
    assert head.startswith(b"HTTP/1.1 503")
    extra.close()
    for sock, _ in opened:
        close(sock)  # type: ignore[operator]
    left = time.monotonic()
    # every place comes back: new streams (kept open as they succeed) fill all of them again
    held: list[socket.socket] = []
    while len(held) < events.MAX_STREAMS:
        sock, head = _open_stream(base)
        if head.startswith(b"HTTP/1.1 200"):
            held.append(sock)
            continue
        sock.close()
        # a bound on a hang only (a place never given back): a busy machine can take seconds
        assert time.monotonic() - left < 60, (
            f"{events.MAX_STREAMS - len(held)} places still held a minute after their clients left"
        )
        time.sleep(0.1)
    for sock in held:
        sock.close()


def test_an_idle_stream_is_back_from_its_thread_after_each_look_not_each_keepalive(
    client: Client,
) -> None:
    """A source with nothing to send hands its thread back after every look (``IDLE``, which the
    response does not send), not only at the keepalive: a stream whose client closed ends
    within one look, and a server stopping waits no longer for it."""
    jid = client.queues["q"].put("tasks.a", {})
    sources = [events.engine_events(client, poll=0), events.log_lines(client, jid, interval=0)]
    try:
        for source in sources:
            assert next(source).startswith(":")  # listening / following
            assert [next(source) for _ in range(3)] == [events.IDLE] * 3
    finally:
        for source in sources:
            source.close()


# -- hosts, origins, headers ---------------------------------------------------------------------


def test_a_foreign_host_header_reads_nothing(base: str) -> None:
    api = Api(base, token=None)
    for path in ("/api/v1/runs", "/", "/metrics", "/api/v1/openapi.json"):
        reply = api.get(path, headers={"Host": "evil.example.com"})
        assert reply.status == 400, path
        assert (
            "evil.example.com" in reply.body["detail"] and "--allowed-host" in reply.body["detail"]
        )
    port = _address(base)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert api.get("/api/v1/runs", headers={"Host": host}).status == 200, host


def test_allowed_hosts_are_the_loopback_names_the_listen_address_and_the_extra_ones(
    client: Client,
) -> None:
    hosts = guard.allowed_hosts("0.0.0.0", ["flows.internal", "10.1.2.3", "fd00::7"])
    assert hosts == {
        "127.0.0.1",
        "localhost",
        "[::1]",
        "0.0.0.0",
        "flows.internal",
        "10.1.2.3",
        "[fd00::7]",
    }
    with serve(client, Auth(TOKEN, reads_open=True), hosts=hosts) as url:
        api = Api(url, token=None)
        assert api.get("/api/v1/runs", headers={"Host": "flows.internal:8080"}).status == 200
        assert api.get("/api/v1/runs", headers={"Host": "flows.internal.evil"}).status == 400


def test_a_write_from_another_origin_is_refused_even_with_the_token(
    base: str, client: Client
) -> None:
    api = Api(base)
    client.queues["o"].put("K", {}, jid="o1")
    for origin in ("http://evil.example.com", "null", "http://127.0.0.1:1"):
        reply = api.post("/api/v1/queues/o/pause", headers={"Origin": origin})
        assert reply.status == 403 and origin in reply.body["detail"], origin
    assert not client.queues["o"].paused()
    host, port = _address(base)
    reply = api.post("/api/v1/queues/o/pause", headers={"Origin": f"http://{host}:{port}"})
    assert reply.status == 200 and client.queues["o"].paused()
    # reads from another origin get the data only through the browser's same-origin rule
    assert api.get("/api/v1/runs", headers={"Origin": "http://evil.example.com"}).status == 200


def test_every_response_carries_the_security_headers(base: str) -> None:
    api = Api(base, token=None)
    replies = [
        api.get("/"),
        api.get("/runs"),
        api.get("/api/v1/runs"),
        api.get("/api/v1/runs/nope"),  # 404
        api.get("/api/v1/runs?limit=0"),  # 422
        api.get("/metrics"),
        api.get("/static/app.js"),
        api.get("/api/v1/docs"),
        api.post("/api/v1/queues/q/pause"),  # 401
        api.get("/", headers={"Host": "evil.example.com"}),  # 400
        api.post("/api/v1/runs", raw=b"x" * (MAX_BODY + 1)),  # 413
    ]
    for reply in replies:
        headers = {k.lower(): v for k, v in reply.headers.items()}
        csp = headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, reply
        assert "unsafe-inline" not in csp
        assert headers.get("x-content-type-options") == "nosniff"
        assert headers.get("referrer-policy") == "no-referrer"


def test_pages_have_no_inline_script(base: str) -> None:
    api = Api(base, token=None)
    for path in ("/", "/runs", "/flows", "/queues", "/workers", "/failures", "/api/v1/docs"):
        page = api.get(path).body
        assert isinstance(page, str)
        for tag in re.findall(r"<script\b[^>]*>", page):
            assert "src=" in tag, (path, tag)
        assert not re.search(r"<script\b[^>]*>\s*[^<\s]", page), path
        assert not re.search(r"\son[a-z]+\s*=", page), path
        assert "javascript:" not in page, path


def test_the_api_docs_are_served_from_this_machine(base: str) -> None:
    api = Api(base, token=None)
    page = api.get("/api/v1/docs").body
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/") and not s.startswith("//") for s in sources)
    for source in sources:
        reply = api.get(source)
        assert reply.status == 200 and len(str(reply.body)) > 100, source
    assert api.get("/api/v1/openapi.json").status == 200


# -- tokens, bodies ------------------------------------------------------------------------------


def test_a_presented_wrong_token_is_refused_even_for_open_reads(base: str) -> None:
    for path in ("/api/v1/runs", "/", "/metrics", "/runs"):
        assert Api(base, token=None).get(path).status == 200, path
        assert Api(base, token=TOKEN).get(path).status == 200, path
        wrong = Api(base, token="wrong-" + TOKEN).get(path)
        assert wrong.status == 403, path
        # another scheme is a proxy's in front (HTTP Basic): not ours to refuse on open reads
        basic = Api(base, token=None).get(path, headers={"Authorization": "Basic eDp5"})
        assert basic.status == 200, path
    # writes still need the bearer token
    basic_auth = {"Authorization": "Basic eDp5"}
    assert Api(base, token=None).post("/api/v1/runs", {}, headers=basic_auth).status == 401


def test_a_chunked_body_over_the_limit_gets_413(base: str, client: Client) -> None:
    host, port = _address(base)
    chunk = b"x" * 8192
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // 8192 + 2))
    request = (
        (
            f"POST /api/v1/runs HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        + body
        + b"0\r\n\r\n"
    )
    with assert_unchanged(client.redis):
        sock = _raw(base, request)
        head = _head(sock)
        sock.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    # a chunked body under the limit is read as any other
    small = b'{"flow": "nope"}'
    request = (
        f"POST /api/v1/runs HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(small), small)
    sock = _raw(base, request)
    head = _head(sock)
    sock.close()
    assert head.startswith(b"HTTP/1.1 404"), head[:200]


def test_a_crash_answers_500_with_a_reference_never_the_errors_own_words(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """What went wrong may name internals: it goes to the server's log, found by the
    reference the client gets."""

    def crashing_route(app: FastAPI) -> None:
        def crash() -> None:
            raise RuntimeError("no key ql:secret-thing at /srv/private/path")

        app.add_api_route("/api/v1/crash", crash)

    with serve(client, Auth(TOKEN, reads_open=True), also=crashing_route) as base:
        reply = Api(base).get("/api/v1/crash")
    assert reply.status == 500
    detail = str(reply.body["detail"])
    assert "secret-thing" not in detail and "RuntimeError" not in detail
    match = re.fullmatch(
        r"internal error ([0-9a-f]{8}): the server's log has what went wrong", detail
    )
    assert match is not None, detail
    logged = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert "secret-thing" in str(logged[0].exc_info[1])
