"""Libraries that are not this release's engine, on a real server: what a user allowed
``FUNCTION LOAD`` could put under the engine's name (the ``functions`` fixture gives a server
without any)."""

from __future__ import annotations

from scheduler.engine import scripts
from scheduler.engine.scripts import function_name, library_name, read_function_name

PWNED = "ql:pwned"


def impostor(name: str | None = None) -> str:
    """A library registering the engine's two function names, whose code writes a key and
    answers as the engine would (so a client that ran it would not notice)."""
    body = f"redis.call('SET', '{PWNED}', 'ran'); return '[]'"
    return (
        f"#!lua name={name or library_name()}\n"
        f"redis.register_function('{function_name()}', function(keys, args) {body} end)\n"
        f"redis.register_function{{function_name='{read_function_name()}',"
        " callback=function(keys, args) return '[]' end, flags={'no-writes'}}\n"
    )


def another_release() -> str:
    """The engine's library with other code under its name: what ``FUNCTION LOAD REPLACE`` of
    another release's text (or anyone's) puts there. It behaves as the engine does, so what
    stops a process is the check, not a reply it cannot read."""
    return scripts.functions_library() + "-- not this release's text\n"
