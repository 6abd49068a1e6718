"""The one vocabulary of run and step statuses and of the actions they allow.

The engine decides every status and allowed action (lua/include/run_state.lua); this module
holds the same words for the Python surfaces (the status words themselves are
:mod:`flows.flowfile.status_words`, which a flow file's tests name), each with its rule as
docs/pages/statuses.md states it, so the API's OpenAPI enums, the CLI's styles and the
dashboard's badges all come from here.
A test compares these lists with the engine's.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from flows.flowfile.status_words import RUN_STATUSES as RUN_STATUSES
from flows.flowfile.status_words import STEP_STATUSES as STEP_STATUSES
from flows.flowfile.status_words import RunStatus as RunStatus
from flows.flowfile.status_words import StepStatus as StepStatus

Action = Literal["retry", "rerun", "cancel", "signal", "approve", "kick"]

ACTIONS: Final[tuple[str, ...]] = get_args(Action)
"""What an operator may do to a run, a step or a job, when the engine lists it as allowed."""

RUN_RULES: Final = {
    "running": "a job of it is running, waiting or awaiting a signal: it can still progress",
    "canceled": (
        "it, or a job of it that had not completed, was canceled (or deleted), and no job"
        " of it can progress"
    ),
    "failed": "a job of it failed or expired",
    "blocked": "nothing failed, but a job is buried or waits for one that never comes",
    "expired": "none of its jobs exists any more (retention removed them)",
    "succeeded": "every job of it completed (by running, or from the step cache) or was skipped",
}

STEP_RULES: Final = {
    "failed": "a job failed (its error, a timed-out wait, a lost worker)",
    "expired": "a job's ttl passed before it ran",
    "running": "a job runs (a sub-flow step: its child run has not ended)",
    "awaiting": "a wait step awaits its signal",
    "waiting": "a job waits for a worker, its delay, or dependencies that can still complete",
    "buried": "a job was buried: it waits for `flows kick --job JID` (or the Kick button)",
    "upstream_failed": "a job waits for a dependency that failed, expired, is buried or gone",
    "canceled": "a job was canceled with its run, or canceled or deleted alone before it completed",
    "gone": "a completed job no longer exists (deleted, or removed by retention)",
    "cached": "every job completed at once with an earlier run's result (the step cache)",
    "skipped": "every job was skipped (its trigger rule or its if:)",
    "success": "every job completed (or was skipped)",
}

ACTION_RULES: Final = {
    "retry": "resume what failed, expired or was canceled (retries restored), never what completed",
    "rerun": "run ended work again (a finished run's step, with --downstream its dependents)",
    "cancel": (
        "cancel every job of the run that has not ended (a job's: that job alone, "
        "`flows cancel RUN:STEP`, `POST /api/v1/jobs/{jid}/cancel`, the Cancel job button)"
    ),
    "signal": "complete an awaiting wait step with data as its outputs",
    "approve": "signal an awaiting wait step with an approval's data: a note and who approved",
    "kick": (
        "put a buried job back into its queue (`flows kick --job JID`, "
        "`POST /api/v1/jobs/{jid}/kick`, the Kick button), or every buried job of a step "
        "(`flows kick --step RUN:STEP`, `POST /api/v1/runs/{run}/steps/{step}/kick`, Kick step)"
    ),
}

STYLES: Final = {
    "success": "green",
    "succeeded": "green",
    "failed": "red",
    "expired": "red",
    "upstream_failed": "red",
    "running": "yellow",
    "waiting": "dim",
    "awaiting": "yellow",
    "buried": "yellow",
    "blocked": "yellow",
    "skipped": "cyan",
    "cached": "green",
    "canceled": "magenta",
    "gone": "dim",
}
"""The CLI's style of each word (rich style names)."""

SYMBOLS: Final = {
    "success": "✓",
    "succeeded": "✓",
    "failed": "✗",
    "running": "▶",
    "waiting": "…",
    "awaiting": "⏸",
    "skipped": "↷",
    "cached": "↺",
    "upstream_failed": "⊘",
    "canceled": "■",
    "expired": "◷",
    "buried": "⚑",
    "gone": "?",
    "blocked": "‖",
}
"""The dashboard badge's symbol of each word (its colour: the ``st-<word>`` class of app.css)."""

FINISHED: Final = frozenset(RUN_STATUSES) - {"running"}
"""Run statuses from which nothing progresses by itself."""

__all__ = [
    "ACTIONS",
    "ACTION_RULES",
    "FINISHED",
    "RUN_RULES",
    "RUN_STATUSES",
    "STEP_RULES",
    "STEP_STATUSES",
    "STYLES",
    "SYMBOLS",
    "Action",
    "RunStatus",
    "StepStatus",
]
