"""Pure cron arithmetic for the scheduler service: fire times, catch-up, overlap, jitter, checks.

The public names are re-exported here: import them from ``scheduler.cron``.
"""

from __future__ import annotations

from scheduler.cron.fire_times import (
    ALIASES,
    DEFAULT_GRACE_SECONDS,
    MAX_CATCHUP_RUNS,
    MAX_ENUMERATED,
    SKIP_RECORD_LIMIT,
    UNREASONABLE_RUNS,
    CatchupPlan,
    CatchupPolicy,
    Fire,
    InvalidSchedule,
    OverlapAction,
    OverlapDecision,
    OverlapPolicy,
    Problem,
    Schedule,
    Skip,
    decide_overlap,
    describe,
    jitter_for,
    missed_ticks,
    next_fire,
    plan_catchup,
    prev_fire,
    validate_schedule,
)

__all__ = [
    "ALIASES",
    "DEFAULT_GRACE_SECONDS",
    "MAX_CATCHUP_RUNS",
    "MAX_ENUMERATED",
    "SKIP_RECORD_LIMIT",
    "UNREASONABLE_RUNS",
    "CatchupPlan",
    "CatchupPolicy",
    "Fire",
    "InvalidSchedule",
    "OverlapAction",
    "OverlapDecision",
    "OverlapPolicy",
    "Problem",
    "Schedule",
    "Skip",
    "decide_overlap",
    "describe",
    "jitter_for",
    "missed_ticks",
    "next_fire",
    "plan_catchup",
    "prev_fire",
    "validate_schedule",
]
