"""``--preview N`` and ``--after-outage FROM/TO`` of ``flows validate`` and ``flows schedules``:
a schedule's next fire times (zone and UTC, DST notes), and what catch-up fires after an outage
under the flow's policy (:mod:`scheduler.cron.preview`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from scheduler.cron.catchup import _fmt_duration
from scheduler.cron.preview import after_outage, parse_period, preview
from scheduler.service.records import Definition

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
    "skip": "these fire in one tick, so each one after the first is skipped while the first runs",
    "buffer_one": "these fire in one tick: the first runs, the second waits, the rest are skipped",
}


def print_preview(
    definition: Definition, now: float, count: int | None, outage: tuple[float, float] | None
) -> None:
    """Plain lines (a fire time per line, easy to grep and diff)."""
    schedule = definition.schedule
    title = f"{definition.name}: {' | '.join(definition.cron)} ({definition.timezone})"
    if count:
        times = preview(schedule, now, count)
        click.echo(f"{title}: next {len(times)} fire times" if times else f"{title}: none left")
        width = len(str(len(times)))
        for i, t in enumerate(times, 1):
            note = f"  ({t.note})" if t.note else ""
            click.echo(f"  {i:>{width}}  {t.local:<28} {t.utc}{note}")
    if outage is not None:
        plan = after_outage(
            schedule,
            definition.catchup,
            definition.window,
            definition.max_runs,
            outage[0],
            outage[1],
        )
        window = (
            "no window"
            if definition.window is None
            else f"window {_fmt_duration(definition.window)}"
        )
        limit = f", max_runs {definition.max_runs}" if definition.max_runs else ""
        missed = "an uncounted number of" if plan.missed is None else str(plan.missed)
        click.echo(
            f"{title}: down from {_utc(outage[0])} to {_utc(outage[1])}, {missed} "
            f"tick{'' if plan.missed == 1 else 's'} missed "
            f"(catch-up policy {definition.catchup}, {window}{limit})"
        )
        if not plan.fires:
            click.echo("  fires nothing on return")
        for t, trigger in plan.fires:
            note = f"  ({t.note})" if t.note else ""
            click.echo(f"  fires {t.local:<28} {t.utc}  [{trigger}]{note}")
        meets = _OVERLAP_NOTES.get(definition.overlap)
        if len(plan.fires) > 1 and meets:
            # The plan is the catch-up policy's; fired in one tick, the runs then meet the
            # overlap policy one after the other.
            click.echo(f"  (overlap {definition.overlap}: {meets}; only overlap allow fires all)")
        for first, last, n, why in plan.skips:
            span = first if first == last else f"{first} .. {last}"
            click.echo(f"  skips {span}  ({'?' if n is None else n}: {why})")


def _utc(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
