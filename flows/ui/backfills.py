"""Backfills in the REST API and the dashboard: each with its progress (ticks handled of all,
runs submitted, canceled runs resumed, ticks that had run already, runs active), and cancel.
The JSON of a backfill is :meth:`scheduler.service.backfills.Backfill.as_json`, as
``flows backfills --json`` prints it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from flows.ui import api, pages
from flows.ui.api import Limit, Offset, Ui, engine_errors, page, reads, writes
from flows.ui.refusals import refusals
from flows.ui.shapes import BackfillCanceled, BackfillDocument, Page, answer
from flows.ui.state import CheckedRoute
from scheduler.service.backfills import Backfill, Backfills

router = APIRouter(prefix=api.PREFIX, route_class=CheckedRoute)
page_router = APIRouter(dependencies=reads, include_in_schema=False, route_class=CheckedRoute)


def _backfill(ui: Ui, backfill_id: str) -> Backfill:
    found = engine_errors(lambda: Backfills(ui.client).get(backfill_id))
    if found is None:
        raise HTTPException(404, f"no backfill {backfill_id!r}")
    return found


def _document(found: Backfill) -> dict[str, Any]:
    out = found.as_json()
    out["progress"] = round(found.next / found.total, 4) if found.total else 1.0
    return out


@router.get(
    "/backfills",
    dependencies=reads,
    tags=["backfills"],
    response_model=None,
    responses=answer(Page),
)
def list_backfills(ui: Ui, offset: Offset = 0, limit: Limit = 100) -> dict[str, Any]:
    """Backfills, newest first, each with its progress and its runs still active."""
    found = engine_errors(lambda: Backfills(ui.client).recent(offset, limit))
    return page([_document(b) for b in found], offset, limit)


@router.get(
    "/backfills/{backfill_id}",
    dependencies=reads,
    tags=["backfills"],
    response_model=None,
    responses={**answer(BackfillDocument), **refusals(404)},
)
def get_backfill(ui: Ui, backfill_id: str) -> dict[str, Any]:
    """One backfill: its ticks handled, runs submitted, canceled runs resumed, ticks that had
    run, runs active."""
    return _document(_backfill(ui, backfill_id))


@router.post(
    "/backfills/{backfill_id}/cancel",
    dependencies=writes,
    tags=["backfills"],
    response_model=None,
    responses={**answer(BackfillCanceled), **refusals(404, 409)},
)
def cancel_backfill(ui: Ui, backfill_id: str) -> dict[str, Any]:
    """Submit no more of its runs and cancel those still active. 409 (nothing changed) when
    it is no longer active (done, or canceled already)."""
    _backfill(ui, backfill_id)
    canceled = engine_errors(lambda: Backfills(ui.client).cancel(backfill_id))
    if not canceled.changed:
        raise HTTPException(409, f"backfill {backfill_id} is {canceled.state}: nothing to cancel")
    return {
        "id": backfill_id,
        "state": canceled.state,
        "runs": canceled.runs,
        "jobs": canceled.jobs,
        "pending": canceled.pending,
    }


@page_router.get("/backfills", response_class=HTMLResponse)
def backfills_page(request: Request, ui: Ui, offset: Offset = 0) -> HTMLResponse:
    listed = list_backfills(ui, offset=offset, limit=50)
    return pages.render(
        request, "backfills.html", backfills=listed["items"], next=listed["next"], offset=offset
    )


__all__ = ["page_router", "router"]
