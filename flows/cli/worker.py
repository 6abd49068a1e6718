"""``flows worker``: run workers on queues."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from flows.cli.common import open_client, user_errors
from flows.cli.namespaces import namespaces_of, run_per_namespace
from flows.cli.notifications import env_file_option, use_env_file
from flows.cli.options import connection, setting_option
from scheduler import embedded
from scheduler.engine.client import Client
from scheduler.worker import Worker, WorkerPool
from scheduler.worker.imports import import_path
from scheduler.worker.settings import SettingError, WorkerSettings, table


def register(group: click.Group) -> None:
    group.add_command(worker)


def serve_metrics(client: Client, queues: list[str], host: str, port: int) -> None:
    """Serve the metrics of ``queues`` (flows.ui.metrics) from a thread of this process."""
    from prometheus_client import start_http_server

    from flows.ui.metrics import registry

    try:
        start_http_server(port, addr=host, registry=registry(client, queues))
    except OSError as error:
        raise click.ClickException(
            f"cannot serve metrics on {host}:{port}: {error.strerror}"
        ) from None


# flows worker runs flows' own hook before each job: a flow step's upstream outputs resolved.
DEFAULTS: dict[str, Any] = {"prepare": "flows.worker_hook:prepare"}


def worker_settings(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add an option for each worker setting ``flows worker`` offers (the table in
    :mod:`scheduler.worker.settings`); the command receives them as one ``settings``."""
    offered = [each for each in table() if each.cli]

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        given = {each.name: values.pop(each.name) for each in offered}
        try:  # each value was checked as its option already; this catches a rule across them
            settings = WorkerSettings(**given)
        except SettingError as error:
            raise click.BadParameter(error.problem, param_hint=error.setting.flag) from None
        return func(settings=settings, **values)

    for each in reversed(offered):
        command = setting_option(each, DEFAULTS.get(each.name, each.default))(command)
    return command


@click.command()
@worker_settings
@click.option(
    "--processes",
    type=click.IntRange(min=0),
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
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."
)
@env_file_option
@connection
def worker(
    settings: WorkerSettings,
    processes: int,
    metrics_port: int | None,
    metrics_host: str,
    env_file: Path | None,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run jobs from QUEUES until stopped (SIGTERM/SIGINT: finish, then hand back; twice: now).

    With several namespaces (--namespace a,b) each gets its own worker, in a child process.
    """
    use_env_file(env_file)  # before the pool starts: its processes inherit $FLOWS_ENV_FILE
    several = namespaces_of(namespace)
    if len(several) > 1:
        sys.exit(run_per_namespace(several))
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s",
    )
    with user_errors():
        url = embedded.resolve_url(redis_url)
    if metrics_port is not None:
        client = open_client(url, namespace)
        serve_metrics(client, list(settings.queues), metrics_host, metrics_port)
    with user_errors():  # an unsafe server (eviction policy) is refused with how to fix it
        if processes == 0:
            import_path(settings.paths)  # as a pool child does: see scheduler/worker/__main__.py
            client = open_client(url, namespace)
            if settings.name:
                client.worker_name = settings.name
            code = Worker(client, settings.queues, **settings.worker_options()).run()
        else:
            code = WorkerPool(url, settings, processes=processes, namespace=namespace).run()
    sys.exit(code)
