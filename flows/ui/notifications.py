"""Notifications in ``flows ui``: ``GET /api/v1/notifications`` and the dashboard's page.

One answer for both: deliveries given up (kept until retried), events waiting to be sent with
their attempts so far, and the latest sends, as the documents of
:mod:`scheduler.notify.documents` (`flows notifications --json` prints the same).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse

from flows.ui import api
from flows.ui.pages import render
from flows.ui.refusals import refusals
from flows.ui.shapes import NotificationRetried, Notifications, answer
from flows.ui.state import CheckedRoute, reader, writer
from scheduler.notify import outbox
from scheduler.notify.documents import unsendable
from scheduler.service.schedules import Schedules

router = APIRouter(route_class=CheckedRoute)
Count = Annotated[int, Query(ge=1, le=2000, description="How many of the latest sends.")]
EventId = Annotated[
    str, Path(pattern=outbox.EVENT_ID, description="The given-up event's id (1795832000123-0).")
]


@router.get(
    f"{api.PREFIX}/notifications",
    dependencies=[Depends(reader)],
    tags=["notifications"],
    response_model=None,
    responses=answer(Notifications),
)
def list_notifications(ui: api.Ui, recent: Count = 50) -> dict[str, Any]:
    """``{failed, waiting, recent, unsendable}``: deliveries given up and events not sent yet,
    each with its channels (``channels``: each one's status, attempts and last error: a channel
    that took it is not sent it again), the latest sends (newest first), and the channels a
    scheduler service cannot send (``unsendable``: its id, the flow file, the channel, why)."""
    return {
        "failed": outbox.failed(ui.client),
        "waiting": outbox.waiting(ui.client),
        "recent": outbox.recent(ui.client, recent),
        "unsendable": unsendable(Schedules(ui.client).services()),
    }


@router.post(
    f"{api.PREFIX}/notifications/{{event_id}}/retry",
    dependencies=[Depends(writer)],
    tags=["notifications"],
    response_model=None,
    responses={**answer(NotificationRetried), **refusals(404)},
)
def retry_notification(ui: api.Ui, event_id: EventId) -> dict[str, Any]:
    """Put a given-up event back in the outbox for another round of attempts, to the channels
    that did not take it: a new entry, ``retried_as`` (its ``retry_of`` this one). 404 when it
    is not given up: the detail says which entry it became if it was sent again already; 422
    when ``event_id`` is no event's id."""
    new_id = outbox.retry_failed(ui.client, event_id)
    if new_id is None:
        raise HTTPException(404, outbox.not_given_up(ui.client, event_id))
    return dict(outbox.retried(event_id, new_id))


@router.get(
    "/notifications",
    response_class=HTMLResponse,
    include_in_schema=False,
    dependencies=[Depends(reader)],
)
def notifications_page(request: Request, ui: api.Ui) -> HTMLResponse:
    return render(request, "notifications.html", **list_notifications(ui, 100))
