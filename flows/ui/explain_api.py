"""``GET /api/v1/jobs/{jid}/explain`` and ``GET /api/v1/runs/{run_id}/explain[?step=]``: why a
job or a run's steps are where they are (:mod:`flows.runs.explain`), for the dashboard's "why?"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException

from flows.runs.explain import child_step, explain_run
from flows.ui.api import PREFIX, Ui, _load_run, engine_errors, narrowed, reads
from flows.ui.refusals import refusals
from flows.ui.shapes import JobExplanation, RunExplanation, answer
from flows.ui.state import CheckedRoute
from scheduler.engine.explain import explain

router = APIRouter(prefix=PREFIX, route_class=CheckedRoute)


@router.get(
    "/jobs/{jid}/explain",
    dependencies=reads,
    tags=["jobs"],
    response_model=None,
    responses={**answer(JobExplanation), **refusals(404)},
)
def explain_job(ui: Ui, jid: str) -> dict[str, Any]:
    """Why the job is where it is: ``{jid, reason, sentence, state, queue, ...facts}``."""
    found = engine_errors(lambda: explain(ui.client, jid))
    if found is None:
        raise HTTPException(404, f"no job {jid!r}")
    return found.as_json()


@router.get(
    "/runs/{run_id}/explain",
    dependencies=reads,
    tags=["runs"],
    response_model=None,
    responses={**answer(RunExplanation), **refusals(404)},
)
def explain_steps(
    ui: Ui, run_id: str, step: Annotated[str | None, narrowed("Only this step.")] = None
) -> dict[str, Any]:
    """Each unfinished step (or ``step``) with the reasons of its jobs."""
    view = _load_run(ui.client, run_id)
    view, step = engine_errors(lambda: child_step(ui.client, view, step))  # 404: UnknownStep
    steps = engine_errors(lambda: explain_run(ui.client, view, step))
    return {"run": view.run_id, "status": view.status, "steps": [s.as_json() for s in steps]}
