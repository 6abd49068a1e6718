"""The engine's wire shapes: time and klass arguments, JSON text, and replies read as Python values.

Shared by every client module (jobs, queues, the client, events): a leaf, so none of them imports
another to read a reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeAlias

from scheduler.engine.limits import read_json

#: A time argument: epoch seconds, or ``""`` for the server's clock.
Now: TypeAlias = float | str
#: A job class: a dotted path, or a class / function whose dotted path is used
#: (:func:`~scheduler.engine.limits.check_klass`).
Klass: TypeAlias = str | Callable[..., Any]


def dumps(value: Any) -> str:
    """JSON text for the engine (compact)."""
    return json.dumps(value, separators=(",", ":"))


def loads(reply: Any) -> Any:
    """Decode a JSON reply (as every reader shows it: :func:`~scheduler.engine.limits.read_json`,
    a part nested too deeply cut); None and ``""`` stay None, non-text replies pass through."""
    if reply is None or reply == "":
        return None
    if isinstance(reply, bytes | str):
        return read_json(reply)
    return reply


def as_list(value: Any) -> list[Any]:
    """A list from a reply (JSON text or a Redis array); ``{}`` (cjson's empty) and None: ``[]``."""
    value = loads(value)
    if not value:
        return []
    if isinstance(value, list):
        return value
    raise TypeError(f"expected a list from the engine, got {value!r}")


def as_dict(value: Any) -> dict[str, Any]:
    """A dict from a reply: JSON text or a mapping; ``[]`` and None (empty) are ``{}``."""
    value = loads(value)
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    raise TypeError(f"expected an object from the engine, got {value!r}")


def as_bool(value: Any) -> bool:
    """A boolean from a reply: Lua true arrives as 1, JSON as ``"true"``."""
    return value in (True, 1, "1", "true")


def as_number(value: Any, default: float = 0.0) -> float:
    """A float from a reply field that may be missing, ``""`` or ``false``."""
    if value is None or value == "" or value is False:
        return default
    return float(value)


def as_int(value: Any, default: int = 0) -> int:
    """An int from a reply field (see :func:`as_number`)."""
    return int(as_number(value, default))


def optional_number(value: Any) -> float | None:
    """A float from a reply field, or None when it is missing, ``""`` or ``false``."""
    return None if value is None or value == "" or value is False else float(value)


def pairs(**options: Any) -> list[Any]:
    """Trailing ``(name, value)`` argument pairs for the options that are not None.

    Lists and dicts are sent as JSON text. Keyword names map to engine names with ``_`` kept.
    """
    out: list[Any] = []
    for name, value in options.items():
        if value is None:
            continue
        out += [name, dumps(value) if isinstance(value, list | tuple | dict) else value]
    return out
