"""``flows explain``: why a run's steps (or one job) are where they are.

A job is explained by the engine in one read (:mod:`scheduler.engine.explain`); a run is its
steps, each with its status and, for a step not finished, every unfinished job's reason (one
pipelined round trip for all of them). The CLI and the REST API both render this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flows.runs.labels import UnknownStep, labelled_step, no_step
from flows.runs.read import RunView, StepView, load_run
from scheduler.engine.client import Client
from scheduler.engine.explain import Explanation, sentence
from scheduler.engine.limits import read_json

FINISHED = ("success", "cached", "skipped", "failed", "expired", "canceled", "gone")
NO_ITEMS = "It had no items: nothing ran, and the steps that need it were released."
NO_ITEMS_YET = "It has no items: it completes without running once nothing holds it back."
SHOWN_PER_STEP = 20
"""Jobs of one step explained at most (a foreach of thousands says how many more there are)."""


@dataclass
class StepReasons:
    step: str
    status: str
    jobs: list[Explanation] = field(default_factory=list)
    more: int = 0
    items: int = 1
    """The step's jobs as the engine counts them (``total``): 0 for a foreach or matrix step
    with no items, whose one job completes without running anything."""

    @property
    def no_items(self) -> str | None:
        """What a step with no items says before its job's reasons, if any (None: it has
        some items)."""
        return no_items(self.status) if self.items == 0 else None

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "items": self.items,
            "no_items": self.no_items,
            "jobs": [j.as_json() for j in self.jobs],
            "more": self.more,
        }


def no_items(status: str) -> str:
    """What a step with no items (``total`` 0: a foreach or matrix step whose one job completes
    with the empty list without running) says of itself in ``status``: it had none, or (not
    finished: it waits for its needs) has none. ``flows explain``, the API's explain and the
    run page's step panel say it."""
    if status == "success":
        return NO_ITEMS
    if status in FINISHED:
        return f"It had no items and was {status}."
    return NO_ITEMS_YET


def _chosen(run_id: str, step: StepView, named: bool) -> list[str]:
    """The jobs of a step to explain: its unfinished ones (a named step with none: all). A
    step with no items lists no job: its one job, ``<run>:<step>``, while it is not finished
    (it waits for its needs)."""
    if step.total == 0 and step.status not in FINISHED:
        return [f"{run_id}:{step.step}"]
    open_items = [job.jid for job in step.jobs if job.status not in FINISHED]
    return open_items or ([job.jid for job in step.jobs] if named else [])


# A job of the run the engine no longer has (job.explain: nil), as the run's record tells it.
_ENDED_WITHOUT_A_JOB = {
    "canceled": "It was canceled (or deleted): it runs only if the run is retried (flows retry).",
    "gone": "Its job no longer exists (deleted, or dropped by retention).",
}


def _no_step(view: RunView, step: str) -> str:
    return no_step(view.run_id, step, [s.step for s in view.steps])


def child_step(client: Client, view: RunView, label: str | None) -> tuple[RunView, str | None]:
    """The run and step a label names (:func:`~flows.runs.labels.labelled_step`); no label:
    the run itself."""
    if label is None or "/" not in label:
        return view, label
    run_id, step = labelled_step(client, view.run_id, label)
    child = load_run(client, run_id)
    if child is None:  # deleted since
        raise UnknownStep(f"no run {run_id!r} (see `flows runs`)")
    return child, step


def explain_run(
    client: Client, view: RunView, step: str | None = None, *, now: float | str = ""
) -> list[StepReasons]:
    """Every step of the run (or ``step`` alone) with the reasons of its unfinished jobs; a
    named step is explained even when finished (a failed step says why)."""
    steps = view.steps
    if step is not None:
        steps = [s for s in steps if s.step == step]
        if not steps:
            raise UnknownStep(_no_step(view, step))
    chosen = {s.step: _chosen(view.run_id, s, step is not None) for s in steps}
    wanted = [(s, jid) for s in steps for jid in chosen[s.step][:SHOWN_PER_STEP]]
    moment = float(now) if now != "" else client.engine.server_time()
    pipe = client.engine.pipeline()
    for _, jid in wanted:
        pipe.call("job.explain", jid, now=moment)
    replies = pipe.execute() if wanted else []
    by_step: dict[str, StepReasons] = {
        s.step: StepReasons(
            s.step, s.status, more=max(0, len(chosen[s.step]) - SHOWN_PER_STEP), items=s.total
        )
        for s in steps
    }
    status = {job.jid: job.status for s in steps for job in s.jobs}
    for (s, jid), reply in zip(wanted, replies, strict=True):
        if reply is None and step is not None and status.get(jid) in _ENDED_WITHOUT_A_JOB:
            # A canceled job is deleted: the step asked about still says how it ended, where
            # an empty answer read as nothing holding it back (the dashboard's "why?").
            word = str(status[jid])
            facts = {"jid": jid, "state": None, "reason": word}
            by_step[s.step].jobs.append(Explanation(jid, word, _ENDED_WITHOUT_A_JOB[word], facts))
            continue
        if isinstance(reply, Exception) or reply is None:
            continue
        facts = read_json(reply)
        if step is None and facts.get("state") in ("complete", "failed", "expired"):
            continue  # the finished items of a step that goes on
        by_step[s.step].jobs.append(
            Explanation(jid, str(facts["reason"]), sentence(facts, moment), facts)
        )
    return list(by_step.values())
