"""``flows sources`` and ``flows sources remove NAME``: the folders the scheduler services
published under their source names (:mod:`scheduler.service.catalog`), live or stale, and
forgetting a stale one."""

from __future__ import annotations

import click

from flows.cli.common import ago, open_client, print_json, report, table, user_errors
from flows.cli.options import as_json, connection


def register(group: click.Group) -> None:
    group.add_command(sources)


@click.group(invoke_without_command=True)
@as_json
@connection
@click.pass_context
def sources(
    ctx: click.Context, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """The scheduler services' sources: the folder each published, live or stale.

    Each `flows scheduler` publishes the flow files of its folder under its source name, and
    `flows ui` lists and starts them. A source is live while one of its services ticks (as
    `flows scheduler --health` asks: within the last 60 s); a service stopped, moved to another
    folder or given another --source leaves its old source's files published, stale, until
    `flows sources remove NAME`.
    """
    if ctx.invoked_subcommand is not None:
        return
    from scheduler.service import catalog

    client = open_client(redis_url, namespace)
    with user_errors():
        now = client.engine.server_time()
        found = catalog.sources(client, now)
    if as_json:
        print_json([s.as_json() for s in found])
        return
    if not found:
        click.echo(
            "no source has published flow files: `flows scheduler --flows-dir DIR` does", err=True
        )
        return
    rows = [
        [
            s.name,
            "live" if s.live else "stale",
            ago(s.last_seen, now),
            s.files,
            ago(s.published, now),
            s.folder,
            ", ".join(service.id for service in s.services),
        ]
        for s in found
    ]
    table(
        "Sources",
        ("source", "state", "last seen", "files", "published", "folder", "services"),
        rows,
    )


@sources.command()
@click.argument("name")
@click.option(
    "--force", is_flag=True, help="Remove it even while a service of it is alive (else refused)."
)
@as_json
@connection
def remove(
    name: str, force: bool, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Forget the flow files source NAME published: `flows ui` lists and starts them no more.

    Refused, changing nothing, for a source that published nothing and, unless --force, for a
    live one (a live service publishes its folder again only when it restarts or a file of it
    changes). Its schedules stay registered: `flows schedule remove` removes one.
    """
    from scheduler.service import catalog

    client = open_client(redis_url, namespace)
    with user_errors():
        now = client.engine.server_time()
        try:
            removed = catalog.remove(client, name, now, force=force)
        except catalog.UnknownSource as unknown:
            raise click.ClickException(f"{unknown}: see `flows sources`") from None
        except catalog.LiveSource as live:
            raise click.ClickException(f"{live}, or pass --force") from None
    files = f"{removed.files} flow file{'' if removed.files == 1 else 's'}"
    text = f"removed source {name}: {files} published from {removed.folder}"
    if removed.live:
        text += " (its service is alive: it publishes them again when it restarts or they change)"
    report(
        as_json,
        text,
        {"source": name, "removed": True, "files": removed.files, "was_live": removed.live},
    )
