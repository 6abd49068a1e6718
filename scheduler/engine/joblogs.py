"""Step logs: what jobs wrote while they ran, read back per attempt.

A worker captures each job's lines (:mod:`scheduler.worker.capture`) and stores them in the
engine (``log.append``: one list per job attempt, at most ``log-lines`` lines and ``log-bytes``
bytes of text each, see ``lua/commands/log.lua``); they are dropped with the job (kept with
the run when its cancel deletes the job). Here they are
read: :func:`read` one page, :func:`tail` the last lines (``flows.runs.logs`` follows them live).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scheduler.engine.limits import read_json
from scheduler.engine.scripts import Engine

# The most lines one read returns (the engine's bound).
PAGE = 1000
# States in which a job writes no more lines.
ENDED = frozenset({"complete", "failed", "canceled", "expired", "buried"})


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line: when it was written (epoch seconds), its stream (``stdout``, ``stderr``,
    ``log`` for a logging record, with its ``level``; ``truncated`` for the marker left where
    the attempt's budget ran out) and its text; ``cut``: the bytes cut off its end (a line
    longer than the engine keeps), 0 for a whole line."""

    time: float
    stream: str
    text: str
    level: str = ""
    cut: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": self.time, "stream": self.stream, "text": self.text}
        if self.level:
            out["level"] = self.level
        if self.cut:
            out["cut"] = self.cut
        return out


@dataclass(frozen=True, slots=True)
class LogPage:
    """Lines ``offset`` to ``next`` of one attempt (``attempt`` 0: the job has no lines yet),
    with the attempt's totals: ``total`` lines kept, ``dropped`` lines not kept (beyond its
    budget) or kept cut short, ``cut`` the latter."""

    jid: str
    attempt: int
    attempts: int
    offset: int
    next: int
    total: int
    dropped: int
    lines: list[LogLine]
    cut: int = 0


def _line(entry: dict[str, Any]) -> LogLine:
    text = entry["m"]
    return LogLine(
        float(entry["t"]),
        str(entry["s"]),
        # Always text as the engine writes it; as JSON otherwise (an older entry, cut if deep).
        text if isinstance(text, str) else json.dumps(text),
        str(entry.get("l", "")),
        int(entry.get("c", 0)),
    )


def read(
    engine: Engine, jid: str, attempt: int | None = None, offset: int = 0, count: int = PAGE
) -> LogPage:
    """One page of job ``jid``'s lines (its latest attempt unless ``attempt`` is given).

    Raises :class:`~scheduler.engine.errors.JobNotFound` when the job does not exist."""
    reply = read_json(engine.call("log.get", jid, attempt or "", offset, count))
    lines = reply["lines"] if isinstance(reply["lines"], list) else []
    return LogPage(
        jid=jid,
        attempt=int(reply["attempt"]),
        attempts=int(reply["attempts"]),
        offset=int(reply["offset"]),
        next=int(reply["next"]),
        total=int(reply["total"]),
        dropped=int(reply["dropped"]),
        lines=[_line(entry) for entry in lines],
        cut=int(reply.get("cut", 0)),
    )


def tail(engine: Engine, jid: str, count: int = 20, attempt: int | None = None) -> list[LogLine]:
    """The last ``count`` lines of the job's latest (or given) attempt: two engine calls."""
    head = read(engine, jid, attempt, 0, 1)
    if head.total <= 1:
        return head.lines
    return read(engine, jid, head.attempt, max(0, head.total - count), min(count, PAGE)).lines
