"""Fan-out from outputs: a ``foreach`` whose items are another step's output. Pure.

``foreach: {items: "${{ steps.list.outputs.files }}", as: f}`` cannot be expanded when the run
is submitted: the step becomes one *template* job (``<run>:<step>``) waiting for its needs, with
a ``fanout`` spec the engine reads (``{"from": <producer jid>, "output": "files"}``). The engine
call that completes the producer puts one job per item (``<run>:<step>[i]``), makes the step's
dependents wait for every item and deletes the template, all at once
(``lua/include/fanout.lua``); no items complete the template with ``[]``; an output that is not
a list of at most :data:`MAX_ITEMS` items fails it in group :data:`INVALID_GROUP`.

The jobs hold no item: each finds it when it starts, like step outputs, as item ``i`` (the
``[i]`` of its jid) of :func:`items_of` the producer's output (the producer is one of its
upstream steps). A step that reads such a step's outputs finds its item jobs the same way
(:meth:`flows.flowfile.job_data.FlowsMeta.expanded`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from flows.flowfile.templates import STEPS, Reference, whole_reference
from scheduler.engine.limits import MAX_FANOUT_ITEMS

MAX_ITEMS: Final = MAX_FANOUT_ITEMS
"""Items of one fan-out: the engine refuses more (``Fanout.MAX_ITEMS``)."""
INVALID_GROUP: Final = "fanout-invalid"
"""The failure group of a fan-out step whose producer's output is not a list of items."""
FANOUT_KEY: Final = "fanout"
"""The meta key (:mod:`flows.flowfile.job_data`) of a fan-out step's jobs:
``{"from": <producer step>, "output": <key>, "as": <item name>}``."""

_ITEM_INDEX = re.compile(r"\[(\d+)\]$")


class FanoutError(ValueError):
    """An output that cannot be a fan-out's items (the engine fails the step the same way)."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where a fan-out step's items come from: ``steps.<step>.outputs.<output>``."""

    step: str
    output: str


def source_of(items: Any) -> Source | None:
    """The source when ``items`` (a foreach's, as written) is exactly one template
    ``${{ steps.<step>.outputs.<output> }}``; None otherwise (a list, a param)."""
    reference = whole_reference(items) if isinstance(items, str) else None
    if reference is None or reference.root != STEPS:
        return None
    path = reference.path
    if len(path) != 4 or path[2] != "outputs":
        return None
    return Source(path[1], path[3])


def is_source_reference(reference: Reference) -> bool:
    """Whether ``reference`` has the shape of a fan-out source: ``steps.<id>.outputs.<key>``."""
    path = reference.path
    return reference.root == STEPS and len(path) == 4 and path[2] == "outputs"


def items_of(value: Any, output: str) -> list[Any]:
    """The items of an output, as the engine counts them: a list, or text holding a JSON array
    (a shell step's outputs are text); an empty mapping counts as an empty list (the engine's
    JSON decoder cannot tell ``{}`` from ``[]``). Raises :class:`FanoutError` otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise FanoutError(
                f'output "{output}" is text that is not a JSON array: {value[:60]!r}'
            ) from None
    if value is None:
        raise FanoutError(f'the producer has no output "{output}"')
    if isinstance(value, Mapping) and not value:
        return []
    if not isinstance(value, list):
        raise FanoutError(f'output "{output}" is {type(value).__name__}, not a list')
    if len(value) > MAX_ITEMS:
        raise FanoutError(
            f'output "{output}" has {len(value)} items, more than the limit of {MAX_ITEMS}'
        )
    return value


def item_index(jid: str) -> int | None:
    """The item index of a fan-out item's jid (``<run>:<step>[i]``); None for the template."""
    found = _ITEM_INDEX.search(jid)
    return int(found.group(1)) if found else None


def item_jids(template: str, count: int) -> list[str]:
    """The jids of a fan-out's items, in item order."""
    return [f"{template}[{i}]" for i in range(count)]
