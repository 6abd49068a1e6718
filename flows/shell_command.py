"""Template values into a shell command as data: each becomes an environment variable.

A ``run:`` command is shell syntax; the values its templates name (params, run fields, foreach
items, other steps' outputs) come from users, schedules and jobs. Pasting them into the text
would let a value such as ``$(rm -rf ~)`` run as code, so every template is replaced by a
reference to an environment variable holding the value, written for the quoting it stands in:

* bare: ``"${NAME}"`` (one word, exactly the value: no splitting, no globbing);
* inside double quotes: ``${NAME}``;
* inside single quotes: ``'"${NAME}"'`` (the quote is closed around it, so the value is read
  there as it would be written there).

The shell expands a variable's value once and never reads it as syntax. The quoting is followed
through backslashes and ``#`` comments; a template in a here-document is read as if bare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from flows.outputs import env_name
from flows.templates import PARAMS, RUN, STEPS, Reference, split

_BARE, _SINGLE, _DOUBLE, _COMMENT = range(4)
_WORD_BREAKS: Final = frozenset(" \t\n;&|()<>")
FOREACH_ENV_ROOT: Final = "foreach"
"""The foreach variable's values are ``FLOWS_FOREACH_<NAME>``: never a runtime name such as
``FLOWS_OUTPUT``, whatever the variable is called."""


def variable_name(reference: Reference) -> str:
    """The environment variable that carries ``reference`` (before any collision suffix)."""
    if reference.root in (PARAMS, RUN, STEPS):
        return env_name(reference)
    return env_name(Reference((FOREACH_ENV_ROOT, *reference.path)))


def shell_command(command: str, value_of: Callable[[Reference], str]) -> tuple[str, dict[str, str]]:
    """``command`` with each template replaced by a variable, and the variables' values.

    ``value_of`` gives a reference's value as text (it may also be a template the worker
    resolves). Two references whose names would collide (``params.a-b`` and ``params.a_b``) get
    distinct names. Raises :class:`flows.templates.TemplateSyntaxError` like ``references``.
    """
    texts, found = split(command)
    variables: dict[str, str] = {}
    names: dict[Reference, str] = {}
    pieces: list[str] = []
    state, word_start = _BARE, True
    for index, text in enumerate(texts):
        pieces.append(text)
        state, word_start = _advance(text, state, word_start)
        if index == len(found):
            break
        reference = found[index]
        name = names.get(reference)
        if name is None:
            name = base = variable_name(reference)
            suffix = 1
            while name in variables:
                suffix += 1
                name = f"{base}_{suffix}"
            names[reference] = name
            variables[name] = value_of(reference)
        pieces.append(_placeholder(name, state))
        word_start = False
    return "".join(pieces), variables


def _placeholder(name: str, state: int) -> str:
    if state == _DOUBLE:
        return f"${{{name}}}"
    if state == _SINGLE:
        return f"'\"${{{name}}}\"'"
    return f'"${{{name}}}"'


def _advance(text: str, state: int, word_start: bool) -> tuple[int, bool]:
    """The quoting state after ``text``, and whether the next character starts a word."""
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and state in (_BARE, _DOUBLE):
            escaped = True
        else:
            state = _after(state, char, word_start)
        word_start = char in _WORD_BREAKS and state == _BARE
    return state, word_start


# The character that ends each quoted state (a comment ends at the newline).
_CLOSING: Final = {_SINGLE: "'", _DOUBLE: '"', _COMMENT: "\n"}
_OPENING: Final = {"'": _SINGLE, '"': _DOUBLE}


def _after(state: int, char: str, word_start: bool) -> int:
    if state != _BARE:
        return _BARE if char == _CLOSING[state] else state
    if char == "#" and word_start:
        return _COMMENT
    return _OPENING.get(char, _BARE)
