"""Which requests ``flows ui`` answers at all, and the headers every response carries.

* **Host**: only requests naming the server by one of its own names are answered (the loopback
  names, the ``--host`` it listens on, each ``--allowed-host``); any other ``Host`` gets 400. A
  web page on another name that resolves to this machine (DNS rebinding) reads nothing.
* **Origin**: a write (any method but GET, HEAD, OPTIONS) that carries an ``Origin`` is refused
  (403) unless it is this server's own origin, whatever token it carries.
* **Headers**: every response, errors included, carries :data:`SECURITY_HEADERS`: a
  Content-Security-Policy with no inline script, no framing, no referrer, no type sniffing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flows.ui import refusals

# Every script and style is a file the server serves; nothing may frame the pages.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_RAW_HEADERS = [(name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]


def host_name(host: str) -> str:
    """``host`` as a ``Host`` header names it without its port: IPv6 addresses in brackets,
    lower case (``::1`` and ``[::1]:8080`` are both ``[::1]``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.index("]") + 1] if "]" in host else host
    if host.count(":") > 1:  # a bare IPv6 address
        return f"[{host}]"
    return host.partition(":")[0]


def allowed_hosts(listen_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a server listening on ``listen_host`` answers as."""
    return frozenset(host_name(h) for h in (*LOOPBACK_HOSTS, listen_host, *extra) if h.strip())


class Guard:
    """The host and origin rules, and the security headers on every response (ASGI)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host_name(host) not in self.hosts:
            await _refuse(
                send,
                400,
                f"this server does not answer as host {host!r}; start flows ui with "
                "--allowed-host NAME to answer as another name",
            )
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                await _refuse(send, 403, f"a write from origin {origin!r} is refused")
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name for name, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *((n, v) for n, v in _RAW_HEADERS if n not in present),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps(refusals.body(detail)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *_RAW_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
