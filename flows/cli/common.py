"""Helpers shared by the command modules: connecting, printing tables and JSON, errors.

Imported by ``flows --help`` too, so what only some commands need (redis and the client, rich's
tables, the audit log) is imported where it is used."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from flows.cli.terminal import visible
from flows.entry import INTERRUPTED as INTERRUPTED
from flows.entry import interrupted_line
from flows.flowfile.findings import did_you_mean
from scheduler.engine.errors import FlowsError, debug_enabled, given_as

if TYPE_CHECKING:
    from rich.console import Console

    from flows.runs.logs import NoSuchRun
    from scheduler.engine.client import Client

T = TypeVar("T")


@functools.cache
def _consoles() -> tuple[Console, Console]:
    from flows.cli.console import Console

    return Console(), Console(stderr=True)


def __getattr__(name: str) -> Any:
    # `console` and `err_console` (stdout, stderr): made, and rich imported, on first use.
    if name in ("console", "err_console"):
        return _consoles()[name == "err_console"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


console: Console
err_console: Console


def error_text(error: BaseException) -> str:
    """The one line every command prints for ``error``: :func:`flows.runs.refusals.told`,
    which decides it for the HTTP API too."""
    from flows.runs.refusals import told

    return told(error)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn this project's errors into one-line CLI errors (exit status 1), as
    :func:`error_text` words them."""
    try:
        yield
    except FlowsError as error:
        if debug_enabled():
            raise
        raise click.ClickException(error_text(error)) from None


def cannot_work(error: Exception) -> click.ClickException:
    """A long-running command (``flows worker``, ``flows scheduler``) stopped by ``error``,
    which restarting it cannot mend: its one line (:func:`error_text`), exit status
    :data:`~scheduler.engine.backoff.EXIT_CONFIG`, so that a supervisor tells it from a crash."""
    from scheduler.engine.backoff import EXIT_CONFIG

    class CannotWork(click.ClickException):
        exit_code = EXIT_CONFIG

    return CannotWork(error_text(error))


@contextlib.contextmanager
def unless_unworkable() -> Iterator[None]:
    """Around a long-running command's work: an error that restarting it cannot mend (a
    refused login or permission, a foreign engine: :func:`~scheduler.service.loop.unworkable`,
    what stops the scheduler service; or any other error of this project that waiting cannot
    cure, :func:`~scheduler.engine.backoff.hopeless`: a malformed URL, an unsafe server, as a
    pool's worker process judges them) becomes :func:`cannot_work`'s exit 78, for every such
    command alike (a supervisor restarting one that exits 1 would do so for ever)."""
    from scheduler.engine.backoff import hopeless
    from scheduler.service.loop import unworkable

    try:
        yield
    except Exception as error:
        if not (unworkable(error) or hopeless(error)) or debug_enabled():
            raise
        raise cannot_work(error) from None


def interrupted() -> click.exceptions.Exit:
    """Ctrl-C: one line on stderr, then exit :data:`INTERRUPTED` (left to click, a command
    would say ``Aborted!`` and exit 1, which scripts read as a failure). The same as the
    console script says for a Ctrl-C before the command line is imported (:mod:`flows.entry`)."""
    click.echo(interrupted_line(), err=True)
    return click.exceptions.Exit(INTERRUPTED)


def guarded(invoke: Callable[[], T]) -> T:
    """The CLI's error boundary: any error but a usage error becomes one line and exit status 1
    (:func:`error_text`); ``flows --debug`` or ``FLOWS_DEBUG=1`` shows the traceback. Ctrl-C
    ends any command with :func:`interrupted`."""
    with given_as("flag"):  # what a command connects to came by --redis: faults say so
        return _guarded(invoke)


def _guarded(invoke: Callable[[], T]) -> T:
    try:
        return invoke()
    except KeyboardInterrupt:
        raise interrupted() from None
    except click.Abort as abort:
        if isinstance(abort.__context__, KeyboardInterrupt):  # Ctrl-C at a prompt
            raise interrupted() from None
        raise
    except click.ClickException as error:
        # Its message may quote what was typed or stored (a name, an id, a file's text): the
        # terminal shows it, never obeys it, whichever command raised it, and a value pasted by
        # mistake is quoted cut short, as any error's line is.
        from scheduler.engine.faults import cut_long_lines

        escaped = visible(cut_long_lines(error.message))
        if escaped != error.message:
            error.__dict__["message"] = escaped  # Final in click's types only
        raise
    except click.exceptions.Exit:
        raise
    except BrokenPipeError:  # the reader went away (`flows logs RUN | head`): end quietly
        quiet_stdout()
        raise click.exceptions.Exit(0) from None
    except Exception as error:
        if debug_enabled():
            raise
        raise click.ClickException(error_text(error)) from None


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush into a closed pipe stays
    silent (Python's documented way to end after a BrokenPipeError)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


class GuardedCommand(click.Command):
    """A command run behind :func:`guarded` (for one run on its own, as ``python -m scheduler``)."""

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(lambda: super(GuardedCommand, self).invoke(ctx))


class GuardedGroup(click.Group):
    """A group whose commands run behind :func:`guarded`; a changing command that succeeded is
    recorded in the audit log (:mod:`flows.cli.auditing`). Ctrl-C while the arguments are read
    or the audit log is loaded ends as :func:`guarded` says too."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:  # reading the arguments: `--help` prints the listing from here
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            raise interrupted() from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["flows.argv"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(lambda: self._invoke_audited(ctx))

    def _invoke_audited(self, ctx: click.Context) -> Any:
        from flows.cli import auditing

        argv = ctx.meta.get("flows.argv", [])
        auditing.check_who(argv)
        try:
            result = guarded(lambda: super(GuardedGroup, self).invoke(ctx))
        except SystemExit as done:
            if done.code in (0, None) and not ctx.meta.get(auditing.RECORDED):
                auditing.after(argv)
            raise
        if not ctx.meta.get(auditing.RECORDED):
            auditing.after(argv)
        return result


def open_client(
    redis_url: str | None, namespace: str | None, *, long_lived: bool = False
) -> Client:
    """A client on ``--redis`` (or $FLOWS_REDIS_URL, or the embedded server); for a
    ``long_lived`` command (ui, scheduler, worker) what no restart mends exits 78
    (:func:`unless_unworkable`)."""
    from flows.cli import auditing
    from scheduler import connect
    from scheduler.engine.client import namespace_prefix

    try:
        namespace_prefix(namespace)
    except ValueError as error:  # a malformed --namespace
        raise click.BadParameter(str(error), param_hint="'--namespace'") from None
    with user_errors(), unless_unworkable() if long_lived else contextlib.nullcontext():
        client = auditing.opened(connect.Client(redis_url, namespace=namespace))
    # Closed when the command ends, not left to the garbage collector: a command run in a
    # longer-lived process (a test's runner, a program calling `main`) keeps no sockets open.
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().call_on_close(client.close)
    return client


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def report(as_json: bool, text: str, value: Any) -> None:
    """What an action did: ``text`` for a person, or ``value`` as JSON (``--json``)."""
    if as_json:
        print_json(value)
    else:
        click.echo(text)


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    keep: Sequence[str] = (),
    empty: str | None = None,
) -> None:
    """Print a table that fits the terminal (:mod:`flows.cli.tables`): the first column, the
    statuses and the ``keep`` columns are never cut. Cells are shown as given (a job id, a
    message, a state are never read as markup); a :class:`rich.text.Text` cell keeps its style.
    Without rows, a listing says so in words instead, ``empty`` on stderr (an empty table reads
    as a hang, or hides a typo), as every listing does: stdout stays empty, as ``--json``'s
    list is, for a script that counts its lines."""
    from flows.cli.tables import fitted, show, table_console

    if not rows and empty is not None:
        click.echo(empty, err=True)
        return
    out = table_console()
    show(out, fitted(title, columns, rows, width=out.width, keep=keep))


def ago(when: float | None, now: float | None = None) -> str:
    """'3s ago', '5m ago', 'in 2h' for an epoch time; '' for none."""
    if not when:
        return ""
    delta = (now if now is not None else time.time()) - when
    future = delta < 0
    delta = abs(delta)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if delta >= size:
            text = f"{delta / size:.0f}{unit}"
            break
    else:
        text = f"{delta:.0f}s"
    return f"in {text}" if future else f"{text} ago"


def when(value: float | None) -> str:
    if not value:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def missing_run(error: NoSuchRun) -> click.ClickException:
    """A run (or its step) that does not exist, as the CLI says it: a missing run points at the
    listing of runs."""
    return click.ClickException(f"{error} (see `flows runs`)" if error.step is None else str(error))


@contextlib.contextmanager
def step_refusal(client: Client, run_id: str, step: str) -> Iterator[None]:
    """An engine refusal of ``step`` (InvalidArgument), when the run has no such step, said as
    every command says it (:func:`flows.runs.labels.no_step`, with the step likely meant): the
    engine's names none."""
    from flows.runs.logs import NoSuchRun, run_jobs
    from scheduler.engine.errors import InvalidArgument

    try:
        yield
    except InvalidArgument:
        try:
            run_jobs(client, run_id, step)
        except NoSuchRun as missing:
            raise missing_run(missing) from None
        raise


def known_queue(client: Client, name: str, *, refuse: bool = True) -> bool:
    """Refuse a queue name the namespace has never seen (:func:`flows.runs.actions.unknown_queue`
    says why); without ``refuse``, only say so on stderr (a listing then shows nothing, as
    asked) and return False. True when the namespace knows the queue."""
    from flows.runs.actions import unknown_queue  # the engine's client: only for a command

    with user_errors():
        problem = unknown_queue(client, name)
    if problem is None:
        return True
    if refuse:
        raise click.ClickException(problem)
    click.echo(f"note: {problem}", err=True)
    return False


def note_new_queues(client: Client, names: Sequence[str]) -> None:
    """Where a queue may well be new (a worker listening on it, unfail's target, the queues
    `flows run` works): a note on stderr for each name the namespace has not seen when one it
    has is close to it (a likely typo), and for each that is paused (its jobs would wait with
    no word why); never refuses, and says nothing when the server cannot tell."""
    try:
        counts = client.queues.counts()
    except Exception:  # a hint only: the command's own work reports a fault
        return
    known = {str(entry.get("name")) for entry in counts}
    paused = {str(entry.get("name")) for entry in counts if entry.get("paused")}
    for name in names:
        hint = did_you_mean(name, known) if name not in known else ""
        if hint:
            click.echo(f"note: no queue {name!r} yet ({hint}); taking it as a new queue", err=True)
        elif name in paused:
            click.echo(
                f"note: queue '{visible(name)}' is paused: its jobs wait until "
                f"`flows queue unpause {visible(name)}`",
                err=True,
            )
