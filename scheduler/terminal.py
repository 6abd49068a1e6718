"""Text that came from a job, a name, a flow file or a log, made safe to print on a terminal.

A job's output, its log records, a failure message or a step id may hold control characters,
and among them escape sequences that set the terminal's title, clear its screen and scrollback,
move the cursor or answer back; bidirectional controls make a line display other than what it
holds. Printed as they are, they drive the reader's terminal (or a CI log's viewer).
:func:`visible` shows each of them as ``\\xNN`` (``\\uNNNN`` for a bidirectional control)
instead, except tab and newline. The ``flows`` commands print such text through it (by way of
``flows.cli.terminal``), and the worker's and the service's logs through
:class:`VisibleFormatter`: one place, in the library, because the worker logs what jobs wrote
and must not import the command line.
"""

from __future__ import annotations

import logging
import re
import sys

# C0 controls but tab and newline, DEL, the C1 controls (U+0080..U+009F; U+009B is a CSI), and
# the bidirectional marks, embeddings, overrides and isolates, which can make a line read as
# something else ("Trojan Source"). Other non-ASCII text (accents, CJK, emoji) is left as is.
BIDI_CONTROLS = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
CONTROL_OR_NEWLINE = re.compile(rf"[\x00-\x08\x0a-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


def escape(match: re.Match[str]) -> str:
    """One matched control character as text: ``\\x1b``, ``\\u202e``."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control character shown as ``\\xNN`` and every bidirectional control
    as ``\\uNNNN`` (tab kept, and newline unless ``newlines`` is false)."""
    return (CONTROL if newlines else CONTROL_OR_NEWLINE).sub(escape, text)


class VisibleFormatter(logging.Formatter):
    """A log record as :func:`visible` shows it, its lines after the first indented: a record's
    message, its arguments and its traceback may hold what a job or a flow file wrote (a job's
    own log records reach the worker's stderr too)."""

    def format(self, record: logging.LogRecord) -> str:
        # Its later lines (a message's, a traceback's) are indented: a message cannot forge
        # a record of its own on the next line.
        return visible(super().format(record)).replace("\n", "\n  ")


def log_to_stderr(level: int | str, fmt: str) -> None:
    """``logging.basicConfig`` to stderr in ``fmt``, its lines shown by :class:`VisibleFormatter`
    (nothing changes when the root logger has a handler already, as with ``basicConfig``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleFormatter(fmt))
    logging.basicConfig(level=level, handlers=[handler])
