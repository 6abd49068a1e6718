"""Pydantic validation errors, as findings a person can act on.

Each error's location is walked against the loaded data to find its data path (and so its line
and column), its message is rewritten with the field path and what was found, and a hint is
added: the closest allowed key for an unknown key (``need`` → ``needs``), where a misplaced key
belongs, the allowed values of an enum. A type error on a value that YAML 1.1 turned into a
number or boolean reports that trap instead (``on is read as the boolean true; quote it``).
"""

from __future__ import annotations

import json
import re
import time
import types
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from flows.flowfile.findings import (
    DataPath,
    FindingSink,
    closest,
    describe,
    did_you_mean,
    path_text,
)
from flows.flowfile.model import (
    ID_PATTERN,
    SUBFLOW_PATH_PATTERN,
    THROTTLE_PATTERN,
    Catchup,
    Concurrency,
    Flow,
    Foreach,
    Param,
    Retry,
    Wait,
)
from flows.flowfile.templates import OPEN
from flows.flowfile.yaml_reader import Trap
from flows.validation.template_checks import template_place_problem
from scheduler.cron import validate_schedule

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "datetime_type": "a date or date-time such as 2025-01-31 or 2025-01-31T02:00:00+01:00",
    "datetime_parsing": "a date or date-time such as 2025-01-31 or 2025-01-31T02:00:00+01:00",
    "datetime_from_date_parsing": "a date or date-time such as 2025-01-31",
}
_RANGE = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}
PATTERN_HINTS = {
    ID_PATTERN: "use letters, digits, '_' and '-', starting with a letter or '_'",
    r"^[a-z0-9_-]+$": "use lowercase letters, digits, '_' and '-', e.g. 'sales-etl'",
    r"^[A-Za-z0-9_.-]+$": "use letters, digits, '_', '.' and '-'",
    THROTTLE_PATTERN: "use letters, digits, '_', '.', ':' and '-'",
    SUBFLOW_PATH_PATTERN: (
        "a .yaml or .yml file's path, relative to this file, without spaces or '$'"
    ),
    r"^[^\s,]+$": "a tag has no spaces or commas",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "use letters, digits and '_', starting with a letter or '_'",
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$": (
        "a dotted path to a callable, such as 'tasks.extract' or 'etl.jobs.Load'"
    ),
}
_MISSING_HINTS = {
    "version": "add 'version: 1' at the top",
    "name": "add 'name: <lowercase-name>' at the top",
    "steps": "add 'steps:' with at least one step",
    "cron": "add 'cron: \"0 2 * * *\"' (minute hour day-of-month month day-of-week)",
    "items": "add 'items:' with a list, or a template naming an array param",
}
# Keys people bring from other tools, and what this schema calls them.
_SYNONYMS = {
    "depends_on": "needs",
    "depends": "needs",
    "dependencies": "needs",
    "requires": "needs",
    "after": "needs",
    "command": "run",
    "cmd": "run",
    "script": "run",
    "shell": "run",
    "call": "job",
    "callable": "job",
    "function": "job",
    "task": "job",
    "uses": "job",
    "args": "with",
    "arguments": "with",
    "inputs": "with",
    "kwargs": "with",
    "retries": "retry",
    "environment": "env",
    "workdir": "cwd",
    "working_directory": "cwd",
    "working-directory": "cwd",
    "loop": "foreach",
    "when": "trigger_rule",
}
# A value written where a mapping goes, standing for one of its fields (retry: 3): that field,
# and what to know about it.
_SHORTHANDS: dict[type[BaseModel], tuple[str, str]] = {
    Retry: ("attempts", " (tries in all, the first one included)"),
    Concurrency: ("max_active_runs", ""),
    Catchup: ("policy", ""),
    Wait: ("signal", ""),
    Foreach: ("items", ""),
}
# A hook written in a step, and the trigger rule of a step after it that does what it meant.
_HOOK_STEPS = {"on_failure": "one_failed", "on_success": "", "finally": "all_done"}
_STEPS_AS_LIST = "key each step by its id: steps: {extract: {run: ...}}, not '- name: extract'"


def report_model_errors(
    error: ValidationError,
    data: Mapping[str, Any],
    sink: FindingSink,
    traps: Mapping[DataPath, Trap],
) -> set[DataPath]:
    """Add a finding for each error of ``error``; return the trap paths that explained one."""
    explained: set[DataPath] = set()
    for details in _one_per_union(error.errors(include_url=False), data):
        path, at_key, missing = _data_path(details["loc"], data)
        place = (details.get("ctx") or {}).get("place")
        if place:  # the model named the part of the value that is wrong
            path, at_key, missing = _data_path((*path, *place), data)
        trap = traps.get(path)
        if (
            trap is not None
            and not at_key
            and details["type"] not in ("extra_forbidden", "missing")
        ):
            sink.error(path, "yaml-trap", f"{path_text(path)}: {trap.message}", trap.hint)
            explained.add(path)
            continue
        code, message, hint = _describe(details, path, missing)
        # About a whole mapping (a step, say): point at its key, where the reader looks.
        at_key = at_key or details["type"] == "extra_forbidden" or _is_mapping(data, path)
        sink.error(path, code, message, hint, at_key=at_key)
    return explained


def _one_per_union(errors: list[ErrorDetails], data: Any) -> list[ErrorDetails]:
    """The errors, those of one value that is of none of a union's types (a choice that may
    be text, an integer or a number) made one, expecting any of them."""
    by_path: dict[DataPath, list[ErrorDetails]] = {}
    for details in errors:
        by_path.setdefault(_data_path(details["loc"], data)[0], []).append(details)
    merged: list[ErrorDetails] = []
    for group in by_path.values():
        kinds = [details["type"] for details in group]
        if len(group) > 1 and all(kind in _EXPECTED for kind in kinds):
            wanted = list(dict.fromkeys(_EXPECTED[kind] for kind in kinds))
            expected = (
                ", ".join(wanted[:-1]) + f" or {wanted[-1]}" if len(wanted) > 1 else wanted[0]
            )
            first = group[0]
            merged.append({**first, "ctx": {"expected": expected}})
        else:
            merged.extend(group)
    return merged


def _data_path(loc: tuple[int | str, ...], data: Any) -> tuple[DataPath, bool, str | None]:
    """The part of ``loc`` that exists in ``data``, whether it is about a key, a missing key.

    Pydantic adds entries that are not in the data (``[key]`` for a mapping key, validator and
    union labels); the first means "the key", the others are skipped.
    """
    path: list[str | int] = []
    current = data
    for position, part in enumerate(loc):
        if part == "[key]":
            return tuple(path), True, None
        in_mapping = isinstance(current, Mapping) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_mapping or in_list:
            current = current[part]
            path.append(part)
        elif position == len(loc) - 1 and isinstance(part, str):
            return tuple(path), False, part
    return tuple(path), False, None


def _describe(details: ErrorDetails, path: DataPath, missing: str | None) -> tuple[str, str, str]:
    """(code, message, hint) for one pydantic error."""
    kind = details["type"]
    ctx: dict[str, Any] = dict(details.get("ctx") or {})
    field = path_text(path)
    value = details.get("input")
    if isinstance(value, str) and OPEN in value and kind == "string_pattern_mismatch":
        return ("template-place", *template_place_problem(path))
    if "message" in ctx:  # raised by the model with its own words (flows.flowfile.model.problem)
        message = (
            ctx["message"]
            if kind in ("generated_id", "reserved_id")
            else f"{field}: {ctx['message']}"
        )
        return kind.replace("_", "-"), message, str(ctx.get("hint", ""))
    if kind == "extra_forbidden":
        return "unknown-key", *_unknown_key(path)
    if kind == "missing":
        name = missing or "?"
        where = f" in {field}" if path else ""
        return "missing-key", f"missing required key '{name}'{where}", _MISSING_HINTS.get(name, "")
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'|(\d+)", str(ctx.get("expected", "")))
        choices = [quoted or number for quoted, number in allowed]
        message = f"{field}: {value!r} is not one of: {', '.join(choices)}"
        if isinstance(value, str) and value in (number for _, number in allowed):
            return "bad-value", message, f"write the number without quotes: {field}: {value}"
        return "bad-value", message, did_you_mean(str(value), choices)
    if kind in _EXPECTED:
        expected = ctx.get("expected", _EXPECTED[kind])
        message = f"{field}: expected {expected}, got {describe(value)}"
        return "wrong-type", message, _wrong_type_hint(kind, path, value)
    if kind in _RANGE:
        symbol, key = _RANGE[kind]
        return (
            "out-of-range",
            f"{field}: {value!r} is out of range (must be {symbol} {ctx[key]})",
            "",
        )
    if kind in _LENGTHS:
        return _length(kind, field, value, ctx)
    if kind == "string_pattern_mismatch":
        hint = PATTERN_HINTS.get(str(ctx.get("pattern")), "")  # a regular expression helps few
        return "bad-format", f"{field}: {value!r} is not allowed here", hint
    return kind.replace("_", "-"), f"{field}: {details['msg']}", ""


_LENGTHS = ("too_short", "too_long", "string_too_short", "string_too_long")


def _length(kind: str, field: str, value: Any, ctx: dict[str, Any]) -> tuple[str, str, str]:
    """(code, message, hint) for a list or a string of the wrong length."""
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "empty", f"{field}: must not be empty", ""
    if kind.startswith("string_"):
        limit = ctx.get("min_length") if kind == "string_too_short" else ctx.get("max_length")
        than = "shorter" if kind == "string_too_short" else "longer"
        return "out-of-range", f"{field}: {value!r} is {than} than {limit} characters", ""
    bound = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
    word = "at least" if kind == "too_short" else "at most"
    return "out-of-range", f"{field}: must have {word} {bound} entries", ""


def _wrong_type_hint(kind: str, path: DataPath, value: Any) -> str:
    if kind == "string_type" and isinstance(value, int | float):
        return f"quote it: '{str(value).lower() if isinstance(value, bool) else value}'"
    if path == ("schedule",) and isinstance(value, str):
        return _schedule_hint(value)
    if path == ("steps",) and isinstance(value, list):
        return _STEPS_AS_LIST
    if _is_step(path):
        return "a step is a mapping with 'run:' or 'job:'"
    return _shorthand_hint(path, value)


def _shorthand_hint(path: DataPath, value: Any) -> str:
    """``retry: 3`` → ``write retry: {attempts: 3}``: the mapping a plain value stands for
    (``n: 3`` under params: the param declared with that default)."""
    model = _model_at(path)
    if model is Param:
        return _param_hint(str(path[-1]), value)
    if model not in _SHORTHANDS or isinstance(value, bool) or not isinstance(value, str | int):
        return ""
    field, note = _SHORTHANDS[model]
    return f"write {path[-1]}: {{{field}: {_as_yaml(value)}}}{note}"


def _param_hint(name: str, value: Any) -> str:
    if value is None:
        return f"write {name}: {{type: string}} (without a default, every run must give it)"
    kind = next((k for types_, k in _PARAM_TYPES if isinstance(value, types_)), None)
    return f"write {name}: {{type: {kind}, default: {_as_yaml(value)}}}" if kind else ""


# A default's Python type → the param type it declares (bool before int: a bool is an int).
_PARAM_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "bool"),
    (int, "int"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
)


def _as_yaml(value: Any) -> str:
    """A value as a hint writes it in YAML: plain when it reads back the same, else JSON."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float) or (isinstance(value, str) and _PLAIN.fullmatch(value)):
        return str(value)
    return json.dumps(value)


# Text YAML reads back as the same text: a word, not one of YAML 1.1's booleans or null.
_PLAIN = re.compile(r"(?!(?i:true|false|yes|no|on|off|null)$)[A-Za-z_][\w.-]*")


def _schedule_hint(text: str) -> str:
    """``schedule: "0 2 * * *"``: the mapping it should be, and whether the text would do as
    its cron (the expression's first problem if not)."""
    written = f'write schedule: {{cron: "{text}"}}'
    errors = [p for p in validate_schedule(text, now=time.time()) if p.severity == "error"]
    if not errors:
        return f"{written} ('{text}' is a valid cron expression)"
    return f"{written}, and fix the expression: {errors[0].message}"


def _is_mapping(data: Any, path: DataPath) -> bool:
    for part in path:
        data = data[part]
    return bool(path) and isinstance(data, Mapping)


def _is_step(path: DataPath) -> bool:
    return len(path) == 2 and path[0] == "steps"


# -- unknown keys -------------------------------------------------------------------------------


def _unknown_key(path: DataPath) -> tuple[str, str]:
    key, parent = str(path[-1]), path[:-1]
    where = f" in {path_text(parent)}" if parent else " at the top level"
    model = _model_at(parent)
    if model is None:
        return f"unknown key '{key}'{where}", ""
    allowed = _keys_of(model)
    if _is_step(parent) and key in _HOOK_STEPS:  # a step's own on_failure: a flow's hook
        rule = _HOOK_STEPS[key]
        like = f"a step with needs: [{parent[1]}]" + (f" and trigger_rule: {rule}" if rule else "")
        return (
            f"unknown key '{key}'{where}",
            f"'{key}' goes under the flow's hooks: (after every step), or {like}",
        )
    # A key that is exactly one of a nested model's (cron → schedule:) says so before a look-alike.
    hint = _belongs_under(model, key, exact=True) or did_you_mean(key, allowed)
    if not hint and _SYNONYMS.get(key.lower()) in allowed:
        hint = f"did you mean '{_SYNONYMS[key.lower()]}'?"
    if not hint:
        hint = _belongs_under(model, key)
    if not hint:
        hint = "allowed keys: " + ", ".join(allowed)
    return f"unknown key '{key}'{where}", hint


def _belongs_under(model: type[BaseModel], key: str, exact: bool = False) -> str:
    """``cron`` at the top level → ``'cron' belongs under 'schedule:'`` (``exact``: only for a
    key spelled as the nested model spells it)."""
    for name, info in model.model_fields.items():
        nested = _as_model(info.annotation)
        if nested is None:
            continue
        if key in _keys_of(nested) or (not exact and closest(key, _keys_of(nested))):
            return f"'{key}' belongs under '{info.alias or name}:'"
    return ""


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(path: DataPath) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``path``, if one does."""
    current: Any = Flow
    for part in path:
        current = _strip(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            fields = {info.alias or name: info for name, info in current.model_fields.items()}
            if part not in fields:
                return None
            current = fields[str(part)].annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list:
            current = get_args(current)[0]
        else:
            return None
    return _as_model(current)


def _as_model(annotation: Any) -> type[BaseModel] | None:
    stripped = _strip(annotation)
    if isinstance(stripped, type) and issubclass(stripped, BaseModel):
        return stripped
    return None


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` → ``X``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation
