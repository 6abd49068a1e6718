"""``flows server``: start, stop and inspect the embedded server.

Commands that get no ``--redis`` URL start the embedded server on demand; these commands manage it
explicitly (for example to pick ``--appendfsync always`` before a run, or to stop it afterwards).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.table import Table

from flows.cli.console import Console
from flows.cli.options import as_json
from scheduler.embedded import DEFAULT_APPENDFSYNC, ENV_URL, FSYNC_POLICIES, EmbeddedServer
from scheduler.engine.connections import redact_url
from scheduler.engine.errors import ServerError

T = TypeVar("T")

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The server's data directory. Default: $FLOWS_DATA_DIR, else $XDG_DATA_HOME/flows, "
    "else ~/.local/share/flows.",
)


def register(group: click.Group) -> None:
    """Add the ``server`` group to ``group``."""
    group.add_command(server)


def _checked(action: Callable[[], T]) -> T:
    """Run ``action``, turning a ServerError into a one-line CLI error (exit status 1)."""
    try:
        return action()
    except ServerError as error:
        raise click.ClickException(str(error)) from None


@click.group()
def server() -> None:
    """The embedded server that keeps jobs on disk when no --redis URL is given."""


@server.command()
@data_dir_option
@click.option(
    "--appendfsync",
    type=click.Choice(FSYNC_POLICIES),
    default=None,
    help=f"How often the append-only file is flushed to disk [default: {DEFAULT_APPENDFSYNC}]. "
    "'always': no acknowledged write is lost on a power cut; 'everysec': up to a second can be "
    "(up to 2 s on a slow disk); 'no': the kernel decides when (up to ~30 s).",
)
def start(data_dir: Path | None, appendfsync: str | None) -> None:
    """Start the server, or reuse the one already running on this data directory."""
    embedded = EmbeddedServer(data_dir, appendfsync=appendfsync or DEFAULT_APPENDFSYNC)
    started = _checked(embedded.start)
    info = _checked(embedded.info)
    verb = "started" if started else "already running"
    click.echo(f"{verb}: {info['url']} (pid {info['pid']}, appendfsync {info['appendfsync']})")
    if appendfsync and info["appendfsync"] != appendfsync:
        click.echo(
            f"note: the running server uses appendfsync {info['appendfsync']}; "
            "stop it first to change that",
            err=True,
        )


@server.command()
@data_dir_option
def stop(data_dir: Path | None) -> None:
    """Shut the server down (its data stays in the append-only file)."""
    embedded = EmbeddedServer(data_dir)
    stopped = _checked(embedded.stop)
    click.echo(f"stopped: {embedded.data_dir}" if stopped else f"not running: {embedded.data_dir}")


@server.command()
@data_dir_option
@as_json
def status(data_dir: Path | None, as_json: bool) -> None:
    """Show whether the server runs, where its data is, and its durability setting."""
    info = _checked(EmbeddedServer(data_dir).info)
    elsewhere = os.environ.get(ENV_URL, "").strip()
    if elsewhere:  # commands use that server: this one being down concerns none of them
        click.echo(
            f"note: ${ENV_URL} is set ({redact_url(elsewhere)}): other commands use that "
            "server, not this one",
            err=True,
        )
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        print_fields(info)


def print_fields(fields: dict[str, Any]) -> None:
    """Print ``fields`` as a two-column table (None as '-', booleans as yes/no)."""
    rows = [(key, _shown(value)) for key, value in fields.items()]
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for key, value in rows:
        table.add_row(key, value)
    # Rich would fold long paths at the console width (80 when piped); a path must stay whole
    # to be copied, so render at least as wide as the widest row.
    console = Console()
    keys, values = (max((len(row[i]) for row in rows), default=0) for i in (0, 1))
    console.width = max(console.width, keys + values + 4)  # + cell padding
    console.print(table)


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
