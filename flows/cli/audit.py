"""``flows audit``: who changed what, through the API or the command line."""

from __future__ import annotations

import click

from flows.access import audit as audit_log
from flows.access.users import name_problem
from flows.cli.common import open_client, print_json, table, when
from flows.cli.options import as_json, connection, one_line
from flows.cli.terminal import visible


def register(group: click.Group) -> None:
    group.add_command(audit)


def _recorded_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse, as a usage error before anything is read, a ``--user`` no entry can name: who is
    recorded is never empty, and one line (:func:`flows.cli.auditing.who` refuses a $FLOWS_USER
    that is not, the API a ``by``). Any other name is searched: a $FLOWS_USER is recorded as
    given, even one no user of the dashboard may have (:func:`_nothing_by` says so)."""
    if value == "":
        raise click.BadParameter(
            "an empty name: no one is recorded so (leave --user out for everyone's entries)",
            ctx,
            param,
        )
    return one_line(ctx, param, value)  # type: ignore[no-any-return]


@click.command()
@click.option(
    "-n",
    "--count",
    type=click.IntRange(1, 10_000),
    default=50,
    show_default=True,
    help="Entries, newest first.",
)
@click.option("--user", "who", metavar="NAME", callback=_recorded_name, help="Only what NAME did.")
@as_json
@connection
def audit(
    count: int, who: str | None, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """The audit log: every change made through the API or the command line (who, with which
    role, via which, what, on what, from where), newest first."""
    entries = audit_log.recent(open_client(redis_url, namespace), count, who=who)
    empty = "the audit log is empty" if who is None else _nothing_by(who)
    if as_json:
        if not entries and who is not None:
            click.echo(empty, err=True)
        print_json(entries)
        return
    table(
        None,
        ["when", "who", "role", "via", "action", "target", "from"],
        [
            [when(e["at"]), e["who"], e["role"], e["via"], e["action"], e["target"], e["address"]]
            for e in entries
        ],
        empty=empty,
    )


def _nothing_by(who: str) -> str:
    """What a ``--user`` that matched nothing says: also that the name is no user's, when the
    users store's rule refuses it (only a $FLOWS_USER or a login name can then be recorded so)."""
    problem = name_problem(who)
    why = (
        ""
        if problem is None
        else f" ({problem}: no user of the dashboard is named so, only a $FLOWS_USER or a login "
        "name may be)"
    )
    return f"nothing by {visible(who)} in the audit log{why}"
