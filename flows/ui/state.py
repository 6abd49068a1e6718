"""What every request of ``flows ui`` works with, and the auth checks as dependencies.

Every read and write looks, once its credential passed, whether the engine's Functions library is
still this release's (:meth:`~scheduler.engine.scripts.Engine.check_library`: a look every few
seconds, nothing in between): a library swapped while the server runs raises
:class:`~scheduler.engine.errors.ForeignEngine`, which the app answers with 503
(:mod:`flows.ui.app`) until an operator loads the engine again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from flows.ui.auth import Auth
from scheduler.engine.backoff import Backoff, Outage
from scheduler.engine.client import Client
from scheduler.engine.errors import ForeignEngine
from scheduler.engine.faults import where

log = logging.getLogger("flows.ui")


@dataclass(frozen=True)
class UiState:
    """The engine's client and the auth policy (``app.state.ui``); ``fault`` says when the
    server stops answering and when it is back, once each, not once a request (a lost
    connection as the scheduler service and the workers say it: :class:`Outage`)."""

    client: Client
    auth: Auth
    fault: Backoff = field(init=False)

    def __post_init__(self) -> None:
        redis = self.client.redis
        server = where(redis, self.client.engine.key_prefix)
        outage = Outage(log, "flows ui", server, "requests are answered 503 until it is back")
        fault = Backoff(log, "flows ui", client=redis, outage=outage)
        object.__setattr__(self, "fault", fault)


def state(request: Request) -> UiState:
    ui: UiState = request.app.state.ui
    return ui


def engine_library(request: Request) -> None:
    """The engine's library looked at again, if it is time (:class:`ForeignEngine` if it is not
    this release's), before the request does anything; called after the credential passed, so
    that only those who may read are told what the server holds."""
    ui = state(request)
    engine = ui.client.engine
    if ui.fault.failing:  # the server was away: one look says whether it is back
        ui.client.redis.ping()
        ui.fault.succeeded()
    if engine.uses_functions is None:  # not loaded yet (a server started before it): it checks
        engine.load()
    engine.check_library()


def refusal(error: ForeignEngine) -> str:
    """What every request is answered while the engine's library is foreign: the refusal's own
    words (what an operator does) and that the server answers again by itself."""
    return f"{error}. Until then this server answers 503; it needs no restart"


def reader(request: Request) -> None:
    """A dependency of every read: what :meth:`Auth.read` allows, then the engine's library."""
    state(request).auth.read(request)
    engine_library(request)


def writer(request: Request) -> None:
    """A dependency of every write: the bearer token, then the engine's library."""
    state(request).auth.write(request)
    engine_library(request)


class CheckedRoute(APIRoute):
    """A route that reads or writes checks the credential before anything of its request is
    read: a client that may not write is told 401 or 403, never what is wrong with its body or
    query (those checks, and FastAPI's own reading of a JSON body, come before a route's
    dependencies). Every router of the app is made with it (``route_class``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        check = _auth_check(self.dependant)
        if check is None:
            return handler

        async def checked(request: Request) -> Response:
            # a user's token is looked up in the server: off the event loop, as the route's is
            await run_in_threadpool(check, state(request).auth, request)
            return await handler(request)

        return checked


def _auth_check(dependant: Dependant) -> Callable[[Auth, Request], None] | None:
    """What the route's own dependency (:func:`writer`, else :func:`reader`) checks."""
    calls = {needed.call for needed in dependant.dependencies}
    if writer in calls:
        return lambda auth, request: auth.write(request)
    if reader in calls:
        return lambda auth, request: auth.read(request)
    return None


def is_json(content_type: str | None) -> bool:
    """Whether ``content_type`` names JSON: ``application/json`` or ``application/*+json``."""
    if not content_type:
        return False
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


async def json_body(request: Request) -> None:
    """A dependency of every route: a route that takes a JSON body refuses one sent as anything
    else (415, naming the type it needs), which would otherwise reach it as bytes and be told
    only that it is not an object. No body needs no type."""
    if getattr(request.scope.get("route"), "body_field", None) is None:
        return
    sent = request.headers.get("content-type")
    body = await request.body()
    if not body:
        return
    if not is_json(sent):
        raise HTTPException(
            415,
            "the body must be JSON, sent with Content-Type: application/json "
            f"(this request's: {sent or 'none'})",
        )
    try:  # JSON read from bytes takes UTF-16 and UTF-32 too; JSON exchanged is UTF-8 only
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HTTPException(422, not_utf8(error)) from None


def not_utf8(error: UnicodeDecodeError) -> str:
    """The refusal of a body that is not UTF-8 text (as JSON sent is, RFC 8259): where."""
    byte = error.object[error.start]
    return (
        f"body: not UTF-8 text: the byte at offset {error.start} (0x{byte:02x}) does not fit; "
        "send JSON as UTF-8"
    )


#: The refusal of a JSON body nested deeper than it can be read.
TOO_DEEP = "body: JSON nested too deeply to be read"


def known_query(request: Request) -> None:
    """A dependency of every route: an operation of the API's document refuses a query
    parameter it does not take (422 naming it and those it takes), which would otherwise be
    passed over: a misspelled filter (``?stauts=failed``) answered with everything. The
    dashboard's pages, which the document leaves out, keep theirs: their scripts read them
    (``/runs/<id>?step=load&line=4``)."""
    route = request.scope.get("route")
    if not request.query_params or not isinstance(route, APIRoute) or not route.include_in_schema:
        return  # most requests carry no query: the route's parameters are not walked
    takes = list(dict.fromkeys(_query_names(route.dependant)))
    unknown = next((name for name in request.query_params if name not in takes), None)
    if unknown is None:
        return
    listed = ", ".join(takes) if takes else "no query parameter"
    raise HTTPException(
        422, f"query.{unknown}: not a parameter of {request.method} {route.path} ({listed})"
    )


def _query_names(dependant: Dependant) -> list[str]:
    """The query parameters a route (and each of its dependencies) reads, by the name sent."""
    names = [field.alias for field in dependant.query_params]
    for needed in dependant.dependencies:
        names += _query_names(needed)
    return names
