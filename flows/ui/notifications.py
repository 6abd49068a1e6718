"""Notifications in ``flows ui``: ``GET /api/v1/notifications`` and the dashboard's page.

One answer for both: deliveries given up (kept until retried), events waiting to be sent with
their attempts so far, and the latest sends (:mod:`scheduler.notify.outbox`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from flows.ui import api
from flows.ui.pages import render
from flows.ui.state import reader, writer
from scheduler.notify import outbox

router = APIRouter()
Count = Annotated[int, Query(ge=1, le=2000, description="How many of the latest sends.")]


@router.get(f"{api.PREFIX}/notifications", dependencies=[Depends(reader)], tags=["notifications"])
def list_notifications(ui: api.Ui, recent: Count = 50) -> dict[str, Any]:
    """``{failed, waiting, recent}``: deliveries given up and events not sent yet, each with its
    channels (``channels``: each one's status, attempts and last error: a channel that took
    it is not sent it again), and the latest sends (newest first)."""
    return {
        "failed": outbox.failed(ui.client),
        "waiting": outbox.waiting(ui.client),
        "recent": outbox.recent(ui.client, recent),
    }


@router.post(
    f"{api.PREFIX}/notifications/{{event_id}}/retry",
    dependencies=[Depends(writer)],
    tags=["notifications"],
)
def retry_notification(ui: api.Ui, event_id: str) -> dict[str, Any]:
    """Put a given-up event back in the outbox for another round of attempts, to the channels
    that did not take it."""
    if not outbox.retry_failed(ui.client, event_id):
        raise HTTPException(404, f"no given-up notification {event_id}")
    return {"id": event_id, "retried": True}


@router.get(
    "/notifications",
    response_class=HTMLResponse,
    include_in_schema=False,
    dependencies=[Depends(reader)],
)
def notifications_page(request: Request, ui: api.Ui) -> HTMLResponse:
    return render(request, "notifications.html", **list_notifications(ui, 100))
