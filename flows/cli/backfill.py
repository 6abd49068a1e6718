"""``flows backfill FLOW --from DATE --to DATE``, ``flows backfills [ID]``.

Canceling one is ``flows cancel --backfill ID`` (:mod:`flows.cli.jobs`). Exit codes: 2 for a
--from or --to that is no date or ends the range before it starts, 1 on other bad input (nothing
stored) or an unknown backfill.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from flows.cli.common import ago, open_client, print_json, table, user_errors, when
from flows.cli.options import as_json, bad_params, connection, id_argument, param
from flows.cli.terminal import visible
from flows.flowfile.params import ParamError, parse_assignments
from flows.runs.backfill import (
    DATE_FORMATS,
    DEFAULT_MAX_ACTIVE,
    MAX_TICKS,
    BackfillError,
    Plan,
    check_build,
    check_range,
    parse_moment,
    plan,
    resolve,
    start,
    with_params,
)
from flows.validation.validate import InvalidFlow
from scheduler.engine.client import Client
from scheduler.service.backfills import MAX_ACTIVE_LIMIT, MISSING, Backfill, Backfills
from scheduler.service.loop import check_health
from scheduler.service.schedules import Schedules


def register(group: click.Group) -> None:
    group.add_command(backfill)
    group.add_command(backfills)


@click.command()
@click.argument("flow")
@click.option(
    "--from",
    "start_text",
    required=True,
    metavar="DATE",
    help=f"First moment of the range ({DATE_FORMATS}; without an offset in the schedule's "
    "time zone).",
)
@click.option(
    "--to",
    "end_text",
    required=True,
    metavar="DATE",
    help="Last moment of the range, included (a date alone: the whole day). Ticks after now "
    "are left to the schedule.",
)
@click.option(
    "--max-active",
    type=click.IntRange(1, MAX_ACTIVE_LIMIT),
    default=DEFAULT_MAX_ACTIVE,
    show_default=True,
    help="At most this many of the backfill's runs active at once (the flow's "
    "concurrency.max_active_runs also holds).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List the ticks: which already ran, which have a canceled run to resume, which are "
    "new; store nothing.",
)
@param
@as_json
@connection
def backfill(
    flow: str,
    start_text: str,
    end_text: str,
    max_active: int,
    dry_run: bool,
    params: tuple[str, ...],
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run FLOW once per schedule tick from --from to --to (a flow file, or a registered flow's
    name). Each run has its tick's logical time and the run id the schedule gives that tick,
    so a tick that already ran is not run again; a tick whose run was canceled is resumed (as
    `flows retry RUN` resumes it). The first runs start now; the scheduler service submits the
    rest as runs finish. `-p` gives every run a param, over the schedule's."""
    try:
        given = parse_assignments(params)
    except ParamError as error:
        raise bad_params(error) from None
    client = open_client(redis_url, namespace)
    with user_errors():
        now = client.engine.server_time()
        ticks = _planned(client, flow, (start_text, end_text), given, now, dry_run)
        if dry_run:
            _dry_run(client, ticks, as_json)
            return
        try:
            backfill_id, _ = start(client, ticks, max_active, now)  # builds the first run
        except BackfillError as error:
            raise click.ClickException(str(error)) from None
        except ParamError as error:
            raise bad_params(error) from None
        healthy, _ = check_health(Schedules(client), now)
        made = Backfills(client).get(backfill_id)
    if made is None:  # dropped by hand meanwhile
        raise click.ClickException(f"backfill {backfill_id} is gone")
    if as_json:
        print_json({**made.as_json(), "scheduler_running": healthy})
        return
    _started(made, ticks, healthy)


def _planned(
    client: Client,
    flow: str,
    texts: tuple[str, str],
    given: dict[str, str],
    now: float,
    dry_run: bool,
) -> Plan:
    """The ticks of ``flow`` from ``texts`` (--from, --to); for a dry run, its first run built
    to refuse what no run of it could be (:func:`start` builds it otherwise): exit 2 for dates
    and params, 1 for the rest."""
    try:
        target = with_params(resolve(client, flow, now), given)
        zone = target.zone
        try:  # --from and --to that are no dates, or out of order: usage errors (exit 2)
            first = parse_moment(texts[0], zone, option="--from")
            last = parse_moment(texts[1], zone, option="--to", end=True)
            check_range(first, last, zone)
        except BackfillError as error:
            raise click.UsageError(str(error)) from None
        ticks = plan(target, first, last, now)
        if dry_run:
            check_build(ticks)
    except InvalidFlow as invalid:
        for finding in invalid.findings:
            click.echo(visible(finding.format()), err=True)
        raise click.exceptions.Exit(1) from None
    except BackfillError as error:
        raise click.ClickException(str(error)) from None
    except ParamError as error:
        raise bad_params(error) from None
    return ticks


def _started(made: Backfill, ticks: Plan, healthy: bool) -> None:
    err = sys.stderr
    click.echo(
        f"backfill {made.id}: {made.total} tick(s) of {made.flow} from "
        f"{ticks.local(made.first)} to {ticks.local(made.last)}",
        file=err,
    )
    if ticks.clamped:
        click.echo("  (ticks after now are left to the schedule)", file=err)
    click.echo(
        f"submitted {made.submitted} run(s) now"
        + (f", resumed {made.resumed} canceled run(s)" if made.resumed else "")
        + (f", {made.existed} tick(s) had run already" if made.existed else "")
        + (f", {made.failed} could not be submitted" if made.failed else "")
        + f"; at most {_limit(made.max_active, made.flow_max)} active at once",
        file=err,
    )
    if made.state == "done":
        click.echo("every tick is handled: nothing is left to submit", file=err)
    elif made.pending:
        click.echo(
            f"the scheduler service submits the other {made.pending} as runs finish"
            + ("" if healthy else " (no scheduler service is running: start `flows scheduler`)"),
            file=err,
        )
    if made.state != "done":
        click.echo(f"  progress:  flows backfills {made.id}", file=err)
        click.echo(f"  cancel:    flows cancel --backfill {made.id}", file=err)
    click.echo(made.id)


def _dry_run(client: Client, ticks: Plan, as_json_output: bool) -> None:
    run_ids = ticks.run_ids
    statuses = Backfills(client).run_statuses(run_ids)
    rows: list[dict[str, Any]] = [
        {
            "tick": tick,
            "local": ticks.local(tick),
            "run_id": run_id,
            "status": status,
            "runs": status in (MISSING, "canceled"),
            "resume": status == "canceled",
        }
        for tick, run_id, status in zip(ticks.ticks, run_ids, statuses, strict=True)
    ]
    to_run = sum(1 for r in rows if r["runs"])
    to_resume = sum(1 for r in rows if r["resume"])
    if as_json_output:
        print_json(
            {"flow": ticks.target.name, "ticks": rows, "to_run": to_run, "to_resume": to_resume}
        )
        return
    resumed = f", {to_resume} of them canceled runs to resume" if to_resume else ""
    table(
        f"{ticks.target.name}: {len(rows)} tick(s), {to_run} to run{resumed} "
        "(dry run: nothing stored)",
        ["run id", "tick", "run"],
        [[r["run_id"], r["local"], _dry_run_word(r)] for r in rows],
    )
    if ticks.clamped:
        click.echo("(ticks after now are left to the schedule)", err=True)


def _dry_run_word(row: dict[str, Any]) -> str:
    if row["resume"]:
        return "resume (canceled)"
    return "new" if row["runs"] else f"exists ({row['status']})"


def _limit(max_active: int, flow_max: int) -> str:
    if flow_max and flow_max < max_active:
        return f"{flow_max} (the flow's max_active_runs)"
    return str(max_active)


def _row(b: Backfill) -> list[Any]:
    return [
        b.id,
        b.state,
        f"{b.next}/{b.total}",
        f"{len(b.active)}/{_limit(b.max_active, b.flow_max).split()[0]}",
        ago(b.created),
    ]


@click.command()
@id_argument("backfill_id", "backfill id", kind="id", required=False, metavar="[ID]")
@as_json
@connection
def backfills(
    backfill_id: str | None, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Backfills, newest first (or one, ID): how many ticks are handled, runs submitted,
    canceled runs resumed, ticks that had run already, runs active."""
    client = open_client(redis_url, namespace)
    with user_errors():
        store = Backfills(client)
        if backfill_id is None:
            found = store.recent()
        else:
            one = store.get(backfill_id)
            if one is None:
                raise click.ClickException(f"no backfill {backfill_id} (see `flows backfills`)")
            found = [one]
    if as_json:
        print_json([b.as_json() for b in found] if backfill_id is None else found[0].as_json())
        return
    if not found:
        click.echo(
            "no backfills (start one with `flows backfill FLOW --from DATE --to DATE`)", err=True
        )
        return
    table(
        None,
        ["id", "state", "ticks", "active", "created"],
        [_row(b) for b in found],
    )
    if backfill_id is not None:
        b = found[0]
        click.echo(
            f"  {b.total} tick(s) of {b.flow}: {b.submitted} run(s) submitted, {b.resumed}"
            f" canceled run(s) resumed, {b.existed} had run already, {b.failed} could not be"
            f" submitted, {b.pending} pending"
        )
        if b.params:
            given = " ".join(f"{name}={_shown(value)}" for name, value in b.params.items())
            click.echo(visible(f"  params: {given}"))
        for run_id in b.active:
            click.echo(f"  active: {run_id}")
        if b.last_error:
            click.echo(f"  last error: {b.last_error}")
        if b.canceled:
            click.echo(f"  canceled {when(b.canceled)}")


def _shown(value: Any) -> str:
    """A param as ``-p`` takes it: text as itself, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


__all__ = ["MAX_TICKS", "backfill", "backfills", "register"]
