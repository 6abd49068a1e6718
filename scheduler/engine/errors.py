"""Exceptions raised by the engine and the client.

The engine replies to a refused call with a Redis error whose first word is a stable code
(see ``lua/README.md``); each code maps to exactly one class here::

    FlowsError                      anything this project raises on purpose
    ├── (flows) InvalidFlow, ParamError, ExpansionError: a flow file or its params are wrong
    ├── EngineError                 the engine refused a call (code INTERNAL: an engine bug)
    │   ├── InvalidArgument         INVALID: missing, malformed or out-of-range argument
    │   ├── JobNotFound             NOTFOUND: no such job (or recurring job)
    │   ├── WrongState              WRONGSTATE: the job is not in a state the command accepts
    │   ├── LockLost                LOCKLOST: the worker no longer holds the job's lock
    │   ├── HasDependents           HASDEPENDENTS: cancel would strand a dependent
    │   ├── TooLarge                TOOLARGE: a payload, id or list is over its size limit
    │   └── UnknownCommand          UNKNOWNCOMMAND: the engine has no such command
    ├── ServerError                 no usable Redis server (not found, failed to start, bad policy)
    │   ├── UnsupportedServer       it lacks a command the engine calls, or Functions and scripts
    │   │                           (scheduler.engine.server_support; names the server's version)
    │   ├── ForeignEngine           a Functions library under the engine's name whose code is not
    │   │                           this release's: never run
    │   └── ServerFault             the server refused or the connection failed
    (scheduler.engine.faults):
    │       ├── ServerUnavailable   cannot connect, or the connection broke
    │       ├── AuthenticationFailed wrong user name or password
    │       ├── ServerOutOfMemory   at maxmemory: writes refused, reads work
    │       ├── ServerReadOnly      a read-only replica: writes refused, reads work
    │       └── PermissionDenied    the ACL user may not run a command (``command`` names it)
    └── ClusterError                a Redis Cluster or Sentinel could not serve an engine call
        ├── ClusterDown             CLUSTERDOWN / no master for the slot within the failover wait
        ├── SlotMoving              MOVED / ASK / TRYAGAIN kept coming: the slot is migrating
        ├── ReadOnlyReplica         READONLY: the node became a replica, no new master found
        ├── OutcomeUnknown          the connection broke after the call was sent: it may have run
        ├── NotReplicated           the write ran, but no replica acknowledged it in time (WAIT)
        └── NamespaceNotInOneSlot   the namespace's keys would not share one hash slot

The fault classes live in :mod:`scheduler.engine.faults` and are imported from there: they also
derive from redis-py's exceptions, and this module stays free of redis (the pure flows modules
derive from :class:`FlowsError`), so it does not import them.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal, ParamSpec, TypeVar

from scheduler.terminal import CONTROL_OR_NEWLINE, escape

if TYPE_CHECKING:  # redis-free at import time: the pure flows modules derive from FlowsError
    import redis


ENV_DEBUG = "FLOWS_DEBUG"
"""Set to 1 to see the traceback of an error instead of its one line (``flows --debug``)."""


Given = Literal["flag", "environment", "argument"]
"""How a program was given its Redis URL (or a worker setting): a command's flag (which falls
back on the environment variable), the environment variable alone, or an argument of the Python
API (the default). Faults and setting errors point at what to fix in these words."""

#: Where a URL given each way is found, for the advice to fix it.
URL_GIVEN_IN: dict[Given, str] = {
    "flag": "--redis or $FLOWS_REDIS_URL",
    "environment": "$FLOWS_REDIS_URL",
    "argument": "the URL given to Client()",
}

_GIVEN_NOW: contextvars.ContextVar[Given] = contextvars.ContextVar("given", default="argument")


@contextlib.contextmanager
def given_as(given: Given) -> Iterator[None]:
    """Within it, URLs and settings are given as ``given``: the command line runs each command
    in ``given_as("flag")``, so its connections' faults name ``--redis``."""
    token = _GIVEN_NOW.set(given)
    try:
        yield
    finally:
        _GIVEN_NOW.reset(token)


def given_now() -> Given:
    """How URLs and settings are given in this context (:func:`given_as`)."""
    return _GIVEN_NOW.get()


GIVEN_ENV = "FLOWS_GIVEN_AS"
"""Tells a process the library starts (a pool's child) how its starter was given its URL and
settings (:data:`Given`), for its faults to point where the user can fix them."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def carrying_given(target: Callable[_P, _R]) -> Callable[_P, _R]:
    """``target``, to run in a thread this one starts, wording faults as this thread does: a
    new thread starts with none of its starter's context (:func:`given_as`), so a worker's
    slot would otherwise say ``Client()`` under ``flows worker``."""
    given = given_now()

    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with given_as(given):
            return target(*args, **kwargs)

    return run


def given_by_starter(default: Given) -> Given:
    """How the process that started this one was given its URL (:data:`GIVEN_ENV`), else
    ``default``."""
    told = os.environ.get(GIVEN_ENV, "")
    return told if told in URL_GIVEN_IN else default


def debug_enabled() -> bool:
    return os.environ.get(ENV_DEBUG, "").strip().lower() in ("1", "true", "yes", "on")


# Longest text quoted in a one-line message (a server reply, a value from a file).
MAX_QUOTE = 300


def shorten(text: str, limit: int = MAX_QUOTE) -> str:
    """``text`` on one line, cut to ``limit`` characters with a note of how much was left out."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit]}... ({len(flat) - limit:,} more characters)"


def counted(number: int, noun: str) -> str:
    """``1 thread``, ``2 threads``: ``number`` and ``noun``, plural unless it is one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


# The engine's name for the command it refused, which its messages start with ("RunRerun(): ");
# also after a prefix the client adds to one ("job j: FlowSubmit(): ").
_COMMAND_NAME = re.compile(r"(^|: )[A-Z][A-Za-z0-9]*\(\): ")


def without_command(text: str) -> str:
    """An engine refusal's ``text`` without the engine's name for the command it refused
    (``RunRerun(): run r has no step s`` -> ``run r has no step s``): how the command line and
    flow findings say it, in the words of the command the user gave, and so do the API's error
    bodies (:func:`scheduler.engine.faults.told`). The logs keep the name."""
    return _COMMAND_NAME.sub(r"\1", text, count=1)


class FlowsError(Exception):
    """Base class of every error this project raises on purpose."""


class EngineError(FlowsError):
    """The engine refused a call. ``code`` is the reply's first word, ``command`` the command.

    The message shows every control character (newline too) as ``\\xNN`` and every
    bidirectional control as ``\\uNNNN`` (:mod:`scheduler.terminal`): it may quote a value the
    caller sent (a jid, a queue, a klass, a number that is none), and a library's caller prints
    or logs it as it is. Escaped here, once for every message, whoever made it: the engine (its
    Lua ``%q`` leaves control characters but newline and NUL as they are, and some messages
    quote a value without it), an engine of another version, or the client's own checks."""

    code = "INTERNAL"

    def __init__(self, message: str, *, command: str | None = None) -> None:
        message = CONTROL_OR_NEWLINE.sub(escape, message)
        super().__init__(message)
        self.message = message
        self.command = command


class InvalidArgument(EngineError):
    """An argument is missing, malformed or out of range (``INVALID``); nothing was done."""

    code = "INVALID"


class JobNotFound(EngineError):
    """No such job, or recurring job (``NOTFOUND``)."""

    code = "NOTFOUND"


class WrongState(EngineError):
    """The job is not in a state the command accepts (``WRONGSTATE``): completing a job
    that is not running, say; nothing was done."""

    code = "WRONGSTATE"


class LockLost(EngineError):
    """This worker no longer holds the job's lock (``LOCKLOST``): it timed out, or another
    worker took the job; the call was refused."""

    code = "LOCKLOST"


class HasDependents(EngineError):
    """Canceling the job would strand a job that depends on it (``HASDEPENDENTS``);
    cancel them together."""

    code = "HASDEPENDENTS"


class TooLarge(EngineError):
    """A payload, id or list is over its size limit (``TOOLARGE``; the limits are
    :mod:`scheduler.engine.limits`)."""

    code = "TOOLARGE"


class UnknownCommand(EngineError):
    """The engine has no such command (``UNKNOWNCOMMAND``)."""

    code = "UNKNOWNCOMMAND"


class ServerError(FlowsError):
    """No usable Redis server: none found, it failed to start, or it is configured unsafely."""


class ClientClosed(FlowsError, RuntimeError):
    """A call on a :class:`~scheduler.engine.client.Client` after its ``close()`` closed the
    connection it opened: refused rather than opening one nobody would close."""

    def __init__(self) -> None:
        super().__init__(
            "this Client was closed: make a new one (or keep it open, as a `with` block does)"
        )


class ForeignEngine(ServerError):
    """The server holds a Functions library (or function) under the engine's versioned name
    whose code is not this release's engine, byte for byte: the client refuses to call it, since
    whoever could load it chose what it runs with the caller's rights."""


class ClusterError(FlowsError):
    """A Redis Cluster or Sentinel could not serve an engine call. Every class but
    :class:`OutcomeUnknown` and :class:`NotReplicated` means the call did not run."""


class ClusterDown(ClusterError):
    """No master served the namespace's slot (CLUSTERDOWN, connection refused, Sentinel knows
    no master) for the whole failover wait."""


class SlotMoving(ClusterError):
    """MOVED, ASK or TRYAGAIN replies for the whole failover wait: the slot is being migrated."""


class ReadOnlyReplica(ClusterError):
    """The node answered READONLY (it was demoted to a replica) and no new master was found."""


class OutcomeUnknown(ClusterError):
    """The connection broke after the call was sent: it may or may not have run (not resent,
    because running it twice would not be the same as once)."""


class NotReplicated(ClusterError):
    """The write ran on the master, but fewer replicas than asked acknowledged it in time
    (durable mode's ``WAIT``): a failover now could lose it."""


class NamespaceNotInOneSlot(ClusterError):
    """On a Redis Cluster the namespace's keys must share one hash slot (a ``{tag}`` prefix)."""


ERRORS_BY_CODE: dict[str, type[EngineError]] = {
    cls.code: cls
    for cls in (
        EngineError,
        InvalidArgument,
        JobNotFound,
        WrongState,
        LockLost,
        HasDependents,
        TooLarge,
        UnknownCommand,
    )
}

# Redis appends " script: <sha>, on @user_script:<line>." to errors raised inside scripts.
_SCRIPT_SUFFIX = re.compile(r"\s*script: \S+, on @user_(?:script|function):\d+\.?$")


def translate(error: redis.ResponseError, command: str | None = None) -> FlowsError | None:
    """Map an engine error reply to its exception class, or None if it is not an engine error."""
    text = _SCRIPT_SUFFIX.sub("", str(error))
    code, _, rest = text.partition(" ")
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return None
    return cls(rest or text, command=command)


__all__ = [
    "ERRORS_BY_CODE",
    "ClientClosed",
    "ClusterDown",
    "ClusterError",
    "EngineError",
    "FlowsError",
    "ForeignEngine",
    "HasDependents",
    "InvalidArgument",
    "JobNotFound",
    "LockLost",
    "NamespaceNotInOneSlot",
    "NotReplicated",
    "OutcomeUnknown",
    "ReadOnlyReplica",
    "ServerError",
    "SlotMoving",
    "TooLarge",
    "UnknownCommand",
    "WrongState",
    "counted",
    "shorten",
    "translate",
    "without_command",
]
