"""The step logs of a run: which jobs a run's steps are, and their lines as they come.

A run's jobs are ``<run id>:<step>`` and ``<run id>:<step>[<i>]``; the part after the run id is a
job's *label* here. Lines are read with :mod:`scheduler.engine.joblogs`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from flows.flowfile.findings import closest
from flows.flowfile.subflow_job import MAX_DEPTH
from flows.runs import pacing
from flows.runs.actions import run_of_job
from flows.runs.labels import UnknownStep, labelled_step, no_step
from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound
from scheduler.engine.joblogs import ENDED, LogLine
from scheduler.engine.replies import as_dict

# Seconds between two looks for jobs that appeared while following (a run's new jobs).
MORE_INTERVAL = 1.0


class NoSuchRun(LookupError):
    """The run (or its step) does not exist; the message says which and what there is.
    ``step`` names the missing step (None: the run is missing)."""

    def __init__(self, message: str, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


# How a line's stream shows in text output (--json gives the stream by name).
MARKS = {"stdout": "|", "stderr": "!", "log": "~", "truncated": "…"}


@dataclass(frozen=True, slots=True)
class StepLine:
    """A line of a run's job: the job's label (``step`` or ``step[i]``; empty for a job of no
    run), jid and attempt."""

    label: str
    jid: str
    attempt: int
    line: LogLine

    def as_dict(self) -> dict[str, object]:
        """The one JSON shape of a log line (``flows logs --json``, the API's pages and
        stream): ``step`` (the label, or None), ``jid``, ``attempt``, then the line's fields."""
        step = self.label or None
        return {"step": step, "jid": self.jid, "attempt": self.attempt, **self.line.as_dict()}


def job_label(client: Client, jid: str) -> str:
    """The label job ``jid`` has in its run's logs (``step``, ``step[i]``); empty for a job of
    no run. A job its run's cancel deleted is labelled from its ``<run>:<step>`` id."""
    run_id = run_of_job(client, jid)
    return "" if run_id is None else _label(run_id, jid)


def tree_label(client: Client, jid: str) -> str:
    """The label job ``jid`` has in the logs of its top-level run: a child run's jobs under
    the parent step that started it (``report/count``, as :func:`run_tree_jobs` labels them);
    empty for a job of no run."""
    run_id = run_of_job(client, jid)
    if run_id is None:
        return ""
    label = _label(run_id, jid)
    for _ in range(MAX_DEPTH + 1):  # a record naming itself a parent cannot loop
        raw = client.engine.call("run.get", run_id)
        record = as_dict(raw) if raw is not None else {}
        parent, step = record.get("parent_run"), record.get("parent_step")
        if not parent or not step:
            break
        label, run_id = f"{step}/{label}", str(parent)
    return label


def run_jobs(client: Client, run_id: str, step: str | None = None) -> list[tuple[str, str]]:
    """``(label, jid)`` of the run's jobs in submission order, only ``step``'s when given."""
    raw = client.engine.call("run.get", run_id)
    if raw is None:
        raise NoSuchRun(f"no run {run_id!r}")
    jids = as_dict(raw).get("jids") or []
    jobs = [(_label(run_id, jid), jid) for jid in jids]
    if step is None:
        return jobs
    chosen = [(label, jid) for label, jid in jobs if _in_step(label, step)]
    if not chosen:
        raise _missing_step(run_id, step, {label.split("[", 1)[0] for label, _ in jobs})
    return chosen


def _in_step(label: str, step: str) -> bool:
    """Whether the job labelled ``label`` is ``step``'s own job or one of its items."""
    return label == step or label.startswith(step + "[")


def _missing_step(run_id: str, step: str, steps: Iterable[str]) -> NoSuchRun:
    """The refusal of a step the run does not have, as every command words it
    (:func:`~flows.runs.labels.no_step`)."""
    return NoSuchRun(no_step(run_id, step, sorted(steps)), step)


#: A page of a run's jobs read in one engine call, at most (``run.get``'s count).
JOBS_PAGE = 1000


def run_jobs_page(
    client: Client, run_id: str, offset: int, count: int
) -> tuple[list[tuple[str, str]], int | None]:
    """A page of :func:`run_jobs` (``count`` at most :data:`JOBS_PAGE`) from ``offset``, and
    the offset of the next page (None: the last), read without the rest of the run's jobs."""
    raw = client.engine.call("run.get", run_id, offset, count)
    if raw is None:
        raise NoSuchRun(f"no run {run_id!r}")
    record = as_dict(raw)
    following = record.get("jids_next")
    jobs = [(_label(run_id, jid), jid) for jid in record.get("jids") or []]
    return jobs, None if following is None else int(following)


def step_jobs_page(
    client: Client, run_id: str, step: str, offset: int, limit: int
) -> tuple[list[tuple[str, str]], int | None]:
    """A page of ``step``'s jobs (as :func:`run_jobs` with ``step``) from the run's job at
    ``offset``, and where the next page starts (None: the last). A page looks at no more than
    :data:`JOBS_PAGE` of the run's jobs, so it may be short, or empty, with more to follow.
    A child run's step (``report/count``) is read across its child runs and paged here."""
    if "/" in step:
        rest = step_jobs(client, run_id, step)[offset:]
        return rest[:limit], offset + limit if len(rest) > limit else None
    jobs, following = run_jobs_page(client, run_id, offset, JOBS_PAGE)
    chosen: list[tuple[str, str]] = []
    for seen, (label, jid) in enumerate(jobs, 1):
        if _in_step(label, step):
            chosen.append((label, jid))
            if len(chosen) == limit:
                more = seen < len(jobs) or following is not None
                return chosen, offset + seen if more else None
    return chosen, following


def no_step_of(client: Client, jid: str) -> NoSuchRun | None:
    """For ``RUN:STEP`` naming no step of its run (an engine refusal of it names none likely
    meant): the :class:`NoSuchRun` that says so, as :func:`run_jobs` says it; None when RUN
    has the step or is no run."""
    run_id = run_of_job(client, jid)
    if run_id is None:
        return None
    try:
        run_jobs(client, run_id, jid[len(run_id) + 1 :].split("[", 1)[0])
    except NoSuchRun as missing:
        return missing
    return None


def jid_meant(client: Client, jid: str) -> str | None:
    """For a jid that is no job, the one of its run (``<run id>:<step>``) likely meant:
    ``r:fetc`` → ``r:fetch``; None when the run does not exist or no job of it is close."""
    run_id, _, _ = jid.rpartition(":")
    raw = client.engine.call("run.get", run_id) if run_id else None
    if raw is None:
        return None
    return closest(jid, [str(j) for j in as_dict(raw).get("jids") or []])


def of_step(label: str, step: str) -> bool:
    """Whether the job labelled ``label`` is of ``step``: the step's own job, its items
    (``step[i]``) or a job of the child run it started (``step/child-step``)."""
    return label == step or label.startswith((f"{step}[", f"{step}/"))


def step_jobs(client: Client, run_id: str, step: str) -> list[tuple[str, str]]:
    """``(label, jid)`` of ``step``'s jobs as :func:`run_jobs`; ``step`` may also be a label a
    sub-flow step's child run gives (``report/count``, as the lines of the run are labelled,
    resolved by :func:`~flows.runs.labels.labelled_step`): that step's jobs in the child run,
    and those of the child runs it started in turn."""
    if "/" not in step:
        return run_jobs(client, run_id, step)
    try:
        child, leaf = labelled_step(client, run_id, step)
    except UnknownStep as error:
        raise NoSuchRun(str(error), step) from None
    run_jobs(client, child, leaf)  # NoSuchRun: no such step of the child, the one likely meant
    prefix = step[: len(step) - len(leaf)]
    return [
        (label, jid) for label, jid in run_tree_jobs(client, child, prefix) if of_step(label, step)
    ]


def _label(run_id: str, jid: str) -> str:
    prefix = run_id + ":"
    return jid[len(prefix) :] if jid.startswith(prefix) else jid


class Follower:
    """Reads the lines of ``jobs`` round by round: each job's attempts from its first (or only
    ``attempt``), from where the last round stopped. A job that is gone (deleted by retention)
    has no lines and has ended; a job its run's cancel deleted keeps its lines."""

    def __init__(
        self,
        client: Client,
        jobs: list[tuple[str, str]],
        *,
        live: bool = True,
        attempt: int | None = None,
    ) -> None:
        self.client = client
        self.live = live
        self.only = attempt
        self._open = list(jobs)
        self._known = {jid for _, jid in jobs}
        self._offsets: dict[str, tuple[int, int]] = {}  # jid -> (attempt, offset)
        # Per (jid, attempt) read: its label, and the lines it dropped or cut (the page's count).
        self.attempts: dict[tuple[str, int], tuple[str, int, int]] = {}

    def add(self, jobs: list[tuple[str, str]]) -> int:
        """Follow these jobs too (a fan-out's items, a child run's jobs), those not yet known;
        returns how many were new."""
        added = 0
        for label, jid in jobs:
            if jid not in self._known:
                self._known.add(jid)
                self._open.append((label, jid))
                added += 1
        return added

    @property
    def done(self) -> bool:
        """Every job has ended and its last lines were read (without ``live``: after a round)."""
        return not self._open

    def poll(self) -> list[StepLine]:
        """One round: the lines written since the last."""
        # States first: a job seen ended here has stored every line it will write.
        ended = _ended(self.client, [jid for _, jid in self._open]) if self.live else None
        out: list[StepLine] = []
        still: list[tuple[str, str]] = []
        for label, jid in self._open:
            attempt, offset = self._offsets.get(jid, (self.only or 1, 0))
            while True:
                try:
                    page = joblogs.read(self.client.engine, jid, attempt, offset)
                except JobNotFound:  # deleted (retention): its lines went with it
                    break
                out += [StepLine(label, jid, attempt, line) for line in page.lines]
                if page.attempts >= attempt:
                    self.attempts[(jid, attempt)] = (label, page.dropped, page.cut)
                offset = page.next
                if len(page.lines) == joblogs.PAGE:
                    continue
                if page.attempts > attempt and self.only is None:  # a later start wrote lines
                    attempt, offset = attempt + 1, 0
                    continue
                break
            self._offsets[jid] = (attempt, offset)
            if ended is not None and jid not in ended:
                still.append((label, jid))
        self._open = still
        return out


def follow(
    client: Client,
    jobs: list[tuple[str, str]] | Follower,
    *,
    live: bool = True,
    interval: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
    more: Callable[[], list[tuple[str, str]]] | None = None,
) -> Iterator[StepLine]:
    """The lines of ``jobs`` as they come (see :class:`Follower`); without ``live`` only what is
    stored now. Looks again soon after lines came, then less often, up to every ``interval``
    seconds (:mod:`flows.runs.pacing`). Ends when every job has ended and its last lines are
    read, or when ``stop()`` says so (the run ended): then after one more round, so the lines
    stored between the last round and the end are read too. ``more()`` names jobs that
    appeared since (a fan-out's items, a child run's jobs), asked at most every
    :data:`MORE_INTERVAL` seconds and once more before ending."""
    follower = jobs if isinstance(jobs, Follower) else Follower(client, jobs, live=live)
    asked = 0.0
    pause = min(pacing.QUICK, interval)
    while True:
        if more is not None and time.monotonic() - asked >= MORE_INTERVAL:
            follower.add(more())
            asked = time.monotonic()
        started = time.monotonic()
        lines = follower.poll()
        spent = time.monotonic() - started
        yield from lines
        # Every known job has ended: jobs that appeared since the last look (a short child run
        # started and ended in between) are read too, else their lines would be skipped.
        if follower.done and (more is None or not follower.add(more())):
            return
        if stop():
            if more is not None:
                follower.add(more())
            yield from follower.poll()  # every job has ended: this round reads their last lines
            return
        time.sleep(pause)
        pause = pacing.next_pause(pause, bool(lines), spent, interval)


def run_tree_jobs(
    client: Client, run_id: str, prefix: str = "", depth: int = 0
) -> list[tuple[str, str]]:
    """``(label, jid)`` of the run's jobs and, under ``step/``, its sub-flow steps' child
    runs' jobs (and theirs, a few levels down)."""
    jobs = [(prefix + label, jid) for label, jid in run_jobs(client, run_id)]
    if depth >= 8:
        return jobs
    labels = dict((jid, label) for label, jid in jobs)
    jids = list(labels)
    children = []
    for start in range(0, len(jids), 500):
        for job in client.jobs.multiget(*jids[start : start + 500]):
            if job.child:
                children += run_tree_jobs(client, job.child, f"{labels[job.jid]}/", depth + 1)
    return jobs + children


def _ended(client: Client, jids: list[str]) -> set[str]:
    """The jids of jobs that write no more lines (ended, or gone)."""
    out = set(jids)
    for start in range(0, len(jids), 500):
        for job in client.jobs.multiget(*jids[start : start + 500]):
            if job.state not in ENDED:
                out.discard(job.jid)
    return out


def tail(client: Client, jid: str, count: int = 20) -> list[LogLine]:
    """The last ``count`` lines of the job's latest attempt."""
    return joblogs.tail(client.engine, jid, count)


__all__ = [
    "Follower",
    "NoSuchRun",
    "StepLine",
    "follow",
    "job_label",
    "no_step_of",
    "of_step",
    "run_jobs",
    "run_tree_jobs",
    "step_jobs",
    "tail",
]
