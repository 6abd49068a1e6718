"""``flows logs``: the step logs of a run, a step or a job, once or as they come (``-f``)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

import click

from flows.cli.common import missing_run, open_client, user_errors
from flows.cli.options import connection, id_argument, id_option
from flows.cli.terminal import Sgr, visible
from flows.runs.labels import labelled_jid
from flows.runs.logs import (
    MARKS,
    Follower,
    NoSuchRun,
    StepLine,
    follow,
    job_label,
    of_step,
    run_jobs,
    run_tree_jobs,
    step_jobs,
)
from flows.runs.read import load_run
from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound

# Lines of a failed job's log printed under its failure.
TAIL_LINES = 20


def register(group: click.Group) -> None:
    group.add_command(logs)


def format_line(item: StepLine, label: bool = True, sgr: Sgr = "escape") -> str:
    """``HH:MM:SS.mmm label | text`` (``!`` for stderr, ``~`` and the level for a record). The
    text shows no control character (:func:`flows.cli.terminal.visible`); ``sgr`` says what becomes
    of its colour sequences."""
    line = item.line
    millis = int(line.time * 1000) % 1000
    stamp = time.strftime("%H:%M:%S", time.localtime(line.time)) + f".{millis:03d}"
    raw = f"{line.level} {line.text}" if line.level else line.text
    text = visible(raw, sgr=sgr)
    if sgr == "keep" and text != raw:
        text += "\x1b[0m"  # a colour left on ends with its line
    if line.cut:
        text += f" … [{line.cut:,} bytes cut]"
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


def _lines(count: int) -> str:
    return f"{count:,} line" + ("" if count == 1 else "s")


class Printer:
    """Prints lines as they come, with a header where a job's next attempt starts (and, with
    ``headers``, before every job attempt), and at the end what each attempt dropped."""

    def __init__(
        self, as_json: bool, label: bool = True, headers: bool = False, sgr: Sgr = "escape"
    ) -> None:
        self.as_json = as_json
        self.sgr = sgr
        self.label = label
        self.headers = headers
        self._last: tuple[str, int] | None = None
        self.printed = 0

    def line(self, item: StepLine) -> None:
        self.printed += 1
        where = (item.jid, item.attempt)
        if not self.as_json and where != self._last and (self.headers or item.attempt > 1):
            click.echo(f"── {visible(self._who(item.label, item.jid))} · attempt {item.attempt} ──")
        self._last = where
        echo_line(item, self.as_json, self.label, self.sgr)

    def _who(self, label: str, jid: str) -> str:
        """How a job is named in a header: by its label among a run's jobs, by its jid when
        the lines are one job's (``--job``)."""
        return label if self.label else jid

    def silent(self, what: str, attempt: int | None) -> None:
        """Say, on stderr, that what was asked for has no line (the attempt ran: `--attempt`
        was checked against the attempts made): an empty output is no answer."""
        if self.printed:
            return
        if attempt is not None:
            click.echo(f"{what}: attempt {attempt} wrote no lines", err=True)
        else:
            click.echo(f"{what}: no lines", err=True)

    def dropped(self, follower: Follower) -> None:
        """Say, on stderr, which attempts kept fewer lines than they wrote."""
        for (jid, attempt), (label, dropped, cut) in sorted(follower.attempts.items()):
            if dropped:
                whole = dropped - cut
                parts = [f"{_lines(whole)} dropped"] if whole else []
                parts += [f"{_lines(cut)} cut short"] if cut else []
                who = visible(self._who(label, jid))
                click.echo(f"{who} attempt {attempt}: {', '.join(parts)}", err=True)


@click.command()
@id_argument("run_id", "run id", metavar="RUN", required=False)
@click.argument("step", required=False)
@id_option(
    "--job",
    "jid",
    what="job id",
    labels=True,
    metavar="JID",
    help="One job's log (instead of RUN [STEP]); RUN:STEP/CHILD-STEP for a child run's job.",
)
@click.option(
    "--attempt", type=click.IntRange(1), help="Only this attempt (default: every attempt)."
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
    """What a run's steps (or one job) wrote: stdout (|), a Python step's stderr (!), log
    records (~), every attempt of each job (a header where one starts).

    A shell step's stdout and stderr share one pipe, so its lines keep the order it wrote them
    in and all show as stdout (|); only what a Python step writes to sys.stderr is marked !.

    STEP is a step of RUN (its items too, and the steps of the child run it started) or, as
    the lines of a child run's step are labelled, STEP/CHILD-STEP.

    With -f, lines are printed as they come until the run (or job) has ended. With -f and
    --attempt N, an attempt not started yet is waited for while it may still come (the job
    waits for a retry or runs an earlier attempt); a job that ends before it is an error.
    """
    if (run_id is None) == (jid is None):
        raise click.UsageError("give a RUN (and optionally a STEP) or --job JID")
    sgr = colour_sgr(colour)
    client = open_client(redis_url, namespace)
    with user_errors():
        if jid is not None:
            jid = labelled_jid(client, jid)
            joblogs.read(client.engine, jid, None, 0, 1)  # JobNotFound: no job, no kept log
            jobs = [(job_label(client, jid), jid)]
            waits = _check_attempt(client, jobs, attempt, f"job {jid}", live=live)
            printer = Printer(as_json, label=False, headers=True, sgr=sgr)
            follower = Follower(client, jobs, live=live, attempt=attempt)
            for item in follow(client, follower, live=live):
                printer.line(item)
            if waits:
                _check_attempt(client, jobs, attempt, f"job {jid}", live=live, ended=True)
            printer.silent(f"job {jid}", attempt)
            printer.dropped(follower)
            return
        assert run_id is not None
        try:
            jobs = run_jobs(client, run_id) if step is None else step_jobs(client, run_id, step)
        except NoSuchRun as error:
            raise missing_run(error) from None
        what = f"step {step}" if step else f"run {run_id}"
        made = _attempts_made(client, run_id, step)
        waits = _check_attempt(client, jobs, attempt, what, made=made, live=live)
        printer = Printer(as_json, headers=step is not None, sgr=sgr)
        follower = Follower(client, jobs, live=live, attempt=attempt)

        def more() -> list[tuple[str, str]]:  # a fan-out's items, child runs' jobs: made later
            jobs = run_tree_jobs(client, run_id)
            if step is None:
                return jobs
            return [(label, j) for label, j in jobs if of_step(label, step)]

        for item in follow(
            client, follower, live=live, stop=lambda: _run_over(client, run_id), more=more
        ):
            printer.line(item)
        if waits:
            made = _attempts_made(client, run_id, step)
            _check_attempt(client, more(), attempt, what, made=made, live=live, ended=True)
        printer.silent(what, attempt)
        printer.dropped(follower)


def _attempts_made(client: Client, run_id: str, step: str | None) -> int:
    """The most attempts a step of the run (``step``, or any) made, as `flows status` counts
    them: one read of the run, without its jobs."""
    view = load_run(client, run_id, limit=0)
    if view is None:
        return 0
    return max((s.attempts for s in view.steps if step in (None, s.step)), default=0)


# How a job that ended before an attempt ended, by its state (a gone job: "ended").
ENDINGS = {
    "complete": "completed",
    "failed": "failed for good",
    "canceled": "was canceled",
    "expired": "expired",
    "buried": "was buried",
}


def _attempts(count: int) -> str:
    return f"{count} attempt{'s' if count != 1 else ''}"


def _check_attempt(
    client: Client,
    jobs: list[tuple[str, str]],
    attempt: int | None,
    what: str,
    made: int = 0,
    *,
    live: bool = False,
    ended: bool = False,
) -> bool:
    """Refuse an ``--attempt`` none of the jobs made. An attempt counts once the job started
    it (its ``runs``, the attempts `flows status` shows: ``made`` when the run's read gave
    them), whether or not it wrote a line; a job its run's cancel deleted counts the attempts
    its kept logs have. Each job is looked at only when ``made`` does not cover the attempt.

    With ``live`` (-f), an attempt not made yet is waited for while a job may still start it
    (one has not ended: it waits, is scheduled for a retry, runs an earlier attempt): said on
    stderr, and True returned; once every job has ended without it (``ended``: after the
    follow), it is refused with how the job ended."""
    if attempt is None or attempt <= made:
        return False
    most = made
    states: list[str | None] = []
    for _, jid in jobs:
        job = client.jobs.get(jid)
        states.append(None if job is None else job.state)
        if job is not None:
            most = max(most, job.runs)
        try:
            most = max(most, joblogs.read(client.engine, jid, None, 0, 1).attempts)
        except JobNotFound:
            continue
    if attempt <= most:
        return False
    if not live:
        has = f"it has {_attempts(most)}" if most else "it has no log yet"
        raise click.ClickException(f"{what} has no attempt {attempt} ({has})")
    if not ended and any(state is not None and state not in joblogs.ENDED for state in states):
        made_so_far = f"has made {_attempts(most)}" if most else "has made no attempt yet"
        click.echo(
            f"note: {visible(what)} {made_so_far}; waiting for attempt {attempt} to start",
            err=True,
        )
        return True
    how = ENDINGS.get(str(states[0]), "ended") if len(states) == 1 else "ended"
    after = f"after {_attempts(most)}" if most else "before its first attempt"
    raise click.ClickException(f"{what} has no attempt {attempt}: it {how} {after}")


def _run_over(client: Client, run_id: str) -> bool:
    view = load_run(client, run_id)
    return view is None or view.finished


def stream_run(client: Client, run_id: str, over: Callable[[], bool]) -> None:
    """Print every line of the run's steps and of its child runs as it comes, until ``over()``
    says the run has ended (``flows run --logs``, which reads the run there as its other modes
    do); ``over()`` is asked between rounds."""
    printer = Printer(as_json=False)
    follower = Follower(client, run_tree_jobs(client, run_id))
    for item in follow(
        client,
        follower,
        stop=over,
        more=lambda: run_tree_jobs(client, run_id),
    ):
        printer.line(item)
    printer.dropped(follower)


def print_tail(client: Client, jid: str, attempts: int = 0, count: int = TAIL_LINES) -> None:
    """The last lines a failed job wrote, indented, on stderr (``flows run``, ``flows status``).

    They are its latest attempt's that wrote any: when that is not its last attempt
    (``attempts``, the times it started), the header says which attempt they come from and
    that the later ones wrote nothing, so an earlier attempt's lines never pass for the
    failure's own."""
    head = joblogs.read(client.engine, jid, None, 0, 1)
    lines = joblogs.tail(client.engine, jid, count, head.attempt or None)
    if not lines:
        return
    header = f"    last {len(lines)} log lines of {jid}"
    if 0 < head.attempt < attempts:
        later = (
            f"attempt {attempts} wrote none"
            if attempts == head.attempt + 1
            else f"attempts {head.attempt + 1} to {attempts} wrote none"
        )
        header += f", from attempt {head.attempt} of {attempts} ({later})"
    click.echo(header + ":", err=True)
    for line in lines:
        click.echo("      " + format_line(StepLine(jid, jid, 0, line), label=False), err=True)
