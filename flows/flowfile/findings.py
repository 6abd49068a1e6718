"""Findings: what validation reports, each with its place in the file and a hint to fix it.

Every check appends to a :class:`FindingSink`, which turns a *data path* (the keys and indexes
leading to a value, e.g. ``("steps", "load", "needs", 0)``) into a line and column through the
loader's source map. Nothing stops at the first problem: the sink collects them all.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

DataPath = tuple[str | int, ...]
"""Keys and list indexes from the top of the document down to one value."""

Locate = Callable[[DataPath, bool], tuple[int, int]]
"""Map a data path (and whether the key rather than the value is meant) to (line, col)."""

LocateIn = Callable[[DataPath, str, int], "tuple[int, int] | None"]
"""Map a data path, a piece of the string there and which occurrence of it (from 0) to the
piece's (line, col); None when it cannot be placed (the string's own position is used)."""

Within = tuple[str, int]
"""A piece of a string (a template, as written) and which occurrence of it, from 0."""


class Severity(StrEnum):
    """An error makes the file unusable (exit 1); a warning is printed but does not fail."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in one flow file. ``line`` and ``col`` are 1-based."""

    file: str
    line: int
    col: int
    severity: Severity
    code: str
    message: str
    hint: str = ""

    def format(self) -> str:
        """``file:line:col: severity: message``, then an indented hint line if there is one."""
        head = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
        return f"{head}\n    hint: {self.hint}" if self.hint else head

    def to_dict(self) -> dict[str, str | int]:
        """A JSON-ready mapping with every field."""
        return {
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "severity": str(self.severity),
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass
class FindingSink:
    """Collects findings for one file, locating data paths through ``locate``."""

    file: str
    locate: Locate
    findings: list[Finding] = field(default_factory=list)
    locate_in: LocateIn | None = None

    def error(
        self,
        path: DataPath,
        code: str,
        message: str,
        hint: str = "",
        *,
        at_key: bool = False,
        within: Within | None = None,
    ) -> None:
        """Record an error about the value at ``path`` (or its key, with ``at_key``; or a piece
        of it, such as one template of a string, with ``within``)."""
        self.add(Severity.ERROR, path, code, message, hint, at_key=at_key, within=within)

    def warning(
        self, path: DataPath, code: str, message: str, hint: str = "", *, at_key: bool = False
    ) -> None:
        """Record a warning about the value at ``path`` (or its key, with ``at_key``)."""
        self.add(Severity.WARNING, path, code, message, hint, at_key=at_key)

    def add(
        self,
        severity: Severity,
        path: DataPath,
        code: str,
        message: str,
        hint: str = "",
        *,
        at_key: bool = False,
        within: Within | None = None,
    ) -> None:
        """Record a finding of any severity (long words in it shortened: a 10,000-character
        key is named by its start and its length, not quoted whole)."""
        placed = self.locate_in(path, *within) if within and self.locate_in else None
        line, col = placed or self.locate(path, at_key)
        message, hint = shorten_words(message), shorten_words(hint)
        self.findings.append(Finding(self.file, line, col, severity, code, message, hint))

    @property
    def has_errors(self) -> bool:
        """Whether any error (not just warnings) was recorded."""
        return any(f.severity is Severity.ERROR for f in self.findings)


MAX_WORD = 80
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD + 1},}}")


def shorten_words(text: str) -> str:
    """``text`` with each run of more than :data:`MAX_WORD` non-blank characters cut to its
    start and its length."""
    if len(text) <= MAX_WORD:
        return text
    return _LONG_WORD.sub(lambda m: f"{m.group()[:40]}... ({len(m.group()):,} characters)", text)


def quoted(text: str) -> str:
    """``text`` quoted as a message shows a value: whole up to :data:`MAX_WORD` characters,
    else its start and its length (a value pasted by mistake is not echoed whole)."""
    if len(text) <= MAX_WORD:
        return repr(text)
    return f"{text[:40]!r}... ({len(text):,} characters)"


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any of ``findings`` is an error."""
    return any(f.severity is Severity.ERROR for f in findings)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """File order: by file, line, column, errors before warnings at one place."""
    return sorted(findings, key=lambda f: (f.file, f.line, f.col, f.severity is not Severity.ERROR))


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` was most likely meant to be, if any is close enough."""
    pool = list(candidates)
    by_case = {c.lower(): c for c in pool}
    if word.lower() in by_case:
        return by_case[word.lower()]
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A hint such as ``did you mean 'needs'?``, or an empty string when nothing is close."""
    match = closest(word, candidates)
    return f"did you mean '{match}'?" if match else ""


def path_meant(written: str | Path, base: Path = Path(".")) -> str | None:
    """The path ``written`` (relative to ``base``) likely meant when it does not exist: the
    entry of its folder closest to its name, written as ``written`` is (``sub/reprot.yaml`` →
    ``sub/report.yaml``); None when it exists, nothing is close or the folder cannot be read."""
    given = Path(written)
    try:
        if (base / given).exists():
            return None
        names = [entry.name for entry in (base / given).parent.iterdir()]
    except OSError:  # a name too long to look up, a folder not readable
        return None
    match = closest(given.name, names)
    return None if match is None else str(given.parent / match)


NAMES_IN_HINT: Final = 10
"""A hint listing what exists (``steps: a, b, ...``) names this many at most."""


def names_hint(label: str, names: Sequence[str]) -> str:
    """``steps: a, b, c``: the first :data:`NAMES_IN_HINT` of ``names``, then how many more."""
    shown = ", ".join(names[:NAMES_IN_HINT])
    more = len(names) - NAMES_IN_HINT
    return f"{label}: {shown}" + (f", ... ({more:,} more)" if more > 0 else "")


def path_text(path: DataPath) -> str:
    """A data path as users write it: ``steps.load.needs[0]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


def describe(value: Any) -> str:
    """A value as a message names it: ``the boolean true``, ``the string 'x'``, ``a list``."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {quoted(value)}"
    if value is None:
        return "nothing (null)"
    return "a list" if isinstance(value, list) else "a mapping"
