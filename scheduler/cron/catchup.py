"""What to do with the ticks due at ``now``: catch-up after downtime and the overlap policy.

Catch-up after downtime (:func:`plan_catchup`)
    ``none`` skips every missed tick, ``latest`` fires the most recent missed tick once,
    ``all`` fires every missed tick in the window, at most ``max_runs`` runs per plan (the
    newest are kept). A tick no more than ``grace_seconds`` old is on time: it fires with
    trigger ``"schedule"`` under every policy. Every skipped tick is reported with its
    reason; past :data:`SKIP_RECORD_LIMIT` individual records, skips are grouped per reason
    with a count, and a plan walks at most :data:`MAX_ENUMERATED` skipped ticks per segment
    (inside the window, outside it): a longer stretch becomes one group with count None.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice, takewhile
from typing import Literal, get_args

from scheduler.cron.expression import Schedule
from scheduler.cron.fire_times import MAX_ENUMERATED, _fires, next_fire, prev_fire

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "MAX_CATCHUP_RUNS",
    "SKIP_RECORD_LIMIT",
    "CatchupPlan",
    "CatchupPolicy",
    "Fire",
    "OverlapAction",
    "OverlapDecision",
    "OverlapPolicy",
    "Skip",
    "decide_overlap",
    "plan_catchup",
]

CatchupPolicy = Literal["none", "latest", "all"]
OverlapPolicy = Literal["skip", "buffer_one", "allow", "cancel_running"]
OverlapAction = Literal["fire", "skip", "buffer", "cancel_and_fire"]
Trigger = Literal["schedule", "catch-up"]

#: A tick at most this old when the service handles it is on time, not a catch-up.
DEFAULT_GRACE_SECONDS = 60.0
#: Skipped ticks reported one record each; later ones are grouped per reason with a count.
SKIP_RECORD_LIMIT = 100
#: Most runs one plan fires under policy ``all`` when ``max_runs`` is not set.
MAX_CATCHUP_RUNS = 1_000


# -------------------------------------------------------------------------- catch-up


@dataclass(frozen=True, slots=True)
class Fire:
    """A tick to fire: ``trigger`` is ``"schedule"`` on time, ``"catch-up"`` when late."""

    tick: float
    trigger: Trigger


@dataclass(frozen=True, slots=True)
class Skip:
    """Skipped ticks ``first``..``last`` (equal for one tick), ``count`` of them, and why.

    ``count`` is None when the group was too large to count (see :data:`MAX_ENUMERATED`).
    """

    first: float
    last: float
    count: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class CatchupPlan:
    """What to do with the ticks due at ``now``: fires and skips oldest first.

    ``next_score`` is the tick to store as the schedule's score after this plan (None: the
    schedule has ended, remove it).
    """

    fires: tuple[Fire, ...]
    skips: tuple[Skip, ...]
    next_score: float | None

    @property
    def skipped(self) -> int:
        """How many ticks were skipped (a lower bound when a group was not counted)."""
        return sum(s.count or 1 for s in self.skips)


class _SkipLog:
    """Collects skips: one record per tick up to a limit, then one group per reason."""

    def __init__(self) -> None:
        self._records: list[Skip] = []
        self._groups: dict[str, tuple[float, float, int | None]] = {}

    def add(self, tick: float, reason: str) -> None:
        if len(self._records) < SKIP_RECORD_LIMIT:
            self._records.append(Skip(tick, tick, 1, reason))
        else:
            self._group(tick, tick, 1, reason)

    def add_uncounted(self, first: float, last: float, reason: str) -> None:
        self._group(first, last, None, reason)

    def _group(self, first: float, last: float, count: int | None, reason: str) -> None:
        if reason in self._groups:
            old_first, old_last, old_count = self._groups[reason]
            first, last = min(first, old_first), max(last, old_last)
            count = None if count is None or old_count is None else count + old_count
        self._groups[reason] = (first, last, count)

    def skips(self) -> tuple[Skip, ...]:
        groups = [Skip(f, la, c, r) for r, (f, la, c) in self._groups.items()]
        return tuple(sorted(self._records + groups, key=lambda s: (s.first, s.last)))


def _ticks_between(schedule: Schedule, lowest: float, highest: float) -> Iterator[float]:
    """Fire times in ``[lowest, highest]``, newest first."""
    return takewhile(lambda t: t >= lowest, _fires(schedule, highest, forward=False))


def _skip_segment(
    schedule: Schedule,
    ticks: Iterator[float],
    lowest: float,
    reason: str,
    log: _SkipLog,
) -> None:
    """Log newest-first ``ticks`` (all ``>= lowest``) as skipped, enumerating a bounded few."""
    for tick in islice(ticks, MAX_ENUMERATED):
        log.add(tick, reason)
    rest = next(ticks, None)
    if rest is not None:  # too many to walk: one uncounted group down to the oldest tick
        oldest = next_fire(schedule, math.ceil(lowest) - 1.0)
        log.add_uncounted(rest if oldest is None else oldest, rest, reason)


def plan_catchup(
    schedule: Schedule,
    policy: CatchupPolicy,
    window_seconds: float | None,
    max_runs: int | None,
    expected_tick: float,
    now: float,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
) -> CatchupPlan:
    """Decide which of the ticks due in ``[expected_tick, now]`` fire and which are skipped.

    ``expected_tick`` is the score the service stored (the tick it meant to fire next). The
    newest due tick fires on time (trigger ``"schedule"``) if it is at most ``grace_seconds``
    old. Of the rest (the missed ticks): ``none`` skips all; ``latest`` fires the newest one
    in the window unless an on-time tick fired; ``all`` fires those in the window, newest
    first up to ``max_runs`` runs in total (or :data:`MAX_CATCHUP_RUNS` if unset). A tick
    older than ``now - window_seconds`` is outside the window (None: no window; ``none``
    ignores the window). Skip reasons: ``"catch-up policy none"``, ``"catch-up policy latest
    (superseded by a newer run)"``, ``"outside catch-up window 12h"``, ``"max_runs 3
    reached"``, ``"catch-up cap 1000 reached"``.
    """
    if policy not in get_args(CatchupPolicy):
        raise ValueError(f"unknown catch-up policy {policy!r}")
    if window_seconds is not None and not window_seconds >= 0:
        raise ValueError(f"catch-up window must be >= 0 seconds, got {window_seconds}")
    if max_runs is not None and max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, got {max_runs}")
    if expected_tick > now:
        return CatchupPlan((), (), expected_tick)

    next_score = next_fire(schedule, now)
    fires: list[Fire] = []
    log = _SkipLog()
    newest = prev_fire(schedule, now)
    if newest is None or newest < expected_tick:
        return CatchupPlan((), (), next_score)
    highest = now  # newest missed tick still to place
    if now - newest <= grace_seconds:
        fires.append(Fire(newest, "schedule"))
        highest = newest - 1.0  # fire times are whole seconds

    if policy == "none" or window_seconds is None:
        cutoff = expected_tick
    else:
        cutoff = max(expected_tick, now - window_seconds)
    if policy == "none":
        quota, reason = 0, "catch-up policy none"
    elif policy == "latest":
        quota, reason = 1 - len(fires), "catch-up policy latest (superseded by a newer run)"
    elif max_runs is not None:
        quota, reason = max_runs - len(fires), f"max_runs {max_runs} reached"
    else:
        quota, reason = MAX_CATCHUP_RUNS - len(fires), f"catch-up cap {MAX_CATCHUP_RUNS} reached"

    recent = _ticks_between(schedule, cutoff, highest)
    fires.extend(Fire(tick, "catch-up") for tick in islice(recent, max(0, quota)))
    _skip_segment(schedule, recent, cutoff, reason, log)
    if cutoff > expected_tick:
        window = f"outside catch-up window {_fmt_duration(window_seconds or 0.0)}"
        older = _ticks_between(schedule, expected_tick, min(highest, math.ceil(cutoff) - 1.0))
        _skip_segment(schedule, older, expected_tick, window, log)
    return CatchupPlan(tuple(sorted(fires, key=lambda f: f.tick)), log.skips(), next_score)


def _fmt_duration(seconds: float) -> str:
    """Compact duration: ``12h``, ``1d12h``, ``1m30s``, ``0s``."""
    left = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


# --------------------------------------------------------------------------- overlap


@dataclass(frozen=True, slots=True)
class OverlapDecision:
    """What to do with a tick given the previous run: ``action`` and, if not plain, why."""

    action: OverlapAction
    reason: str | None = None


def decide_overlap(
    policy: OverlapPolicy, previous_run_active: bool, buffered: bool
) -> OverlapDecision:
    """Apply the overlap policy to a tick whose previous run may still be active.

    ``skip`` drops the tick; ``buffer_one`` keeps one run waiting for the active one to end
    (a second tick while one waits is dropped); ``allow`` runs both; ``cancel_running``
    cancels the active run, then fires. With no active run every policy fires.
    """
    if policy not in get_args(OverlapPolicy):
        raise ValueError(f"unknown overlap policy {policy!r}")
    if not previous_run_active or policy == "allow":
        return OverlapDecision("fire")
    if policy == "skip":
        return OverlapDecision("skip", "overlap skip: previous run still active")
    if policy == "cancel_running":
        return OverlapDecision("cancel_and_fire", "overlap cancel_running: previous run cancelled")
    if buffered:
        return OverlapDecision("skip", "overlap buffer_one: a run is already buffered")
    return OverlapDecision("buffer", "overlap buffer_one: waits for the previous run to end")
