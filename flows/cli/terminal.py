"""Text that came from a job, a name, a datum or a log, made safe to print on a terminal.

A job's output, a failure message or a run's params may hold control characters, and among them
escape sequences that set the terminal's title, clear its screen and scrollback, move the
cursor or answer back, or bidirectional controls that make a line display other than what it
holds. Printed as they are, they drive the reader's terminal (or a CI log's viewer).
:func:`visible` shows each control character as ``\\xNN`` (a bidirectional one as ``\\uNNNN``)
instead, except tab and newline; every command prints such text through it. Which characters
and how they are shown is :mod:`scheduler.terminal`'s, shared with the worker's logs. Colour
(SGR) sequences may be kept for ``flows logs --color``, and nothing else.
"""

from __future__ import annotations

import re
from typing import Literal

from scheduler.terminal import CONTROL, CONTROL_OR_NEWLINE, escape

# A complete Select Graphic Rendition sequence: colours and text attributes only.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")

Sgr = Literal["escape", "keep"]


def visible(text: str, *, newlines: bool = True, sgr: Sgr = "escape") -> str:
    """``text`` with every control character shown as ``\\xNN`` and every bidirectional control
    as ``\\uNNNN`` (tab kept, and newline unless ``newlines`` is false). ``sgr``: colour
    sequences are escaped like the rest, or kept (for a terminal that shows colour)."""
    control = CONTROL if newlines else CONTROL_OR_NEWLINE
    if sgr == "escape" or "\x1b" not in text:
        return control.sub(escape, text)
    kept: list[str] = []
    start = 0
    for match in _SGR.finditer(text):
        kept.append(control.sub(escape, text[start : match.start()]))
        kept.append(match.group())
        start = match.end()
    kept.append(control.sub(escape, text[start:]))
    return "".join(kept)
