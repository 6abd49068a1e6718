"""The words of run and step statuses: the engine decides them (lua/include/run_state.lua), a
flow test's ``expect:`` names them, :mod:`flows.runs.statuses` holds their rules."""

from __future__ import annotations

from typing import Final, Literal, get_args

RunStatus = Literal["running", "succeeded", "failed", "blocked", "canceled", "expired"]
StepStatus = Literal[
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
]

RUN_STATUSES: Final[tuple[str, ...]] = get_args(RunStatus)
"""What a run can be, each rule in :data:`flows.runs.statuses.RUN_RULES`."""

STEP_STATUSES: Final[tuple[str, ...]] = get_args(StepStatus)
"""What a step (or one job of it) can be, in precedence order: a step says the first that one
of its jobs says (``cached`` or ``skipped`` only when all of them were, ``success`` otherwise)."""
