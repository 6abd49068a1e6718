"""``flows worker``: run workers on queues."""

from __future__ import annotations

import logging
import sys

import click

from flows.cli.common import open_client, user_errors
from flows.cli.fanout import namespaces_of, run_per_namespace
from flows.cli.options import FiniteFloat, connection
from scheduler import embedded
from scheduler.engine.client import Client
from scheduler.worker import Worker, WorkerPool
from scheduler.worker.imports import import_path, load_object


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


@click.command()
@click.option("-q", "--queues", required=True, help="Comma-separated queues, e.g. etl,emails.")
@click.option(
    "--strategy",
    type=click.Choice(["ordered", "round-robin"]),
    default="ordered",
    show_default=True,
    help="ordered: drain the first queue before the next; round-robin: one from each in turn.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Worker processes kept alive by a supervisor; 0 runs jobs in this process.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Jobs at once per process.",
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    default=64,
    show_default=True,
    help="At most this many jobs popped ahead of the free threads while jobs finish within "
    "milliseconds (fewer for slower jobs, none for jobs of 20 ms or more); 0: never.",
)
@click.option("--burst", is_flag=True, help="Exit 0 once the queues are empty.")
@click.option("--name", help="Worker name (default <host>-<pid>).")
@click.option(
    "--shutdown-grace",
    type=FiniteFloat(min=0),
    default=30.0,
    show_default=True,
    help="Seconds running jobs get to finish after SIGTERM/SIGINT before they are handed back.",
)
@click.option(
    "--prepare",
    hidden=True,
    default="flows.worker_hook:prepare",
    help="module:function run before each job (default: resolve flow steps' upstream outputs).",
)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Also import job modules from this folder (repeatable); the working directory "
    "always comes first.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    help="Serve Prometheus metrics of the worker's queues on this port (at /metrics).",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."
)
@click.option(
    "--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR."
)
@connection
def worker(
    queues: str,
    strategy: str,
    processes: int,
    threads: int,
    prefetch: int,
    burst: bool,
    name: str | None,
    shutdown_grace: float,
    prepare: str | None,
    paths: tuple[str, ...],
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run jobs from QUEUES until stopped (SIGTERM/SIGINT: finish, then hand back; twice: now).

    With several namespaces (--namespace a,b) each gets its own worker, in a child process.
    """
    several = namespaces_of(namespace)
    if len(several) > 1:
        sys.exit(run_per_namespace(several))
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s",
    )
    names = [q.strip() for q in queues.split(",") if q.strip()]
    if not names:
        raise click.BadParameter("give at least one queue", param_hint="--queues")
    with user_errors():
        url = embedded.resolve_url(redis_url)
    if metrics_port is not None:
        serve_metrics(open_client(url, namespace), names, metrics_host, metrics_port)
    with user_errors():  # an unsafe server (eviction policy) is refused with how to fix it
        if processes == 0:
            import_path(paths)  # as a pool child does: see scheduler/worker/__main__.py
            client = open_client(url, namespace)
            if name:
                client.worker_name = name
            hook = load_object(prepare) if prepare else None
            code = Worker(
                client,
                names,
                strategy=strategy,  # type: ignore[arg-type]
                threads=threads,
                prefetch=prefetch,
                burst=burst,
                shutdown_grace=shutdown_grace,
                prepare=hook,
            ).run()
        else:
            code = WorkerPool(
                url,
                names,
                processes=processes,
                threads=threads,
                prefetch=prefetch,
                strategy=strategy,
                burst=burst,
                name=name,
                namespace=namespace,
                prepare=prepare,
                paths=paths,
                shutdown_grace=shutdown_grace,
                log_level=log_level.upper(),
            ).run()
    sys.exit(code)
