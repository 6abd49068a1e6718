"""Helpers shared by the command modules: connecting, printing tables and JSON, errors.

Imported by ``flows --help`` too, so what only some commands need (redis and the client, rich's
tables) is imported where it is used."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from scheduler.engine.errors import FlowsError, debug_enabled

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from scheduler.engine.client import Client

T = TypeVar("T")


@functools.cache
def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    return Console(), Console(stderr=True)


def __getattr__(name: str) -> Any:
    # `console` and `err_console` (stdout, stderr): made, and rich imported, on first use.
    if name in ("console", "err_console"):
        return _consoles()[name == "err_console"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


console: Console
err_console: Console


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn this project's errors into one-line CLI errors (exit status 1)."""
    try:
        yield
    except FlowsError as error:
        if debug_enabled():
            raise
        raise click.ClickException(str(error)) from None


def guarded(invoke: Callable[[], T]) -> T:
    """The CLI's error boundary: any error but a usage error becomes one line and exit status 1
    (:func:`scheduler.engine.faults.one_line`); ``--debug`` or ``FLOWS_DEBUG=1`` shows the
    traceback."""
    try:
        return invoke()
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as error:
        if debug_enabled():
            raise
        from scheduler.engine.faults import one_line

        raise click.ClickException(one_line(error)) from None


class GuardedCommand(click.Command):
    """A command run behind :func:`guarded` (for one run on its own, as ``python -m scheduler``)."""

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(lambda: super(GuardedCommand, self).invoke(ctx))


class GuardedGroup(click.Group):
    """A group whose commands run behind :func:`guarded`."""

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(lambda: super(GuardedGroup, self).invoke(ctx))


def open_client(redis_url: str | None, namespace: str | None) -> Client:
    """A client on ``--redis`` (or $FLOWS_REDIS_URL, or the embedded server)."""
    from scheduler.engine.client import Client, namespace_prefix

    try:
        namespace_prefix(namespace)
    except ValueError as error:  # a malformed --namespace
        raise click.BadParameter(str(error), param_hint="'--namespace'") from None
    with user_errors():
        return Client(redis_url, namespace=namespace)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table. Cells are shown as given (a job id, a message, a state are never read as
    markup); a :class:`rich.text.Text` cell keeps its style."""
    from rich.table import Table
    from rich.text import Text

    out = Table(title=title and Text(title), title_justify="left", header_style="bold")
    cells = [[_cell(cell) for cell in row] for row in rows]
    # The first column names things (a run id, a jid, a worker) that users copy into the next
    # command: it is never shortened; the other columns give way on a narrow screen.
    widest = max((row[0].cell_len for row in cells if row), default=0)
    for index, column in enumerate(columns):
        if index == 0:
            out.add_column(column, no_wrap=True, min_width=max(widest, len(column)))
        else:
            out.add_column(column)
    for row in cells:
        out.add_row(*row)
    _consoles()[0].print(out)


def _cell(cell: Any) -> Text:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    return Text("" if cell is None else str(cell))


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


def is_tty() -> bool:
    return sys.stdout.isatty()
