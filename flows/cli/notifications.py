"""``flows notifications``: what was sent, what waits to be, and what could not be; and the
deliverer the scheduler service and ``flows run`` send the notifications' outbox with."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import click

from flows.cli.common import ago, open_client, print_json, table
from flows.cli.options import as_json, connection
from flows.cli.terminal import visible
from scheduler import secrets
from scheduler.engine.client import Client
from scheduler.engine.errors import carrying_given
from scheduler.notify import outbox
from scheduler.notify.documents import ChannelDocument, EventDocument, SendDocument, unsendable
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import EnvFileError
from scheduler.service.schedules import Schedules

log = logging.getLogger(__name__)


def register(group: click.Group) -> None:
    group.add_command(notifications)


env_file_option = click.option(
    "--env-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="NAME=value lines: secrets (of flows' secrets: and of notifications), looked up before "
    "the environment and $FLOWS_SECRETS_DIR, /run/secrets.",
)
"""The ``--env-file`` of the commands that resolve secrets (worker, run, scheduler)."""


def use_env_file(path: Path | None) -> None:
    """Resolve this process's secrets from ``path`` too (a bad file: a one-line error)."""
    try:
        secrets.use_env_file(path)
    except EnvFileError as error:
        raise click.ClickException(str(error)) from None


def notify_deliverer(
    client: Client, env_file: Path | None, dashboard: str, name: str, *, stable: bool = True
) -> Deliverer:
    """The deliverer of a long-lived process (``stable``: a consumer name that survives its
    restarts, so what it was sending when it died is sent first when it is back) or of one
    ``flows run``. A bad env file is a one-line error."""
    use_env_file(env_file)
    consumer = f"{socket.gethostname()}:{name}" if stable else None
    return Deliverer(client, secrets=secrets.store(), dashboard=dashboard, consumer=consumer)


def _checked_event_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A ``--retry`` that is no event id is a usage error, quoted with its control characters
    shown (it was typed or pasted: it may hold anything)."""
    problem = None if value is None else outbox.id_problem(value)
    if problem is not None:
        raise click.BadParameter(f"{visible(repr(value))} {problem}", ctx, param)
    return value


@click.command()
@click.option("--failed", "only_failed", is_flag=True, help="Only the deliveries given up.")
@click.option(
    "--retry",
    "retry_id",
    metavar="ID",
    callback=_checked_event_id,
    help="Send a given-up event again (to the channels that did not take it).",
)
@click.option(
    "-n",
    "--count",
    type=click.IntRange(1, 2000),
    default=30,
    show_default=True,
    help="How many of the latest sends to show.",
)
@as_json
@connection
def notifications(
    only_failed: bool,
    retry_id: str | None,
    count: int,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Notifications: given up (kept until retried), waiting to be sent, and the latest sends.

    Also the channels a scheduler service cannot send (a secret it lacks, a URL kept in a
    secret that is none), as each found when it loaded their flow files.

    A delivery that keeps failing is retried with a growing wait (5s, 10s, 20s ... up to 10
    minutes, 10 attempts), then kept here with each channel's status: `flows notifications
    --retry ID` sends it again to the channels that did not take it.
    """
    client = open_client(redis_url, namespace)
    if retry_id is not None:
        new_id = outbox.retry_failed(client, retry_id)
        if new_id is None:
            raise click.ClickException(outbox.not_given_up(client, retry_id))
        if as_json:
            print_json(outbox.retried(retry_id, new_id))
        else:
            click.echo(f"notification {retry_id} is back in the outbox as {new_id}", err=True)
        return
    given_up = outbox.failed(client)
    pending = [] if only_failed else outbox.waiting(client)
    sent = [] if only_failed else outbox.recent(client, count)
    stuck = [] if only_failed else unsendable(Schedules(client).services())
    if as_json:
        print_json({"failed": given_up, "waiting": pending, "recent": sent, "unsendable": stuck})
        return
    if stuck:
        table(
            "Channels a scheduler service cannot send",
            ["service", "file", "channel", "problem"],
            [[u["service"], u["file"], u["channel"], u["problem"]] for u in stuck],
        )
    if given_up:
        show_events("Given up", given_up, next_try=False)
    elif only_failed:
        click.echo("no notification was given up", err=True)
    if only_failed:
        return
    if pending:
        show_events("Waiting", pending, next_try=True)
    if sent:
        show_sends(sent)
    elif not given_up and not pending:
        click.echo("no notification was sent, is waiting or was given up", err=True)


def show_events(title: str, events: Sequence[EventDocument], *, next_try: bool) -> None:
    """A table of events (given up, or waiting: then with their next try), one row each."""
    columns = ["id", "kind", "scope", "run", "jid", "attempts"]
    columns += ["next try", "channel: status"] if next_try else ["channel: status"]
    rows = []
    for e in events:
        row = [e["id"], e["kind"], e["scope"], e["run"], e["jid"] or "", str(e["attempts"])]
        row += [ago(e["due"])] if next_try else []
        rows.append([*row, channel_lines(e["channels"])])
    table(title, columns, rows)


def show_sends(sends: Sequence[SendDocument]) -> None:
    """The latest sends, newest first."""
    table(
        "Latest sends",
        ["id", "event", "run", "channel", "status", "attempt", "by", "when", "error"],
        [
            [
                s["id"],
                s["event"],
                s["run"],
                s["channel"],
                s["status"],
                str(s["attempt"]),
                s["by"],
                ago(s["at"]),
                s["error"],
            ]
            for s in sends
        ],
    )


def channel_lines(channels: Iterable[ChannelDocument]) -> str:
    """One line per channel of an event: ``webhook https://...: delivered`` / ``...: failed
    (HTTP 502 Bad Gateway)``."""
    return "\n".join(
        f"{c['channel']}: {c['status']}" + (f" ({c['error']})" if c["error"] else "")
        for c in channels
    )


DRAIN_SECONDS = 30.0
"""How long ``flows run`` keeps sending its notifications after its run ended."""


@contextlib.contextmanager
def delivering(deliverer: Deliverer | None, interval: float = 0.5) -> Iterator[None]:
    """Send the outbox in a thread while the block runs, then what is left (up to
    :data:`DRAIN_SECONDS`); nothing when ``deliverer`` is None."""
    if deliverer is None:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                deliverer.tick()
            except Exception as error:  # Redis away for a moment: the next tick tries again
                log.warning("notifications: %s", error)

    thread = threading.Thread(target=carrying_given(loop), name="flows-notify", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if not deliverer.drain(DRAIN_SECONDS):
            click.echo(
                "some notifications are not sent yet (see `flows notifications`): the "
                "scheduler service sends them",
                err=True,
            )
        deliverer.forget()


def dashboard_url() -> str:
    """The dashboard's address for links in notifications (``$FLOWS_DASHBOARD_URL``)."""
    return os.environ.get("FLOWS_DASHBOARD_URL", "")
