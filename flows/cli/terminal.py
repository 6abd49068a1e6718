"""Text that came from a job, a name, a datum or a log, made safe to print on a terminal.

A job's output, a failure message or a run's params may hold control characters, and among them
escape sequences that set the terminal's title, clear its screen and scrollback, move the
cursor or answer back. Printed as they are, they drive the reader's terminal (or a CI log's
viewer). :func:`visible` shows each control character as ``\\xNN`` instead, except tab and
newline; every command prints such text through it. Colour (SGR) sequences may be kept for
``flows logs --color``, and nothing else.
"""

from __future__ import annotations

import re
from typing import Literal

# C0 controls but tab and newline, DEL, and the C1 controls (U+0080..U+009F; U+009B is a CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# A complete Select Graphic Rendition sequence: colours and text attributes only.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")

Sgr = Literal["escape", "keep"]


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def visible(text: str, *, newlines: bool = True, sgr: Sgr = "escape") -> str:
    """``text`` with every control character shown as ``\\xNN`` (tab kept, and newline unless
    ``newlines`` is false). ``sgr``: colour sequences are escaped like the rest, or kept (for a
    terminal that shows colour)."""
    control = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    if sgr == "escape" or "\x1b" not in text:
        return control.sub(_escape, text)
    kept: list[str] = []
    start = 0
    for match in _SGR.finditer(text):
        kept.append(control.sub(_escape, text[start : match.start()]))
        kept.append(match.group())
        start = match.end()
    kept.append(control.sub(_escape, text[start:]))
    return "".join(kept)
