"""Tables that fit the terminal: the one place that decides how a table gives way.

What users copy into the next command (a run id, a jid) and what they read at a glance (a
status, a state) is never cut: those *key* columns keep their full width. The other columns
wrap, and when even that does not fit the terminal's width, the last of them are left out, with
a caption naming them (``--json`` has every field). When the key columns alone are wider than
the terminal, the table is as wide as they need and printed uncropped (:func:`show`): the
terminal wraps its lines, and an id stays whole on its line, to copy; a table redrawn in place
(`flows run`'s live view) folds them inside their cells instead (``fold_keys``). Piped into
another program, where there are no columns to fit, a table is as wide as its rows
(``$COLUMNS`` sets a width), so nothing is cut for ``grep`` either. Every cell is text, never
markup: ``profile[region=eu]`` shows as written.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from flows.cli.console import Console, asked_width
from flows.cli.terminal import visible

KEY_COLUMNS = frozenset({"status", "state"})
"""Columns never cut besides the first (statuses: a cut one reads as another)."""
PIPED_WIDTH = 400
"""The width of a table written to a pipe (no wrapping at an imagined 80 columns)."""
MIN_WRAPPED = 8
"""The narrowest a wrapping column is made before columns are left out."""
_EDGE, _PER_COLUMN = 1, 3  # the table's left border; each column's padding and right border


def table_console(stderr: bool = False) -> Console:
    """A console for tables: the terminal's width, or :data:`PIPED_WIDTH` when piped."""
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal and asked_width() is None:
        out = Console(stderr=stderr, highlight=False, width=PIPED_WIDTH)
    return out


def show(out: Console, renderable: RenderableType) -> None:
    """Print a table (or a group holding one) of :func:`fitted` on ``out``, never cropped to
    its width: what :func:`fitted` made wider than the terminal (key columns that do not fit)
    is wrapped by the terminal, every character kept."""
    out.print(renderable, crop=False)


def cell(value: Any) -> Text:
    """A cell as text (a :class:`Text` keeps its style; anything else is never read as markup).
    Cells show jobs' and users' text: no control character reaches the terminal."""
    if isinstance(value, Text):
        safe = visible(value.plain)
        return value if safe == value.plain else Text(safe, style=value.style)
    return Text("" if value is None else visible(str(value)))


def fitted(
    title: str | Text | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    width: int,
    keep: Collection[str] = (),
    caption: str | None = None,
    fold_keys: bool = False,
) -> Table:
    """A table of ``rows`` that fits ``width`` columns: the first column and those named in
    ``keep`` or :data:`KEY_COLUMNS` at full width, the others wrapped, the last of them left out
    when they cannot fit. When the key columns alone do not fit, the table is as wide as they
    need (print it with :func:`show`), or with ``fold_keys`` they are folded to fit."""
    cells = [[cell(value) for value in row] for row in rows]
    natural = [
        max([len(name), *(row[i].cell_len for row in cells if i < len(row))])
        for i, name in enumerate(columns)
    ]
    key = [i == 0 or name in KEY_COLUMNS or name in keep for i, name in enumerate(columns)]
    shown = list(range(len(columns)))

    def needed(indexes: list[int]) -> int:
        least = sum(natural[i] if key[i] else min(natural[i], MIN_WRAPPED) for i in indexes)
        return _EDGE + least + _PER_COLUMN * len(indexes)

    left_out: list[str] = []
    while needed(shown) > width:
        droppable = [i for i in shown if not key[i]]
        if not droppable:
            break
        shown.remove(droppable[-1])
        left_out.insert(0, columns[droppable[-1]])
    notes = [caption] if caption else []
    if left_out:
        notes.append(f"left out to fit {width} columns: {', '.join(left_out)} (--json has all)")
    too_wide = needed(shown) > width
    out = Table(
        title=Text(title) if isinstance(title, str) else title,
        title_justify="left",
        caption="\n".join(notes) or None,
        caption_justify="left",
        header_style="bold",
        width=needed(shown) if too_wide and not fold_keys else None,
    )
    for i in shown:
        if key[i] and too_wide and fold_keys:
            out.add_column(columns[i], overflow="fold")
        elif key[i]:
            out.add_column(columns[i], no_wrap=True, min_width=natural[i])
        else:
            out.add_column(columns[i], overflow="fold")
    for row in cells:
        out.add_row(*(row[i] if i < len(row) else Text("") for i in shown))
    return out
