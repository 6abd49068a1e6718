"""``flows run``, ``flows status``, ``flows runs``: submit a flow and follow runs.

``flows status`` and ``flows runs`` only read: the flow model, the submission and the local
worker are imported by the commands that use them, so the readers start in a fraction of the
time."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from flows import gc_pause
from flows.cli.common import ago, console, err_console, open_client, print_json, table, user_errors
from flows.cli.logs import print_tail, stream_run
from flows.cli.options import as_json, connection, logical_time, param
from flows.cli.options import run_id as run_id_option
from flows.cli.signal import print_awaiting
from flows.runs import RunView, list_runs, load_run
from scheduler.engine.client import Client

STATUS_STYLE = {
    "success": "green",
    "succeeded": "green",
    "failed": "red",
    "expired": "red",
    "upstream_failed": "red",
    "running": "yellow",
    "waiting": "dim",
    "awaiting": "yellow",
    "buried": "yellow",
    "skipped": "cyan",
    "canceled": "magenta",
    "gone": "dim",
}
"""Styles of the status words (flows.runs); any other word is shown plain."""


SHUTDOWN_GRACE = 5.0
"""Seconds the local worker of `flows run` gives running jobs after Ctrl-C."""
INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells use."""


def register(group: click.Group) -> None:
    for command in (run, status, runs):
        group.add_command(command)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}s"


def styled(word: str) -> Text:
    """A status word in its style, as text (never read as markup)."""
    return Text(word, style=STATUS_STYLE.get(word, ""))


def render_run(view: RunView) -> Table | Group:
    """The run's steps as a table: status, progress, attempts, duration; then the runs it is
    linked to (its parent, its sub-flow steps' child runs)."""
    out = Table(
        title=Text.assemble(f"Run {view.run_id} ", styled(view.status)),
        title_justify="left",
        header_style="bold",
    )
    for column in ("step", "status", "jobs done", "attempts", "duration"):
        out.add_column(column)
    for step in view.steps:
        out.add_row(
            Text(step.step),
            styled(step.status),
            step.progress,
            str(step.attempts) if step.attempts else "",
            _seconds(step.duration),
        )
    links = [f"step {step.step}: child run {step.child}" for step in view.steps if step.child]
    parent = view.record.get("parent_run")
    if parent:
        links.insert(0, f"child run of {parent} (step {view.record.get('parent_step', '')})")
    return Group(out, Text("\n".join(links))) if links else out


def _print_failures(client: Client, view: RunView) -> None:
    for job in view.failed_jobs:
        failure = job.failure or {}
        err_console.print(
            Text.assemble((job.jid, "bold red"), f" {job.state}: {failure.get('group', '')}")
        )
        message = str(failure.get("message", "")).strip().splitlines()[-8:]
        err_console.print("\n".join("    " + line for line in message), markup=False)
        print_tail(client, job.jid)


def _follow(
    client: Client, run_id: str, queues: list[str], threads: int, live: bool, logs: bool = False
) -> tuple[RunView, bool]:
    """Run a local worker on the run's queues until the run has finished or Ctrl-C (printing
    the steps' lines as they come with ``logs``, else a live table); returns the run as it is
    then and whether it was interrupted."""
    from rich.live import Live

    from flows.worker_hook import prepare
    from scheduler.worker import Worker
    from scheduler.worker.imports import import_path

    import_path()  # job modules beside where `flows run` was started, as in every worker mode
    worker = Worker(
        Client.from_engine(client.engine),
        queues,
        threads=threads,
        prepare=prepare,
        poll_interval=0.5,
        shutdown_grace=SHUTDOWN_GRACE,
    )
    thread = threading.Thread(target=worker.run, name="flows-run-worker", daemon=True)
    thread.start()
    view = load_run(client, run_id)
    assert view is not None
    interrupted = False
    try:
        if logs:
            stream_run(client, run_id)
            view = load_run(client, run_id) or view
            console.print(render_run(view))
            return view, False
        with Live(render_run(view), console=console, auto_refresh=False, transient=False) as screen:
            while not view.finished:
                time.sleep(0.2)
                view = load_run(client, run_id) or view
                if live:
                    screen.update(render_run(view), refresh=True)
            screen.update(render_run(view), refresh=True)
        if not console.is_terminal:
            console.line()  # Live leaves the last frame without its newline when piped
    except KeyboardInterrupt:
        interrupted = True
        err_console.print(
            f"stopping: running jobs get {SHUTDOWN_GRACE:g}s to finish, then wait again",
            markup=False,
        )
    finally:
        worker.stop()
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            thread.join(timeout=SHUTDOWN_GRACE + 5)
    if interrupted:
        view = load_run(client, run_id) or view
    return view, interrupted


def work_run(
    client: Client, run_id: str, queues: list[str], threads: int, logs: bool = False
) -> int:
    """Work the run here with a live view (or its steps' lines, with ``logs``) until it ends;
    the exit code: 0 when it succeeded, 1 when not, :data:`INTERRUPTED` after Ctrl-C (saying
    how to resume or cancel it)."""
    view, interrupted = _follow(client, run_id, queues, threads, sys.stdout.isatty(), logs)
    if interrupted:
        done = sum(1 for s in view.steps if s.status in ("success", "skipped"))
        click.echo(
            f"interrupted: run {run_id} is {view.status} ({done} of {len(view.steps)} steps "
            "done; unfinished jobs wait in their queues)\n"
            f"  resume it here:       flows retry {run_id}\n"
            f"  or with workers:      flows worker -q {','.join(queues)}\n"
            f"  cancel what is left:  flows cancel {run_id}",
            err=True,
        )
        return INTERRUPTED
    if view.status != "succeeded":
        _print_failures(client, view)
        click.echo(f"run {run_id} {view.status}", err=True)
        return 1
    click.echo(f"run {run_id} succeeded", err=True)
    return 0


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@param
@logical_time
@run_id_option("<flow>@<UTC now>-<random>, e.g. etl@20250131T020000Z-3f9a1c")
@click.option("--detach", is_flag=True, help="Submit and return; long-lived workers run it.")
@click.option("--logs", is_flag=True, help="Print every step's lines as they come.")
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Jobs at once in the local worker.",
)
@connection
def run(
    file: Path,
    params: tuple[str, ...],
    logical_time: datetime | None,
    run_id: str | None,
    detach: bool,
    logs: bool,
    threads: int,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Validate FILE, submit a run, and (unless --detach) run it here until it ends.

    Exit code 0 when every step succeeded, 1 when the run failed or the file is invalid, 130
    after Ctrl-C (the run stays as it is: resume it with `flows retry RUN`).
    """
    from flows.params import parse_assignments
    from flows.run_builder import build_run, read_flow_file
    from flows.run_specs import manual_run_id
    from flows.submit import submit
    from flows.validate import InvalidFlow

    gc_pause.enable()  # loading and expanding happen before the local worker's threads start
    try:
        flow_file = read_flow_file(file)
    except InvalidFlow as invalid:
        for finding in invalid.findings:
            click.echo(finding.format(), err=True)  # plain: file:line:col must never wrap
        raise click.exceptions.Exit(1) from None
    moment = logical_time or datetime.now(UTC)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    run_id = run_id or manual_run_id(flow_file.flow.name)
    with user_errors():  # bad params, an expansion the flow cannot make, an engine limit
        built = build_run(
            flow_file,
            run_id=run_id,
            logical_time=moment,
            params=parse_assignments(params),
            trigger="manual",
        )
    client = open_client(redis_url, namespace)
    with user_errors():
        submission = submit(client, built)
    if submission.created:
        click.echo(f"submitted run {run_id} ({submission.jobs} jobs)", err=True)
    else:
        click.echo(f"run {run_id} exists already: nothing submitted", err=True)
    if detach:
        click.echo(run_id)
        return
    with user_errors():
        sys.exit(work_run(client, run_id, list(built.queues), threads, logs))


@click.command()
@click.argument("run_id", required=False)
@as_json
@connection
def status(run_id: str | None, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """A run's steps (the latest run when RUN_ID is left out)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if run_id is None:
            latest = list_runs(client, count=1)
            if not latest:
                raise click.ClickException("no runs yet: start one with `flows run FILE`")
            run_id = str(latest[0]["id"])
        view = load_run(client, run_id)
    if view is None:
        raise click.ClickException(f"no run {run_id!r} (see `flows runs`)")
    if as_json:
        print_json(
            {
                "id": view.run_id,
                "status": view.status,
                "record": view.record,
                "steps": [
                    {
                        "step": s.step,
                        "status": s.status,
                        "jobs": s.jids,
                        "started": s.started,
                        "finished": s.finished,
                        "duration": s.duration,
                        "attempts": s.attempts,
                        "child": s.child,
                    }
                    for s in view.steps
                ],
            }
        )
        return
    console.print(render_run(view))
    print_awaiting(client, view)
    if view.status == "failed":
        _print_failures(client, view)


@click.command()
@click.option("--flow", help="Only runs of this flow.")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="Show at most this many runs.",
)
@as_json
@connection
def runs(
    flow: str | None, limit: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Recent runs, newest first."""
    client = open_client(redis_url, namespace)
    with user_errors():
        records = list_runs(client, flow, limit)
        views = [load_run(client, str(r["id"])) for r in records]
    if as_json:
        print_json(
            [
                {**r, "status": v.status if v else "unknown"}
                for r, v in zip(records, views, strict=True)
            ]
        )
        return
    rows = [
        [
            r["id"],
            r.get("flow", ""),
            styled(v.status) if v else "",
            r.get("trigger", ""),
            ago(r.get("submitted")),
            r.get("jobs", ""),
        ]
        for r, v in zip(records, views, strict=True)
    ]
    table("Runs", ("run", "flow", "status", "trigger", "submitted", "jobs"), rows)
