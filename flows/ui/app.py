"""The ``flows ui`` application: the dashboard's pages, the REST API and metrics, on one process.

:func:`create_app` builds it around a client and an auth policy; routers are included here,
so a page is one more router. Request bodies larger than :data:`~flows.ui.refusals.MAX_BODY`
are refused (413) before the app reads them, and every error answers JSON
``{"detail": message}`` with no traceback; a Functions library on the server that is not this
release's engine answers 503, pages with the dashboard's error page. :mod:`flows.ui.guard`
decides which hosts and origins are answered at all.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import redis
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flows.ui import (
    api,
    apidocs,
    audit_log,
    backfills,
    explain_api,
    guard,
    history,
    methods,
    metrics,
    notifications,
    pages,
    refusals,
    sources,
    start,
)
from flows.ui.auth import Auth
from flows.ui.state import TOO_DEEP, UiState, json_body, known_query, not_utf8, refusal
from scheduler.engine import faults
from scheduler.engine.backoff import FAULTS, transient
from scheduler.engine.client import Client
from scheduler.engine.errors import ForeignEngine

log = logging.getLogger("flows.ui")

# What the OpenAPI document says of every endpoint: the rules each one's own words assume.
API_DESCRIPTION = (
    "Listings are bounded pages (`offset`, `limit`, `next`). A filter that narrows a read to one "
    "thing (`flow`, `step`, `queue`, `who`) given empty is refused with 422 naming it: leave it "
    "out to filter nothing; a query parameter the path does not take is refused so too. A body "
    "is JSON, sent with `Content-Type: application/json` (else 415). `HEAD` is answered "
    'wherever `GET` is. Every refusal answers `{"detail": ...}` (`Refusal`): the API\'s words, '
    "naming what is wrong and where, or with a flow file that does not validate, its findings; "
    "each operation lists the statuses it answers, a method a path does not take answers "
    "405 with `Allow`, and a path with a trailing slash answers 404 naming the path without "
    "it (never a redirect). A refusal changes nothing."
)


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes with 413: by their declared length, or read
    up to the limit when they come chunked."""

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
        if declared is None and b"transfer-encoding" in headers:
            # A chunked body has no length to check up front: read it here, up to the limit, so
            # the answer is 413 before the app sees any of it.
            messages: list[Message] = []
            seen = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client left
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    await _too_large(self.limit, send)
                    return
                messages.append(message)
                if not message.get("more_body"):
                    break

            async def replay() -> Message:
                return messages.pop(0) if messages else await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)


async def _too_large(limit: int, send: Send) -> None:
    response = JSONResponse(refusals.body(f"the request body is larger than {limit} bytes"), 413)
    headers = [*response.raw_headers, (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


class Answer(JSONResponse):
    """The API's JSON. Text a request's JSON held is told back (an unknown param's name), and
    JSON may carry a lone surrogate (``"\\ud800"``) that UTF-8 cannot: it is written as JSON's
    escape for it, so the answer is the client's own text, not a crash."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")


def _refusal(status: int, detail: Any, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(refusals.body(detail), status, headers=headers)


#: The heading of the error page a page answers with, by status.
PAGE_ERRORS = {404: "Not found", 409: "Not now", 400: "The request cannot be answered"}


#: What a request that needs Redis is answered while it is away; its own words (the server's
#: address) stay in the log, as an internal error's do.
SERVER_AWAY = (
    "the Redis server cannot be used now (away, loading, full or read-only): try again "
    "shortly; this server's log says why"
)
RETRY_AFTER = 5


def _crashed(request: Request, error: Exception) -> JSONResponse:
    """A bug's answer: the error's own words stay in the server's log (they may name a key, a
    path, a server's address that a client has no business reading); the reference finds
    the traceback there."""
    reference = secrets.token_hex(4)
    log.error("%s %s failed [%s]", request.method, request.url.path, reference, exc_info=error)
    # Answered outside the middleware that adds the security headers: add them here.
    return JSONResponse(
        refusals.body(f"internal error {reference}: the server's log has what went wrong"),
        500,
        headers=guard.SECURITY_HEADERS,
    )


async def _server_away(request: Request, error: Exception) -> Response:
    """Redis away, loading, full or read-only, or refusing the login (restarted without its
    ACL users, say), is no bug of this server: 503, and the log says when the fault starts
    and when it is over (``UiState.fault``), with no traceback."""
    if not (transient(error) or faults.login_refused(error)):
        return _crashed(request, error)
    ui: UiState = request.app.state.ui
    if isinstance(error, redis.RedisError):  # said alike, from an engine call or not
        error = faults.translate(error, ui.client.redis, ui.client.engine.key_prefix) or error
    ui.fault.failed(error)
    headers = {"Retry-After": str(RETRY_AFTER)}
    if _answers_html(request):
        page = pages.error_page(request, 503, "Redis cannot be used now", SERVER_AWAY)
        page.headers.update(headers)
        return page
    return _refusal(503, SERVER_AWAY, headers)


def _problem(error: Mapping[str, Any], sent: Any) -> str:
    """One problem of a request, naming where it is (``body.params``, ``query.limit``, ...); a
    body that is not JSON by the line and column where reading it stopped, and why."""
    where = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid" and isinstance(sent, str) and len(where) == 2:
        at = int(where[1])
        line, column = sent.count("\n", 0, at) + 1, at - sent.rfind("\n", 0, at)
        why = dict(error.get("ctx") or {}).get("error", "")
        return f"body: not JSON, at line {line}, column {column}: {why}"
    return f"{'.'.join(str(p) for p in where)}: {error.get('msg', 'invalid')}"


def _unreadable_body(error: StarletteHTTPException) -> str | None:
    """Why a JSON body could not be read at all, when that is what ``error`` is: the framework
    answers both with 400 "There was an error parsing the body", which says neither."""
    cause = error.__cause__ if error.status_code == 400 else None
    if isinstance(cause, UnicodeDecodeError):
        return not_utf8(cause)
    if isinstance(cause, RecursionError):
        return TOO_DEEP
    return None


def _answers_html(request: Request) -> bool:
    """Whether the route ``request`` reached is a dashboard page (it answers HTML)."""
    route = request.scope.get("route")
    answers = getattr(route, "response_class", None)
    return isinstance(answers, type) and issubclass(answers, HTMLResponse)


def _browser_off_the_api(request: Request) -> bool:
    """Whether a request no route took is a browser's for a dashboard address (a mistyped
    one, a trailing slash): it gets the error page, where a JSON client of the API gets JSON."""
    if "route" in request.scope or request.url.path.startswith(api.PREFIX):
        return False
    return "text/html" in request.headers.get("accept", "")


def _no_path(app: FastAPI, scope: Scope) -> str:
    """A 404's words for a path no route takes: the path meant when it is one with a trailing
    slash (refused, not redirected: a redirect has no body, and a POST's is not followed)."""
    path = scope["path"]
    meant = path.rstrip("/")
    takes = methods.allowed(app.routes, {**scope, "path": meant}) if meant != path and meant else ""
    if takes:
        return f"no path {path} here: {meant}, without the trailing slash, takes {takes}"
    return f"no path {path} here: GET {app.openapi_url} lists the API's paths"


def create_app(
    client: Client,
    auth: Auth,
    flows_dir: Path | None = None,
    hosts: frozenset[str] = guard.allowed_hosts("127.0.0.1"),
) -> FastAPI:
    """The ``flows ui`` app on ``client``'s namespace, answering as the names in ``hosts`` (see
    :mod:`flows.ui.guard`); ``flows_dir``: the folder whose flow files it lists and starts
    (:mod:`flows.ui.start`)."""
    app = FastAPI(
        title="redis-flows",
        summary="Runs, jobs, queues, workers, schedules and failures of a redis-flows namespace.",
        description=API_DESCRIPTION,
        version="1",
        openapi_url=f"{api.PREFIX}/openapi.json",
        docs_url=None,  # apidocs serves it from this machine's files
        redoc_url=None,
        default_response_class=Answer,
        redirect_slashes=False,  # a path with a trailing slash is refused naming the one meant
        dependencies=[Depends(known_query), Depends(json_body)],
    )
    app.state.ui = UiState(client, auth)
    app.state.flows_dir = flows_dir
    routers = (
        api.router,
        metrics.router,
        pages.router,
        history.router,
        history.page_router,
        notifications.router,
        audit_log.router,
        start.router,
        sources.router,
        backfills.router,
        backfills.page_router,
        explain_api.router,
    )
    for router in routers:  # the document gives each operation what any request can get
        app.include_router(router, responses=refusals.EVERY_ROUTE)
    apidocs.mount(app)
    app.mount("/static", StaticFiles(directory=pages.HERE / "static"), name="static")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Answer:
        problems = [_problem(e, error.body) for e in error.errors()]
        return _refusal(422, "; ".join(problems))

    @app.exception_handler(ForeignEngine)
    async def foreign(request: Request, error: ForeignEngine) -> Response:
        # The library was swapped (or was never this release's): nothing is run, every request
        # that reads or writes the engine is refused until an operator loads it again, which
        # the next look (Engine.check_library) sees. No restart needed.
        detail = refusal(error)
        if _answers_html(request):
            return pages.error_page(request, 503, "The engine cannot be used", detail)
        return _refusal(503, detail)

    @app.exception_handler(StarletteHTTPException)
    async def refused(request: Request, error: StarletteHTTPException) -> Response:
        # A page a browser asked for (a run that is gone, a step it lacks) answers as a page:
        # the dashboard's error page with the API's words. The API answers JSON, and so do a
        # page's refusals of credentials (401, 403), as the same for every client.
        headers = dict(error.headers or {})
        detail = error.detail
        unreadable = _unreadable_body(error)
        if unreadable is not None:
            return _refusal(422, unreadable)
        if error.status_code == 405:  # the router's words name neither the method nor the path
            headers["Allow"] = methods.allowed(app.routes, request.scope)
            detail = (
                f"{request.method} is not taken by {request.url.path}: it takes {headers['Allow']}"
            )
        elif error.status_code == 404 and "route" not in request.scope:  # no route matched
            detail = _no_path(app, request.scope)
        if error.status_code not in (401, 403) and (
            _answers_html(request) or _browser_off_the_api(request)
        ):
            title = PAGE_ERRORS.get(error.status_code, "The request cannot be answered")
            page = pages.error_page(request, error.status_code, title, str(detail))
            page.headers.update(headers)
            return page
        return _refusal(error.status_code, detail, headers or None)

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        return _crashed(request, error)

    for fault in FAULTS:
        app.add_exception_handler(fault, _server_away)

    app.add_middleware(methods.HeadAsGet)  # innermost: the others see the request's HEAD
    app.add_middleware(audit_log.AuditLog, ui=app.state.ui)
    app.add_middleware(BodyLimit, limit=refusals.MAX_BODY)
    app.add_middleware(guard.Guard, hosts=hosts)  # outermost: refusals get the headers too
    return app
