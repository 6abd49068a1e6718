"""The step logs of a run: which jobs a run's steps are, and their lines as they come.

A run's jobs are ``<run id>:<step>`` and ``<run id>:<step>[<i>]``; the part after the run id is a
job's *label* here. Lines are read with :mod:`scheduler.engine.joblogs`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound
from scheduler.engine.joblogs import ENDED, LogLine


class NoSuchRun(LookupError):
    """The run (or its step) does not exist; the message says which and what there is."""


@dataclass(frozen=True, slots=True)
class StepLine:
    """A line of a run's job: the job's label (``step`` or ``step[i]``), jid and attempt."""

    label: str
    jid: str
    attempt: int
    line: LogLine

    def as_dict(self) -> dict[str, object]:
        return {"step": self.label, "jid": self.jid, "attempt": self.attempt, **self.line.as_dict()}


def run_jobs(client: Client, run_id: str, step: str | None = None) -> list[tuple[str, str]]:
    """``(label, jid)`` of the run's jobs in submission order, only ``step``'s when given."""
    raw = client.engine.call("run.get", run_id)
    if raw is None:
        raise NoSuchRun(f"no run {run_id!r} (see `flows runs`)")
    jids = json.loads(raw).get("jids") or []
    jobs = [(_label(run_id, jid), jid) for jid in jids]
    if step is None:
        return jobs
    chosen = [(label, jid) for label, jid in jobs if label == step or label.startswith(step + "[")]
    if not chosen:
        steps = sorted({label.split("[", 1)[0] for label, _ in jobs})
        raise NoSuchRun(f"run {run_id!r} has no step {step!r} (its steps: {', '.join(steps)})")
    return chosen


def _label(run_id: str, jid: str) -> str:
    prefix = run_id + ":"
    return jid[len(prefix) :] if jid.startswith(prefix) else jid


class Follower:
    """Reads the lines of ``jobs`` round by round: each job's latest attempt, and the attempts
    after it (a retry), from where the last round stopped. A job that is gone (deleted by a
    cancel or by retention) has no lines and has ended."""

    def __init__(self, client: Client, jobs: list[tuple[str, str]], *, live: bool = True) -> None:
        self.client = client
        self.live = live
        self._open = list(jobs)
        self._offsets: dict[str, tuple[int, int]] = {}  # jid -> (attempt, offset)

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
            attempt, offset = self._offsets.get(jid, (0, 0))
            while True:
                try:
                    page = joblogs.read(self.client.engine, jid, attempt or None, offset)
                except JobNotFound:  # deleted (canceled, retention): its lines went with it
                    break
                attempt = attempt or page.attempt
                out += [StepLine(label, jid, page.attempt, line) for line in page.lines]
                offset = page.next
                if len(page.lines) == joblogs.PAGE:
                    continue
                if page.attempts > attempt:  # a retry wrote lines: follow it from its start
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
    jobs: list[tuple[str, str]],
    *,
    live: bool = True,
    interval: float = 0.2,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[StepLine]:
    """The lines of ``jobs`` as they come (see :class:`Follower`); without ``live`` only what is
    stored now. Ends when every job has ended and its last lines are read, or when ``stop()``
    says so after a round."""
    follower = Follower(client, jobs, live=live)
    while True:
        yield from follower.poll()
        if follower.done or stop():
            return
        time.sleep(interval)


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


__all__ = ["Follower", "NoSuchRun", "StepLine", "follow", "run_jobs", "tail"]
