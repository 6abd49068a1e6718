"""Housekeeping the service does so that nothing waits for a worker to pop.

Each step is one bounded engine call per batch (``lua/commands/maintain.lua``), repeated while a
batch came back full, up to ``max_rounds`` batches per queue; what is left waits for the next
run. ``now`` None lets the server's clock decide.

- :func:`maintain_queues`: per queue, due recurring jobs spawn their children, due scheduled
  jobs become waiting, expired locks are reaped (grace period, then the job waits again without
  using a retry, or fails in ``worker-lost`` past ``lost-worker-retries``);
- :func:`time_out_waits` (part of :func:`maintain_queues`): jobs awaiting a signal (a flow's
  ``wait:`` steps) past their timeout fail in ``wait-timeout`` or are skipped, as each wait says
  (``wait.sweep``, ``lua/commands/wait.lua``); no worker pops them, so only the service does it;
- :func:`apply_retention`: completed jobs beyond ``jobs-history`` / ``jobs-history-count`` and
  finished runs older than ``jobs-history`` are dropped.

The light/deep consistency check (:mod:`scheduler.engine.doctor`:
``doctor.ScheduledCheck(deep_every=N)``,
or ``doctor.light_check`` / ``doctor.deep_check``) plugs in as a :data:`Check`, which the service
runs on its own interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scheduler.engine.client import Client

#: A periodic check the service runs next to housekeeping: ``check(client, now)``.
Check = Callable[[Client, float | None], object]

BATCH = 100
MAX_ROUNDS = 50
_COUNTS = ("promoted", "spawned", "reclaimed", "failed", "waits_failed", "waits_skipped")


@dataclass
class HousekeepingReport:
    promoted: int = 0
    spawned: int = 0
    reclaimed: int = 0
    failed: int = 0
    queues: int = 0
    waits_failed: int = 0
    """Waits that timed out and failed (group ``wait-timeout``)."""
    waits_skipped: int = 0
    """Waits that timed out and were skipped (``on_timeout: skip``)."""

    def add(self, counts: dict[str, Any]) -> None:
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + int(counts.get(name, 0)))

    @property
    def busy(self) -> bool:
        return any(getattr(self, name) for name in _COUNTS)


@dataclass
class RetentionReport:
    jobs: int = 0
    runs: int = 0


def _queue_names(client: Client, now: float | str) -> list[str]:
    counts = json.loads(client.engine.call("queues", now=now))
    return [str(q["name"]) for q in counts] if isinstance(counts, list) else []


def maintain_queues(
    client: Client, now: float | None = None, *, batch: int = BATCH, max_rounds: int = MAX_ROUNDS
) -> HousekeepingReport:
    """Promote, spawn and reap in every known queue (see the module doc)."""
    at: float | str = "" if now is None else now
    report = HousekeepingReport()
    pending = _queue_names(client, at)
    report.queues = len(pending)
    for _ in range(max_rounds):
        if not pending:
            break
        pipe = client.engine.pipeline()
        for queue in pending:
            pipe.call("maintain", queue, batch, now=at)
        full = []
        for queue, reply in zip(pending, pipe.execute(), strict=True):
            if isinstance(reply, Exception):
                raise reply
            counts = json.loads(reply)
            report.add(counts)
            if any(int(counts[name]) >= batch for name in ("promoted", "spawned", "reclaimed")):
                full.append(queue)
        pending = full
    report.waits_failed, report.waits_skipped = time_out_waits(
        client, now, batch=batch, max_rounds=max_rounds
    )
    return report


def time_out_waits(
    client: Client, now: float | None = None, *, batch: int = BATCH, max_rounds: int = MAX_ROUNDS
) -> tuple[int, int]:
    """Time out the waits past their deadline, one ``wait.sweep`` call per batch of ``batch``;
    returns how many failed and how many were skipped."""
    at: float | str = "" if now is None else now
    failed = skipped = 0
    for _ in range(max_rounds):
        counts = json.loads(client.engine.call("wait.sweep", batch, now=at))
        failed += int(counts["failed"])
        skipped += int(counts["skipped"])
        if int(counts["failed"]) + int(counts["skipped"]) < batch:
            break
    return failed, skipped


def apply_retention(
    client: Client, now: float | None = None, *, batch: int = BATCH, max_rounds: int = MAX_ROUNDS
) -> RetentionReport:
    """Drop expired completed jobs and old finished runs (see the module doc)."""
    at: float | str = "" if now is None else now
    report = RetentionReport()
    kept = 0
    for _ in range(max_rounds):
        counts = json.loads(client.engine.call("maintain.retention", batch, kept, now=at))
        report.jobs += int(counts["jobs"])
        report.runs += int(counts["runs"])
        kept += int(counts["kept"])
        if int(counts["jobs"]) < batch and int(counts["runs"]) + int(counts["kept"]) < batch:
            break
    return report


__all__ = [
    "Check",
    "HousekeepingReport",
    "RetentionReport",
    "apply_retention",
    "maintain_queues",
    "time_out_waits",
]
