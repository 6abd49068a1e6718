"""Reading runs back: a run's record and the state of each of its steps."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flows.outputs import FlowsMeta
from scheduler.client import Client
from scheduler.job import Job

BATCH = 500
FINAL_STATES = {"complete", "failed"}


@dataclass
class StepView:
    """One step of a run (a foreach step's items together)."""

    step: str
    jobs: list[Job] = field(default_factory=list)

    @property
    def states(self) -> list[str]:
        return [j.state for j in self.jobs]

    @property
    def status(self) -> str:
        """waiting, running, success, failed, blocked (held back by a failed upstream)."""
        states = self.states
        if any(s == "failed" for s in states):
            return "failed"
        if any(s in ("running", "stalled") for s in states):
            return "running"
        if states and all(s == "complete" for s in states):
            return "success"
        return "waiting"

    @property
    def started(self) -> float | None:
        times = [_first(j, "popped") for j in self.jobs]
        found = [t for t in times if t is not None]
        return min(found) if found else None

    @property
    def finished(self) -> float | None:
        if any(j.state not in FINAL_STATES for j in self.jobs):
            return None
        times = [j.updated for j in self.jobs if j.updated is not None]
        return max(times) if times else None

    @property
    def duration(self) -> float | None:
        start, end = self.started, self.finished
        return None if start is None or end is None else max(0.0, end - start)

    @property
    def progress(self) -> str:
        done = sum(1 for s in self.states if s == "complete")
        return f"{done}/{len(self.jobs)}"


@dataclass
class RunView:
    run_id: str
    record: dict[str, Any]
    steps: list[StepView]

    @property
    def status(self) -> str:
        """running, succeeded, failed (something failed and nothing else can run), or canceled."""
        statuses = [s.status for s in self.steps]
        if not self.steps or (self.record.get("canceled") and not self._can_progress()):
            return "canceled"
        if all(s == "success" for s in statuses):
            return "succeeded"
        if any(s == "running" for s in statuses):
            return "running"
        if any(s == "failed" for s in statuses) and not self._can_progress():
            return "failed"
        return "running"

    def _can_progress(self) -> bool:
        """Whether some job could still run: waiting or scheduled, not held back by a failure."""
        return any(
            j.state in ("waiting", "scheduled", "running", "stalled")
            for s in self.steps
            for j in s.jobs
        )

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed", "canceled")

    @property
    def failed_jobs(self) -> list[Job]:
        return [j for s in self.steps for j in s.jobs if j.state == "failed"]


def _first(job: Job, what: str) -> float | None:
    for entry in reversed(job.history):
        if entry.get("what") == what:
            return float(entry["when"])
    return None


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def load_run(client: Client, run_id: str) -> RunView | None:
    """The run and its steps, or None when no run has that id."""
    raw = client.engine.call("run.get", run_id)
    if raw is None:
        return None
    record = json.loads(raw)
    jids = record.pop("jids", None) or []
    jobs: list[Job] = []
    for batch in _batches(jids, BATCH):
        jobs += client.jobs.multiget(*batch)
    steps: dict[str, StepView] = {}
    for job in jobs:
        meta = FlowsMeta.from_data(job.data)
        name = meta.step if meta else job.jid.rsplit(":", 1)[-1]
        steps.setdefault(name, StepView(name)).jobs.append(job)
    return RunView(run_id, record, list(steps.values()))


def list_runs(client: Client, flow: str | None = None, count: int = 25) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(client.engine.call("runs", flow or "", 0, count))
    return records


__all__ = ["RunView", "StepView", "list_runs", "load_run"]
