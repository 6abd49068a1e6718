"""``--preview N`` and ``--after-outage FROM/TO`` of ``flows validate`` and ``flows schedules``:
a schedule's next fire times (zone and UTC, DST notes), and what catch-up fires after an outage
under the flow's policy (:mod:`scheduler.cron.preview`). :func:`build` decides what a preview
says, once: :func:`print_preview` prints it as lines, :meth:`SchedulePreview.to_json` is its JSON
(``flows schedules --json``, ``flows validate --format json``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from flows.cli.terminal import visible
from scheduler.cron.catchup import CatchupPlan, _fmt_duration
from scheduler.cron.preview import (
    OutagePreview,
    UpcomingPreview,
    after_outage,
    meet_overlap,
    outage_due,
    outage_preview,
    parse_period,
    upcoming,
)
from scheduler.service.records import Definition, paused_skip

F = TypeVar("F", bound=Callable[..., Any])


def _period(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return parse_period(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def options(function: F) -> F:
    """The two options, declared once for both commands."""
    function = click.option(
        "--after-outage",
        "outage",
        metavar="FROM/TO",
        callback=_period,
        help="Print what catch-up would fire when the service is back at TO after being "
        "down since FROM (ISO 8601 times), under the flow's policy.",
    )(function)
    return click.option(
        "--preview",
        type=click.IntRange(1, 10_000),
        metavar="N",
        help="Print the schedule's next N fire times, in its zone and in UTC.",
    )(function)


_OVERLAP_NOTES = {
    "skip": "the catch-up runs go in one tick, so each after the first meets it running and is"
    " skipped",
    "buffer_one": "the catch-up runs go in one tick: the first runs, the second waits for it to"
    " end, the rest are skipped",
    "cancel_running": "the catch-up runs go in one tick, each canceling the run before it: only"
    " the last runs to its end",
}


@dataclass(frozen=True, slots=True)
class SchedulePreview:
    """What one schedule will do: its next fire times (``upcoming``; None: not asked for) and
    its return after an outage (``outage``), with the notes printed under them: ``pause`` says
    why nothing fires and what resumes it ('' when not paused)."""

    definition: Definition
    upcoming: UpcomingPreview | None
    outage: OutagePreview | None
    pause: str = ""
    catching_up: int = 0
    """The runs the catch-up policy alone would fire on return, before the overlap policy."""

    @property
    def upcoming_pause(self) -> str:
        return f"{self.pause}; these are the times it would fire" if self.pause else ""

    @property
    def upcoming_end(self) -> str:
        """Why fewer fire times remain than were asked for ('' when not fewer)."""
        times = self.upcoming
        if times is None or not times.cut_short:
            return ""
        if times.end is None:  # no bound: the walk reached the calendar's last year
            return "fire times end with the year 9999"
        tense = "ends" if times.end.instant > times.after else "ended"
        return f"the schedule {tense} at {times.end.local}"

    @property
    def outage_pause(self) -> str:
        return f"{self.pause}; on return it skips the ticks it missed" if self.pause else ""

    @property
    def outage_overlap(self) -> str:
        """How several catch-up fires meet the overlap policy ('' when they do not)."""
        meets = _OVERLAP_NOTES.get(self.definition.overlap)
        if self.outage is None or self.catching_up < 2 or not meets:
            return ""
        return f"overlap {self.definition.overlap}: {meets}; only overlap allow runs all"

    @property
    def outage_end(self) -> str:
        plan = self.outage
        if plan is None or plan.end is None or plan.end.instant > plan.back:
            return ""
        return f"the schedule ends at {plan.end.local}: nothing fires after that"

    def to_json(self) -> dict[str, Any]:
        """``preview`` and ``after_outage``, each when asked for, with the notes printed."""
        out: dict[str, Any] = {}
        if self.upcoming is not None:
            notes = [self.upcoming_pause, self.upcoming_end]
            out["preview"] = {**self.upcoming.to_json(), "notes": [n for n in notes if n]}
        if self.outage is not None:
            notes = [self.outage_pause, self.outage_overlap, self.outage_end]
            out["after_outage"] = {**self.outage.to_json(), "notes": [n for n in notes if n]}
        return out


def _paused(definition: Definition, by_operator: bool, note: str) -> str:
    """Why nothing fires and what resumes it ('' when the schedule is not paused)."""
    ways = []
    if definition.paused:
        ways.append("its file drops schedule.paused: true")
    if by_operator:
        ways.append(f"`flows schedule resume {definition.name}`")
    if not ways:
        return ""
    why = f" ({note})" if by_operator and note else ""
    return f"paused{why}: nothing fires until {' and '.join(ways)}"


def build(
    definition: Definition,
    now: float,
    count: int | None,
    outage: tuple[float, float] | None,
    *,
    paused: bool = False,
    pause_note: str = "",
) -> SchedulePreview:
    """The preview of one schedule at ``now``. ``paused``: paused by an operator (``flows
    schedule pause``, with ``pause_note``); a file's ``paused: true`` is the definition's."""
    schedule = definition.schedule
    pause = _paused(definition, paused, pause_note)
    plan = None
    catching_up = 0
    if outage is not None:
        down, back = outage
        if pause:  # the service skips a paused schedule's due ticks (scheduler.service.planning)
            due = outage_due(schedule, down, back)
            skip = None if due is None else paused_skip(schedule, due, back)
            skipped = None if due is None else CatchupPlan((), (skip,) if skip else (), None)
            plan = outage_preview(schedule, down, back, skipped)
        else:
            plan = after_outage(
                schedule,
                definition.catchup,
                definition.window,
                definition.max_runs,
                down,
                back,
            )
            catching_up = len(plan.fires)
            plan = meet_overlap(plan, definition.overlap)
    times = upcoming(schedule, now, count) if count else None
    return SchedulePreview(definition, times, plan, pause, catching_up)


def print_preview(preview: SchedulePreview) -> None:
    """Plain lines (a fire time per line, easy to grep and diff)."""
    definition = preview.definition
    title = f"{definition.name}: {definition.timing}"
    times = preview.upcoming
    if times is not None:
        found = len(times.times)
        ends = f": {preview.upcoming_end}" if preview.upcoming_end else ""
        if not times.cut_short:
            click.echo(f"{title}: next {found} fire time{'' if found == 1 else 's'}")
        elif found:
            s = "" if found == 1 else "s"
            click.echo(f"{title}: only {found} fire time{s} left ({times.asked} asked){ends}")
        else:
            click.echo(f"{title}: no fire times left{ends}")
        _note(preview.upcoming_pause)
        width = len(str(found))
        for i, t in enumerate(times.times, 1):
            note = f"  ({t.note})" if t.note else ""
            click.echo(f"  {i:>{width}}  {t.local:<28} {t.utc}{note}")
    plan = preview.outage
    if plan is not None:
        window = (
            "no window"
            if definition.window is None
            else f"window {_fmt_duration(definition.window)}"
        )
        limit = f", max_runs {definition.max_runs}" if definition.max_runs else ""
        missed = "an uncounted number of" if plan.missed is None else str(plan.missed)
        click.echo(
            f"{title}: down from {_utc(plan.down)} to {_utc(plan.back)}, {missed} "
            f"tick{'' if plan.missed == 1 else 's'} missed "
            f"(catch-up policy {definition.catchup}, {window}{limit})"
        )
        _note(preview.outage_pause)
        if not plan.fires:
            click.echo("  fires nothing on return")
        for t, trigger in plan.fires:
            note = f"  ({t.note})" if t.note else ""
            click.echo(f"  fires {t.local:<28} {t.utc}  [{trigger}]{note}")
        _note(preview.outage_overlap)
        for skip in plan.skips:
            first, last = skip.first.local, skip.last.local
            span = first if first == last else f"{first} .. {last}"
            count = "?" if skip.count is None else skip.count
            click.echo(f"  skips {span}  ({count}: {skip.reason})")
        _note(preview.outage_end)


def _note(text: str) -> None:
    if text:  # a pause note is an operator's text: shown, never obeyed by the terminal
        click.echo(f"  ({visible(text)})")


def _utc(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
