"""The error boundary: what the server refused, said in one line a user can act on.

Faults of the server or of the connection (not of the call's arguments) become one class each,
also raised by the client (:class:`~scheduler.engine.scripts.Engine` translates them)::

    ServerError
    ├── ServerUnavailable       cannot connect, the connection broke, or no Redis answers
    ├── AuthenticationFailed    wrong user name or password (also a redis AuthenticationError)
    ├── ServerOutOfMemory       the server is at maxmemory and refuses writes
    ├── ServerReadOnly          the server is a read-only replica
    ├── ServerWithoutReplicas   NOREPLICAS: too few replicas for min-replicas-to-write
    └── PermissionDenied        the ACL user may not run a command (``command`` names it)

Each also derives from the redis-py exception it replaces, so code that catches
``redis.RedisError`` (a worker's retry loops) keeps working. Messages name the server as
``host:port`` or the socket path and the namespace, never a password.

:func:`one_line` is the boundary itself: the CLI, the worker and the scheduler service call it on
any exception to get the one line they print or log (``--debug`` / ``FLOWS_DEBUG=1`` shows the
traceback instead).
"""

from __future__ import annotations

import re
from typing import Any, cast

import redis

from scheduler.engine.connections import keeper_of, redact_url, url_given_in
from scheduler.engine.errors import (
    ENV_DEBUG,
    EngineError,
    FlowsError,
    ServerError,
    debug_enabled,
    shorten,
    without_command,
)


class ServerFault(ServerError):
    """The server (or the way to it) refused a call; ``where`` names it, ``command`` the call."""

    def __init__(self, message: str, *, where: str = "", command: str | None = None) -> None:
        super().__init__(message)
        self.where = where
        self.command = command

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ServerUnavailable(ServerFault, redis.exceptions.ConnectionError):
    """No connection to the server: it is not running, not reachable, the connection broke, or
    what answers there does not speak Redis's protocol."""


class AuthenticationFailed(ServerFault, redis.exceptions.AuthenticationError):
    """The server refused the user name or password."""


class ServerOutOfMemory(ServerFault, redis.exceptions.OutOfMemoryError):
    """The server is at ``maxmemory`` (policy ``noeviction``) and refuses writes; reads work."""


class ServerReadOnly(ServerFault, redis.exceptions.ReadOnlyError):
    """The server is a read-only replica and refuses writes; reads work."""


class ServerWithoutReplicas(ServerFault, redis.exceptions.ResponseError):
    """The master has fewer good replicas than its ``min-replicas-to-write`` and refuses
    writes (``NOREPLICAS``): cut off by a partition, it takes nothing the heal would wipe."""


class PermissionDenied(ServerFault, redis.exceptions.NoPermissionError):
    """The ACL user may not run ``command`` (or read or write one of its keys)."""


# -- where ---------------------------------------------------------------------------------------


def _connection_kwargs(client: redis.Redis) -> dict[str, Any]:
    """What the client connects with: its pool's, or a cluster client's (which has no one
    pool) shared by its nodes, the node it asks first giving the address."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return dict(pool.connection_kwargs)
    cluster = cast(Any, client)
    node = cluster.get_default_node()
    return {**cluster.get_connection_kwargs(), "host": node.host, "port": node.port}


def address(client: redis.Redis) -> str:
    """``host:port`` or the unix socket path of a redis-py client (never its password); for a
    Sentinel-managed master, whose settings hold no host, its service and the sentinels."""
    pool = getattr(client, "connection_pool", None)
    service = getattr(pool, "service_name", None)
    if service is not None:
        sentinels = cast(Any, pool).sentinel_manager.sentinels
        asked = ", ".join(_host_port(_connection_kwargs(sentinel)) for sentinel in sentinels)
        return f"the master of Sentinel service {service} (sentinels {asked})"
    return _host_port(_connection_kwargs(client))


def _host_port(kwargs: dict[str, Any]) -> str:
    if kwargs.get("path"):
        return str(kwargs["path"])
    host = str(kwargs.get("host", "localhost"))
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{kwargs.get('port', 6379)}"


def user_of(client: redis.Redis) -> str:
    return str(_connection_kwargs(client).get("username") or "default")


def where(client: redis.Redis, prefix: str | None = None) -> str:
    return f"Redis at {address(client)}" + (f" (namespace {prefix})" if prefix else "")


# -- translating ---------------------------------------------------------------------------------

_REDIS_COMMAND = re.compile(r"run the '([^']+)' command")


def login_fix(client: redis.Redis | None = None) -> str:
    """What to do when the server refuses the login, wherever it is said."""
    return (
        f"check the user name and password in {url_given_in(client)}, and that the ACL user is"
        " enabled (a server restarted without its ACL file has lost its users)"
    )


def login_refused(error: BaseException) -> bool:
    """Whether ``error`` is the server refusing the user name or password (redis-py raises it
    as a :class:`redis.ConnectionError`, but no server started, no wait, mends it)."""
    return isinstance(error, redis.exceptions.AuthenticationError) or str(error).startswith(
        ("WRONGPASS", "NOAUTH", "invalid username-password")
    )


def access_refused(error: BaseException) -> bool:
    """Whether the server refused ``error``'s caller its login or a permission: it stays
    refused until an operator changes the credentials or the ACL user."""
    return isinstance(
        error, (AuthenticationFailed, PermissionDenied, redis.exceptions.NoPermissionError)
    ) or (isinstance(error, redis.RedisError) and login_refused(error))


def _redis_command(text: str) -> str | None:
    match = _REDIS_COMMAND.search(text)
    return match.group(1) if match else None


def _call(command: str | None) -> str:
    return f"engine command {command!r}" if command else "the command"


def translate(
    error: redis.RedisError,
    client: redis.Redis,
    prefix: str | None = None,
    command: str | None = None,
) -> ServerFault | None:
    """The fault class for a redis-py error raised calling ``command``; None if it is none.

    Error replies the engine passes on from the server (``NOPERM``/``OOM``/``READONLY`` raised
    inside the script) arrive as the same redis-py classes as the server's own.
    """
    if isinstance(error, ServerFault):
        return error
    at = where(client, prefix)
    reason = shorten(str(error)).rstrip(".")
    if login_refused(error):
        return AuthenticationFailed(
            f"{at} refused the login as user {user_of(client)!r} ({reason}): {login_fix(client)}",
            where=at,
            command=command,
        )
    if isinstance(error, redis.exceptions.InvalidResponse):  # a web server, an SSH daemon...
        return ServerUnavailable(
            f"{at} does not answer as a Redis server does ({reason}): check the host and port"
            f" in {url_given_in(client)}",
            where=at,
            command=command,
        )
    if isinstance(error, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        keeper = keeper_of(client)
        fix = (
            keeper.unreachable
            if keeper is not None
            else f"start the server, or check the host and port in {url_given_in(client)}"
        )
        return ServerUnavailable(f"cannot reach {at}: {reason}; {fix}", where=at, command=command)
    if isinstance(error, redis.exceptions.OutOfMemoryError):
        return ServerOutOfMemory(
            f"{at} is out of memory (used memory > maxmemory) and refuses writes: {_call(command)}"
            " was not run and nothing changed; free memory (delete or truncate finished jobs, "
            "lower jobs-history) or raise maxmemory; reads still work",
            where=at,
            command=command,
        )
    if isinstance(error, redis.exceptions.ReadOnlyError):
        return ServerReadOnly(
            f"{at} is a read-only replica and refuses writes: {_call(command)} was not run; "
            f"point {url_given_in(client)} at the primary; reads still work",
            where=at,
            command=command,
        )
    if reason.startswith("NOREPLICAS"):
        return ServerWithoutReplicas(
            f"{at} has fewer replicas than its min-replicas-to-write and refuses writes:"
            f" {_call(command)} was not run; writes resume once a replica is back; reads work",
            where=at,
            command=command,
        )
    if isinstance(error, redis.exceptions.NoPermissionError) or "ACL failure" in reason:
        refused = _redis_command(reason)
        what = f"Redis command {refused!r}" if refused else "a key or command it needs"
        needed = "" if command in (None, refused) else f" (needed by engine command {command!r})"
        return PermissionDenied(
            f"{at}: ACL user {user_of(client)!r} may not run {what}{needed}, so nothing was done;"
            ' use a user granted it (see "Least-privilege Redis users" in the docs)',
            where=at,
            command=refused or command,
        )
    return None


_ACL_USER = re.compile(r"^User (\S+) has no permissions")


def _refused_by_acl(text: str) -> str:
    """A NOPERM reply to a command sent outside the engine, worded as :func:`translate` words
    the engine's (the user is named where the server's reply names it: Valkey, Redis 7.2+)."""
    user = _ACL_USER.search(text)
    refused = _redis_command(text)
    who = f"ACL user {user.group(1)!r}" if user else "the ACL user"
    what = f"Redis command {refused!r}" if refused else "a key or command it needs"
    return (
        f"Redis refused the command: {who} may not run {what};"
        ' use a user granted it (see "Least-privilege Redis users" in the docs)'
    )


def one_line(error: BaseException) -> str:
    """What a user is told about ``error``: one line, without a traceback or a password."""
    if isinstance(error, (FlowsError, EngineError)):
        text = str(error)
    elif isinstance(error, redis.RedisError) and login_refused(error):
        text = f"Redis refused the login ({shorten(str(error)).rstrip('.')}): {login_fix()}"
    elif isinstance(error, redis.exceptions.ConnectionError):
        fix = f"start the server, or check the host and port in {url_given_in()}"
        text = f"cannot reach Redis: {error}; {fix}"
    elif isinstance(error, redis.exceptions.NoPermissionError):  # a command sent, not the engine
        text = _refused_by_acl(str(error))
    elif isinstance(error, redis.RedisError):
        text = f"Redis refused the command: {error}"
    else:
        text = (
            f"unexpected error ({type(error).__name__}: {error}); for the traceback, run it "
            f"again as `flows --debug COMMAND ...` (or with {ENV_DEBUG}=1)"
        )
    lines = [line for line in redact_url(text).splitlines() if line.strip()]
    return shorten(lines[0] if lines else type(error).__name__, MAX_LINE) + (
        "" if len(lines) <= 1 else "\n" + "\n".join(lines[1:])
    )


def told(error: BaseException) -> str:
    """What the person who gave a command is told about ``error``, by the command line and by
    the HTTP API's error bodies alike: :func:`one_line`, for an engine refusal without the
    engine's name for the command it refused (:func:`~scheduler.engine.errors.without_command`).
    Logs keep the name (:func:`one_line`)."""
    text = one_line(error)
    return without_command(text) if isinstance(error, EngineError) else text


MAX_LINE = 2000
"""The most characters of an error's line (:func:`one_line`, :func:`cut_long_lines`): a value
pasted by mistake (a file's content) is quoted cut short, not echoed whole."""


# Room for the note a cut line ends with ("... (98,089 more characters)"): a line cut already
# is not cut again.
_NOTE_ROOM = 40


def cut_long_lines(text: str) -> str:
    """``text`` with each line over :data:`MAX_LINE` characters cut short (saying how much was
    left out), the others, and those cut already, as they are."""
    return "\n".join(
        shorten(line, MAX_LINE) if len(line) > MAX_LINE + _NOTE_ROOM else line
        for line in text.split("\n")
    )


__all__ = [
    "ENV_DEBUG",
    "AuthenticationFailed",
    "PermissionDenied",
    "ServerFault",
    "ServerOutOfMemory",
    "ServerReadOnly",
    "ServerUnavailable",
    "ServerWithoutReplicas",
    "access_refused",
    "address",
    "cut_long_lines",
    "debug_enabled",
    "login_refused",
    "one_line",
    "told",
    "translate",
    "where",
]
