"""The ``flows ui`` application: the dashboard's pages, the REST API and metrics, on one process.

:func:`create_app` builds it around a client and an auth policy; routers are included here,
so a page is one more router. Request bodies larger than :data:`MAX_BODY` are refused (413)
before they are read, and every error answers JSON ``{"detail": message}`` with no traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flows.ui import api, explain_api, metrics, pages
from flows.ui.auth import Auth
from flows.ui.state import UiState
from scheduler.engine.client import Client

log = logging.getLogger("flows.ui")

# The largest request body accepted, in bytes (a run's params included).
MAX_BODY = 64 * 1024


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes with 413, by header or as they stream in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(self.limit, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _too_large(self.limit, send)


class _TooLarge(Exception):
    pass


async def _too_large(limit: int, send: Send) -> None:
    response = JSONResponse({"detail": f"the request body is larger than {limit} bytes"}, 413)
    await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


def create_app(client: Client, auth: Auth) -> FastAPI:
    """The ``flows ui`` app on ``client``'s namespace."""
    app = FastAPI(
        title="redis-flows",
        summary="Runs, jobs, queues, workers, schedules and failures of a redis-flows namespace.",
        version="1",
        openapi_url=f"{api.PREFIX}/openapi.json",
        docs_url=f"{api.PREFIX}/docs",
        redoc_url=None,
    )
    app.state.ui = UiState(client, auth)
    app.include_router(api.router)
    app.include_router(metrics.router)
    app.include_router(pages.router)
    app.include_router(explain_api.router)
    app.mount("/static", StaticFiles(directory=pages.HERE / "static"), name="static")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        # One line per problem, naming where it is (body.params, query.limit, ...).
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in error.errors()
        ]
        return JSONResponse({"detail": "; ".join(problems)}, 422)

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse({"detail": f"internal error: {type(error).__name__}: {error}"}, 500)

    app.add_middleware(BodyLimit, limit=MAX_BODY)
    return app
