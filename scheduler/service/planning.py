"""What to do with one due schedule: pure decisions, no Redis, no clock.

A due entry's score is the tick the schedule meant to fire next. At ``now``:

- a paused schedule skips every due tick (reason ``paused``) and moves to the first tick after
  ``now``;
- otherwise :func:`scheduler.cron.plan_catchup` says which due ticks fire and which are skipped
  (with reasons). One engine call records the skips before the plan's *first* fire and fires
  it, moving the score to the tick after it; a plan with several fires (catch-up ``all``) takes
  several calls, each planned again from the new score. The plans keep the newest ticks, so
  planning again picks the same ones, and a crash between two calls loses nothing: the score
  still points at the first tick not handled;
- the overlap policy (:func:`scheduler.cron.decide_overlap`) then decides that fire against
  the last run: fire, skip it, buffer it until the last run ends, or cancel the last run and
  fire.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Literal

from scheduler.cron import (
    DEFAULT_GRACE_SECONDS,
    Schedule,
    Skip,
    decide_overlap,
    jitter_for,
    missed_ticks,
    next_fire,
    plan_catchup,
)
from scheduler.service.records import Definition, DueEntry, paused_skip

Action = Literal["fire", "skip", "buffer"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One engine call's worth: the skips it records, then ``action`` on ``tick``.

    ``next`` is the score afterwards (None: the schedule has no fire time left); ``trigger`` is
    ``schedule`` for an on-time tick, ``catch-up`` for a late one; ``cancel`` is the run that
    overlap ``cancel_running`` cancels first; ``note`` says why, for the log.
    """

    action: Action
    next: float | None
    skips: tuple[Skip, ...] = ()
    tick: float | None = None
    trigger: str = "schedule"
    cancel: str | None = None
    note: str | None = None


def decide(
    definition: Definition,
    entry: DueEntry,
    now: float,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> Decision:
    """The next step for a due schedule (see the module doc)."""
    schedule = definition.schedule
    if entry.paused:
        skip = paused_skip(schedule, entry.next, now)
        return Decision("skip", next_fire(schedule, now), (skip,) if skip else ())
    on_time = _on_time(definition, entry, now, grace_seconds)
    if on_time is not None:
        return _overlap(definition, entry, entry.next, "schedule", (), on_time[0])
    plan = plan_catchup(
        schedule,
        definition.catchup,
        definition.window,
        definition.max_runs,
        entry.next,
        now,
        grace_seconds=grace_seconds,
    )
    if not plan.fires:
        return Decision("skip", plan.next_score, plan.skips)
    first = plan.fires[0]
    before = tuple(s for s in plan.skips if s.last < first.tick)
    return _overlap(
        definition, entry, first.tick, first.trigger, before, next_fire(schedule, first.tick)
    )


def _on_time(
    definition: Definition, entry: DueEntry, now: float, grace: float
) -> tuple[float | None] | None:
    """``(next fire time,)`` when the score is the only due tick and on time, else None.

    The common case: one walk of the cron expressions instead of the catch-up plan's five,
    and the plan would fire exactly that tick (whatever the policy), skip nothing, and move
    on to the next fire time.
    """
    if now - entry.next > grace:
        return None
    ticks = _two_from(definition.schedule, entry.next)
    # A score is always a fire time of the registered definition; make sure all the same.
    if not ticks or ticks[0] != entry.next:
        return None
    upcoming = ticks[1] if len(ticks) > 1 else None
    if upcoming is not None and upcoming <= now:
        return None  # more than one tick is due: let the plan decide
    return (upcoming,)


# Fire times are a pure function of the schedule, and many schedules share one (every flow on
# "0 * * * *" in UTC): keep a block of each schedule's upcoming fire times and answer from it
# while the tick lies inside, so walking the cron expressions (a croniter built each time) is
# paid once per block, not once per tick.
_BLOCK = 64
_MAX_BLOCKS = 16384
_blocks: dict[Schedule, tuple[float, tuple[float, ...]]] = {}


def _two_from(schedule: Schedule, tick: float) -> tuple[float, ...]:
    """The first two fire times at or after ``tick``."""
    bound = math.ceil(tick) - 1.0
    cached = _blocks.get(schedule)
    if cached is not None:
        start, block = cached
        # The block holds every fire time in (start, block[-1]], all of them when it is short.
        if start <= bound:
            i = bisect.bisect_right(block, bound)
            if i + 2 <= len(block) or len(block) < _BLOCK:
                return block[i : i + 2]
    block = tuple(missed_ticks(schedule, bound, math.inf, limit=_BLOCK))
    if len(_blocks) >= _MAX_BLOCKS:
        _blocks.clear()
    _blocks[schedule] = (bound, block)
    return block[:2]


def fire_after(schedule: Schedule, moment: float) -> float | None:
    """:func:`scheduler.cron.next_fire` (fire times are whole seconds), answered from the
    block of fire times kept for on-time ticks."""
    ticks = _two_from(schedule, math.floor(moment) + 1.0)
    return ticks[0] if ticks else None


def _overlap(
    definition: Definition,
    entry: DueEntry,
    tick: float,
    trigger: str,
    before: tuple[Skip, ...],
    upcoming: float | None,
) -> Decision:
    """The fire of ``tick`` after the skips ``before``, as the overlap policy has it."""
    overlap = decide_overlap(definition.overlap, entry.active, entry.buffered is not None)
    if overlap.action == "skip":
        reason = overlap.reason or "overlap"
        skips = (*before, Skip(tick, tick, 1, reason))
        return Decision("skip", upcoming, skips, tick, trigger, note=reason)
    if overlap.action == "buffer":
        return Decision("buffer", upcoming, before, tick, trigger, note=overlap.reason)
    cancel = entry.last_run if overlap.action == "cancel_and_fire" else None
    return Decision("fire", upcoming, before, tick, trigger, cancel, overlap.reason)


def start_delay(definition: Definition, tick: float, now: float) -> float:
    """Seconds from ``now`` until the run of ``tick`` may start: its jitter, less lateness."""
    jitter = jitter_for(definition.name, tick, definition.jitter)
    return max(0.0, round(tick + jitter - now, 3))


__all__ = ["Decision", "decide", "fire_after", "start_delay"]
