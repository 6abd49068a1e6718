"""Backfilling a flow: one run per past tick of its schedule (``flows backfill``).

The flow is a flow file (its ``schedule:`` block) or a registered flow (the version the
scheduler service registered). Its ticks in the range are enumerated as the service's catch-up
enumerates them (:func:`scheduler.service.backfills.backfill_ticks`), each run id is the one the
schedule gives the tick, and each run is built by the one run builder
(:func:`flows.runs.build.build_run`, through :class:`flows.runs.service_source.FlowsSource`) with
trigger ``backfill``, the tick as its logical time in the schedule's time zone.

A backfill is stored in the engine with all its ticks and advanced a few runs at a time: by
``flows backfill`` right away, then by the scheduler service as runs finish
(:mod:`scheduler.service.backfills`). Nothing here waits for runs.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from flows.expand.run_ids import RUN_ID_TIME, run_id_for
from flows.flowfile.params import ParamError
from flows.runs.build import FlowFile, parse_flow_text, read_flow_file
from flows.runs.service_source import FlowsSource, definition_of
from scheduler.cron import InvalidSchedule, wall_instants
from scheduler.engine.client import Client
from scheduler.engine.errors import shorten
from scheduler.service.backfills import (
    MAX_ACTIVE_LIMIT,
    MAX_TICKS,
    TRIGGER,
    AdvanceReport,
    Backfills,
    TooManyTicks,
    advance,
    backfill_ticks,
)
from scheduler.service.records import Definition
from scheduler.service.schedules import Schedules

#: ``--max-active`` when not given.
DEFAULT_MAX_ACTIVE = 10

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DATE_FORMATS = "YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] or either with an offset (Z, +01:00)"


class BackfillError(ValueError):
    """A backfill that cannot be made as asked; the message says what and why."""


@dataclass(frozen=True)
class Target:
    """The flow to backfill: its validated file and its schedule's definition."""

    flow_file: FlowFile
    definition: Definition

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def flow_max(self) -> int:
        """The flow's ``concurrency.max_active_runs`` (0: none)."""
        return self.flow_file.flow.concurrency.max_active_runs or 0

    @property
    def zone(self) -> ZoneInfo:
        return self.definition.zone


@dataclass(frozen=True)
class Plan:
    """The ticks of a range, oldest first, with their run ids. ``start`` and ``end`` are the
    range as asked; ``clamped`` is True when ``end`` was later than now (later ticks are the
    schedule's)."""

    target: Target
    start: float
    end: float
    ticks: tuple[float, ...]
    clamped: bool = False

    @property
    def run_ids(self) -> list[str]:
        return [run_id_for(self.target.name, tick) for tick in self.ticks]

    def local(self, tick: float) -> str:
        """A tick as the schedule's wall clock reads it."""
        return datetime.fromtimestamp(tick, self.target.zone).strftime("%Y-%m-%d %H:%M %Z")


def resolve(client: Client, flow: str, now: float) -> Target:
    """The flow file at ``flow``, or else the registered flow named ``flow``.

    Raises :class:`flows.validation.validate.InvalidFlow` for a file with errors,
    :class:`BackfillError`
    for a flow without a schedule or a name that is neither."""
    path = Path(flow)
    try:
        is_file = path.is_file()
    except OSError as error:  # a name too long for a path (ENAMETOOLONG), say
        raise BackfillError(f"{shorten(flow, 60)}: no such file ({error.strerror})") from None
    if is_file:
        flow_file = read_flow_file(path, now=now, expand_check=True)
        if flow_file.flow.schedule is None:
            raise BackfillError(
                f"{flow}: flow {flow_file.flow.name!r} has no schedule: block, so it has no "
                "ticks to backfill"
            )
        return Target(flow_file, definition_of(flow_file))
    if path.exists():
        raise BackfillError(f"{flow}: not a flow file")
    if "/" in flow or path.suffix in (".yaml", ".yml"):
        raise BackfillError(f"{flow}: no such file")
    registration = Schedules(client).get(flow, skips=0)
    if registration is None:
        raise BackfillError(
            f"{flow}: no such file, and no registered flow of that name (see `flows schedules`)"
        )
    definition = registration.definition
    try:
        definition.schedule  # noqa: B018 - built once here, so a bad one is refused here
    except InvalidSchedule as error:  # registered by an older version's laxer cron checks
        raise BackfillError(
            f"{flow}: the registered schedule cannot be backfilled: {error}; fix its file "
            "(the scheduler service registers it again at its next scan)"
        ) from None
    flow_file = parse_flow_text(definition.source, definition.file)
    return Target(flow_file, definition)


def parse_moment(text: str, zone: ZoneInfo, *, option: str, end: bool = False) -> float:
    """Epoch seconds of ``--from``/``--to`` ``text``; a time without an offset is read in the
    schedule's time zone. A date alone is the start of that day, or for ``end`` the last second
    of it (``--to 2026-11-30`` covers the whole 30th).

    A wall-clock time is mapped as the schedule maps its ticks
    (:func:`scheduler.cron.wall_instants`), so the range holds the ticks whose wall-clock
    times it names, where they fire: one in a spring-forward gap is the first instant after
    it (``--from 02:30 --to 02:30`` on the night 02:30 does not exist holds the ``30 2`` tick,
    fired at 03:00), a repeated one its first occurrence, or for ``end`` its second."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BackfillError(
            f"{option} {text!r} is not a date or time: use {DATE_FORMATS}"
        ) from None
    try:
        if moment.tzinfo is not None:
            seconds = moment.timestamp()
        elif end and _DATE.match(value):
            # The next day's midnight in the zone, less a second: a day may be 23 or 25 hours
            # long. The last day of the calendar has no next one: its last second then.
            try:
                seconds = wall_instants(moment + timedelta(days=1), zone)[0] - 1.0
            except OverflowError:
                seconds = wall_instants(moment.replace(hour=23, minute=59, second=59), zone)[1]
        else:
            seconds = wall_instants(moment, zone)[1 if end else 0]
    except (OverflowError, ValueError, OSError):
        seconds = -1.0  # beyond what a clock holds: out of range below
    if seconds < 0:
        raise BackfillError(
            f"{option} {text!r} is before 1970-01-01 00:00 UTC or out of range: a backfill "
            "covers ticks from then on"
        )
    return seconds


def check_range(start: float, end: float, zone: ZoneInfo) -> None:
    """Refuse a range that ends before it starts (:class:`BackfillError`); ``zone``: the
    schedule's, in which the message shows the range."""
    if start > end:
        raise BackfillError(
            f"--from {shown(start, zone)} is after --to {shown(end, zone)}: nothing to backfill"
        )


def plan(target: Target, start: float, end: float, now: float) -> Plan:
    """The ticks of ``target``'s schedule in ``[start, end]`` (no later than ``now``)."""
    zone = target.zone
    check_range(start, end, zone)
    if start > now:
        raise BackfillError(
            f"--from {shown(start, zone)} is in the future: a backfill covers past ticks "
            "(the schedule fires the coming ones)"
        )
    last = min(end, now)
    try:
        ticks = tuple(backfill_ticks(target.definition.schedule, start, last))
    except TooManyTicks as error:  # a range to split: the user's to fix, said in one line
        raise BackfillError(str(error)) from None
    if not ticks:
        raise BackfillError(
            f"the schedule of {target.name} has no tick from {shown(start, zone)} to "
            f"{shown(last, zone)}"
        )
    return Plan(target, start, end, ticks, clamped=end > now)


def new_backfill_id(flow: str, now: float) -> str:
    """``<flow>-bf-<UTC time>-<random>``: printed, and listed by ``flows backfills``."""
    stamp = time.strftime(RUN_ID_TIME, time.gmtime(now))
    return f"{flow}-bf-{stamp}-{secrets.token_hex(2)}"


def with_params(target: Target, given: Mapping[str, str]) -> Target:
    """``target`` whose every run takes ``given`` (``-p NAME=VALUE``, text converted to each
    param's type when a run is built) over the schedule's params."""
    if not given:
        return target
    definition = replace(target.definition, params={**target.definition.params, **given})
    return replace(target, definition=definition)


def check_build(plan: Plan) -> None:
    """Build the first tick's run now, so a flow whose runs cannot be built (a required param
    without a default, a limit) is refused before anything is stored. Params it cannot take
    raise :class:`ParamError` (the command's usage error), anything else
    :class:`BackfillError`."""
    tick = plan.ticks[0]
    try:
        FlowsSource().build(
            plan.target.definition, run_id_for(plan.target.name, tick), tick, TRIGGER, 0.0
        )
    except ParamError:
        raise
    except ValueError as error:
        raise BackfillError(f"cannot build the run of {plan.local(tick)}: {error}") from None


def start(client: Client, plan: Plan, max_active: int, now: float) -> tuple[str, AdvanceReport]:
    """Store the backfill and submit its first runs (as many as its limits allow); the
    scheduler service submits the rest as runs finish. Returns its id and what was submitted."""
    if not 1 <= max_active <= MAX_ACTIVE_LIMIT:
        raise BackfillError(f"--max-active must be from 1 to {MAX_ACTIVE_LIMIT}: {max_active}")
    check_build(plan)
    backfill_id = new_backfill_id(plan.target.name, now)
    Backfills(client).create(
        backfill_id,
        plan.target.definition,
        plan.ticks,
        [run_id_for(plan.target.definition.name, tick) for tick in plan.ticks],
        max_active=max_active,
        flow_max=plan.target.flow_max,
        start=plan.start,
        end=plan.end,
        now=now,
    )
    return backfill_id, advance(client, FlowsSource(), now, backfill_id=backfill_id)


def shown(moment: float, zone: ZoneInfo) -> str:
    """``moment`` as the schedule's wall clock reads it, the clock ``--from`` and ``--to``
    without an offset are read on, then the UTC in brackets (``2026-11-05 00:00:00 CET
    (2026-11-04 23:00:00 UTC)``); a schedule in UTC: the UTC alone."""
    utc = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))
    local = datetime.fromtimestamp(moment, zone).strftime("%Y-%m-%d %H:%M:%S %Z")
    return utc if local == utc else f"{local} ({utc})"


__all__ = [
    "DEFAULT_MAX_ACTIVE",
    "MAX_TICKS",
    "BackfillError",
    "Plan",
    "Target",
    "check_build",
    "check_range",
    "new_backfill_id",
    "parse_moment",
    "plan",
    "resolve",
    "shown",
    "start",
    "with_params",
]
