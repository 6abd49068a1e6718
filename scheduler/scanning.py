"""Keeping Redis's schedules in step with a folder of flow files (``--flows-dir``).

Every scan walks the folder (``*.yaml`` and ``*.yml``, recursively), reads each file whose size
or modification time changed, and compares content hashes:

- a file with a schedule is registered, and registered again when its content changes;
- a file that does not validate is reported, and the registration it had stays as it was;
- a schedule whose file is gone, no longer has a schedule, or now names another flow is
  unregistered, but only when its file lies under this folder: services watching other
  folders keep theirs;
- two files naming the same flow: the one already registered keeps it, the other is reported.

A file is judged by its content hash, so touching a file, or several services scanning the
same folder, registers nothing twice (the engine answers 'unchanged').
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.schedules import Definition, FlowSource, InvalidSource, Schedules

log = logging.getLogger("flows.scheduler")

PATTERNS = ("*.yaml", "*.yml")


@dataclass
class ScanReport:
    """What one scan changed and what it could not load."""

    registered: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)
    """File → why it was not loaded (its previous registration is kept)."""
    files: int = 0


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the last scan learned from one file: by (mtime, size), then by content hash."""

    stamp: tuple[int, int]
    hash: str
    definition: Definition | None
    error: str | None


def flow_files(folder: Path) -> Iterator[Path]:
    """Flow files under ``folder``, sorted, skipping hidden files and folders."""
    found: set[Path] = set()
    for pattern in PATTERNS:
        for path in folder.rglob(pattern):
            parts = path.relative_to(folder).parts
            if path.is_file() and not any(part.startswith(".") for part in parts):
                found.add(path)
    return iter(sorted(found))


def _digest(text: str) -> str:
    """Change detection only: the registered hash is the flow source's."""
    return hashlib.sha256(text.encode()).hexdigest()


class Reloader:
    """Scans ``folder`` and registers what changed (see the module doc)."""

    def __init__(self, schedules: Schedules, source: FlowSource, folder: Path) -> None:
        self.schedules = schedules
        self.source = source
        self.folder = folder.resolve()
        self._seen: dict[Path, _Seen] = {}

    def scan(self, now: float) -> ScanReport:
        """One pass over the folder; ``now`` is the time fire times are computed from."""
        report = ScanReport()
        candidates: dict[str, list[Definition]] = {}
        paths = list(flow_files(self.folder))
        for path in paths:
            seen = self._load(path, now)
            report.files += 1
            if seen.error is not None:
                report.invalid[str(path)] = seen.error
            elif seen.definition is not None:
                candidates.setdefault(seen.definition.name, []).append(seen.definition)
        for gone in set(self._seen) - set(paths):
            del self._seen[gone]
        registered = self.schedules.index(now=now)
        wanted: dict[str, Definition] = {}
        for name, definitions in candidates.items():
            owner = registered.get(name)
            wanted[name] = _pick(definitions, owner[1] if owner else None, report)
        for name, definition in wanted.items():
            if registered.get(name, ("", ""))[0] != definition.hash:
                self._register(definition, now, report)
        for name, (digest, file) in registered.items():
            if name in wanted or not self._ours(file) or file in report.invalid:
                continue
            outcome = self.schedules.unregister(name, digest, now=now)
            if outcome == "unregistered":
                log.info("unregistered schedule %s (%s no longer schedules it)", name, file)
                report.unregistered.append(name)
        return report

    def definitions(self) -> list[Definition]:
        """The definitions of the files of the last scan that have a schedule."""
        return [seen.definition for seen in self._seen.values() if seen.definition is not None]

    def _load(self, path: Path, now: float) -> _Seen:
        old = self._seen.get(path)
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if old is not None and old.stamp == stamp:
                return old
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            # Unreadable right now (being replaced, permissions): keep what we knew, or report
            # it (which also keeps its registration), and look again next scan.
            log.warning("cannot read %s: %s", path, error)
            return old or _Seen((0, 0), "", None, f"{path}: cannot read: {error}")
        digest = _digest(text)
        if old is not None and old.hash == digest:
            seen = _Seen(stamp, digest, old.definition, old.error)
        else:
            seen = self._judge(path, text, digest, stamp, now)
        self._seen[path] = seen
        return seen

    def _judge(
        self, path: Path, text: str, digest: str, stamp: tuple[int, int], now: float
    ) -> _Seen:
        try:
            definition = self.source.load(path, text, now)
        except InvalidSource as invalid:
            log.error("%s does not validate; its schedule stays as registered:\n%s", path, invalid)
            return _Seen(stamp, digest, None, str(invalid))
        except Exception as error:  # a bug in one check must not stop the other files
            log.exception("cannot load %s", path)
            return _Seen(stamp, digest, None, f"{path}: {type(error).__name__}: {error}")
        return _Seen(stamp, digest, definition, None)

    def _register(self, definition: Definition, now: float, report: ScanReport) -> None:
        try:
            outcome = self.schedules.register(definition, now)
        except Exception as error:  # one refused registration must not stop the scan
            log.exception("cannot register %s", definition.name)
            report.invalid[definition.file] = f"{type(error).__name__}: {error}"
            return
        if outcome == "registered":
            log.info("registered schedule %s from %s", definition.name, definition.file)
            report.registered.append(definition.name)
        elif outcome == "updated":
            log.info("updated schedule %s from %s", definition.name, definition.file)
            report.updated.append(definition.name)

    def _ours(self, file: str) -> bool:
        return bool(file) and Path(file).is_relative_to(self.folder)


def _pick(definitions: list[Definition], owner_file: str | None, report: ScanReport) -> Definition:
    """Of files naming one flow, the registered one (else the first); the rest are reported."""
    chosen = next((d for d in definitions if d.file == owner_file), definitions[0])
    for other in definitions:
        if other is not chosen:
            message = (
                f"{other.file}: flow '{other.name}' is already scheduled by {chosen.file}; "
                "rename one of the flows"
            )
            log.error("%s", message)
            report.invalid[other.file] = message
    return chosen


__all__ = ["PATTERNS", "Reloader", "ScanReport", "flow_files"]
