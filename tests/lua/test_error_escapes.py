"""An engine refusal that quotes a caller's value reaches a library's caller with every control
character and bidirectional control shown as an escape (``\\x1b``, ``\\u202e``): its message is
printed and logged as it is. The engine's ``%q`` leaves ESC as it is, and some messages quote a
value without it; the client's error constructor escapes them all, whatever the command."""

from __future__ import annotations

import re
from typing import Any

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import EngineError, InvalidArgument, UnknownCommand
from scheduler.terminal import BIDI_CONTROLS

# An escape sequence that clears the screen, and a right-to-left override.
HOSTILE = "x\x1b[2J\u202ey"
RAW = re.compile(rf"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def refused(lua: Lua, command: str, *args: Any) -> EngineError:
    with unchanged(lua.r), pytest.raises(EngineError) as raised:
        lua(command, *args, now=T0)
    return raised.value


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("put", ["w", "q", HOSTILE, "K", "{}", 0]),  # the jid
        ("put", ["w", HOSTILE, "j", "K", "{}", 0]),  # the queue
        ("put", ["w", "q", "j", HOSTILE, "{}", 0]),  # the klass
        ("put", ["w", "q", "j", "K", "{}", HOSTILE]),  # the delay: quoted without %q
        ("put", ["w", "q", "j", "K", f'"{HOSTILE}"', 0]),  # data that is no object
        ("pop", [HOSTILE, "w", 1]),
        ("cancel", [HOSTILE]),
        ("wait.signal", [HOSTILE, "{}"]),
    ],
)
def test_a_refusal_quoting_a_value_shows_its_control_characters_as_escapes(
    lua: Lua, command: str, args: list[Any]
) -> None:
    error = refused(lua, command, *args)
    assert isinstance(error, InvalidArgument), error
    for text in (str(error), error.message):
        assert not RAW.search(text), repr(text)
        assert "x\\x1b[2J\\u202ey" in text, text


def test_an_unknown_command_named_with_control_characters_is_escaped_too(lua: Lua) -> None:
    error = refused(lua, f"no{HOSTILE}")
    assert isinstance(error, UnknownCommand)
    assert not RAW.search(str(error)) and "\\x1b[2J\\u202e" in str(error), str(error)


def test_the_client_s_own_refusals_are_escaped_alike() -> None:
    error = EngineError(f"Put(): {HOSTILE}\nnext line\tand a tab", command="put")
    assert str(error) == "Put(): x\\x1b[2J\\u202ey\\x0anext line\tand a tab"
