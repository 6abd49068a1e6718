"""Deadlines of runs and steps, checked by the scheduler service with its housekeeping: each
call of ``deadline.sweep`` (``lua/include/deadlines.lua``) looks at the due entries, marks the
unfinished ones missed, once, and writes their notifications in the same call."""

from __future__ import annotations

import json
import logging

from scheduler.engine.client import Client

log = logging.getLogger(__name__)

BATCH = 100
MAX_ROUNDS = 50


def sweep_deadlines(
    client: Client, now: float | None = None, *, batch: int = BATCH, max_rounds: int = MAX_ROUNDS
) -> int:
    """Check the due deadlines (``now``: the engine's time, passed in by tests); returns how
    many were missed by this call."""
    at: float | str = "" if now is None else now
    missed = 0
    for _ in range(max_rounds):
        reply = json.loads(client.engine.call("deadline.sweep", batch, now=at))
        missed += int(reply["missed"])
        if int(reply["looked"]) < batch:
            break
    if missed:
        log.warning("deadlines: %d missed", missed)
    return missed


def missed_total(client: Client) -> int:
    """How many deadlines were missed in the namespace, in all (the metric)."""
    return int(client.engine.call("deadline.count"))
