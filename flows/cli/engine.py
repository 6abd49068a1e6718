"""``flows engine``: the Lua job engine as an artefact for other clients.

``flows engine bundle`` prints the qless-compatible script (load it with ``SCRIPT LOAD`` and call
``EVALSHA <sha> 0 <command> <now> <args...>`` from any qless client, which gets qless-core's
replies, events and semantics: the qless dialect); ``--functions`` prints the Redis Functions
library the Python client loads instead (the native dialect). ``flows engine info`` shows the names
and hashes by which a server knows this version of the engine. ``flows engine load`` loads it
into a server (an operator's step where workers may not: docs/pages/acl.md).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import click
import redis

from flows.cli.common import open_client, user_errors
from flows.cli.options import as_json, connection
from flows.cli.server import print_fields
from scheduler.engine import scripts


def register(group: click.Group) -> None:
    """Add the ``engine`` group to ``group``."""
    group.add_command(engine)


def _source(functions: bool) -> str:
    try:
        return scripts.functions_library() if functions else scripts.qless_bundle()
    except scripts.BundleError as error:
        raise click.ClickException(str(error)) from None


@click.group()
def engine() -> None:
    """The Lua job engine: print it for other qless clients, show its version, load it."""


@engine.command()
@click.option(
    "--functions",
    is_flag=True,
    help="Print the Redis Functions library (for FUNCTION LOAD) instead of the EVAL script.",
)
def bundle(functions: bool) -> None:
    """Print the engine script to stdout (qless calling convention, for SCRIPT LOAD)."""
    click.echo(_source(functions), nl=False)


def engine_info() -> dict[str, Any]:
    """The engine's identity: where its sources are and the names a server knows it by."""
    bundle_text = _source(functions=False)
    return {
        "sources": str(scripts.lua_dir()),
        "source_hash": scripts.source_hash(),
        "bundle_sha1": hashlib.sha1(bundle_text.encode()).hexdigest(),
        "bundle_bytes": len(bundle_text.encode()),
        "library": scripts.library_name(),
        "function": scripts.function_name(),
    }


@engine.command()
@as_json
def info(as_json: bool) -> None:
    """Show the engine's sources, its EVALSHA hash and its Functions library name."""
    data = engine_info()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    print_fields(data)


@engine.command()
@connection
def load(redis_url: str | None, namespace: str | None) -> None:
    """Load this release's engine into the server, or check the one loaded there.

    Every command loads it when it is missing, as its user may; run this as an operator after
    an upgrade where the workers' and the service's users may not (no function|load). A
    Functions library under the engine's name whose code is not this release's is refused,
    and left for an operator to delete.
    """
    client = open_client(redis_url, namespace)
    engine = client.engine
    with user_errors():
        try:
            loaded = engine.load()
        except redis.RedisError as error:
            raise engine.fault(error, "load") from error
    if engine.uses_functions:
        state = "loaded" if loaded else "already loaded, its code checked"
        click.echo(f"{scripts.library_name()}: {state}")
    else:
        click.echo(f"script {engine.script_sha}: loaded (the server has no Functions)")
