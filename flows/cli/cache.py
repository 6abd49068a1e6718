"""``flows cache list`` and ``flows cache clear [KEY...]``: the shared step cache's entries."""

from __future__ import annotations

import itertools
from typing import Final

import click

from flows.cli import auditing
from flows.cli.common import ago, open_client, print_json, report, table, user_errors
from flows.cli.options import as_json, connection
from scheduler.engine.client import Client
from scheduler.engine.replies import as_list


def register(group: click.Group) -> None:
    group.add_command(cache)


@click.group()
def cache() -> None:
    """The shared step cache (steps with `cache: {key, ttl}`)."""


@cache.command("list")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Show at most this many entries.",
)
@as_json
@connection
def list_entries(limit: int, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Cache entries, newest first: the key, the job that produced it, its status (fresh: the
    next job of its key takes its result; expired: past its ttl, not used; else its job's state),
    when it completed, its ttl."""
    client = open_client(redis_url, namespace)
    with user_errors():
        entries = as_list(client.engine.call("cache.list", 0, limit))
    if as_json:
        print_json(entries)
        return
    if not entries:
        click.echo("the step cache is empty", err=True)
        return
    rows = [
        [e["key"][:12], e["jid"], e["status"], ago(e.get("completed")), f"{e['ttl']:g}s"]
        for e in entries
    ]
    table("Step cache", ("key", "produced by", "status", "completed", "ttl"), rows)


PAGE: Final = 1000
"""Entries a ``cache.list`` reads in one engine call (at most: the engine's bound, as for an
unnamed ``cache.clear``)."""


def _every_key(client: Client) -> list[str]:
    """The key of every entry, newest first, a page of them a call."""
    keys: list[str] = []
    for offset in itertools.count(0, PAGE):
        page = as_list(client.engine.call("cache.list", offset, PAGE))
        if not page:
            break
        keys += [e["key"] for e in page]
    return keys


@cache.command("clear")
@click.argument("keys", nargs=-1)
@as_json
@connection
def clear(
    keys: tuple[str, ...], as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Forget cache entries (KEYS, or the start of each as `flows cache list` shows it; none:
    every entry). The next run of each step runs it again."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if keys:
            known = _every_key(client)
            full = []
            for key in keys:
                matches = [k for k in known if k.startswith(key)]
                if not matches:
                    raise click.ClickException(
                        f"{key!r}: no entry with a key starting so (see `flows cache list`)"
                    )
                if len(matches) > 1:  # the reader picks: the start of each, as the list shows
                    shown = ", ".join(sorted(m[: len(key) + 8] for m in matches)[:5])
                    raise click.ClickException(
                        f"{key!r}: {len(matches)} entries have a key starting so ({shown}"
                        f"{', ...' if len(matches) > 5 else ''}): give more of the one to clear"
                    )
                full.append(matches[0])
            keys = tuple(full)
            removed = int(client.engine.call("cache.clear", *keys))
        else:
            removed = 0
            while True:  # every entry: the engine clears a page of them a call
                cleared = int(client.engine.call("cache.clear"))
                removed += cleared
                if not cleared:
                    break
    auditing.changed(removed > 0)  # a clear of nothing changed nothing
    text = f"removed {removed} cache entr{'y' if removed == 1 else 'ies'}"
    report(as_json, text, {"removed": removed})
