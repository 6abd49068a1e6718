"""What a job function may return, decided here: JSON values, and the values JSON carries
faithfully as text (as web frameworks' JSON encoders write them).

A ``datetime``, ``date`` or ``time`` is stored as its ISO 8601 text, a ``UUID``, a ``Decimal``
and a path as their ``str()``, a tuple as a list, a key that is a number, bool or None as JSON
writes it (``1`` as ``"1"``, unless the dict also has ``"1"``). Anything else (a set, bytes, an
object) is refused with the place it holds in the result and its type: stored as ``repr()`` text
it would leave a dependent nothing to read.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from scheduler.engine.limits import json_place

_PLAIN = (str, int, float, bool, type(None))
_AS_TEXT = (uuid.UUID, decimal.Decimal, PurePath)
_ISO = (datetime.datetime, datetime.date, datetime.time)

ACCEPTED = (
    "JSON values (dict, list, str, int, float, bool, None; a key that is a number, bool or None"
    " as JSON writes it), tuples (as lists)"
    " and datetime, date, time, UUID, Decimal and path values (as text)"
)
"""What :func:`storable` accepts, in words (for a refusal and the docs)."""


class UnstorableResult(ValueError):
    """A result holding a value JSON cannot carry: its place in the result and its type."""


def storable(value: Any) -> Any:
    """``value`` with every value JSON carries as text made that text; raises
    :class:`UnstorableResult` at the first one it cannot carry."""
    return _storable(value, ["result"])


def _storable(value: Any, place: list[str | int]) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        carried = {
            _key(key, place): _storable(child, [*place, key]) for key, child in value.items()
        }
        if len(carried) < len(value):
            _refuse_equal_keys(value, place)
        return carried
    if isinstance(value, list | tuple):
        return [_storable(child, [*place, index]) for index, child in enumerate(value)]
    if isinstance(value, _ISO):
        return value.isoformat()
    if isinstance(value, _AS_TEXT):
        return str(value)
    raise UnstorableResult(
        f"{json_place(place)} is {_a(value)}, which JSON cannot carry{_hint(value)}; a result"
        f" holds {ACCEPTED}"
    )


def _key(key: Any, place: Sequence[str | int]) -> str:
    """A key as JSON writes it: text as it is, a number, bool or None as its JSON text (as a
    result of plain JSON values is stored), anything else refused."""
    if isinstance(key, str):
        return key
    if isinstance(key, _PLAIN):
        return str(next(iter(json.loads(json.dumps({key: None})))))
    raise UnstorableResult(
        f"{json_place(place)} has a key that is not text: {repr(key)[:40]} ({_type(key)});"
        " JSON keys are text"
    )


def _refuse_equal_keys(value: dict[Any, Any], place: Sequence[str | int]) -> None:
    """Two keys JSON writes alike (``1`` and ``"1"``): one value would be lost without a word."""
    seen: dict[str, Any] = {}
    for key in value:
        text = _key(key, place)
        if text in seen:
            raise UnstorableResult(
                f"{json_place(place)} has two keys JSON writes alike, as {json.dumps(text)}: "
                f"{repr(seen[text])[:40]} ({_type(seen[text])}) and {repr(key)[:40]} "
                f"({_type(key)})"
            )
        seen[text] = key


def _type(value: Any) -> str:
    kind = type(value)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def _a(value: Any) -> str:
    name = _type(value)
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _hint(value: Any) -> str:
    if isinstance(value, set | frozenset):
        return " (return a list: sorted(...) or list(...))"
    if isinstance(value, bytes | bytearray):
        return " (return text: .decode() or base64)"
    return ""
