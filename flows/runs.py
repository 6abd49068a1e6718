"""Reading runs back: a run's record and the status of each of its steps.

Statuses are words for people, read from the engine's job states and histories: a complete job
the engine skipped (its trigger rule) is ``skipped``; a job waiting for a failed (or expired, or
itself held back) dependency is ``upstream_failed`` (``flows retry`` resumes it); a ``wait:`` step
whose needs are met is ``awaiting`` (a signal); a job of the run that no longer exists is
``canceled`` when the run was canceled, else ``gone``. A sub-flow step waiting for its child run
is ``running`` (its :attr:`StepView.child` names that run); a child run's record names its parent
(``parent_run``, ``parent_step``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from flows.outputs import FlowsMeta, was_skipped
from scheduler.engine.client import Client
from scheduler.engine.job import Job

BATCH = 500
FINAL_STATES = frozenset({"complete", "failed", "expired"})
ACTIVE_STATES = frozenset({"waiting", "scheduled", "running", "stalled", "awaiting"})
_FAILED_STATES = frozenset({"failed", "expired"})

RUN_STATUSES: Final = ("running", "succeeded", "failed", "canceled")
"""What :attr:`RunView.status` can say."""
STEP_STATUSES: Final = (
    "failed",
    "expired",
    "running",
    "awaiting",
    "waiting",
    "buried",
    "upstream_failed",
    "canceled",
    "gone",
    "cached",
    "skipped",
    "success",
)
"""What :attr:`StepView.status` can say, in precedence order: a step says the first that one of
its jobs says (``cached`` or ``skipped`` only when all of them were; ``success`` otherwise)."""

_JOB_STATUS: Final = {
    "complete": "success",
    "failed": "failed",
    "expired": "expired",
    "running": "running",
    "stalled": "running",
    "waiting": "waiting",
    "scheduled": "waiting",
    "depends": "waiting",
    "buried": "buried",
    "awaiting": "awaiting",
}
_RUN_FIELDS_JSON: Final = ("params", "queues", "outputs")
_RUN_FIELDS_NUMBERS: Final = ("submitted", "jobs", "tick", "canceled", "depth")


@dataclass(frozen=True, slots=True)
class JobRun:
    """One job of a step as the run view sees it: the job (None when it no longer exists) and
    its status word."""

    jid: str
    job: Job | None
    status: str

    @property
    def started(self) -> float | None:
        """When its latest put was first popped (retries and lost locks included)."""
        return self._since_put()[0]

    @property
    def attempts(self) -> int:
        """How often it was popped since its latest put (a resume puts it again); a sub-flow
        step's run after its child ended is no new attempt."""
        return self._since_put()[1]

    def _since_put(self) -> tuple[float | None, int]:
        if self.job is None or self.status == "skipped":
            return None, 0
        first: float | None = None
        attempts = 0
        for entry in reversed(self.job.history):
            what = entry.get("what")
            if what == "put":
                break
            if what == "popped":
                first, attempts = float(entry["when"]), attempts + 1
            elif what == "awaiting":  # a wait step started waiting for its signal
                first = float(entry["when"])
            elif what == "waiting":  # a sub-flow step handed to the engine (its run goes on)
                attempts -= 1
        return first, attempts


@dataclass
class StepView:
    """One step of a run (a foreach step's items together)."""

    step: str
    items: list[JobRun] = field(default_factory=list)

    @property
    def jobs(self) -> list[Job]:
        """The step's jobs that still exist."""
        return [item.job for item in self.items if item.job is not None]

    @property
    def jids(self) -> list[str]:
        return [item.jid for item in self.items]

    @property
    def states(self) -> list[str]:
        return [j.state for j in self.jobs]

    @property
    def status(self) -> str:
        """One of :data:`STEP_STATUSES`."""
        found = {item.status for item in self.items}
        for status in STEP_STATUSES[:-3]:
            if status in found:
                return status
        if found in ({"skipped"}, {"cached"}):
            return found.pop()
        return "success"

    @property
    def started(self) -> float | None:
        """When its first job first started (None before that, or when it was skipped)."""
        found = [t for t in (item.started for item in self.items) if t is not None]
        return min(found) if found else None

    @property
    def finished(self) -> float | None:
        """When its last job ended; None while one has not (or none started)."""
        if self.started is None or any(
            item.job is None or item.job.state not in FINAL_STATES for item in self.items
        ):
            return None
        times = [j.updated for j in self.jobs if j.updated is not None]
        return max(times) if times else None

    @property
    def duration(self) -> float | None:
        """From its first start to its end (retries included)."""
        start, end = self.started, self.finished
        return None if start is None or end is None else max(0.0, end - start)

    @property
    def attempts(self) -> int:
        """The most attempts any of its jobs took (1: no retry)."""
        return max((item.attempts for item in self.items), default=0)

    @property
    def child(self) -> str | None:
        """The run a sub-flow step started (None for other steps, and before it started one)."""
        return next((job.child for job in self.jobs if job.child), None)

    @property
    def progress(self) -> str:
        done = sum(1 for item in self.items if item.status in ("success", "cached", "skipped"))
        return f"{done}/{len(self.items)}"


@dataclass
class RunView:
    run_id: str
    record: dict[str, Any]
    steps: list[StepView]

    @property
    def status(self) -> str:
        """One of :data:`RUN_STATUSES`: running while a job can still progress; then canceled,
        failed (a step failed, expired or was held back by one), or succeeded (every step
        succeeded or was skipped)."""
        if not self.steps or (self.record.get("canceled") and not self._can_progress()):
            return "canceled"
        if self._can_progress():
            return "running"
        statuses = {s.status for s in self.steps}
        if statuses & {"failed", "expired", "upstream_failed"}:
            return "failed"
        if statuses <= {"success", "cached", "skipped", "gone"}:
            return "succeeded"
        return "running"

    def _can_progress(self) -> bool:
        """Whether some job could still run: waiting, scheduled, running or awaiting a signal (a
        sub-flow step waiting for its child run too)."""
        jobs = (job for step in self.steps for job in step.jobs)
        return any(job.state in ACTIVE_STATES or _waits_for_child(job) for job in jobs)

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed", "canceled")

    @property
    def failed_jobs(self) -> list[Job]:
        return [j for s in self.steps for j in s.jobs if j.state in _FAILED_STATES]

    @property
    def queues(self) -> list[str]:
        """The queues of the run's jobs (from its record, else from the jobs left)."""
        queues = self.record.get("queues")
        if isinstance(queues, list) and queues:
            return [str(q) for q in queues]
        return sorted({j.queue for s in self.steps for j in s.jobs})


def _waits_for_child(job: Job) -> bool:
    """Whether ``job`` is a sub-flow step waiting for its child run (lua/commands/subflow.lua)."""
    return job.state == "depends" and job.child is not None


def _statuses(jobs: Mapping[str, Job]) -> dict[str, str]:
    """Each jid's status word; ``jobs`` in dependency order (the run's submission order)."""
    out: dict[str, str] = {}
    for jid, job in jobs.items():
        if _waits_for_child(job):
            out[jid] = "running"
        elif job.state == "complete":
            out[jid] = "skipped" if was_skipped(job.history) else _completed(job)
        elif job.state == "depends" and any(
            out.get(dependency) in ("failed", "expired", "upstream_failed")
            for dependency in job.dependencies
        ):
            out[jid] = "upstream_failed"
        else:
            out[jid] = _JOB_STATUS.get(job.state, job.state)
    return out


def _completed(job: Job) -> str:
    """``cached`` for a job the step cache completed (lua/commands/cache.lua), else ``success``."""
    return "cached" if any(e.get("what") == "cached" for e in job.history) else "success"


def run_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A run record as JSON values: ``params`` and ``queues`` decoded, times and counts numbers
    (the engine keeps every field of a run as text)."""
    record = dict(raw)
    for name in _RUN_FIELDS_JSON:
        value = record.get(name)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                record[name] = json.loads(value)
    for name in _RUN_FIELDS_NUMBERS:
        value = record.get(name)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                number = float(value)
                whole = number.is_integer() and name in ("jobs", "depth")
                record[name] = int(number) if whole else number
    return record


def step_of(run_id: str, jid: str) -> str:
    """The step (or hook) of a job id ``<run id>:<step>`` or ``<run id>:<step>[<i>]``."""
    name = jid[len(run_id) + 1 :] if jid.startswith(f"{run_id}:") else jid.rsplit(":", 1)[-1]
    return _ITEM.sub("", name)


_ITEM = re.compile(r"\[\d+\]$")


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def load_run(client: Client, run_id: str) -> RunView | None:
    """The run and its steps, or None when no run has that id."""
    raw = client.engine.call("run.get", run_id)
    if raw is None:
        return None
    record = run_record(json.loads(raw))
    jids = [str(jid) for jid in record.pop("jids", None) or []]
    jobs: dict[str, Job] = {}
    for batch in _batches(jids, BATCH):
        jobs.update((j.jid, j) for j in client.jobs.multiget(*batch))
    canceled = bool(record.get("canceled"))
    statuses = _statuses({jid: jobs[jid] for jid in jids if jid in jobs})
    steps: dict[str, StepView] = {}
    for jid in jids:
        job = jobs.get(jid)
        meta = FlowsMeta.from_data(job.data) if job is not None else None
        name = meta.step if meta else step_of(run_id, jid)
        status = statuses[jid] if job is not None else ("canceled" if canceled else "gone")
        steps.setdefault(name, StepView(name)).items.append(JobRun(jid, job, status))
    return RunView(run_id, record, list(steps.values()))


def list_runs(client: Client, flow: str | None = None, count: int = 25) -> list[dict[str, Any]]:
    """Run records, newest first (as :func:`run_record` gives them)."""
    records = json.loads(client.engine.call("runs", flow or "", 0, count))
    return [run_record(r) for r in records]


__all__ = [
    "RUN_STATUSES",
    "STEP_STATUSES",
    "JobRun",
    "RunView",
    "StepView",
    "list_runs",
    "load_run",
    "run_record",
]
