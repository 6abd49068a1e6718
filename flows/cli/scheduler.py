"""``flows scheduler`` (the service), ``flows schedules``, ``flows schedule ACTION NAME``.

Exit codes: ``flows scheduler --health`` 0 when healthy, 1 when not; ``--once`` 1 when a file
under --flows-dir could not be loaded (its findings printed as ``flows validate`` prints them)
or a schedule could not be handled; ``flows scheduler`` 78 (``EXIT_CONFIG``) when the server's
engine library is not this release's (:class:`ForeignEngine`) or the server refuses its login or
a permission; the others 1 on an error (an
unknown schedule, say).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

import click

from flows.cli.common import (
    GuardedCommand,
    ago,
    open_client,
    print_json,
    report,
    table,
    unless_unworkable,
    user_errors,
)
from flows.cli.namespaces import namespaces_of, run_per_namespace
from flows.cli.notifications import env_file_option, notify_deliverer
from flows.cli.options import (
    FiniteFloat,
    as_json,
    checked_value,
    connection,
    id_argument,
    log_level_option,
    one_line,
)
from flows.cli.preview import SchedulePreview, print_preview
from flows.cli.preview import build as build_preview
from flows.cli.preview import options as preview_options
from flows.cli.terminal import visible
from flows.flowfile.findings import Finding
from flows.runs.service_source import FlowsSource
from flows.runs.trigger import trigger_run
from scheduler.cron import InvalidSchedule, Skip
from scheduler.engine.client import Client
from scheduler.engine.doctor import ScheduledCheck
from scheduler.service.loop import (
    Fired,
    OnceReport,
    SchedulerService,
    check_health,
)
from scheduler.service.records import LIVE_TICK_AGE, Registration
from scheduler.service.scanning import ScanReport, default_origin
from scheduler.service.schedules import Schedules
from scheduler.terminal import log_to_stderr

#: Tests only: the step at which the service stops dead (see SchedulerService).
FAILPOINT_ENV = "FLOWS_SCHEDULER_FAILPOINT"


def register(group: click.Group) -> None:
    group.add_command(scheduler_command)
    group.add_command(schedules)
    group.add_command(schedule)


def _setup_logging(level: str) -> None:
    # The lines name schedules, files and their findings: text of flow files, shown as text.
    log_to_stderr(level.upper(), "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    # APScheduler reports each run of each step at INFO, and a tick still running at the next
    # interval as a WARNING: both are normal here.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)


def _print_once(report: OnceReport, as_json_output: bool) -> None:
    tick = report.tick
    if as_json_output:
        print_json(
            {
                "now": tick.now,
                "registered": report.scan.registered,
                "updated": report.scan.updated,
                "unregistered": report.scan.unregistered,
                "invalid": report.scan.invalid,
                "findings": [finding.to_dict() for finding in _findings(report.scan)],
                "fired": [_fired(f) for f in tick.fired],
                "skipped": [{"schedule": name, **_skip(skip)} for name, skip in tick.skipped],
                "buffered": [{"schedule": n, "tick": t} for n, t in tick.buffered],
                "conflicts": tick.conflicts,
                "errors": tick.errors,
                "housekeeping": report.housekeeping.__dict__,
                "retention": report.retention.__dict__,
                "backfills": {
                    "submitted": report.backfills.submitted,
                    "resumed": report.backfills.resumed,
                    "existed": report.backfills.existed,
                    "failed": report.backfills.failed,
                },
            }
        )
        return
    # Names, files and findings come from flow files: each line shown by visible().
    for fired in tick.fired:
        # A run made already (reply 'exists') is no second fire of its tick: said so, as the
        # service's log says it.
        already = " (the run existed already)" if fired.outcome == "exists" else ""
        click.echo(visible(f"fired {fired.name} {fired.run_id} ({fired.trigger}){already}"))
    for name, skip in tick.skipped:
        click.echo(visible(f"skipped {name} {skip.count or '?'} tick(s): {skip.reason}"))
    for name, at in tick.buffered:
        click.echo(visible(f"buffered {name} tick {at:.0f}"))
    for run_id in report.backfills.submitted:
        click.echo(visible(f"backfill submitted {run_id}"))
    for run_id in report.backfills.resumed:
        click.echo(visible(f"backfill resumed {run_id}"))


def _findings(scan: ScanReport) -> list[Finding]:
    """The findings of the files the scan found not to validate, file by file."""
    return [finding for file in scan.invalid for finding in _file_findings(scan, file)]


def _file_findings(scan: ScanReport, file: str) -> list[Finding]:
    """A file's findings as `flows validate` gives them: the scan's, else what validate's own
    reader says of the file (the service reads files itself: one it could not read as UTF-8
    text has no findings of its own). None for a file that reads well: its scan line says why
    it was not registered (a flow another file schedules)."""
    found = [f for f in scan.findings.get(file, ()) if isinstance(f, Finding)]
    if found:
        return found
    from flows.flowfile.yaml_reader import load_file

    try:
        return list(load_file(Path(file)).findings)
    except OSError:  # unreadable to validate too (permissions): the scan's line says why
        return []


def _print_invalid(scan: ScanReport) -> None:
    """On stderr, what kept each file the scan could not load from being registered: a flow
    file's findings as `flows validate` prints them, another reason (a flow another file or
    source schedules, an unreadable file) in one line, one error each in the summary line."""
    if not scan.invalid:
        return
    from flows.cli.validate import print_findings, summary

    others = 0
    for file, why in scan.invalid.items():
        findings = _file_findings(scan, file)
        if findings:
            print_findings(findings, stderr=True)
        else:  # names and paths come from flow files: shown by visible()
            others += 1
            click.echo(visible(why if why.startswith(f"{file}:") else f"{file}: {why}"), err=True)
    click.echo(summary(_findings(scan), scan.files, other_errors=others), err=True)


def _fired(fired: Fired) -> dict[str, Any]:
    return {
        "schedule": fired.name,
        "run_id": fired.run_id,
        "tick": fired.tick,
        "trigger": fired.trigger,
        "outcome": fired.outcome,
    }


def _skip(skip: Skip) -> dict[str, Any]:
    return {"first": skip.first, "last": skip.last, "count": skip.count, "reason": skip.reason}


@click.command("scheduler", cls=GuardedCommand)
@click.option(
    "--flows-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of flow files; those with a schedule are registered (required to run).",
)
@click.option(
    "--source",
    "origin",
    metavar="NAME",
    callback=checked_value("source name", "id"),
    help="The name the folder's schedules are registered under; this service fires only "
    "those (default: the folder's name, so the same checkout at another path is the same "
    "source).",
)
@click.option("--once", is_flag=True, help="Scan, fire what is due, keep house once, and exit.")
@click.option(
    "--health",
    is_flag=True,
    help="Exit 0 if a service (of --source or --flows-dir, when given) ticked recently, else 1.",
)
@click.option(
    "--id",
    "service_id",
    metavar="ID",
    callback=checked_value("service id", "id"),
    help="This service's id for --health (default host-pid; with --once host-once).",
)
@click.option(
    "--max-age",
    type=FiniteFloat(min=0),
    default=LIVE_TICK_AGE,
    show_default=True,
    help="--health: how old the last tick may be, in seconds.",
)
@click.option(
    "--tick-interval",
    type=FiniteFloat(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between looks for due schedules (and health reports).",
)
@click.option(
    "--scan-interval",
    type=FiniteFloat(min=0.05),
    default=10.0,
    show_default=True,
    help="Seconds between scans of --flows-dir for added, changed and removed files.",
)
@click.option(
    "--housekeeping-interval",
    type=FiniteFloat(min=0.05),
    default=5.0,
    show_default=True,
    help="Seconds between promoting due scheduled jobs, spawning recurring jobs and reaping "
    "expired locks.",
)
@click.option(
    "--retention-interval",
    type=FiniteFloat(min=0.05),
    default=300.0,
    show_default=True,
    help="Seconds between drops of completed jobs and finished runs older than jobs-history.",
)
@env_file_option
@click.option(
    "--dashboard-url",
    envvar="FLOWS_DASHBOARD_URL",
    default="",
    help="The dashboard's address, for the links in notifications [env FLOWS_DASHBOARD_URL].",
)
@log_level_option
@click.option(
    "--now", type=FiniteFloat(min=0), hidden=True, help="--once at this epoch time (tests)."
)
@as_json
@connection
def scheduler_command(
    flows_dir: Path | None,
    origin: str | None,
    once: bool,
    health: bool,
    service_id: str | None,
    max_age: float,
    tick_interval: float,
    scan_interval: float,
    housekeeping_interval: float,
    retention_interval: float,
    env_file: Path | None,
    dashboard_url: str,
    log_level: str,
    now: float | None,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """The scheduler service: fire the cron schedules of the flows under --flows-dir.

    The folder's schedules are registered as one source (--source, default the folder's name);
    the service fires those and no other source's, and unregisters a schedule whose file is
    gone from the folder at the next scan. Runs until SIGTERM. Any number of services may run
    at once (run two, on two machines, for safety): each tick fires exactly once. Files
    added, changed or removed are picked up every --scan-interval seconds; a file that does
    not validate is reported (once, and again when it changes) and its schedule stays as it
    was registered. Also promotes
    scheduled jobs, spawns recurring jobs, reaps expired locks and drops old completed jobs and
    runs, even when no worker pops.

    A Functions library on the server that is not this release's engine, or the server refusing
    its login or a permission, found at the start or while it runs, stops it with one line
    saying what to do, exit 78; so does a malformed URL or an unsafe server at the start.

    With --once, a file that does not validate has its findings printed on stderr, as `flows
    validate` prints them, and the exit code is 1 (the other files are registered and fired
    all the same).

    With several namespaces (--namespace a,b) each gets its own service, in a child process.
    """
    several = namespaces_of(namespace)
    if len(several) > 1:
        sys.exit(run_per_namespace(several))
    client = open_client(redis_url, namespace, long_lived=not (health or once))
    if health:
        with user_errors():
            ok, message = check_health(
                Schedules(client),
                client.engine.server_time(),
                service_id=service_id,
                source=origin or (default_origin(flows_dir) if flows_dir else None),
                max_age=max_age,
            )
        click.echo(message)
        sys.exit(0 if ok else 1)
    if flows_dir is None:
        raise click.UsageError("--flows-dir is required (the folder of flow files to schedule)")
    if now is not None and not once:
        raise click.UsageError("--now only goes with --once")
    _setup_logging(log_level)
    if once and service_id is None:
        # One id per host for cron-driven --once runs, so health follows the latest run.
        service_id = f"{socket.gethostname()}-once"
    service = SchedulerService(
        client,
        FlowsSource(),
        flows_dir,
        origin=origin,
        service_id=service_id,
        tick_interval=tick_interval,
        scan_interval=scan_interval,
        housekeeping_interval=housekeeping_interval,
        retention_interval=retention_interval,
        failpoint=os.environ.get(FAILPOINT_ENV) or None,
        # The consistency check (scheduler.engine.doctor): light and repairing every minute, deep
        # hourly.
        checks=[ScheduledCheck(deep_every=60)],
        check_interval=60.0,
        deliverer=notify_deliverer(client, env_file, dashboard_url, origin or flows_dir.name),
        log_invalid=not once,  # --once prints them itself, as `flows validate` does
    )
    with user_errors():
        if once:
            report = service.once(now)
            _print_once(report, as_json)
            _print_invalid(report.scan)
            sys.exit(1 if report.tick.errors or report.scan.invalid else 0)
        with unless_unworkable():  # restarting cannot mend it: an operator must
            service.run()


# --------------------------------------------------------------------------- operating


def _local(when: float | None, registration: Registration) -> str:
    return registration.local(when)


def _next(registration: Registration, now: float) -> str:
    if registration.next is None:
        return "ended"
    return f"{_local(registration.next, registration)} ({ago(registration.next, now)})"


def _paused(registration: Registration) -> str:
    if registration.definition.paused:
        return "yes (in its file)"
    if registration.paused:
        return "yes" + (f" ({registration.pause_note})" if registration.pause_note else "")
    return "no"


def _policy(registration: Registration) -> str:
    d = registration.definition
    return f"catch-up {d.catchup}, overlap {d.overlap}" + (
        f", jitter {d.jitter:g}s" if d.jitter else ""
    )


@click.command()
@as_json
@preview_options
@connection
def schedules(
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
    preview: int | None = None,
    outage: tuple[float, float] | None = None,
) -> None:
    """Registered schedules: next fire time in their time zone, last run, policy, paused.

    With --preview N or --after-outage FROM/TO, what each schedule will do (with --json, as each
    schedule's `preview` and `after_outage`)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        now = client.engine.server_time()
        registrations = Schedules(client).all()
    previews = {
        r.name: _preview(r, now, preview, outage) for r in registrations if preview or outage
    }
    if as_json:
        # With --preview or --after-outage, each schedule's also has `preview`, `after_outage`
        # (or `not_previewed`: why its definition cannot be).
        print_json(
            [
                r.as_json() | (_preview_json(previews[r.name]) if r.name in previews else {})
                for r in registrations
            ]
        )
        return
    if not registrations:
        click.echo(
            "no schedules: start `flows scheduler --flows-dir DIR` on a folder of flows", err=True
        )
        return
    rows = [
        [
            r.name,
            r.definition.timing,
            _next(r, now),
            r.last_run or "",
            "" if r.last_run is None else r.last_run_status,
            _policy(r),
            _paused(r),
        ]
        for r in registrations
    ]
    table("Schedules", ("schedule", "cron", "next", "last run", "state", "policy", "paused"), rows)
    for name, shown in previews.items():
        if isinstance(shown, str):
            click.echo(f"{name}: not previewed: {shown}")
        else:
            print_preview(shown)


def _preview(
    registration: Registration, now: float, count: int | None, outage: tuple[float, float] | None
) -> SchedulePreview | str:
    """The schedule's preview, or why there is none: a definition registered by an older
    version that today's cron checks refuse (a range that runs backwards, say)."""
    try:
        return build_preview(
            registration.definition,
            now,
            count,
            outage,
            paused=registration.paused,
            pause_note=registration.pause_note,
        )
    except InvalidSchedule as error:
        return f"{error}; fix its file (the scheduler reports it at each scan)"


def _preview_json(preview: SchedulePreview | str) -> dict[str, Any]:
    return {"not_previewed": preview} if isinstance(preview, str) else preview.to_json()


@click.group()
def schedule() -> None:
    """Act on one schedule: pause, resume, trigger, show, remove."""


def _get(client: Client, name: str, skips: int = 0) -> Registration:
    schedules = Schedules(client)
    registration = schedules.get(name, skips=skips)
    if registration is None:
        raise _unknown(name, schedules)
    return registration


def _unknown(name: str, schedules: Schedules) -> click.ClickException:
    """No schedule ``name``: with the one likely meant, as `flows sources remove` says it."""
    from flows.flowfile.findings import did_you_mean

    hint = did_you_mean(name, schedules.index())
    return click.ClickException(
        f"no schedule {name!r}" + (f"; {hint}" if hint else "") + " (see `flows schedules`)"
    )


@schedule.command()
@id_argument("name", "schedule name")
@click.option(
    "--note", default="", callback=one_line, help="Why, on one line (shown by `flows schedules`)."
)
@as_json
@connection
def pause(
    name: str, note: str, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Stop firing NAME: its ticks are skipped (reason 'paused') until resumed."""
    client = open_client(redis_url, namespace)
    with user_errors():
        _get(client, name)
        Schedules(client).pause(name, note)
    report(as_json, f"paused {name}", {"name": name, "paused": True, "note": note})


@schedule.command()
@id_argument("name", "schedule name")
@as_json
@connection
def resume(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Fire NAME again from its next tick (ticks due while paused stay skipped)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        _get(client, name)
        outcome = Schedules(client).resume(name, client.engine.server_time())
    text = f"resumed {name}" if outcome == "resumed" else f"{name} was not paused"
    report(as_json, text, {"name": name, "paused": False, "outcome": outcome})


@schedule.command()
@id_argument("name", "schedule name")
@as_json
@connection
def trigger(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Run NAME now with its schedule's params (a manual run; the ticks are unchanged)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        _get(client, name)
        try:
            triggered = trigger_run(client, name)
        except ValueError as error:
            raise click.ClickException(f"cannot build a run of {name}: {error}") from None
    run_id = triggered.run_id
    n = triggered.jobs
    click.echo(f"submitted run {run_id} ({n} job{'' if n == 1 else 's'})", err=True)
    if triggered.existed:
        click.echo(f"run {run_id} existed already", err=True)
    report(as_json, run_id, triggered.as_json())


@schedule.command()
@id_argument("name", "schedule name")
@as_json
@connection
def remove(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Unregister NAME: no service fires it any more (its runs and their jobs stay).

    A file in a service's folder that still schedules it registers it again at that
    service's next scan: remove or change the file too.
    """
    client = open_client(redis_url, namespace)
    with user_errors():
        registration = _get(client, name)
        outcome = Schedules(client).unregister(name)
    if outcome != "unregistered":  # removed by someone else meanwhile
        raise _unknown(name, Schedules(client))
    source = registration.definition.origin
    text = f"removed {name}" + (f" (source {source})" if source else "")
    report(as_json, text, {"name": name, "removed": True, "source": source or None})


@schedule.command()
@id_argument("name", "schedule name")
@click.option(
    "--skips",
    type=click.IntRange(0, 100),
    default=20,
    show_default=True,
    help="How many records of skipped ticks to show, newest first.",
)
@as_json
@connection
def show(
    name: str, skips: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """One schedule in full, with its recently skipped ticks and why."""
    client = open_client(redis_url, namespace)
    with user_errors():
        registration = _get(client, name, skips)
        now = client.engine.server_time()
    if as_json:
        print_json(registration.as_json())
        return
    d = registration.definition
    rows = [
        ("source", d.origin or "- (registered without one)"),
        ("file", d.file),
        ("cron", d.timing),
        ("next", _next(registration, now)),
        ("policy", _policy(registration)),
        ("paused", _paused(registration)),
        (
            "last run",
            "- (none yet)"
            if registration.last_run is None
            else f"{registration.last_run} {registration.last_run_status}",
        ),
        (
            "fired / skipped / triggered",
            f"{registration.fired} / {registration.skipped} / {registration.triggered}",
        ),
    ]
    if registration.buffered is not None:
        rows.append(("buffered tick", _local(registration.buffered, registration)))
    table(f"Schedule {name}", ("field", "value"), rows)
    if registration.skips:
        table(
            "Skipped ticks (newest first)",
            ("first", "last", "count", "reason"),
            [
                (
                    _local(s.first, registration),
                    _local(s.last, registration),
                    "?" if s.count is None else s.count,
                    s.reason,
                )
                for s in registration.skips
            ],
        )


__all__ = ["FAILPOINT_ENV", "register", "scheduler_command"]
