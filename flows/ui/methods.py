"""Which HTTP methods a path takes: ``HEAD`` wherever ``GET`` is, and a 405's ``Allow``.

A ``HEAD`` request runs the path's ``GET`` (which changes nothing) and is answered with its
status and headers, never its body: monitoring probes and ``curl -I`` ask so. An event stream's
``HEAD`` ends with its headers, as a client that went away ends it.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Answers ``HEAD`` as ``GET`` without the body (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        answered = False

        async def headers_only(message: Message) -> None:
            nonlocal answered
            if answered:
                if message.get("more_body"):  # a stream goes on: end it as a client that left
                    raise OSError("a HEAD request is answered without a body")
                return  # the body: not sent
            await send(message)
            if message["type"] == "http.response.start":
                answered = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def until_answered() -> Message:
            return {"type": "http.disconnect"} if answered else await receive()

        try:
            await self.app({**scope, "method": "GET"}, until_answered, headers_only)
        except (OSError, ClientDisconnect):
            if not answered:
                raise


# The methods a route of the app may take (HEAD: wherever GET is).
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def allowed(routes: Iterable[BaseRoute], scope: Scope) -> str:
    """The ``Allow`` header of the path ``scope`` asks for: every method some route takes on
    it (the router's 405 names the first route's only), ``HEAD`` wherever ``GET`` is. Each
    method is asked of the routes as a request of it would be, so included routers count."""
    taken = {
        method
        for method in METHODS
        if any(route.matches(_asking(scope, method))[0] is Match.FULL for route in routes)
    }
    if "GET" in taken:
        taken.add("HEAD")
    return ", ".join(sorted(taken))


def _asking(scope: Scope, method: str) -> Scope:
    """A fresh request scope for ``scope``'s path with ``method`` (no route matched yet)."""
    return {
        "type": "http",
        "method": method,
        "path": scope["path"],
        "root_path": scope.get("root_path", ""),
    }
