"""``flows logs``: the step logs of a run, a step or a job, once or as they come (``-f``)."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from flows.cli.common import open_client, user_errors
from flows.cli.options import connection
from flows.runs import load_run
from flows.steplogs import NoSuchRun, StepLine, follow, run_jobs
from flows.terminal import Sgr, visible
from scheduler.engine import joblogs
from scheduler.engine.client import Client

# How a line's stream shows in text output (--json gives the stream by name).
MARKS = {"stdout": "|", "stderr": "!", "log": "~", "truncated": "…"}
# Lines of a failed job's log printed under its failure.
TAIL_LINES = 20


def register(group: click.Group) -> None:
    group.add_command(logs)


def format_line(item: StepLine, label: bool = True, sgr: Sgr = "escape") -> str:
    """``HH:MM:SS.mmm label | text`` (``!`` for stderr, ``~`` and the level for a record). The
    text shows no control character (:func:`flows.terminal.visible`); ``sgr`` says what becomes
    of its colour sequences."""
    line = item.line
    millis = int(line.time * 1000) % 1000
    stamp = time.strftime("%H:%M:%S", time.localtime(line.time)) + f".{millis:03d}"
    raw = f"{line.level} {line.text}" if line.level else line.text
    text = visible(raw, sgr=sgr)
    if sgr == "keep" and text != raw:
        text += "\x1b[0m"  # a colour left on ends with its line
    who = f" {item.label}" if label else ""
    return f"{stamp}{who} {MARKS.get(line.stream, '?')} {text}"


def echo_line(item: StepLine, as_json: bool, label: bool = True, sgr: Sgr = "escape") -> None:
    if as_json:
        click.echo(json.dumps(item.as_dict(), sort_keys=True))
    else:
        click.echo(format_line(item, label, sgr), color=sgr == "keep")


def colour_sgr(colour: str) -> Sgr:
    """What ``--color`` (auto, always, never) makes of a line's colour sequences: kept for a
    terminal (auto: standard output is one, and ``NO_COLOR`` is unset), else shown as text."""
    if colour == "always":
        return "keep"
    if colour == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        return "keep"
    return "escape"


@click.command()
@click.argument("run_id", metavar="RUN", required=False)
@click.argument("step", required=False)
@click.option("--job", "jid", metavar="JID", help="One job's log (instead of RUN [STEP]).")
@click.option(
    "--attempt", type=click.IntRange(1), help="With --job: this attempt (default: the latest)."
)
@click.option("-f", "--follow", "live", is_flag=True, help="Keep printing lines as they come.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--color",
    "colour",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Pass the lines' colour (SGR) sequences on: auto, to a terminal. Any other control "
    "character is always shown as \\xNN.",
)
@connection
def logs(
    run_id: str | None,
    step: str | None,
    jid: str | None,
    attempt: int | None,
    live: bool,
    as_json: bool,
    colour: str,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """What a run's steps (or one job) wrote: stdout (|), stderr (!), log records (~).

    With -f, lines are printed as they come until the run (or job) has ended.
    """
    if (run_id is None) == (jid is None):
        raise click.UsageError("give a RUN (and optionally a STEP) or --job JID")
    if attempt is not None and jid is None:
        raise click.UsageError("--attempt goes with --job")
    client = open_client(redis_url, namespace)
    sgr = colour_sgr(colour)
    with user_errors():
        if jid is not None:
            _job_logs(client, jid, attempt, live, as_json, sgr)
            return
        assert run_id is not None
        try:
            jobs = run_jobs(client, run_id, step)
        except NoSuchRun as error:
            raise click.ClickException(str(error)) from None

        for item in follow(client, jobs, live=live, stop=lambda: _run_over(client, run_id)):
            echo_line(item, as_json, sgr=sgr)


def _run_over(client: Client, run_id: str) -> bool:
    view = load_run(client, run_id)
    return view is None or view.finished


def _job_logs(
    client: Client, jid: str, attempt: int | None, live: bool, as_json: bool, sgr: Sgr
) -> None:
    if attempt is not None:  # one attempt as stored: no following
        offset = 0
        while True:
            page = joblogs.read(client.engine, jid, attempt, offset)
            for line in page.lines:
                echo_line(StepLine(jid, jid, page.attempt, line), as_json, False, sgr)
            if len(page.lines) < joblogs.PAGE:
                return
            offset = page.next
    client.jobs[jid]
    for item in follow(client, [(jid, jid)], live=live):
        echo_line(item, as_json, False, sgr)


def stream_run(client: Client, run_id: str) -> None:
    """Print every line of the run's steps as it comes, until the run has ended (``flows run
    --logs``)."""
    jobs = run_jobs(client, run_id)
    for item in follow(client, jobs, stop=lambda: _run_over(client, run_id)):
        echo_line(item, as_json=False)


def print_tail(client: Client, jid: str, count: int = TAIL_LINES) -> None:
    """The last lines a failed job wrote, indented, on stderr (``flows run``, ``flows status``)."""
    lines = joblogs.tail(client.engine, jid, count)
    if not lines:
        return
    click.echo(f"    last {len(lines)} log lines of {jid}:", err=True)
    for line in lines:
        click.echo("      " + format_line(StepLine(jid, jid, 0, line), label=False), err=True)
