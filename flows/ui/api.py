"""The REST API, JSON under ``/api/v1/``: runs, jobs, queues, workers, schedules, failures.

Every listing is one bounded page (``offset``, ``limit`` at most :data:`MAX_LIMIT`) answered with
``{items, offset, limit, next}`` (``next``: the offset of the next page, null at the end); no
endpoint reads more than a page's worth of the namespace. A filter that narrows a read to one
thing (a run listing's ``flow``, a run's ``step``, ``queue``, ``who``) given empty is refused
(422 naming it), never read as no filter: leave it out to filter nothing. Reads need what
:meth:`flows.ui.auth.Auth.read` allows, writes (POST) a bearer token. A request value reaches the
engine as an argument and a run's params are bound as ``flows run`` binds them, never as code.
Engine refusals come back as 4xx with the engine's one-line message, worded as ``flows`` words
it (:func:`flows.runs.refusals.told`: without the engine's name for its command).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from flows.runs import actions as run_actions
from flows.runs import statuses
from flows.runs.labels import UnknownStep, labelled_step, no_step
from flows.runs.logs import (
    NoSuchRun,
    StepLine,
    job_label,
    no_step_of,
    run_jobs_page,
    step_jobs_page,
)
from flows.runs.read import PAGE, RunView, list_run_statuses, load_run, run_document
from flows.runs.refusals import told
from flows.runs.signals import SignalRefused, approval, signal_step
from flows.runs.trigger import UnknownFlow, trigger_run
from flows.ui import events
from flows.ui.refusals import refusals
from flows.ui.roles import who
from flows.ui.shapes import (
    FailedJobs,
    JobCanceled,
    JobDocument,
    JobKicked,
    JobRetried,
    LogPage,
    Page,
    QueuePaused,
    RunCanceled,
    RunJobs,
    RunRetried,
    RunStarted,
    SchedulePaused,
    ScheduleResumed,
    Signaled,
    StepKicked,
    StepRerun,
    Unfailed,
    WorkerForgotten,
    answer,
)
from flows.ui.state import CheckedRoute, UiState, engine_library, reader, state, writer
from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, InvalidArgument, JobNotFound
from scheduler.engine.job import Job
from scheduler.engine.limits import line_fault
from scheduler.engine.replies import as_list
from scheduler.service.records import Registration
from scheduler.service.schedules import Schedules

PREFIX = "/api/v1"
MAX_LIMIT = 500
# Runs looked at for one page of a filtered run listing, at most.
MAX_RUNS_SCANNED = 1000

Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Where the page starts.")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items in the page, at most.")]


def narrowed(description: str, max_length: int = 256) -> Any:
    """A query parameter naming the one thing a read is narrowed to (a flow, a step, a queue).
    Given empty it is refused (422 naming it), never read as no filter: an empty value is a
    mistake (a blank field, an unset variable) that would otherwise answer everything."""
    return Query(min_length=1, max_length=max_length, description=description)


Ui = Annotated[UiState, Depends(state)]
router = APIRouter(prefix=PREFIX, route_class=CheckedRoute)
reads = [Depends(reader)]
writes = [Depends(writer)]


def page(items: list[Any], offset: int, limit: int, more: bool | None = None) -> dict[str, Any]:
    """A page of a listing; ``more`` when the caller knows whether items follow."""
    if more is None:
        more = len(items) == limit
    return {
        "items": items,
        "offset": offset,
        "limit": limit,
        "next": offset + len(items) if more else None,
    }


T = TypeVar("T")


def engine_errors(action: Callable[[], T]) -> T:
    """Run an engine call; its refusal becomes a 4xx with the engine's message, as the
    command line says it (:func:`~flows.runs.refusals.told`)."""
    try:
        return action()
    except (JobNotFound, UnknownStep) as error:
        raise HTTPException(404, told(error)) from None
    except EngineError as error:
        conflict = error.code in ("WRONGSTATE", "HASDEPENDENTS", "LOCKLOST")
        raise HTTPException(409 if conflict else 400, told(error)) from None


# -- bodies ----------------------------------------------------------------------------------------


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _one_line(value: str) -> str:
    fault = line_fault(value)
    if fault is not None:  # the fault's words, without pydantic's "Value error, "
        raise PydanticCustomError("one_line", fault)
    return value


#: A short text shown on one line (who signals, a pause's note): refused (422 naming the field)
#: when it holds a control character but tab, as `flows` refuses it
#: (:func:`scheduler.engine.limits.line_fault`).
OneLine = Annotated[str, AfterValidator(_one_line)]


class StartRun(Body):
    flow: str = Field(min_length=1, max_length=256, description="A registered flow's name.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Param values, checked against the flow's declarations as `flows run -p`.",
    )


class Signal(Body):
    data: dict[str, Any] = Field(
        default_factory=dict,
        description="The signal's data, a JSON object: the wait step's outputs.",
    )
    by: OneLine = Field(
        default="api", min_length=1, max_length=256, description="Who gives the signal."
    )


class Approve(Body):
    note: str = Field(default="", max_length=4096, description="The step's `outputs.note`.")
    by: OneLine = Field(
        default="api",
        min_length=1,
        max_length=256,
        description="Who approves (a user's own name when the token is a user's).",
    )


class PauseSchedule(Body):
    note: OneLine = Field("", max_length=1024, description="Why (shown with the schedule).")


class Unfail(Body):
    queue: str = Field(min_length=1, max_length=256, description="The queue to put them into.")
    count: int = Field(25, ge=1, le=1000)


# -- runs ------------------------------------------------------------------------------------------


def _load_run(
    client: Client, run_id: str, limit: int = PAGE, offsets: dict[str, int] | None = None
) -> RunView:
    view = engine_errors(lambda: load_run(client, run_id, limit, offsets))
    if view is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return view


def _labelled_step(client: Client, run_id: str, step: str) -> tuple[RunView, str]:
    """The run and step a route's ``step`` names: a step of the run, or ``step/child-step``
    one of the child run a sub-flow step started (:func:`~flows.runs.labels.labelled_step`);
    404 when either is missing, saying which, with the step likely meant."""
    _load_run(client, run_id, 0)
    child, name = engine_errors(lambda: labelled_step(client, run_id, step))
    view = _load_run(client, child, 0)
    if view.step(name) is None:
        raise missing_step(view, name)
    return view, name


def missing_step(view: RunView, step: str) -> HTTPException:
    """The 404 for a step the run lacks, with the step likely meant."""
    return HTTPException(404, no_step(view.run_id, step, [s.step for s in view.steps]))


def _runs_page(client: Client, flow: str | None, offset: int, count: int) -> list[Any]:
    """Run records with their statuses, newest first (one engine call), as JSON values."""
    return engine_errors(lambda: list_run_statuses(client, flow, offset, count))


RUN_STATUSES = "^(" + "|".join(statuses.RUN_STATUSES) + ")$"


def listed(record: dict[str, Any], status: str | None, all_runs: bool) -> bool:
    """Whether a run listing filtered by ``status`` (and without child runs unless
    ``all_runs``) shows ``record``."""
    if not all_runs and record.get("parent_run"):
        return False
    return status is None or record.get("status") == status


@router.get("/runs", dependencies=reads, tags=["runs"], response_model=None, responses=answer(Page))
def list_runs(
    ui: Ui,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 25,
    flow: Annotated[str | None, narrowed("Only runs of this flow.")] = None,
    status: Annotated[
        statuses.RunStatus | None, Query(description="Only runs with this status.")
    ] = None,
    since: Annotated[
        float | None, Query(ge=0, description="Submitted at or after (epoch s).")
    ] = None,
    all_runs: Annotated[
        bool, Query(alias="all", description="List sub-flows' child runs too.")
    ] = False,
) -> dict[str, Any]:
    """Runs, newest first, each with its status (the engine's word: running, succeeded,
    failed, blocked, canceled, expired; docs: statuses) and its number of child runs
    (``children``); a sub-flow's child runs are listed only with ``all``. Filtered, a page
    looks at no more than 1,000 runs: follow ``next`` until it is null."""
    items: list[dict[str, Any]] = []
    position, end, more = offset, offset + MAX_RUNS_SCANNED, True
    while more and len(items) < limit and position < end:
        count = min(100, end - position) if status or not all_runs else limit - len(items)
        records = _runs_page(ui.client, flow, position, count)
        more = len(records) == count
        for seen, record in enumerate(records, 1):
            if since is not None and float(record.get("submitted") or 0) < since:
                more = False  # newest first: the rest are older still
                break
            position += 1
            if listed(record, status, all_runs):
                record["children"] = int(record.get("children") or 0)
                items.append(record)
                if len(items) == limit:
                    more = more or seen < len(records)  # the page's rest comes next
                    break
    return {"items": items, "offset": offset, "limit": limit, "next": position if more else None}


@router.get(
    "/runs/{run_id}",
    dependencies=reads,
    tags=["runs"],
    response_model=RunView,
    responses=refusals(404),
)
def get_run(
    ui: Ui,
    run_id: str,
    limit: Annotated[int, Query(ge=0, le=1000, description="Jobs listed per step.")] = PAGE,
    step: Annotated[str | None, narrowed("The step to page.")] = None,
    offset: Offset = 0,
) -> JSONResponse:
    """One run as the engine decides it: its status, counts per status, allowed actions and
    graph, and each step's status, counts, attempts, times, actions and a page of its jobs
    (``limit`` per step; ``step`` and ``offset`` page one step's jobs: 404 when the run has no
    such step). The same document as ``flows status RUN --json``."""
    offsets = {step: offset} if step else None
    view = _load_run(ui.client, run_id, limit, offsets)
    if step and view.step(step) is None:  # else the whole run came back, as if it were paged
        raise missing_step(view, step)
    # Sent as built: `response_model` documents the shape, whose record fields vary by run.
    return JSONResponse(run_document(view))


@router.post(
    "/runs",
    dependencies=writes,
    tags=["runs"],
    status_code=201,
    response_model=None,
    responses={**answer(RunStarted, 201), **refusals(404, 409, 415)},
)
def start_run(ui: Ui, body: StartRun) -> dict[str, Any]:
    """Start a run of a registered flow (one the scheduler service registered) with params."""
    try:
        triggered = engine_errors(lambda: trigger_run(ui.client, body.flow, body.params))
    except UnknownFlow as error:
        raise HTTPException(404, str(error)) from None
    except ValueError as error:
        raise HTTPException(422, str(error)) from None
    return triggered.as_json()


@router.post(
    "/runs/{run_id}/retry",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(RunRetried), **refusals(404, 409)},
)
def retry_run(ui: Ui, run_id: str) -> dict[str, Any]:
    """Resume a run: its failed and expired jobs run again, completed ones do not. 409
    (nothing changed) when nothing of it failed."""
    _load_run(ui.client, run_id, 0)
    count = engine_errors(lambda: run_actions.retry_run(ui.client, run_id))
    return {"id": run_id, "retried": count}


@router.post(
    "/runs/{run_id}/cancel",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(RunCanceled), **refusals(404, 409)},
)
def cancel_run(ui: Ui, run_id: str) -> dict[str, Any]:
    """Cancel every job of the run that has not ended. 409 (nothing changed) when none is
    left."""
    _load_run(ui.client, run_id, 0)
    count = engine_errors(lambda: int(ui.client.engine.call("run.cancel", run_id)))
    return {"id": run_id, "canceled": count}


class Rerun(Body):
    downstream: bool = Field(False, description="Re-run every step that needs it too.")
    item: str | None = Field(
        None, min_length=1, max_length=1024, description="Only this job of the step."
    )


@router.post(
    "/runs/{run_id}/steps/{step:path}/rerun",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(StepRerun), **refusals(404, 409, 415)},
)
def rerun_step(ui: Ui, run_id: str, step: str, body: Rerun | None = None) -> dict[str, Any]:
    """Run a step of a finished run again (with ``downstream``, every step after it), its
    attempts counting on; earlier attempts' logs stay readable. 409 (nothing changed) while
    the run is running."""
    chosen = body or Rerun(downstream=False, item=None)
    view, step = _labelled_step(ui.client, run_id, step)
    count = engine_errors(
        lambda: run_actions.rerun(ui.client, view.run_id, step, chosen.downstream, chosen.item)
    )
    return {"id": view.run_id, "step": step, "rerun": count}


@router.post(
    "/runs/{run_id}/steps/{step:path}/kick",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(StepKicked), **refusals(404, 409)},
)
def kick_step(ui: Ui, run_id: str, step: str) -> dict[str, Any]:
    """Put every buried job of a step back into its queue (a foreach step's items too), each
    waiting again at its priority, as ``flows kick --step RUN:STEP`` does. Nothing changes
    when it is refused: 404 for an unknown run or step, 409 when no job of the step is
    buried."""
    view, step = _labelled_step(ui.client, run_id, step)
    kicked = engine_errors(lambda: run_actions.kick_step(ui.client, view.run_id, step))
    return {"id": view.run_id, "step": step, "kicked": len(kicked), "jobs": kicked}


_SIGNAL_REFUSED = {"missing": 404, "state": 409}


def _signaled(action: Callable[[], T]) -> T:
    """A signal or an approval given: its refusal as a 4xx, and so the engine's (a run id it
    refuses: empty, too long, ``..``)."""
    try:
        return engine_errors(action)
    except SignalRefused as error:
        raise HTTPException(_SIGNAL_REFUSED.get(error.kind, 422), str(error)) from None


@router.post(
    "/runs/{run_id}/steps/{step:path}/signal",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(Signaled), **refusals(404, 409, 415)},
)
def signal_wait(
    ui: Ui, request: Request, run_id: str, step: str, body: Signal | None = None
) -> dict[str, Any]:
    """Complete a `wait:` step awaiting its signal, with `data` as its outputs; its dependents
    are released at once. 409 (nothing changed) when the step is not awaiting a signal. A
    user's signal is recorded as the user's, whatever `by` says."""
    signal = body or Signal()
    identity = who(request)
    by = identity.name if identity is not None and identity.user else signal.by
    done = _signaled(lambda: signal_step(ui.client, run_id, step, signal.data, by=by))
    return {"id": done.run_id, "step": done.step, "jid": done.jid, "data": dict(done.data)}


@router.post(
    "/runs/{run_id}/steps/{step:path}/approve",
    dependencies=writes,
    tags=["runs"],
    response_model=None,
    responses={**answer(Signaled), **refusals(404, 409, 415)},
)
def approve_wait(
    ui: Ui, request: Request, run_id: str, step: str, body: Approve | None = None
) -> dict[str, Any]:
    """Approve a `wait:` step awaiting its signal, as `flows approve` does: the signal's data is
    `{"note": NOTE, "approved_by": WHO}`. Nothing changes when it is refused: 404 for an unknown
    run or step, 409 when the step is not awaiting a signal, 422 when its wait declares an
    output an approval does not give (signal it instead)."""
    given = body or Approve()
    identity = who(request)
    by = identity.name if identity is not None and identity.user else given.by
    done = _signaled(lambda: signal_step(ui.client, run_id, step, approval(given.note, by), by=by))
    return {"id": done.run_id, "step": done.step, "jid": done.jid, "data": dict(done.data)}


@router.get(
    "/runs/{run_id}/logs",
    dependencies=reads,
    tags=["runs"],
    response_model=None,
    responses={**answer(RunJobs), **refusals(404)},
)
def run_logs(
    ui: Ui,
    run_id: str,
    step: Annotated[str | None, narrowed("Only this step's jobs.")] = None,
    offset: Offset = 0,
    limit: Limit = 100,
) -> dict[str, Any]:
    """A page of the run's jobs (of one step) in submission order, each with its label, to
    read its log. Filtered by ``step``, a page looks at no more than 1,000 of the run's jobs:
    follow ``next`` until it is null."""
    if step is not None and "/" not in step:  # a child run's step is checked as it is read
        view = _load_run(ui.client, run_id, 0)
        if view.step(step) is None:
            raise missing_step(view, step)
    try:
        jobs, following = engine_errors(
            lambda: (
                run_jobs_page(ui.client, run_id, offset, limit)
                if step is None
                else step_jobs_page(ui.client, run_id, step, offset, limit)
            )
        )
    except NoSuchRun as error:  # gone since, or never there
        raise HTTPException(404, str(error)) from None
    items = [{"step": label, "jid": jid} for label, jid in jobs]
    return {"id": run_id, "items": items, "offset": offset, "limit": limit, "next": following}


# -- jobs ------------------------------------------------------------------------------------------


def _job(client: Client, jid: str) -> Job:
    found = engine_errors(lambda: client.jobs.get(jid))
    if found is None:
        raise HTTPException(404, f"no job {jid!r}")
    return found


@router.get(
    "/jobs/{jid}",
    dependencies=reads,
    tags=["jobs"],
    response_model=None,
    responses={**answer(JobDocument), **refusals(404)},
)
def get_job(ui: Ui, jid: str) -> dict[str, Any]:
    """One job: state, data, result, failure, history, and the actions allowed on it now (a
    job of a run: as its run's decider says; `run` names the run, `step` gives its step as the
    run's JSON does), and who ran it last (`ran_by`). The same document as ``flows job JID
    --json``."""
    found = _job(ui.client, jid)
    return engine_errors(lambda: run_actions.job_document(ui.client, found))


@router.post(
    "/jobs/{jid}/retry",
    dependencies=writes,
    tags=["jobs"],
    response_model=None,
    responses={**answer(JobRetried), **refusals(404, 409)},
)
def retry_job(ui: Ui, jid: str) -> dict[str, Any]:
    """Put a failed or expired job back (a job of a run by the run's rules), or the failed
    jobs of a run's step named as ``RUN:STEP`` (a foreach step's items, ``RUN:STEP[i]``, too).
    409 (nothing changed) for a job in any other state: a completed one is re-run, an awaiting
    one signaled; 404 for no such job, or a step the run lacks (with the one likely meant)."""

    def retry() -> dict[str, Any]:
        try:
            return run_actions.retry_job(ui.client, jid)
        except InvalidArgument:  # RUN:STEP naming no step: said with the one likely meant
            if (missing := no_step_of(ui.client, jid)) is not None:
                raise HTTPException(404, str(missing)) from None
            raise

    done = engine_errors(retry)
    return {"jid": jid, **done}


@router.post(
    "/jobs/{jid}/kick",
    dependencies=writes,
    tags=["jobs"],
    response_model=None,
    responses={**answer(JobKicked), **refusals(404, 409)},
)
def kick_job(ui: Ui, jid: str) -> dict[str, Any]:
    """Put a buried job back into its queue, waiting again at its priority (a job of a run:
    its step waits again). 409 (nothing changed) when the job is not buried."""
    found = _job(ui.client, jid)
    kicked = engine_errors(lambda: ui.client.jobs.kick(jid))
    return {"jid": jid, "queue": found.queue, "kicked": len(kicked)}


@router.post(
    "/jobs/{jid}/cancel",
    dependencies=writes,
    tags=["jobs"],
    response_model=None,
    responses={**answer(JobCanceled), **refusals(404, 409)},
)
def cancel_job(ui: Ui, jid: str) -> dict[str, Any]:
    """Cancel a job (refused while a job depends on it)."""
    _job(ui.client, jid)
    return {"canceled": engine_errors(lambda: ui.client.jobs.cancel(jid))}


def _log_page(
    client: Client, jid: str, attempt: int | None, offset: int = 0, count: int = joblogs.PAGE
) -> tuple[joblogs.LogPage, int]:
    """A page of the job's log (:func:`scheduler.engine.joblogs.read`) and the attempts the job
    made; 404 in plain words when there is no such job, or when it never made ``attempt``. An
    attempt counts once the job started it (its ``runs``), whether or not it wrote a line, as
    `flows logs --attempt` counts it; the log alone knows only the latest attempt that wrote
    one (a job its run's cancel deleted counts those)."""

    def read() -> joblogs.LogPage:
        try:
            return joblogs.read(client.engine, jid, attempt, offset, count)
        except JobNotFound:  # its message names the engine's command
            raise HTTPException(404, f"no job {jid!r}") from None

    found = engine_errors(read)
    job = engine_errors(lambda: client.jobs.get(jid))
    made = max(found.attempts, job.runs if job is not None else 0)
    if attempt is not None and attempt > made:
        has = f"it has {made} attempt{'s' if made != 1 else ''}" if made else "it has no log yet"
        raise HTTPException(404, f"job {jid!r} has no attempt {attempt} ({has})")
    return found, made


@router.get(
    "/jobs/{jid}/logs",
    dependencies=reads,
    tags=["jobs"],
    response_model=None,
    responses={**answer(LogPage), **refusals(404)},
)
def job_logs(
    ui: Ui,
    jid: str,
    attempt: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=joblogs.PAGE)] = joblogs.PAGE,
) -> dict[str, Any]:
    """A page of one attempt's log lines, each in the shape `flows logs --json` prints
    (`step`, `jid`, `attempt`, `time`, `stream`, `text`, ...): by default the latest attempt
    that wrote any (`attempt`, 0 when none did). `attempts` is how many attempts the job made,
    whether or not they wrote a line: an `attempt` below it, not asked for, means the later
    ones wrote nothing. 404 for a job that is not there, and for an attempt it never made
    (the detail says how many it has)."""
    found, made = _log_page(ui.client, jid, attempt, offset, limit)
    label = engine_errors(lambda: job_label(ui.client, jid))
    return {
        "jid": jid,
        "attempt": found.attempt,
        "attempts": made,
        "total": found.total,
        "dropped": found.dropped,
        "items": [StepLine(label, jid, found.attempt, line).as_dict() for line in found.lines],
        "offset": found.offset,
        "limit": limit,
        "next": found.next if found.next < found.total else None,
    }


def _log_text(client: Client, first: joblogs.LogPage) -> Iterator[str]:
    """The attempt's lines from ``first`` on, a page per engine call, each ending in a newline;
    a job deleted meanwhile ends the text where it was."""
    page = first
    while True:
        yield "".join(line.text + "\n" for line in page.lines)
        if not page.lines or page.next >= page.total:
            return
        try:
            page = joblogs.read(client.engine, page.jid, page.attempt, page.next)
        except JobNotFound:
            return


@router.get(
    "/jobs/{jid}/logs/raw",
    dependencies=reads,
    tags=["jobs"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/plain": {}}}, **refusals(404)},
)
def job_log_raw(
    ui: Ui, jid: str, attempt: Annotated[int | None, Query(ge=1, le=100_000)] = None
) -> StreamingResponse:
    """One attempt's log (the latest by default) as plain text, a line each, as the job wrote
    them (colour sequences included), to download. 404 as the lines' page."""
    first, _ = _log_page(ui.client, jid, attempt)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", jid).strip("_") or "job"
    return StreamingResponse(
        _log_text(ui.client, first),
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{name}.attempt-{first.attempt}.log"',
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get(
    "/jobs/{jid}/logs/stream",
    dependencies=reads,
    tags=["jobs", "events"],
    response_class=StreamingResponse,
    responses={200: events.ANSWER, **refusals(404)},
)
def job_logs_stream(request: Request, ui: Ui, jid: str) -> StreamingResponse:
    """The job's log lines as server-sent events (``event: line``), from its latest attempt's
    first line, until the job has ended (then ``event: end``). A stream opened with a user's
    token ends (``event: revoked``) once the user is revoked, any stream (``event: refused``)
    once the engine's library is not this release's."""
    _job(ui.client, jid)
    return events.stream(
        events.log_lines(ui.client, jid),
        lambda: engine_library(request),
        ui.auth.still_allowed(request),
    )


# -- queues, workers -------------------------------------------------------------------------------


@router.get(
    "/queues", dependencies=reads, tags=["queues"], response_model=None, responses=answer(Page)
)
def list_queues(ui: Ui, offset: Offset = 0, limit: Limit = 100) -> dict[str, Any]:
    """Queues with their counts (backlog, leased, waiting, running, ..., paused)."""
    names = engine_errors(
        lambda: [
            str(n) for n in as_list(ui.client.engine.call("doctor.names", "queues", offset, limit))
        ]
    )
    queues = engine_errors(lambda: ui.client.queues.documents(*names)) if names else []
    return page(queues, offset, limit)


def _known_queue(client: Client, queue: str) -> None:
    """404 for a queue the namespace never saw, naming the one likely meant."""
    problem = engine_errors(lambda: run_actions.unknown_queue(client, queue))
    if problem is not None:
        raise HTTPException(404, problem)


@router.post(
    "/queues/{queue}/pause",
    dependencies=writes,
    tags=["queues"],
    response_model=None,
    responses={**answer(QueuePaused), **refusals(404)},
)
def pause_queue(ui: Ui, queue: str) -> dict[str, Any]:
    """Stop handing out the queue's jobs. 404 for a queue the namespace never saw, naming the
    one likely meant (as `flows queue pause`); nothing changes then."""
    _known_queue(ui.client, queue)
    engine_errors(lambda: ui.client.queues[queue].pause())
    return {"queue": queue, "paused": True}


@router.post(
    "/queues/{queue}/unpause",
    dependencies=writes,
    tags=["queues"],
    response_model=None,
    responses={**answer(QueuePaused), **refusals(404)},
)
def unpause_queue(ui: Ui, queue: str) -> dict[str, Any]:
    """Hand out the queue's jobs again. 404 for a queue the namespace never saw."""
    _known_queue(ui.client, queue)
    engine_errors(lambda: ui.client.queues[queue].unpause())
    return {"queue": queue, "paused": False}


@router.get(
    "/workers", dependencies=reads, tags=["workers"], response_model=None, responses=answer(Page)
)
def list_workers(
    ui: Ui,
    offset: Offset = 0,
    limit: Limit = 100,
    queue: Annotated[str | None, narrowed("Only workers listening on this queue.")] = None,
) -> dict[str, Any]:
    """Live workers, most recently active first, with host, pid, queues and jobs held."""
    # `queue` filters, it names no resource: a queue exists for the engine from its first put
    # or as soon as a worker listens on it, and one named only in a flow may have no worker
    # yet. No worker is an answer (an empty page), not a missing name.
    workers = engine_errors(lambda: ui.client.workers.documents(queue))
    chosen = workers[offset : offset + limit]
    return page(chosen, offset, limit, more=len(workers) > offset + limit)


@router.post(
    "/workers/{worker}/forget",
    dependencies=writes,
    tags=["workers"],
    response_model=None,
    responses={**answer(WorkerForgotten), **refusals(404, 409)},
)
def forget_worker(ui: Ui, worker: str) -> dict[str, Any]:
    """Forget a worker that is gone (killed, it never said it stopped), as `flows workers
    --forget` does: 409 while it may be working (seen within worker-silent-after, its lease
    not lapsed) or holds jobs, 404 for no such worker; nothing changes then."""
    engine_errors(lambda: ui.client.workers.forget(worker))
    return {"worker": worker, "forgotten": True}


# -- schedules -------------------------------------------------------------------------------------


def _schedule_dict(registration: Registration) -> dict[str, Any]:
    return registration.as_json()


def _registration(client: Client, name: str) -> Registration:
    found = engine_errors(lambda: Schedules(client).get(name, skips=0))
    if found is None:
        raise HTTPException(404, f"no schedule {name!r}")
    return found


@router.get(
    "/schedules",
    dependencies=reads,
    tags=["schedules"],
    response_model=None,
    responses=answer(Page),
)
def list_schedules(ui: Ui, offset: Offset = 0, limit: Limit = 100) -> dict[str, Any]:
    """Registered schedules by name, each with its next fire time and last run."""
    raw = engine_errors(lambda: ui.client.engine.call("schedule.list", offset, limit))
    items = [_schedule_dict(Registration.from_reply(r)) for r in as_list(raw)]
    return page(items, offset, limit)


@router.post(
    "/schedules/{name}/pause",
    dependencies=writes,
    tags=["schedules"],
    response_model=None,
    responses={**answer(SchedulePaused), **refusals(404, 415)},
)
def pause_schedule(ui: Ui, name: str, body: PauseSchedule | None = None) -> dict[str, Any]:
    """Skip the schedule's ticks (reason ``paused``) until it is resumed."""
    _registration(ui.client, name)
    engine_errors(lambda: Schedules(ui.client).pause(name, body.note if body else ""))
    return {"name": name, "paused": True}


@router.post(
    "/schedules/{name}/resume",
    dependencies=writes,
    tags=["schedules"],
    response_model=None,
    responses={**answer(ScheduleResumed), **refusals(404)},
)
def resume_schedule(ui: Ui, name: str) -> dict[str, Any]:
    """Fire the schedule again from its next tick."""
    _registration(ui.client, name)
    outcome = engine_errors(
        lambda: Schedules(ui.client).resume(name, ui.client.engine.server_time())
    )
    return {"name": name, "paused": False, "outcome": outcome}


@router.post(
    "/schedules/{name}/trigger",
    dependencies=writes,
    tags=["schedules"],
    status_code=201,
    response_model=None,
    responses={**answer(RunStarted, 201), **refusals(404, 409)},
)
def trigger_schedule(ui: Ui, name: str) -> dict[str, Any]:
    """A run now, with the schedule's params."""
    return start_run(ui, StartRun(flow=name))


# -- failures --------------------------------------------------------------------------------------


@router.get(
    "/failures", dependencies=reads, tags=["failures"], response_model=None, responses=answer(Page)
)
def list_failure_groups(ui: Ui, offset: Offset = 0, limit: Limit = 100) -> dict[str, Any]:
    """Failure groups by name: each ``{group, total, dropped}``, its failed jobs kept and
    those dropped for good by ``max-failed-per-group`` (a group that only dropped jobs too)."""
    groups = engine_errors(lambda: ui.client.jobs.failure_groups())
    return page(groups[offset : offset + limit], offset, limit, more=len(groups) > offset + limit)


# A group is an id, which may hold "/" (lua/README.md), where a name may not: the group is the
# rest of the path, as it arrives decoded.
@router.get(
    "/failures/{group:path}",
    dependencies=reads,
    tags=["failures"],
    response_model=None,
    responses=answer(FailedJobs),
)
def list_failures(ui: Ui, group: str, offset: Offset = 0, limit: Limit = 25) -> dict[str, Any]:
    """A page of a group's failed jobs, newest first."""
    listing = engine_errors(lambda: ui.client.failed(group, offset, limit))
    items = [j.as_json() for j in listing.jobs]
    return {
        **page(items, offset, limit, more=listing.total > offset + len(items)),
        "total": listing.total,
        "dropped": listing.dropped,
    }


@router.post(
    "/failures/{group:path}/unfail",
    dependencies=writes,
    tags=["failures"],
    response_model=None,
    responses={**answer(Unfailed), **refusals(404, 415)},
)
def unfail(ui: Ui, group: str, body: Unfail) -> dict[str, Any]:
    """Put up to ``count`` of the group's failed jobs back into ``queue``. 404 when the group
    has no failed jobs, naming the one likely meant (as `flows unfail`); nothing moves then."""
    refusal = engine_errors(
        lambda: run_actions.unfail_refusal(ui.client, group, f"GET {PREFIX}/failures")
    )
    if refusal is not None:
        raise HTTPException(404, refusal)
    moved = engine_errors(lambda: ui.client.unfail(body.queue, group, body.count))
    return {"group": group, "queue": body.queue, "moved": moved}


# -- events ----------------------------------------------------------------------------------------


@router.get(
    "/events",
    dependencies=reads,
    tags=["events"],
    response_class=StreamingResponse,
    responses={200: events.ANSWER},
)
def engine_events(request: Request, ui: Ui) -> StreamingResponse:
    """The engine's events (put, popped, completed, failed, run_submitted, ...) as server-sent
    events, one ``data:`` JSON object each, as they happen. A stream opened with a user's
    token ends (``event: revoked``) once the user is revoked, any stream (``event: refused``)
    once the engine's library is not this release's."""
    return events.stream(
        events.engine_events(ui.client),
        lambda: engine_library(request),
        ui.auth.still_allowed(request),
    )
