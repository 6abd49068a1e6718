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
    └── ServerError                 no usable Redis server (not found, failed to start, bad policy)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # redis-free at import time: the pure flows modules derive from FlowsError
    import redis


class FlowsError(Exception):
    """Base class of every error this project raises on purpose."""


class EngineError(FlowsError):
    """The engine refused a call. ``code`` is the reply's first word, ``command`` the command."""

    code = "INTERNAL"

    def __init__(self, message: str, *, command: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.command = command


class InvalidArgument(EngineError):
    code = "INVALID"


class JobNotFound(EngineError):
    code = "NOTFOUND"


class WrongState(EngineError):
    code = "WRONGSTATE"


class LockLost(EngineError):
    code = "LOCKLOST"


class HasDependents(EngineError):
    code = "HASDEPENDENTS"


class TooLarge(EngineError):
    code = "TOOLARGE"


class UnknownCommand(EngineError):
    code = "UNKNOWNCOMMAND"


class ServerError(FlowsError):
    """No usable Redis server: none found, it failed to start, or it is configured unsafely."""


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
