"""The scheduler services' sources in the REST API: each source that published its folder
(:mod:`scheduler.service.catalog`), live or stale, and removing a stale one's folder, as
``flows sources`` and ``flows sources remove`` do. Removing needs an admin
(:mod:`flows.ui.roles`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import Field

from flows.ui import api
from flows.ui.api import Body, Ui, engine_errors, reads, writes
from flows.ui.refusals import refusals
from flows.ui.shapes import Listing, SourceRemoved, answer
from flows.ui.state import CheckedRoute
from scheduler.service import catalog

router = APIRouter(prefix=api.PREFIX, route_class=CheckedRoute)


class RemoveSource(Body):
    force: bool = Field(
        False, description="Remove it even while a service of it is alive (it is refused then)."
    )


@router.get(
    "/sources", dependencies=reads, tags=["sources"], response_model=None, responses=answer(Listing)
)
def list_sources(ui: Ui) -> dict[str, Any]:
    """Every source whose service published its folder of flow files, by name: its folder,
    how many files, when it was published, whether a service of it is alive (``live``: one
    ticked within the last 60 s, as `flows scheduler --health` asks) and when one was last
    seen."""
    now = ui.client.engine.server_time()
    found = engine_errors(lambda: catalog.sources(ui.client, now))
    return {"items": [s.as_json() for s in found]}


@router.post(
    "/sources/{source}/remove",
    dependencies=writes,
    tags=["sources"],
    response_model=None,
    responses={**answer(SourceRemoved), **refusals(404, 409, 415)},
)
def remove_source(ui: Ui, source: str, body: RemoveSource | None = None) -> dict[str, Any]:
    """Forget the flow files a source published (a service retired, moved or renamed leaves
    them listed otherwise). 404 for a source that published nothing, 409 while a service of it
    is alive unless ``force``; nothing is changed then."""
    force = body.force if body is not None else False
    now = ui.client.engine.server_time()
    try:
        removed = engine_errors(lambda: catalog.remove(ui.client, source, now, force=force))
    except catalog.UnknownSource as unknown:
        raise HTTPException(404, str(unknown)) from None
    except catalog.LiveSource as live:
        raise HTTPException(409, f'{live}, or send {{"force": true}}') from None
    return {"source": source, "removed": True, "files": removed.files, "was_live": removed.live}
