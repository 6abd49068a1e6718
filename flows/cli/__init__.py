"""The ``flows`` command line: one click group, one module per command group.

Each module in :data:`COMMAND_MODULES` defines ``register(group)``, which adds its commands; a
module is imported only when one of its commands runs (:mod:`flows.cli.lazy`), and ``--help``
lists the commands from :mod:`flows.cli.catalog` (run ``python -m flows.cli.write_catalog``
after adding or renaming a command, or changing the first sentence of its docstring). Options
shared by many commands (``--redis``, ``--namespace``, ``--json``) live in
:mod:`flows.cli.options`, declared once.
"""

from __future__ import annotations

import os

import click

from flows.cli.catalog import COMMANDS
from flows.cli.lazy import LazyGroup
from scheduler.engine.errors import ENV_DEBUG

# Modules of flows.cli that contribute commands.
COMMAND_MODULES: list[str] = [
    "server",
    "engine",
    "worker",
    "jobs",
    "queue_admin",
    "run",
    "signal",
    "logs",
    "validate",
    "plan",
    "graph",
    "schema",
    "scheduler",
    "sources",
    "backfill",
    "doctor",
    "ui",
    "notifications",
    "users",
    "audit",
    "flowtest",
    "explain",
    "cache",
]


@click.group(
    cls=LazyGroup,
    modules=COMMAND_MODULES,
    catalog=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="redis-flows", prog_name="flows")
@click.option(
    "--debug",
    is_flag=True,
    help=f"Show the traceback of an error instead of one line (also ${ENV_DEBUG}=1).",
)
def main(debug: bool) -> None:
    """Declarative workflow scheduler on Redis: YAML pipelines, a job engine, workers, cron."""
    if debug:
        os.environ[ENV_DEBUG] = "1"  # also for the worker processes a supervisor starts
