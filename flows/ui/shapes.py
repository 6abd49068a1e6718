"""The shapes of the API's answers, as its OpenAPI document gives them.

The routes build their answers as they always have (dicts, sent by the app's JSON response);
these models only document them: each route names its model with :func:`answer` and no
response model, so nothing is validated or dropped on the way out, and the tests hold the live
answers to the document. A model that forbids other fields says the answer has no others.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flows.runs.read import StepView


def answer(model: type[BaseModel], status: int = 200) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answer of a route that answers ``model`` (with ``status``). The route says
    ``response_model=None`` too, so that its answer is sent as it builds it."""
    return {status: {"model": model, "description": (model.__doc__ or "").split("\n")[0]}}


class Shape(BaseModel):
    """An answer with no fields but those it names."""

    model_config = ConfigDict(extra="forbid")


class Page(Shape):
    """A page of a listing: follow ``next`` (the next page's ``offset``) until it is null."""

    items: list[dict[str, Any]]
    offset: int
    limit: int
    next: int | None = Field(description="The next page's `offset`; null on the last page.")


class FailedJobs(Page):
    """A page of a failure group's jobs, with the group's totals."""

    total: int = Field(description="The group's failed jobs kept.")
    dropped: int = Field(description="Its jobs dropped for good by `max-failed-per-group`.")


class Listing(Shape):
    """Every item at once: a short list (a folder's flow files, the sources)."""

    items: list[dict[str, Any]]


class AuditPage(Shape):
    """A page of the audit log, newest first: ask for the next with ``before=next``."""

    items: list[dict[str, Any]]
    next: str | None = Field(description="The `before` of the next page; null on the last.")


class LogLine(Shape):
    """One log line, in the one shape of `flows logs --json` and the log stream."""

    step: str | None = Field(description="The job's label in its run; null for no run's job.")
    jid: str
    attempt: int
    time: float
    stream: str = Field(description="`stdout`, `stderr`, `log` (with `level`) or `truncated`.")
    text: str
    level: str | None = Field(None, description="A logging record's level.")
    cut: int | None = Field(None, description="Bytes cut off the end of a line too long.")


class LogPage(Shape):
    """A page of one attempt's log lines."""

    jid: str
    attempt: int = Field(description="The attempt read: asked for, else the latest with lines.")
    attempts: int = Field(description="Attempts the job made, whether or not they wrote.")
    total: int = Field(description="The attempt's lines kept.")
    dropped: int = Field(description="Its lines not kept (beyond its budget) or cut short.")
    items: list[LogLine]
    offset: int
    limit: int
    next: int | None = Field(description="The next page's `offset`; null at the end so far.")


class RunStarted(Shape):
    """A run started: its id, its number of jobs, its flow and whether it was there already.

    Every start answers it: a flow file's, a webhook's, a registered flow's and a schedule's
    (:meth:`flows.runs.trigger.Triggered.as_json` builds it)."""

    id: str
    jobs: int
    flow: str
    existed: bool = Field(description="The run id was taken already: nothing was submitted.")


class RunJobs(Page):
    """A page of the run's jobs (of one step), each with its label, to read its log."""

    id: str
    items: list[dict[str, Any]] = Field(description="Each `{step, jid}`, in submission order.")


class RunRetried(Shape):
    """How many of the run's jobs were put back."""

    id: str
    retried: int


class RunCanceled(Shape):
    """How many of the run's jobs were canceled."""

    id: str
    canceled: int


class StepRerun(Shape):
    """How many jobs of the step (and after it, with `downstream`) run again."""

    id: str
    step: str
    rerun: int


class StepKicked(Shape):
    """The step's buried jobs put back into their queues."""

    id: str
    step: str
    kicked: int
    jobs: list[str]


class Signaled(Shape):
    """The wait step's job completed with the signal's data as its outputs."""

    id: str
    step: str
    jid: str
    data: dict[str, Any]


class JobRetried(Shape):
    """How many jobs were put back: of the job's run (`run`), else of its queue (`queue`)."""

    jid: str
    retried: int
    run: str | None = None
    queue: str | None = None


class JobKicked(Shape):
    """The buried job put back into its queue."""

    jid: str
    queue: str
    kicked: int


class JobCanceled(Shape):
    """The jobs canceled."""

    canceled: list[str]


class QueuePaused(Shape):
    """The queue, and whether its jobs are handed out now."""

    queue: str
    paused: bool


class WorkerForgotten(Shape):
    """The worker the engine no longer lists."""

    worker: str
    forgotten: bool


class SchedulePaused(Shape):
    """The schedule, and whether its ticks are skipped now."""

    name: str
    paused: bool


class ScheduleResumed(SchedulePaused):
    """The schedule resumed (`outcome`: `resumed`, or `not-paused` when it was not)."""

    outcome: str


class Unfailed(Shape):
    """How many of the group's failed jobs were put into the queue."""

    group: str
    queue: str
    moved: int


class JobDocument(BaseModel):
    """One job as `flows job JID --json` prints it: its fields (`jid`, `state`, `queue`,
    `data`, `history`, `failure`, `result`, ... as the engine keeps them), the run it belongs to,
    the actions allowed on it now and who ran it last."""

    jid: str
    state: str
    queue: str
    run: str | None = Field(description="The run the job belongs to; null for a job of no run.")
    step: StepView | None = Field(
        description="Its step as the run's JSON gives it (`GET /api/v1/runs/{run}?limit=0`): "
        "status, counts, attempts, times, actions and, for a sub-flow step, `child`, its child "
        "run's id; null for a job of no run."
    )
    actions: list[str]
    ran_by: dict[str, Any] | None = Field(description="`worker`, `host`, `pid`; or null.")


class Timeline(Shape):
    """Each step's waiting and running spans (epoch s; null where not yet)."""

    id: str
    status: str
    submitted: float | None
    now: float
    steps: list[dict[str, Any]]


class FlowHistory(Shape):
    """A flow's newest runs (columns, oldest first) by its steps (rows)."""

    flow: str
    steps: list[str]
    runs: list[dict[str, Any]]


class RunExplanation(Shape):
    """Each unfinished step (or the one asked) with the reasons of its jobs."""

    run: str
    status: str
    steps: list[dict[str, Any]]


class JobExplanation(BaseModel):
    """Why a job is where it is: its reason and sentence, with the facts behind them."""

    jid: str
    reason: str
    sentence: str
    state: str | None = None
    queue: str | None = None


class Notifications(Shape):
    """Deliveries given up, events not sent yet, the latest sends (newest first), and the
    channels a scheduler service cannot send (its id, the flow file, the channel, why)."""

    failed: list[dict[str, Any]]
    waiting: list[dict[str, Any]]
    recent: list[dict[str, Any]]
    unsendable: list[dict[str, Any]]


class NotificationRetried(Shape):
    """The given-up event put back in the outbox, as a new entry."""

    id: str
    retried: bool
    retried_as: str


class SourceRemoved(Shape):
    """The source's files forgotten: how many, and whether a service of it was alive."""

    source: str
    removed: bool
    files: int
    was_live: bool


class BackfillDocument(BaseModel):
    """One backfill as `flows backfills --json` prints it (its ticks handled, runs submitted,
    canceled runs resumed, ticks that had run, runs active, ...), with its `progress`."""

    id: str
    flow: str
    state: str
    progress: float = Field(description="The share of its ticks handled, 0 to 1.")


class BackfillCanceled(Shape):
    """The backfill canceled: its state now, and the runs and jobs canceled."""

    id: str
    state: str
    runs: int
    jobs: int
    pending: int
