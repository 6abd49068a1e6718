"""The consoles every command prints through: rich's, with a width that is never absurd.

Rich takes ``$COLUMNS`` as the width whenever it is made of digits, and a width of 0 prints
nothing at all (some CI runners and ``env -i`` shells set ``COLUMNS=0``); ``COLUMNS=3`` wraps
every word onto lines of its own. :func:`asked_width` is the one place that decides what
``$COLUMNS`` asks for, and :class:`Console` uses the terminal's width, or
:data:`FALLBACK_WIDTH`, when the width it would take is narrower than :data:`MIN_WIDTH`."""

from __future__ import annotations

import os

from rich import console as rich_console
from rich.console import ConsoleDimensions

MIN_WIDTH = 20
"""The narrowest width honoured: below it a table or a finding is unreadable."""
FALLBACK_WIDTH = 80
"""The width used when neither ``$COLUMNS`` nor the terminal gives a sane one."""


def asked_width() -> int | None:
    """The width ``$COLUMNS`` asks for: a whole number of at least :data:`MIN_WIDTH`; any other
    value (``0``, ``abc``, ``-5``, ``3``) is as if it were not set."""
    columns = os.environ.get("COLUMNS", "").strip()
    if not columns.isdigit() or int(columns) < MIN_WIDTH:
        return None
    return int(columns)


def _terminal_width() -> int:
    for stream in (1, 2):
        try:
            width = os.get_terminal_size(stream).columns
        except (OSError, ValueError):
            continue
        if width >= MIN_WIDTH:
            return width
    return FALLBACK_WIDTH


class Console(rich_console.Console):
    """Rich's console, whose width (read at each use, so a resized terminal is followed) is
    never below :data:`MIN_WIDTH`: a narrower one, from an odd ``$COLUMNS``, gives way to the
    terminal's width or :data:`FALLBACK_WIDTH`."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if size.width >= MIN_WIDTH:
            return size
        return ConsoleDimensions(_terminal_width(), size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        rich_console.Console.size.fset(self, new_size)  # type: ignore[attr-defined]
