"""What the engine needs of its server, said in one line naming the server's version when the
server lacks it.

Two things can be missing: a way to load the engine at all (Redis Functions, Redis 7.0+, or
else scripts: ``SCRIPT LOAD`` / ``EVALSHA``), and a command the engine's Lua calls, absent from
an older server or renamed away by its configuration (``rename-command``). Either way the
server would answer with a bare "unknown command"; :class:`UnsupportedServer` says instead which
server this is, what it lacks and which version has it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import redis

from scheduler.engine.errors import ServerError

# The first Redis version with each command the engine uses that a Redis still met in the
# field may lack (Valkey, which forked from Redis 7.2, has them all).
SINCE: dict[str, str] = {
    "function": "7.0",
    "fcall": "7.0",
    "fcall_ro": "7.0",
    "getdel": "6.2",
    "lpos": "6.0.6",
    "zpopmin": "5.0",
    "xadd": "5.0",
}

# A script's call of a command the server does not have: Redis 6 says "Unknown Redis command
# called from Lua script", Redis 7 "... called from script", Valkey "Unknown command called from
# script".
_UNKNOWN_IN_SCRIPT = re.compile(r"unknown (?:redis )?command called from", re.IGNORECASE)
# A command sent by the client that the server does not have: "unknown command 'EVALSHA', ...".
_UNKNOWN_SENT = re.compile(r"unknown command [`'\"]?([A-Za-z_.|-]+)", re.IGNORECASE)
# The commands the engine's Lua calls by name (``redis.call('hset', ...)``, and the batched
# ``Engine.call_many('zadd', ...)``).
_CALLED = re.compile(r"(?:redis\.p?call|Engine\.call_many)\(\s*'([a-zA-Z_]+)'")


class UnsupportedServer(ServerError):
    """The server lacks what the engine needs (a way to load it, or a command it calls); the
    message names the server's version and what is needed."""


def is_unknown_command(error: BaseException) -> bool:
    """Whether ``error`` is the server's answer to a command it does not have (sent by the
    client or called by a script)."""
    text = str(error)
    return bool(_UNKNOWN_IN_SCRIPT.search(text) or _UNKNOWN_SENT.search(text))


def engine_commands(source: str) -> frozenset[str]:
    """The server commands the engine's Lua ``source`` calls by name."""
    return frozenset(name.lower() for name in _CALLED.findall(source))


def server_version(client: redis.Redis) -> str:
    """``redis 7.0.15``, ``valkey 8.1.1``: the server's name and version (INFO server)."""
    try:
        info: dict[str, Any] = client.info("server")
    except redis.RedisError:
        return "a server of unknown version"
    name = str(info.get("server_name") or ("valkey" if "valkey_version" in info else "redis"))
    return f"{name} {info.get(f'{name}_version') or info.get('redis_version', '?')}"


def missing_commands(client: redis.Redis, names: Iterable[str]) -> list[str]:
    """Those of ``names`` the server does not have (``COMMAND INFO`` answers nil for them),
    sorted. Read from the connection as sent: redis-py's reply parser fails on the nils."""
    wanted = sorted({name.lower() for name in names})
    if not wanted:
        return []
    pool = client.connection_pool
    connection: Any = pool.get_connection()  # redis-py's Connection is untyped
    try:
        connection.send_command("COMMAND", "INFO", *wanted)
        reply = connection.read_response()
    except redis.RedisError:
        return []
    finally:
        pool.release(connection)
    return [name for name, info in zip(wanted, reply or [], strict=False) if info is None]


def _needed(names: Iterable[str]) -> str:
    return ", ".join(
        name.upper() + (f" (Redis {SINCE[name]}+)" if name in SINCE else "") for name in names
    )


def lacking(client: redis.Redis, used: Iterable[str], command: str) -> UnsupportedServer:
    """The error for an engine call ``command`` that the server answered "unknown command":
    which of the commands ``used`` (the engine's, or the one the client sent) it lacks."""
    version = server_version(client)
    missing = missing_commands(client, used)
    if not missing:
        return UnsupportedServer(
            f"the server ({version}) does not know a command the engine's {command!r} uses;"
            " the engine is tested on Valkey 8 and Redis 7.0+"
        )
    return UnsupportedServer(
        f"the server ({version}) has no {_needed(missing)}, which the engine's {command!r}"
        " needs: use a server that has it (Valkey, or a newer Redis), or one whose"
        " configuration does not rename it away"
    )


def no_loader(client: redis.Redis) -> UnsupportedServer:
    """The error for a server that can load the engine neither as Functions nor as a script."""
    return UnsupportedServer(
        f"the server ({server_version(client)}) runs neither Functions (FUNCTION LOAD, FCALL:"
        " Redis 7.0+) nor scripts (SCRIPT LOAD, EVALSHA): the engine needs one of them"
        " (Valkey and Redis 7.0+ have both; a managed server may disable them)"
    )


def sent_command(error: BaseException) -> str | None:
    """The command a client-sent "unknown command" error names, lower-case (None: none, or
    the error is a script's call, which the server does not name)."""
    if _UNKNOWN_IN_SCRIPT.search(str(error)):
        return None
    match = _UNKNOWN_SENT.search(str(error))
    return match.group(1).lower() if match else None


__all__ = [
    "SINCE",
    "UnsupportedServer",
    "engine_commands",
    "is_unknown_command",
    "lacking",
    "missing_commands",
    "no_loader",
    "sent_command",
    "server_version",
]
