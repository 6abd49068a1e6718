"""The kinds of event the engine publishes, read from its sources, are the ones Python knows
(``scheduler.engine.events.EVENT_KINDS``, which ``EventListener.on`` checks a kind against).

Every message these tests collect is checked against the same list (``lua_support.Channels``);
this reads the sources, so a kind no test publishes is covered too.
"""

from __future__ import annotations

import re
from pathlib import Path

from scheduler.engine.events import EVENT_KINDS

LUA = Path(__file__).resolve().parents[2] / "lua"
# A quoted kind, or a channel name's first part ('ready:'); a bare word is a variable.
QUOTED = re.compile(r"['\"]([a-z_]+)['\":]")
# Where a kind is written (each quoted word of what a place captures is one): a JSON event's
# `event = ...` field (up to the next one), the tracked channel, a worker's event, a plain
# channel, a queue's channel, the spliced put event, and wait.lua's finish().
PLACES = (
    re.compile(r"[{,] event = ([^,}]+)"),
    re.compile(r"Events\.tracked\(('[a-z_]+')"),
    re.compile(r"Events\.to_worker\([^,]+, ('[a-z_]+')"),
    re.compile(r"Events\.publish\(('[a-z_]+')"),
    re.compile(r"Events\.publish\(('[a-z_]+:)' \.\. queue"),
    re.compile(r"\"event\":(\"[a-z_]+\")"),
    re.compile(r"\bfinish\([^)]*?, ('[a-z_]+'), \{"),
)


def published_kinds() -> set[str]:
    kinds: set[str] = set()
    for path in LUA.rglob("*.lua"):
        text = path.read_text()
        for place in PLACES:
            for written in place.findall(text):
                kinds.update(QUOTED.findall(written))
    return kinds - {"log"}  # P log carries JSON events: not a kind of its own


def test_the_kinds_in_the_lua_sources_are_the_ones_python_knows() -> None:
    assert published_kinds() == EVENT_KINDS
