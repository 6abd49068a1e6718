"""Lines read from a process's pipe in bounded chunks, however long a line is.

A job's subprocess may write a line of any length (a 200 MB JSON document on one line): reading
it line by line would hold the whole line, then its decoded copy. Here the pipe is read
:data:`CHUNK` bytes at a time and at most :data:`MAX_LINE` bytes of a line are kept; the rest
of the line is only counted (``cut``), so what the worker holds is bounded by the two sizes
whatever the process writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

# Bytes read from the pipe at once.
CHUNK = 65536
# The longest line kept, in bytes (the engine's bound for a stored line, lua/commands/log.lua).
MAX_LINE = 16384


@dataclass(frozen=True, slots=True)
class Line:
    """One line without its newline, and the bytes cut off its end (0: the whole line)."""

    text: str
    cut: int = 0


def decode(raw: bytes | bytearray) -> str:
    """``raw`` as text; a character cut in two at the end of a kept part is dropped."""
    text = bytes(raw).decode(errors="replace")
    return text[:-1] if text.endswith("\ufffd") and len(raw) == MAX_LINE else text


class LineSplitter:
    """Bytes in, whole lines out: keeps at most :data:`MAX_LINE` bytes of the current line."""

    __slots__ = ("_cut", "_kept")

    def __init__(self) -> None:
        self._kept = bytearray()
        self._cut = 0

    def feed(self, data: bytes) -> list[Line]:
        lines: list[Line] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            room = MAX_LINE - len(self._kept)
            if len(piece) > room:
                self._kept += piece[:room]
                self._cut += len(piece) - room
            else:
                self._kept += piece
            if end < 0:
                return lines
            lines.append(self._take())
            start = end + 1

    def close(self) -> list[Line]:
        """The last line, when it had no newline."""
        return [self._take()] if self._kept or self._cut else []

    def _take(self) -> Line:
        line = Line(decode(self._kept), self._cut)
        self._kept, self._cut = bytearray(), 0
        return line


def read_lines(fd: int) -> Iterator[Line]:
    """The lines written to pipe ``fd`` until its end, read :data:`CHUNK` bytes at a time."""
    splitter = LineSplitter()
    while True:
        try:
            data = os.read(fd, CHUNK)
        except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
            continue
        if not data:
            break
        yield from splitter.feed(data)
    yield from splitter.close()
