"""Options shared by many commands, declared once."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

redis_url = click.option(
    "--redis",
    "redis_url",
    envvar="FLOWS_REDIS_URL",
    metavar="URL",
    default=None,
    help="Redis URL (redis://, rediss://, unix://, redis+cluster://, redis+sentinel://). "
    "Default: $FLOWS_REDIS_URL, else the embedded server.",
)

namespace = click.option(
    "--namespace",
    envvar="FLOWS_NAMESPACE",
    default=None,
    metavar="PREFIX",
    help="Namespace: a name (billing: keys under '{billing}:') or a key prefix ending in ':'. "
    "Default: $FLOWS_NAMESPACE, else 'ql:' (a Redis Cluster needs one).",
)


class FiniteFloat(click.FloatRange):
    """A float range that also refuses NaN and infinities (``click.FloatRange`` lets NaN through:
    every comparison with NaN is false)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        result = super().convert(value, param, ctx)
        if not math.isfinite(result):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return result


as_json = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


def connection(func: F) -> F:
    """Add --redis and --namespace to a command."""
    return redis_url(namespace(func))


# `flows plan` and `flows run` describe a run the same way.
param = click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A param of the run (repeatable). Text is converted to the param's type: an array as "
    "a,b,c or a JSON list, an object as JSON, a bool as true/false.",
)
logical_time = click.option(
    "--logical-time",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]),
    default=None,
    help="The moment the run stands for (${{ run.logical_date }}; UTC unless an offset is "
    "given). Default: now.",
)


def run_id(default: str) -> Callable[[F], F]:
    """``--run-id``, whose default ``default`` describes."""
    return click.option(
        "--run-id",
        default=None,
        metavar="ID",
        help=f"The run's id (its jobs are ID:<step>). Default: {default}.",
    )
