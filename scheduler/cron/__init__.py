"""Pure cron arithmetic for the scheduler service: fire times, catch-up, overlap, jitter, checks.

Nothing here touches Redis, files or the clock: every function takes its times as arguments.
One module per concern, each building on the ones before it:

- :mod:`scheduler.cron.expression`: parsing an expression and a :class:`Schedule`, and the
  checks (with their messages) that refuse what cannot be scheduled;
- :mod:`scheduler.cron.fire_times`: next, previous and missed fire times under the
  daylight-saving rule, jitter, and the ``flows schedules`` line;
- :mod:`scheduler.cron.catchup`: what to do with the ticks due after a downtime (catch-up
  policies) and with a tick whose previous run is still active (overlap policies);
- :mod:`scheduler.cron.checks`: everything ``flows validate`` reports about a ``schedule:``
  block.

The public names are re-exported here: import them from ``scheduler.cron``.
"""

from __future__ import annotations

from scheduler.cron.catchup import (
    DEFAULT_GRACE_SECONDS,
    MAX_CATCHUP_RUNS,
    SKIP_RECORD_LIMIT,
    CatchupPlan,
    CatchupPolicy,
    Fire,
    OverlapAction,
    OverlapDecision,
    OverlapPolicy,
    Skip,
    decide_overlap,
    plan_catchup,
)
from scheduler.cron.checks import UNREASONABLE_RUNS, Problem, validate_schedule
from scheduler.cron.expression import ALIASES, InvalidSchedule, Schedule
from scheduler.cron.fire_times import (
    MAX_ENUMERATED,
    describe,
    jitter_for,
    missed_ticks,
    next_fire,
    prev_fire,
    wall_instants,
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
    "wall_instants",
]
