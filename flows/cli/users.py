"""``flows user add|list|revoke``: the users of ``flows ui`` and their roles."""

from __future__ import annotations

import click

from flows.access.users import ROLES, Users, name_problem
from flows.cli.auditing import who
from flows.cli.common import ago, open_client, print_json, table, user_errors
from flows.cli.options import as_json, connection


def register(group: click.Group) -> None:
    group.add_command(user)


def user_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Refuse, as a usage error before anything is sent, what is not a user name."""
    problem = name_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


@click.group()
def user() -> None:
    """Users of flows ui: viewer (reads), operator (also retries, reruns, cancels, approves,
    signals, triggers), admin (also schedules, queues, workers, throttles, users)."""


@user.command("add")
@click.argument("name", callback=user_name)
@click.option("--role", type=click.Choice(ROLES), required=True, help="What the user may do.")
@connection
def add(name: str, role: str, redis_url: str | None, namespace: str | None) -> None:
    """Add user NAME and print its token, once (only its hash is kept)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        token = Users(client).add(name, role, by=who())
    click.echo(f"user {name} added as {role}; its token (shown only now):", err=True)
    click.echo(token)


@user.command("list")
@as_json
@connection
def list_users(as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """The users and their roles (never their tokens)."""
    found = Users(open_client(redis_url, namespace)).list()
    if as_json:
        print_json([u.as_json() for u in found])
        return
    table(
        None,
        ["user", "role", "added", "by"],
        [[u.name, u.role, ago(u.created), u.by] for u in found],
        empty="no users: add one with `flows user add NAME --role ROLE`",
    )


@user.command("revoke")
@click.argument("name", callback=user_name)
@connection
def revoke(name: str, redis_url: str | None, namespace: str | None) -> None:
    """Remove user NAME: its token stops working at once."""
    client = open_client(redis_url, namespace)
    with user_errors():
        Users(client).revoke(name)
    click.echo(f"user {name} revoked", err=True)
