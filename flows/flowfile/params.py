"""Params: ``-p key=value`` parsing, values checked against declared types, defaults applied.

Types and their values (JSON-ready): ``string``; ``int``; ``number`` (int or float); ``bool``;
``date`` (text ``YYYY-MM-DD``); ``array`` (items of ``items.type``); ``object`` (a mapping).
On the command line an array is JSON (``[1, 2]``) or comma-separated (``de,at,ch``), an object
is JSON, a bool is true/false, yes/no, on/off or 1/0.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from flows.flowfile.findings import describe, did_you_mean, quoted
from flows.flowfile.model import Param
from flows.flowfile.templates import OPEN, strings
from scheduler.engine.errors import FlowsError
from scheduler.engine.limits import (
    MAX_RESULT_DEPTH,
    PAST_JSON_NUMBERS,
    json_depth,
    json_fault,
)

MAX_DEPTH = MAX_RESULT_DEPTH
"""How deeply a param's value may nest: as a step's outputs and a signal's data, so that a run's
record and its jobs' data, which hold it a few levels down, stay within what the engine stores
and every surface reads back."""

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_EXPECTED = {
    "string": "a string",
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "date": "a date such as 2025-01-31",
    "array": "a list",
    "object": "a mapping",
}


class ParamError(FlowsError, ValueError):
    """Params that cannot be used; ``problems`` lists each with what to do, and ``missing``
    the required params not given (how to give one is the caller's to say: ``-p`` on the
    command line, a JSON body in the API)."""

    def __init__(self, problems: Sequence[str], missing: Sequence[str] = ()) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)
        self.missing = list(missing)


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """``["date=2025-01-31", "regions=de,at"]`` → a mapping; each name at most once."""
    given: dict[str, str] = {}
    problems: list[str] = []
    for pair in pairs:
        name, equals, value = pair.partition("=")
        name = name.strip()
        if not equals or not name:
            problems.append(f"'{pair}' is not name=value (e.g. -p date=2025-01-31)")
        elif name in given:
            problems.append(f"param '{name}' is given twice")
        else:
            given[name] = value
    if problems:
        raise ParamError(problems)
    return given


def type_problem(value: Any, param: Param) -> str | None:
    """Why ``value`` is not a valid ``param.type`` value, or None when it is."""
    expected = _EXPECTED[param.type]
    if not _matches(value, param.type):
        return f"expected {expected}, got {describe(value)}"
    if param.type == "array" and param.items is not None:
        for index, item in enumerate(value):
            if not _matches(item, param.items.type):
                wanted = _EXPECTED[param.items.type]
                return f"item {index}: expected {wanted}, got {describe(item)}"
    return None


def choice_problem(value: Any, param: Param) -> str | None:
    """Why ``value`` is not one of ``param.choices``, or None when it is (or there are none)."""
    if param.choices is None or value in param.choices:
        return None
    shown = ", ".join(str(choice) for choice in param.choices[:20])
    more = f" and {len(param.choices) - 20} more" if len(param.choices) > 20 else ""
    hint = did_you_mean(str(value), [str(choice) for choice in param.choices])
    named = quoted(value) if isinstance(value, str) else repr(value)
    return f"{named} is not one of its choices ({shown}{more})" + (f"; {hint}" if hint else "")


def value_problem(value: Any, param: Param) -> str | None:
    """Why ``value`` cannot be ``param``'s value (its type, then its choices), or None."""
    return type_problem(value, param) or choice_problem(value, param)


def _matches(value: Any, kind: str) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "date": _is_date,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    return checks[kind](value)


def _is_date(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 10:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def from_text(text: str, param: Param) -> Any:
    """A command-line value as ``param.type``; raises ValueError saying what was expected."""
    try:
        return _convert(text, param)
    except RecursionError:  # deeper than this interpreter's JSON decoder goes
        raise ValueError(f"nests more than {MAX_DEPTH} levels deep") from None
    except ValueError as error:
        if str(error).startswith(("expected", "an integer", "item ")):
            raise
        raise ValueError(f"expected {_EXPECTED[param.type]}, got {quoted(text)}") from None


def _convert(text: str, param: Param) -> Any:
    kind = param.type
    if kind == "array":
        items = json.loads(text) if text.lstrip().startswith("[") else _split(text)
        item_param = Param(type=param.items.type) if param.items else Param()
        if isinstance(items, list) and param.items is not None and param.items.type != "string":
            items = [_item(index, i, item_param) for index, i in enumerate(items)]
        return items
    if kind == "object":
        return json.loads(text)
    if kind == "int":
        return _integer(text)
    if kind == "number":
        number = float(text)
        return int(number) if number.is_integer() and "." not in text else number
    if kind == "bool":
        lowered = text.strip().lower()
        if lowered not in _TRUE | _FALSE:
            raise ValueError(f"expected true or false (or yes/no, on/off, 1/0), got {quoted(text)}")
        return lowered in _TRUE
    return text


def _item(index: int, item: Any, param: Param) -> Any:
    """Item ``index`` of an array param given as text, as the item type: a problem names the
    item, as :func:`type_problem` names it."""
    if not isinstance(item, str):
        return item
    try:
        return from_text(item, param)
    except ValueError as error:
        raise ValueError(f"item {index}: {error}") from None


def _integer(text: str) -> int:
    """``text`` as an integer. One too long for Python to read (past 4,300 digits) is an
    integer all the same, and past what JSON holds: said so, not "expected an integer"."""
    try:
        return int(text)
    except ValueError:
        digits = text.strip().lstrip("+-").replace("_", "")
        if not digits.isdecimal():
            raise
        raise ValueError(
            f"an integer of {len(digits):,} digits, {PAST_JSON_NUMBERS}; give it as text"
        ) from None


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",")] if text.strip() else []


def _given(value: Any, param: Param) -> tuple[Any, str | None]:
    """A given value as ``param.type`` (text is converted), or why it cannot be used: it does
    not convert, nests too deeply, holds what JSON cannot (NaN, an infinity, a lone surrogate),
    or holds a template."""
    if isinstance(value, str) and param.type != "string":
        try:
            value = from_text(value, param)
        except ValueError as error:
            return value, str(error)
    if json_depth(value, MAX_DEPTH) > MAX_DEPTH:
        return value, f"nests more than {MAX_DEPTH} levels deep"
    # NaN, 1e999, a lone surrogate (an argv not UTF-8): the engine stores none of them
    fault = json_fault(value)
    if fault is not None:
        place, what = fault
        return value, f"at {place}, {what}" if place else what
    if any(OPEN in text for _, text in strings(value)):
        return value, f"values cannot contain '{OPEN}'"
    return value, None


def bind_params(
    declared: Mapping[str, Param],
    given: Mapping[str, Any],
    render_default: Callable[[Any], Any],
) -> dict[str, Any]:
    """Every declared param's value for a run: given (text is converted), else its default.

    ``render_default`` resolves the templates a default may hold (``${{ run.logical_date }}``).
    Raises :class:`ParamError` listing unknown names (with the closest declared one), missing
    required params, values of the wrong type and values not among the param's choices.
    """
    problems: list[str] = []
    for name in given:
        if name not in declared:
            hint = did_you_mean(name, declared) or (
                f"declared: {', '.join(declared)}" if declared else "the flow declares no params"
            )
            problems.append(f"unknown param '{name}' ({hint})")
    values: dict[str, Any] = {}
    missing: list[str] = []
    for name, param in declared.items():
        if name in given:
            value, problem = _given(given[name], param)
            if problem:
                problems.append(f"param '{name}': {problem}")
                continue
        elif param.has_default:
            value = render_default(param.default)
        elif param.is_required:
            problems.append(f"missing required param '{name}'")
            missing.append(name)
            continue
        else:
            value = None
        problem = None if value is None and not param.is_required else value_problem(value, param)
        if problem:
            problems.append(f"param '{name}': {problem}")
        values[name] = value
    if problems:
        raise ParamError(problems, missing)
    return values
