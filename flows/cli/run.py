"""``flows run``, ``flows status``, ``flows runs``: submit a flow and follow runs.

``flows status`` and ``flows runs`` only read: the flow model, the submission and the local
worker are imported by the commands that use them, so the readers start in a fraction of the
time."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click
from click.core import ParameterSource
from rich.console import Group
from rich.table import Table
from rich.text import Text

from flows import gc_pause
from flows.cli import auditing
from flows.cli.common import (
    INTERRUPTED,
    ago,
    console,
    err_console,
    note_new_queues,
    open_client,
    print_json,
    table,
    user_errors,
    when,
)
from flows.cli.logs import print_tail, stream_run
from flows.cli.notifications import (
    dashboard_url,
    delivering,
    env_file_option,
    notify_deliverer,
    use_env_file,
)
from flows.cli.options import (
    as_json,
    bad_params,
    connection,
    flow_file,
    id_argument,
    id_option,
    logical_time,
    param,
)
from flows.cli.options import run_id as run_id_option
from flows.cli.signal import child_waits, print_awaiting
from flows.cli.tables import fitted, show, table_console
from flows.cli.terminal import visible
from flows.flowfile.durations import spelled
from flows.runs import pacing
from flows.runs.read import RunView, list_run_statuses, load_run, run_document
from flows.runs.statuses import STYLES
from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError, carrying_given

if TYPE_CHECKING:  # the flow model is loaded by the commands that read flow files
    from flows.flowfile.findings import Finding
    from flows.runs.build import FlowFile
    from scheduler.worker import Worker

STATUS_STYLE = STYLES
"""Styles of the status words (flows.runs.statuses); any other word is shown plain."""


SHUTDOWN_GRACE = 5.0
"""Seconds the local worker of `flows run` gives running jobs after Ctrl-C."""
WAIT_SWEEP_INTERVAL = 1.0
"""Seconds between two looks for timed-out waits while `flows run` drives a run."""
FOLLOW_LONGEST = 0.2
"""The longest pause between two reads of the run `flows run` follows (:mod:`flows.runs.pacing`
decides each: a run's end shows within tens of milliseconds, a long quiet step costs five
reads a second)."""
FAILURE_LINES = 12
"""Lines of a failed job's message printed under it."""


def register(group: click.Group) -> None:
    for command in (run, status, runs):
        group.add_command(command)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}s"


def styled(word: str) -> Text:
    """A status word in its style, as text (never read as markup)."""
    return Text(word, style=STATUS_STYLE.get(word, ""))


def render_run(view: RunView, width: int | None = None, live: bool = False) -> Table | Group:
    """The run's steps as a table (fitting ``width``, the console's by default: step and status
    never cut; ``live``: redrawn in place, so folded when they cannot fit): status, progress,
    attempts, duration; then the runs it is linked to (its parent, its sub-flow steps' child
    runs)."""
    rows = [
        [
            Text(step.step),
            styled(step.status),
            step.progress,
            str(step.attempts) if step.attempts else "",
            _seconds(step.duration),
        ]
        for step in view.steps
    ]
    out = fitted(
        Text.assemble(f"Run {view.run_id} ", styled(view.status)),
        ("step", "status", "jobs done", "attempts", "duration"),
        rows,
        width=console.width if width is None else width,
        fold_keys=live,
    )
    links = [f"step {step.step}: child run {step.child}" for step in view.steps if step.child]
    parent = view.record.get("parent_run")
    if parent:
        links.insert(0, f"child run of {parent} (step {view.record.get('parent_step', '')})")
    links.extend(_missed_deadlines(view))
    return Group(out, Text("\n".join(links))) if links else out


def print_run(view: RunView) -> None:
    """Print the run's table (:func:`render_run`) as every table is printed: as wide as the
    terminal, or as its rows when piped, never cropped (:mod:`flows.cli.tables`)."""
    out = table_console()
    show(out, render_run(view, out.width))


def _missed_deadlines(view: RunView) -> list[str]:
    """A line for the run's missed ``deadline:`` and one for each step's, with when it was
    found missed (local time, as the other times the command prints)."""
    record = view.record
    lines = []
    if record.get("deadline_missed"):
        deadline, missed = spelled(record.get("deadline")), when(record["deadline_missed"])
        lines.append(f"deadline {deadline} missed at {missed}")
    for step in view.steps:
        if step.deadline_missed:
            lines.append(f"step {step.step}: deadline missed at {when(step.deadline_missed)}")
    return lines


def _print_failures(client: Client, view: RunView) -> None:
    for job in view.failed_jobs:
        failure = job.failure or {}
        err_console.print(
            Text.assemble(
                (job.jid, "bold red"), f" {job.state}: {visible(str(failure.get('group', '')))}"
            )
        )
        message = visible(str(failure.get("message", ""))).strip().splitlines()
        if len(message) > FAILURE_LINES:  # its first line says what happened, the last where
            message = [message[0], "...", *message[-(FAILURE_LINES - 2) :]]
        # A job's words are its own lines: never wrapped at an imagined 80 columns off a
        # terminal (a CI log, a pipe), where a cut line no longer greps.
        lines = "\n".join("    " + line for line in message)
        err_console.print(lines, markup=False, highlight=False, soft_wrap=True)
        if not str(failure.get("group", "")).startswith("exit-code-"):
            print_tail(client, job.jid, job.attempts)  # a shell step's message has its tail


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "INFO"
"""The level of Python logging records steps' logs keep, as `flows worker --log-level`."""
WORKER_LOG_LEVEL = "WARNING"
"""The level from which the local worker's own records are printed on stderr (unless
``--log-level`` is given)."""
LIBRARY_LOGGERS = frozenset({"flows", "scheduler"})
"""The loggers (and those under them) whose records the local worker's stderr shows: the
worker's, the engine client's, the notifications', the audit log's. A step's records go to its
log."""


def worker_log(level: str, stream: TextIO) -> logging.Handler:
    """The handler that prints the local worker's log records on ``stream`` (stderr): those of
    :data:`LIBRARY_LOGGERS` from ``level`` on (a lost lock, a report the server did not take, a
    notification not delivered), shown by :class:`~scheduler.terminal.VisibleFormatter` (the
    text of a job or a flow file in them cannot drive the terminal). Left out: a step's own
    records, which are its log (``--logs``, `flows logs`), and the records of jobs' outcomes
    (done, failed, retried, ...), which the run's table and its failures say already."""
    from scheduler.terminal import VisibleFormatter
    from scheduler.worker.batching import OUTCOME_RECORD

    def shown(record: logging.LogRecord) -> bool:
        ours = record.name.partition(".")[0] in LIBRARY_LOGGERS
        return ours and not getattr(record, OUTCOME_RECORD, False)

    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(VisibleFormatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(shown)
    return handler


@contextlib.contextmanager
def worker_log_on_stderr(level: str) -> Iterator[None]:
    """:func:`worker_log` on stderr while the local worker works (the root logger's handler:
    the worker logs from threads of its own)."""
    handler = worker_log(level, sys.stderr)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


class WaitTimeouts:
    """Times out the run's `wait:` steps past their deadline while `flows run` drives it, as the
    scheduler service does (``wait.sweep``, at most once per :data:`WAIT_SWEEP_INTERVAL`): a
    wait's timeout fires without a service running."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._last = 0.0

    def __call__(self) -> None:
        from scheduler.service.housekeeping import time_out_waits

        if time.monotonic() - self._last < WAIT_SWEEP_INTERVAL:
            return
        self._last = time.monotonic()
        with contextlib.suppress(FlowsError):  # the next round tries again
            time_out_waits(self.client, max_rounds=1)


def check_server(client: Client, command: str) -> None:
    """Refuse, before anything is changed, to work a run here on a server whose eviction policy
    may drop jobs: the local worker would refuse it (as every worker does) only once the run
    was submitted or put back, and the run would wait for it."""
    from scheduler.engine.safety import check_eviction_policy

    with user_errors():
        check_eviction_policy(client.redis, who=command)


class LocalWorker:
    """The worker of `flows run`, run in a thread (:meth:`work`). Called between the reads of
    the run, it raises again an error that ended the worker (a server it refuses, a permission
    it lacks), said as every error is, instead of the run being followed while no one works
    it; then ``sweep``."""

    def __init__(self, worker: Worker, sweep: Callable[[], None]) -> None:
        self.worker = worker
        self.sweep = sweep
        self.error: Exception | None = None

    def work(self) -> None:
        try:
            self.worker.run()
        except Exception as error:
            self.error = error

    def __call__(self) -> None:
        if self.error is not None:
            raise self.error
        self.sweep()


class AwaitNotice:
    """Says on stderr, once per step, that a step of the run (or of a child run it waits for)
    awaits a signal, with the `flows approve` / `flows signal` command that gives it: the one
    place every mode of `flows run` says it from (a table, --json, --logs, --detach)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.told: list[str] = []

    def __call__(self, view: RunView) -> None:
        awaiting = any(s.status == "awaiting" and s.step not in self.told for s in view.steps)
        if awaiting or child_waits(view):  # a child run's step too
            self.told.extend(print_awaiting(self.client, view, told=self.told, err=True))


class RunReader:
    """The run as `flows run` follows it: each read said to :class:`AwaitNotice`, in every
    mode alike."""

    def __init__(self, client: Client, run_id: str, notice: AwaitNotice) -> None:
        self.client = client
        self.run_id = run_id
        self.notice = notice
        self.view: RunView | None = None

    def __call__(self) -> RunView:
        again = load_run(self.client, self.run_id) or self.view
        assert again is not None  # submitted by this command: it is there
        self.view = again
        self.notice(again)
        return again


def _read_again(
    read: RunReader, view: RunView, pause: float, sweep: Callable[[], None]
) -> tuple[RunView, float]:
    """The run read again after ``pause``, and the pause before the next read."""
    time.sleep(pause)
    sweep()
    started = time.monotonic()
    again = read()
    spent = time.monotonic() - started
    return again, pacing.next_pause(pause, again != view, spent, FOLLOW_LONGEST)


def _follow(
    client: Client,
    run_id: str,
    queues: list[str],
    threads: int,
    live: bool,
    logs: bool = False,
    log_level: str = DEFAULT_LOG_LEVEL,
    quiet: bool = False,
) -> tuple[RunView, int | None]:
    """Run a local worker on the run's queues until the run has finished or Ctrl-C or SIGTERM
    (printing the steps' lines as they come with ``logs``, else a live table, nothing when
    ``quiet``); returns the run as it is then and the signal that interrupted it (None)."""
    from rich.live import Live

    from flows.runtime.worker_hook import prepare
    from scheduler.worker import Worker
    from scheduler.worker.imports import import_path

    import_path()  # job modules beside where `flows run` was started, as in every worker mode
    # The records steps emit reach the step logs from this level on (the root logger's default,
    # WARNING, would drop a step's logging.info); nothing more is printed here.
    logging.getLogger().setLevel(log_level)
    worker = Worker(
        Client.from_engine(client.engine),
        queues,
        threads=threads,
        prepare=prepare,
        poll_interval=0.5,
        shutdown_grace=SHUTDOWN_GRACE,
    )
    # Called between the reads of the run: the local worker's end, then the waits' timeouts.
    between_reads = LocalWorker(worker, WaitTimeouts(client))
    thread = threading.Thread(
        target=carrying_given(between_reads.work), name="flows-run-worker", daemon=True
    )
    read = RunReader(client, run_id, AwaitNotice(client))
    interrupted = False

    def over() -> bool:  # --logs: between its rounds of lines, the run read as the others read it
        between_reads()
        return read().finished

    presses: list[int] = []
    announced: list[bool] = []  # the stop was said: a signal from now on is a second one
    previous = _count_ctrl_c(presses, announced)
    try:
        # Started in here: a signal from now on may find a job running, which must get its
        # grace and be handed back (the first read can take long: it says every awaited signal).
        thread.start()
        view = read()
        if logs:
            stream_run(client, run_id, over)
            view = read()
            print_run(view)
            return view, None
        pause = pacing.QUICK
        if quiet or not live:  # --json, or piped: no frames, the table once at the end
            while not view.finished:
                view, pause = _read_again(read, view, pause, between_reads)
            if not quiet:  # --json: the run's JSON at the end is the whole output
                print_run(view)
            return view, None
        # Transient: the frames go, and the table is printed once, as it is at the end or
        # when the jobs were handed back after Ctrl-C.
        frame = render_run(view, live=True)
        with Live(frame, console=console, auto_refresh=False, transient=True) as screen:
            while not view.finished:
                view, pause = _read_again(read, view, pause, between_reads)
                screen.update(render_run(view, live=True), refresh=True)
        print_run(view)
    except KeyboardInterrupt:
        interrupted = True
        again = "Ctrl-C" if presses[:1] != [signal.SIGTERM] else "SIGTERM"
        announced.append(True)  # before the line: whoever reads it may press again at once
        click.echo(
            f"stopping: running jobs get {SHUTDOWN_GRACE:g}s to finish, then wait again "
            f"({again} again: stop them now)",
            err=True,
        )
    finally:
        announced.append(True)  # the first one may come while the worker stops, unsaid
        try:
            _stop_worker(worker, thread, presses)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if interrupted:  # the table as it is now the jobs were handed back, not the last frame
        view = load_run(client, run_id) or read()
        if not quiet:
            print_run(view)
        return view, presses[0] if presses else signal.SIGINT
    return view, None


def _count_ctrl_c(presses: list[int], announced: list[bool]) -> dict[int, Any]:
    """From now on the first Ctrl-C or SIGTERM raises KeyboardInterrupt, as Ctrl-C does by
    default, and each one is counted in ``presses`` (only appended to, by the handler: no lock,
    see :mod:`scheduler.stop_signals`); later ones raise nothing, and :func:`_stop_worker` acts
    on them. SIGTERM (a service manager, `timeout`) stops the run as Ctrl-C does: by default it
    would end the process at once and leave the step's command running. A signal before the
    stop is ``announced`` is the first one again: `timeout` signals the process and then its
    whole group, so one request can arrive twice. Returns the handlers to put back (none
    installed outside the main thread, nor for a signal that is ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def pressed(signum: int, frame: FrameType | None) -> None:
        if presses and not announced:
            return  # the same request delivered again, before anyone could see the stop
        presses.append(signum)
        if len(presses) == 1:
            raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is None or handler == signal.SIG_IGN:  # None: a handler not set in Python
            continue
        previous[signum] = handler
        signal.signal(signum, pressed)
    return previous


def _stop_worker(worker: Worker, thread: threading.Thread, presses: list[int]) -> None:
    """Stop the local worker and wait for it: running jobs get :data:`SHUTDOWN_GRACE` to
    finish, then are handed back. A Ctrl-C after the first (counted in ``presses``) stops them
    now: the commands they started are killed at once, and the jobs are handed back as soon as
    their threads end; one more stops waiting."""
    worker.stop()
    deadline = time.monotonic() + SHUTDOWN_GRACE + 5
    now = False
    while thread.is_alive() and time.monotonic() < deadline:
        if len(presses) > 1 and not now:
            now = True
            click.echo("stopping now: running jobs are killed and wait again", err=True)
            worker.stop_now()
            deadline = time.monotonic() + worker.settings.kill_after + 5
        if len(presses) > 2:
            return  # their commands were killed above: only the hand-back is not waited for
        # The first Ctrl-C comes here when the run had ended already: the jobs get their grace.
        with contextlib.suppress(KeyboardInterrupt):
            thread.join(0.05)


def work_run(
    client: Client,
    run_id: str,
    queues: list[str],
    threads: int,
    logs: bool = False,
    log_level: str = DEFAULT_LOG_LEVEL,
    as_json: bool = False,
    stderr_level: str = WORKER_LOG_LEVEL,
) -> int:
    """Work the run here with a live view (or its steps' lines, with ``logs``; with
    ``as_json`` only the run's JSON at the end, as `flows status --json` gives it) until it
    ends, the worker's own records from ``stderr_level`` on printed on stderr
    (:func:`worker_log`); the exit code: 0 when it succeeded, 1 when not, :data:`INTERRUPTED`
    after Ctrl-C and 143 after SIGTERM (saying how to resume or cancel it)."""
    note_new_queues(client, queues)  # a paused queue: its jobs would wait with no word why
    with worker_log_on_stderr(stderr_level):
        view, interrupted = _follow(
            client, run_id, queues, threads, sys.stdout.isatty(), logs, log_level, quiet=as_json
        )
    if as_json:
        print_json(run_document(view))
    if interrupted is not None:
        done = sum(1 for s in view.steps if s.status in ("success", "cached", "skipped"))
        how = "interrupted" if interrupted == signal.SIGINT else "terminated"
        code = INTERRUPTED if interrupted == signal.SIGINT else 128 + interrupted
        if view.finished:  # its last jobs ended in their grace: nothing waits to be resumed
            if view.status != "succeeded":
                _print_failures(client, view)
            click.echo(
                f"{how}: run {run_id} {view.status} while stopping ({done} of "
                f"{len(view.steps)} steps done)",
                err=True,
            )
            return code
        click.echo(
            f"{how}: run {run_id} is {view.status} ({done} of {len(view.steps)} steps "
            "done; unfinished jobs wait in their queues)\n"
            f"  resume it here:       flows retry {run_id}\n"
            f"  or with workers:      flows worker -q {','.join(queues)}\n"
            f"  cancel what is left:  flows cancel {run_id}",
            err=True,
        )
        return code
    if view.status != "succeeded":
        _print_failures(client, view)
        click.echo(f"run {run_id} {view.status}", err=True)
        return 1
    click.echo(f"run {run_id} succeeded", err=True)
    return 0


@click.command()
@click.argument("file", type=flow_file)
@param
@logical_time
@run_id_option("<flow>@<UTC now>-<random>, e.g. etl@20250131T020000Z-3f9a1c")
@click.option("--detach", is_flag=True, help="Submit and return; long-lived workers run it.")
@click.option("--logs", is_flag=True, help="Print every step's lines as they come.")
@as_json
@env_file_option
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Jobs at once in the local worker.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default=DEFAULT_LOG_LEVEL,
    show_default=True,
    help="Python logging records from this level on are kept in the steps' logs (as on "
    "`flows worker`); the local worker's own records are printed on stderr from this level "
    "when it is given, else from WARNING.",
)
@click.option(
    "--check-imports/--no-check-imports",
    default=True,
    show_default=True,
    help="Import the Python steps' modules before submitting a run to work here (a module "
    "that does not import is refused now, not at run time).",
)
@connection
def run(
    file: Path,
    params: tuple[str, ...],
    logical_time: datetime | None,
    run_id: str | None,
    detach: bool,
    logs: bool,
    env_file: Path | None,
    threads: int,
    log_level: str,
    check_imports: bool,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Validate FILE, submit a run, and (unless --detach) run it here until it ends.

    The local worker's warnings and errors (a lost lock, a report the server did not take, a
    notification not delivered) are printed on stderr; what the steps log is in their logs
    (--logs prints it), and the run's failures are printed when it ends.

    Exit code 0 when every step succeeded, 1 when the run failed or the file is invalid, 130
    after Ctrl-C, 143 after SIGTERM (the run stays as it is: resume it with `flows retry RUN`).
    Ctrl-C or SIGTERM gives running jobs 5 s to finish, then hands them back; a second kills
    their commands and hands them back at once.
    """
    from flows.expand.run_ids import manual_run_id
    from flows.flowfile.params import ParamError, parse_assignments
    from flows.runs.build import build_run, read_flow_file
    from flows.runs.submit import submit
    from flows.validation.validate import InvalidFlow

    if as_json and logs:
        raise click.UsageError("--json and --logs both write stdout: choose one")
    use_env_file(env_file)  # the local worker's secrets, and the notifications'
    gc_pause.enable()  # loading and expanding happen before the local worker's threads start
    # One pause from reading the file to the run's JSON: the collector back between the
    # steps would pass over everything they left alive each time (see flows.gc_pause).
    with gc_pause.gc_paused():
        try:
            flow_file = read_flow_file(file)
        except InvalidFlow as invalid:
            _refuse(file, invalid.findings)
        moment = logical_time or datetime.now(UTC)
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        run_id = run_id or manual_run_id(flow_file.flow.name)
        with user_errors():  # an expansion the flow cannot make, an engine limit
            try:
                built = build_run(
                    flow_file,
                    run_id=run_id,
                    logical_time=moment,
                    params=parse_assignments(params),
                    trigger="manual",
                )
            except ParamError as error:
                raise bad_params(error) from None
    auditing.who()  # recorded once submitted: a $FLOWS_USER on two lines is refused before
    client = open_client(redis_url, namespace)
    # The local worker will import them (with --detach, workers elsewhere, which may hold
    # modules this machine lacks); checked last, so what else is wrong is said first.
    if check_imports and not detach:
        _check_imports(file, flow_file)
    if not detach:
        check_server(client, "flows run")
    with user_errors():
        submission = submit(client, built)
    if submission.created:
        auditing.record(client, "run", run_id, detail=str(file))
        n = submission.jobs
        click.echo(f"submitted run {run_id} ({n} job{'' if n == 1 else 's'})", err=True)
    else:
        click.echo(f"run {run_id} exists already: nothing submitted", err=True)
    if detach:
        if any(step.wait is not None for step in flow_file.flow.steps.values()):
            # A wait with nothing before it awaits from now: no worker will say so.
            with user_errors():
                RunReader(client, run_id, AwaitNotice(client))()
        if as_json:
            from flows.runs.trigger import Triggered  # its shape; what it imports, only here

            flow = flow_file.flow.name
            print_json(Triggered(run_id, submission.jobs, flow, not submission.created).as_json())
        else:
            click.echo(run_id)
        return
    # The run's notifications are sent from here too, while it runs and a little after.
    deliverer = None
    if built.request.run.get("notify"):
        deliverer = notify_deliverer(client, env_file, dashboard_url(), "run", stable=False)
    given = click.get_current_context().get_parameter_source("log_level")
    stderr_level = log_level.upper() if given is ParameterSource.COMMANDLINE else WORKER_LOG_LEVEL
    with user_errors(), delivering(deliverer):
        code = work_run(
            client,
            run_id,
            list(built.queues),
            threads,
            logs,
            log_level.upper(),
            as_json,
            stderr_level,
        )
    sys.exit(code)


def _check_imports(file: Path, flow_file: FlowFile) -> None:
    """Refuse (exit 1, with the findings) a flow whose Python steps do not import, as a worker
    here would import them: from the working directory and the flow's folder."""
    from flows.validation.validate import import_findings
    from scheduler.worker.imports import import_path

    import_path()
    findings = import_findings(
        flow_file.flow, flow_file.text, file=str(file), flow_dir=flow_file.flow_dir
    )
    if findings:
        _refuse(file, findings, "(--no-check-imports submits it anyway)")


def _refuse(file: Path, findings: Sequence[Finding], note: str = "") -> NoReturn:
    """Print the findings that keep FILE from running, ``note``, and the summary line
    `flows validate` ends with; exit 1."""
    from flows.cli.validate import checked_files, summary

    for finding in findings:  # plain: file:line:col must never wrap
        click.echo(visible(finding.format()), err=True)
    if note:
        click.echo(note, err=True)
    click.echo(summary(findings, len(checked_files([file], findings))), err=True)
    raise click.exceptions.Exit(1)


def latest_run(client: Client) -> str | None:
    """The newest run that is no sub-flow's child run (None when there is none)."""
    offset = 0
    while True:
        records = list_run_statuses(client, offset=offset, count=100)
        for record in records:
            if not record.get("parent_run"):
                return str(record["id"])
        if len(records) < 100:
            return None
        offset += len(records)


@click.command()
@id_argument("run_id", "run id", required=False)
@as_json
@connection
def status(run_id: str | None, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """A run's steps (the latest top-level run when RUN_ID is left out)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if run_id is None:
            run_id = latest_run(client)
            if run_id is None:
                raise click.ClickException("no runs yet: start one with `flows run FILE`")
        view = load_run(client, run_id)
    if view is None:
        raise click.ClickException(f"no run {run_id!r} (see `flows runs`)")
    if as_json:
        print_json(run_document(view))
        return
    print_run(view)
    print_awaiting(client, view)
    if view.status == "failed":
        _print_failures(client, view)


def _listed_runs(
    client: Client, flow: str | None, limit: int, show_all: bool
) -> list[dict[str, Any]]:
    """Up to ``limit`` runs with their status and child-run count, newest first; child runs
    only with ``show_all`` (looking at 1,000 runs at most, or ``limit``)."""
    out: list[dict[str, Any]] = []
    offset = 0
    size = min(limit, 1000) if show_all else 100  # the engine's page is 1,000 runs at most
    while len(out) < limit and offset < max(1000, limit):
        page = list_run_statuses(client, flow, offset, size)
        offset += len(page)
        for record in page:
            if show_all or not record.get("parent_run"):
                out.append({**record, "children": int(record.get("children") or 0)})
        if len(page) < size:
            break
    return out[:limit]


def _no_runs(client: Client, flow: str | None) -> str:
    if flow is None:
        return "no runs yet"
    from flows.flowfile.findings import did_you_mean

    with user_errors():
        flows = {str(r.get("flow", "")) for r in _listed_runs(client, None, 1000, True)}
    hint = did_you_mean(flow, sorted(flows - {""}))
    return f"no runs of flow {visible(repr(flow))}" + (f" ({hint})" if hint else "")


@click.command()
@id_option("--flow", what="flow name", kind="name", help="Only runs of this flow.")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="Show at most this many runs.",
)
@click.option("--all", "show_all", is_flag=True, help="List sub-flows' child runs too.")
@as_json
@connection
def runs(
    flow: str | None,
    limit: int,
    show_all: bool,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Recent runs, newest first; a sub-flow's child runs are counted under their parent
    (``--all`` lists them)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        records = _listed_runs(client, flow, limit + 1, show_all)  # one more: is the list cut
    more, records = len(records) > limit, records[:limit]
    if as_json:
        print_json(records)
        return
    if not records:  # an empty table reads as a hang, or hides a typo in --flow
        click.echo(_no_runs(client, flow), err=True)
        return
    rows = [
        [
            r["id"],
            r.get("flow", ""),
            styled(str(r.get("status", ""))),
            r.get("trigger", ""),
            ago(r.get("submitted")),
            r.get("jobs", ""),
            str(r["children"]) if r["children"] else "",
        ]
        for r in records
    ]
    table("Runs", ("run", "flow", "status", "trigger", "submitted", "jobs", "child runs"), rows)
    if more:  # a cut list must not read as all there is
        hint = " (--flow FLOW lists one flow's)" if flow is None else ""
        click.echo(f"note: the list stops at --limit {limit}; older runs exist{hint}", err=True)
