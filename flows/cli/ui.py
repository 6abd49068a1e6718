"""``flows ui``: the REST API, live events and metrics over HTTP (the dashboard's process)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import click
import redis

from flows.access.users import Users
from flows.cli.common import open_client, unless_unworkable, user_errors
from flows.cli.notifications import env_file_option, use_env_file
from flows.cli.options import connection, log_level_option
from flows.ui.auth import (
    ENV_TOKEN,
    Auth,
    TokenError,
    reached_through,
    server_token,
)
from flows.ui.roles import RoleAuth
from scheduler.engine.backoff import wait_for_server
from scheduler.engine.client import Client
from scheduler.hosts import is_loopback
from scheduler.terminal import log_to_stderr

log = logging.getLogger("flows.ui")


def register(group: click.Group) -> None:
    group.add_command(ui)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"File holding the bearer token that writes (and reads, off loopback or behind a "
    f"proxy) need; "
    f"default ${ENV_TOKEN}. Without one, writes are refused. Read again when it changes: a "
    f"rotated token works without a restart.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests naming this server as NAME (a DNS name or address it is reached "
    "by, e.g. behind a proxy); repeatable. Loopback names and --host are always answered. A "
    "name that is not loopback means reads need a token.",
)
@click.option(
    "--read-only-open",
    is_flag=True,
    help="Answer reads without a token even on a non-loopback address or behind a proxy.",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDR",
    callback=lambda _ctx, _param, values: _proxies(values),
    help="Believe X-Forwarded-For and X-Forwarded-Proto from this address or network (a "
    "reverse proxy in front, e.g. 127.0.0.1); repeatable. Default: from no one, so the audit "
    "log records the address that connected. Reads then need a token.",
)
@click.option(
    "--flows-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A folder of flow files: every one is listed and can be started (scheduled or not), "
    "and its flows' webhook triggers are served. Default: the flow files the scheduler "
    "services publish of their folders.",
)
@env_file_option
@log_level_option
@connection
def ui(
    host: str,
    port: int,
    token_file: Path | None,
    allowed_hosts: tuple[str, ...],
    read_only_open: bool,
    trusted_proxies: tuple[str, ...],
    flows_dir: Path | None,
    env_file: Path | None,
    log_level: str,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Serve the dashboard (/), the REST API (/api/v1/, OpenAPI at /api/v1/openapi.json) and
    /metrics.

    A Functions library on the server that is not this release's engine, the server refusing
    its login or a permission, or a malformed URL stops it at the start with one line saying
    what to do, exit 78;
    such a library found while it serves makes every request that reads or writes the engine
    answer 503 with that line until an operator has loaded the engine. SIGTERM or SIGINT stops it
    cleanly, exit 0 (a second: at once)."""
    import uvicorn

    from flows.ui import events
    from flows.ui.app import create_app
    from flows.ui.guard import allowed_hosts as allowed_hosts_for

    log_to_stderr(log_level, "%(asctime)s %(levelname)s %(message)s")
    try:
        token, rotated = server_token(token_file)
    except TokenError as error:
        raise click.ClickException(str(error)) from None
    listening = _bind(host, port)  # a busy port is said before anything else
    client = open_client(redis_url, namespace, long_lived=True)
    users = Users(client)
    try:
        with user_errors(), unless_unworkable():  # as the scheduler and the workers stop
            # Started before its server, or during a failover: wait for it, as workers do.
            wait_for_server(log, "flows ui: starting", _loader(client), client=client.redis)
            has_users = users.any()
    except BaseException:
        listening.close()
        raise
    # A proxy on this machine forwards anyone's requests from loopback: listening there is
    # then no longer "only this machine".
    proxy = reached_through(allowed_hosts, trusted_proxies)
    exposed = f"listening on {host}" if not is_loopback(host) else None
    if exposed is None and proxy is not None:
        exposed = f"answering requests forwarded from elsewhere ({proxy})"
    if exposed is not None and token is None and not has_users and not read_only_open:
        listening.close()
        raise click.ClickException(
            f"{exposed} needs a token (--token-file or ${ENV_TOKEN}) or a user "
            "(flows user add), or --read-only-open to answer reads from anyone without one"
        )
    base = Auth.for_server(token, host, read_only_open, proxied=proxy is not None)
    use_env_file(env_file)  # the webhook triggers' secrets
    auth = RoleAuth(base.token, base.reads_open, token_file=rotated, users=users)
    app = create_app(
        client,
        auth,
        flows_dir.resolve() if flows_dir else None,
        hosts=allowed_hosts_for(host, allowed_hosts),
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        # Its records go to this command's log, in its format; its start-up and shut-down
        # steps (INFO) only when asked for (--log-level DEBUG): the lines below say both.
        log_config=None,
        log_level=_web_server_level(logging.getLevelNamesMapping()[log_level]),
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=5,  # open event streams would otherwise hold the stop forever
        # uvicorn believes X-Forwarded-For from 127.0.0.1 (or $FORWARDED_ALLOW_IPS) unless told
        # otherwise: anyone on this machine could then choose the address the audit log
        # records. Only a proxy named with --trusted-proxy is believed.
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies),
    )

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            events.stop_all()  # open streams end now, so the stop waits for none of them
            if self.should_exit:  # a second signal, of either kind: stop now
                self.force_exit = True
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn's own raises the signal it stopped on again once stopped, and a SIGTERM
            # then ends the process with 143: a stop asked for is a clean stop, exit 0, as the
            # scheduler service and the workers end theirs.
            if threading.current_thread() is not threading.main_thread():
                yield  # Python takes signals in the main thread only
                return
            stops = (signal.SIGTERM, signal.SIGINT)
            before = {signum: signal.signal(signum, self.handle_exit) for signum in stops}
            try:
                yield
            finally:
                for signum, handler in before.items():
                    signal.signal(signum, handler)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            log.info("flows ui stopped")

    server = _Server(config)
    bound = listening.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"flows ui on http://{shown}:{bound} (dashboard /, API /api/v1/, metrics /metrics; "
        f"reads {'open' if base.reads_open else 'need a token'}; "
        f"writes {'need a token' if token or has_users else 'disabled: no token'})",
        err=True,
    )
    server.run(sockets=[listening])
    sys.exit(0 if server.started else 1)


def _proxies(values: tuple[str, ...]) -> tuple[str, ...]:
    """Each ``--trusted-proxy`` as uvicorn matches it (an address, or a network in its normal
    form); anything else is refused, as uvicorn would take it for a name that never matches (or
    ``*`` for anyone) without a word."""
    out = []
    for value in values:
        text = value.strip()
        try:
            out.append(
                str(ipaddress.ip_network(text, strict=False))
                if "/" in text
                else str(ipaddress.ip_address(text))
            )
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/8)",
                param_hint="--trusted-proxy",
            ) from None
    return tuple(out)


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``, before anything says it serves there; a busy port
    is one line saying what to do."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise click.BadParameter(f"{host!r}: {error.strerror}", param_hint="--host") from None
    listening = socket.socket(family, kind, proto)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(address)
    except OSError as error:
        listening.close()
        if error.errno == errno.EADDRINUSE:
            raise click.ClickException(
                f"port {port} on {host} is already in use (another flows ui?): stop what "
                "listens there, or choose another port with --port (0: any free port)"
            ) from None
        raise click.ClickException(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return listening


def _web_server_level(level: int) -> int:
    """uvicorn's log level for ours: its start-up and shut-down steps (INFO) only at DEBUG."""
    return level if level <= logging.DEBUG else max(level, logging.WARNING)


def _loader(client: Client) -> Callable[[], object]:
    """Load the engine, a fault of the server said as every command says it (where, as whom)."""

    def load() -> object:
        try:
            return client.engine.load()
        except redis.RedisError as error:
            raise client.engine.fault(error) from None

    return load
