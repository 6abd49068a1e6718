"""``flows ui``'s part of the audit log (:mod:`flows.access.audit`): a middleware that records every
write the API answered with success, and ``GET /api/v1/audit`` and the dashboard's Audit page.

The middleware reads, once the route has answered and before the answer is sent, who passed
(:func:`flows.ui.roles.who`, kept in the request's state), the route's name and path parameters
(the target) and the client's address; a refused request changed nothing and is not recorded.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flows.access import audit
from flows.ui import api
from flows.ui.pages import render
from flows.ui.roles import Identity
from flows.ui.shapes import AuditPage, answer
from flows.ui.state import CheckedRoute, UiState, reader

log = logging.getLogger("flows.ui")

WRITES = {"POST", "PUT", "PATCH", "DELETE"}


class AuditLog:
    """Records each successful write under ``/api/``."""

    def __init__(self, app: ASGIApp, ui: UiState) -> None:
        self.app = app
        self.ui = ui

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in WRITES:
            await self.app(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            # Recorded before the answer leaves: a client that saw its change succeed finds it
            # in the audit log.
            if message["type"] == "http.response.start" and 200 <= int(message["status"]) < 300:
                self._record_api_write(scope)
            await send(message)

        await self.app(scope, receive, watched)

    def _record_api_write(self, scope: Scope) -> None:
        if not str(scope.get("path", "")).startswith(api.PREFIX + "/"):
            return
        try:
            self._record(scope)
        except Exception as error:  # the change is made: a lost entry is logged, not raised
            log.error("audit: could not record %s: %s", scope.get("path"), error)

    def _record(self, scope: Scope) -> None:
        identity = (scope.get("state") or {}).get("identity")
        route = scope.get("route")
        params = scope.get("path_params") or {}
        client = scope.get("client")
        audit.record(
            self.ui.client,
            who=identity.name if isinstance(identity, Identity) else "anonymous",
            role=identity.role if isinstance(identity, Identity) else "",
            via="api",
            action=getattr(route, "name", "") or f"{scope['method']} {scope['path']}",
            target=" ".join(f"{k}={v}" for k, v in params.items()),
            address=str(client[0]) if client else "",
            detail=f"{scope['method']} {scope['path']}",
        )


router = APIRouter(route_class=CheckedRoute)
Count = Annotated[int, Query(ge=1, le=api.MAX_LIMIT, description="Entries, newest first.")]


@router.get(
    f"{api.PREFIX}/audit",
    dependencies=[Depends(reader)],
    tags=["audit"],
    response_model=None,
    responses=answer(AuditPage),
)
def list_audit(
    ui: api.Ui,
    limit: Count = 100,
    before: Annotated[
        str | None, Query(pattern=r"^[0-9]+-[0-9]+$", description="Older than (an entry's id).")
    ] = None,
    who: Annotated[str | None, api.narrowed("Only this user's changes.", max_length=64)] = None,
) -> dict[str, Any]:
    """Changes made through the API and the command line, newest first: ``{items, next}``
    (``next``: the ``before`` of the next page, null at the end)."""
    try:
        items = audit.recent(ui.client, limit, before, who)
    except ValueError as error:  # an id out of a stream id's range: the client's mistake
        raise HTTPException(422, f"query.before: {error}") from None
    return {"items": items, "next": items[-1]["id"] if len(items) == limit else None}


@router.get(
    "/audit", response_class=HTMLResponse, include_in_schema=False, dependencies=[Depends(reader)]
)
def audit_page(request: Request, ui: api.Ui) -> HTMLResponse:
    return render(request, "audit.html", entries=audit.recent(ui.client, 200))
