"""A run's timeline and a flow's history grid: their API routes and the flow's page.

Both read with :mod:`flows.runs.history` (a grid costs three round trips to the engine whatever
its size); the run page draws the timeline in the browser (``static/timeline.js``), the flow
page renders its grid on the server.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from flows.runs import history as run_history
from flows.ui import api, graph, pages
from flows.ui.refusals import refusals
from flows.ui.shapes import FlowHistory, Timeline, answer
from flows.ui.state import CheckedRoute, reader
from scheduler.service.records import Registration
from scheduler.service.schedules import Schedules

router = APIRouter(prefix=api.PREFIX, dependencies=[Depends(reader)], route_class=CheckedRoute)
page_router = APIRouter(
    dependencies=[Depends(reader)], route_class=CheckedRoute, include_in_schema=False
)

Count = Annotated[
    int, Query(ge=1, le=run_history.MAX_RUNS, description="Runs, newest first, at most.")
]


def brief(seconds: Any) -> str:
    """A duration in at most four characters or so, for a grid's column: 4.2s, 1m05, 2h03."""
    if seconds is None or seconds == "":
        return ""
    value = float(seconds)
    if value < 10:
        return f"{value:.1f}s"
    if value < 60:
        return f"{value:.0f}s"
    minutes = int(value // 60)
    if minutes < 60:
        return f"{minutes}m{int(value % 60):02d}"
    return f"{minutes // 60}h{minutes % 60:02d}"


pages.templates.env.filters["brief"] = brief


@router.get(
    "/runs/{run_id}/timeline",
    tags=["runs"],
    response_model=None,
    responses={**answer(Timeline), **refusals(404)},
)
def run_timeline(ui: api.Ui, run_id: str) -> dict[str, Any]:
    """Each step's waiting and running spans: ``ready`` (its needs had ended), ``started``,
    ``finished`` (epoch s, null where not yet), and a one-job step's attempts."""
    view = api._load_run(ui.client, run_id)
    needs = api.engine_errors(lambda: graph.run_needs(ui.client, view.record, view.graph))
    now = api.engine_errors(ui.client.engine.server_time)
    return api.engine_errors(lambda: run_history.timeline(ui.client, view, needs, now))


def _flow(ui: api.Ui, flow: str, count: int) -> tuple[run_history.FlowHistory, Registration | None]:
    """The flow's history and its schedule; 404 when the engine knows no such flow.

    A flow exists while a scheduler service has it registered (``schedule:<name>``) or the
    engine's run index of the flow (``runs:<flow>``) still holds a run: a flow started only with
    `flows run` is never registered, and a registered one may not have run yet. A flow file no
    one registered or ran is not the engine's to know."""
    found = api.engine_errors(lambda: run_history.flow_history(ui.client, flow, count))
    registration = api.engine_errors(lambda: Schedules(ui.client).get(flow, skips=0))
    if registration is None and not found.runs:
        raise HTTPException(404, f"no flow named {flow!r}")
    return found, registration


@router.get(
    "/flows/{flow}/history",
    tags=["runs"],
    response_model=None,
    responses={**answer(FlowHistory), **refusals(404)},
)
def flow_history(ui: api.Ui, flow: str, count: Count = 25) -> dict[str, Any]:
    """The flow's newest runs (oldest first) by its steps: each run's status and duration, and
    each of its steps' status and duration, as a grid. 404 for a flow that is neither
    registered nor has a run."""
    found, _ = _flow(ui, flow, count)
    return run_history.history_json(found)


def _cells(found: run_history.FlowHistory) -> list[dict[str, Any]]:
    """One column per run: its status, duration (and its share of the longest) and cells."""
    durations = [run_history.run_duration(view) for view in found.runs]
    longest = max((d for d in durations if d is not None), default=0.0) or 1.0
    return [
        {
            "id": view.run_id,
            "status": view.status,
            "submitted": view.record.get("submitted"),
            "duration": duration,
            "share": (duration or 0.0) / longest,
            "steps": {step.step: step for step in view.steps},
        }
        for view, duration in zip(found.runs, durations, strict=True)
    ]


@page_router.get("/flows/{flow}", response_class=HTMLResponse)
def flow_page(request: Request, ui: api.Ui, flow: str, count: Count = 25) -> HTMLResponse:
    """A flow: its schedule when one is registered, and its recent runs as a grid."""
    found, registration = _flow(ui, flow, count)
    return pages.render(
        request,
        "flow.html",
        flow=flow,
        schedule=api._schedule_dict(registration) if registration is not None else None,
        runs=_cells(found),
        steps=found.steps,
        count=count,
    )
