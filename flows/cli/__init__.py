"""The ``flows`` command line: one click group, one module per command group.

Each module in :data:`COMMAND_MODULES` defines ``register(group)``, which adds its commands.
Options shared by many commands (``--redis``, ``--namespace``, ``--json``) live in
:mod:`flows.cli.options`, declared once.
"""

from __future__ import annotations

import importlib
import os

import click

from flows.cli.common import GuardedGroup
from scheduler.engine.faults import ENV_DEBUG

# Modules of flows.cli that contribute commands, in the order `flows --help` lists them.
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
    cls=GuardedGroup,
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


for _name in COMMAND_MODULES:
    importlib.import_module(f"flows.cli.{_name}").register(main)
