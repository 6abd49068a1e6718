"""``flows worker``: run workers on queues."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flows.cli.common import (
    cannot_work,
    note_new_queues,
    open_client,
    unless_unworkable,
    user_errors,
)
from flows.cli.namespaces import namespaces_of, run_per_namespace
from flows.cli.notifications import env_file_option, use_env_file
from flows.cli.options import connection, setting_option
from scheduler.connect import resolve_url
from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError, carrying_given, debug_enabled
from scheduler.terminal import log_to_stderr
from scheduler.worker import Worker, WorkerPool
from scheduler.worker.imports import import_path
from scheduler.worker.pool import MAX_PROCESSES
from scheduler.worker.settings import SettingError, WorkerSettings, table

if TYPE_CHECKING:
    from flows.ui.auth import TokenFile


def register(group: click.Group) -> None:
    group.add_command(worker)


def serve_metrics(
    client: Client,
    queues: list[str],
    host: str,
    port: int,
    token: str | None,
    rotated: TokenFile | None = None,
) -> None:
    """Serve the metrics of ``queues`` (flows.ui.metrics) from a thread of this process, under
    ``flows ui``'s rules: its own names only, and the bearer ``token`` when there is one (a
    presented token must be it; ``rotated``: the file it is read again from when it changes)."""
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client import make_wsgi_app

    from flows.ui.auth import presented_problem
    from flows.ui.guard import SECURITY_HEADERS, allowed_hosts, host_name
    from flows.ui.metrics import registry
    from scheduler.hosts import is_loopback

    metrics = make_wsgi_app(registry(client, queues))
    hosts = allowed_hosts(host)
    reads_open = is_loopback(host)

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        header = environ.get("HTTP_AUTHORIZATION", "")
        status, detail = 0, ""
        if host_name(environ.get("HTTP_HOST", "")) not in hosts:
            status, detail = 400, "this server does not answer as that host"
        elif not reads_open or header:
            status, detail = presented_problem(header, token, rotated) or (0, "")
        if status:
            reason = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden"}[status]
            body = json.dumps({"detail": detail}).encode()
            start_response(
                f"{status} {reason}",
                [("Content-Type", "application/json"), *SECURITY_HEADERS.items()]
                + ([("WWW-Authenticate", "Bearer")] if status == 401 else []),
            )
            return [body]

        def with_headers(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            return start_response(status, [*headers, *SECURITY_HEADERS.items()], *rest)

        return metrics(environ, with_headers)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        server = make_server(host, port, guarded, Server, Quiet)
    except OSError as error:
        raise click.ClickException(
            f"cannot serve metrics on {host}:{port}: {error.strerror}"
        ) from None
    threading.Thread(
        target=carrying_given(server.serve_forever), name="flows-metrics", daemon=True
    ).start()
    # The address to scrape, in the log an operator reads first (the pool's children do not
    # serve it, so this line comes once).
    shown = f"[{host}]" if ":" in host else host
    logging.getLogger("flows.worker").info(
        "metrics of %s at http://%s:%d/metrics (reads %s)",
        ",".join(queues),
        shown,
        port,
        "open" if reads_open else "need the token",
    )


# flows worker runs flows' own hook before each job: a flow step's upstream outputs resolved.
DEFAULTS: dict[str, Any] = {"prepare": "flows.runtime.worker_hook:prepare"}


def worker_settings(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add an option for each worker setting ``flows worker`` offers (the table in
    :mod:`scheduler.worker.settings`); the command receives them as one ``settings``."""
    offered = [each for each in table() if each.cli]

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        given = {each.name: values.pop(each.name) for each in offered}
        try:  # each value was checked as its option already; this catches a rule across them
            settings = WorkerSettings(**given)
            settings.check_processes(values["processes"])  # the names of a pool's processes
        except SettingError as error:
            raise click.BadParameter(error.problem, param_hint=f"'{error.setting.flag}'") from None
        return func(settings=settings, **values)

    for each in reversed(offered):
        command = setting_option(each, DEFAULTS.get(each.name, each.default))(command)
    return command


@click.command()
@worker_settings
@click.option(
    "--processes",
    type=click.IntRange(0, MAX_PROCESSES),
    default=1,
    show_default=True,
    help="Worker processes kept alive by a supervisor; 0 runs jobs in this process.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve Prometheus metrics of the worker's queues on this port (at /metrics).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address for --metrics-port; any but loopback needs a token (--metrics-token-file).",
)
@click.option(
    "--metrics-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File holding the bearer token that metrics requests need; default $FLOWS_UI_TOKEN. "
    "Needed to serve metrics on a non-loopback address. Read again when it changes: a rotated "
    "token works without a restart.",
)
@env_file_option
@connection
def worker(
    settings: WorkerSettings,
    processes: int,
    metrics_port: int | None,
    metrics_host: str,
    env_file: Path | None,
    metrics_token_file: Path | None,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run jobs from QUEUES until stopped (SIGTERM/SIGINT: finish, then hand back; twice: now).

    One SIGTERM/SIGINT, sent to this process or to all its processes at once (Ctrl-C, a process
    group, systemd), lets running jobs finish for --shutdown-grace seconds, hands back the rest
    and exits 0; a second stops at once (exit 1: the jobs left running wait again within
    seconds). A worker that cannot work however often it is restarted (a Functions library on
    the server that is not this release's engine, the server refusing its login or a
    permission, a malformed URL, a server that may evict jobs) stops with one line saying what
    to do, exit 78.

    With several namespaces (--namespace a,b) each gets its own worker, in a child process.
    """
    use_env_file(env_file)  # before the pool starts: its processes inherit $FLOWS_ENV_FILE
    several = namespaces_of(namespace)
    if len(several) > 1:
        sys.exit(run_per_namespace(several))
    # With --processes 0 a job's own log records reach this stderr too (the pool's children
    # set theirs up alike): shown, not obeyed, by the terminal.
    log_to_stderr(settings.log_level, "%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s")
    with user_errors(), unless_unworkable():  # the embedded server's folder unusable, say
        url = resolve_url(redis_url)
    if metrics_port is not None:
        from flows.ui.auth import ENV_TOKEN, TokenError, server_token
        from scheduler.hosts import is_loopback

        try:
            token, rotated = server_token(metrics_token_file)
        except TokenError as error:
            raise click.ClickException(str(error)) from None
        if token is None and not is_loopback(metrics_host):
            raise click.ClickException(
                f"serving metrics on {metrics_host} needs a token (--metrics-token-file or "
                f"${ENV_TOKEN})"
            )
        client = open_client(url, namespace, long_lived=True)
        serve_metrics(client, list(settings.queues), metrics_host, metrics_port, token, rotated)
    # A queue no job has used yet is fine for a worker: only a likely typo gets a note. A
    # server not there yet is the worker's to wait for, below, not the note's to report.
    with contextlib.suppress(Exception):
        note_new_queues(open_client(url, namespace), settings.queues)
    # An unsafe server (eviction policy) is refused with how to fix it.
    with user_errors(), unless_unworkable():
        if processes == 0:
            import_path(settings.paths)  # as a pool child does: see scheduler/worker/__main__.py
            client = open_client(url, namespace, long_lived=True)
            if settings.name:
                client.worker_name = settings.name
            in_process = Worker(client, settings=settings)
            try:
                code = in_process.run()
            except FlowsError as error:  # as a pool's process exits over it (and the pool)
                if error is not in_process.slots.fatal or debug_enabled():
                    raise
                raise cannot_work(error) from None
        else:
            code = WorkerPool(url, settings, processes=processes, namespace=namespace).run()
    sys.exit(code)
