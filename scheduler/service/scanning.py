"""Keeping Redis's schedules in step with a folder of flow files (``--flows-dir``).

Every scan walks the folder (``*.yaml`` and ``*.yml``, recursively, flow tests ``*.test.yaml``
left out), reads each file whose size
or modification time changed, and compares content hashes:

- a file with a schedule is registered under this folder's source name (``origin``), and
  registered again when its content changes or it moves within the folder (runs resolve its
  sub-flows and its own folder from the registered file);
- a file that does not validate is reported, and the registration it had stays as it was,
  also when it moved in the same change: a broken file that still declares its flow's name
  (a top-level ``name:`` line) keeps that flow's schedule while the file registered for it is
  gone from the folder, until it validates and is registered from where it now is; one whose
  name cannot be read keeps the schedule registered from its own path, and the schedules whose
  files went in the scan in which it appeared (:meth:`Reloader._held_while_nameless`), never at
  a service's first scan, which saw nothing appear: a schedule whose file went while no
  service watched is unregistered, whatever broken file is beside it. Its log line says which:
  the schedule it keeps, or that nothing is registered from it. A file's problem is
  logged once, when it is first seen or changes, not at every scan;
- a schedule of this source whose file is gone, no longer has a schedule, or now names another
  flow is unregistered; schedules of other sources are never touched (a flow that another
  source schedules is reported, not taken over). A source is a name, not a path, so the same
  repository checked out at different paths on two machines is one source. A schedule
  registered before sources existed (no origin) is taken over by the source whose folder holds
  its file;
- two files naming the same flow: the one already registered keeps it, the other is reported;
- every file that validates, scheduled or not, is published in the catalogue
  (:mod:`scheduler.service.catalog`) when the folder's files changed, for ``flows ui``.

A file is judged by its content hash, so touching a file, or several services scanning the
same folder, registers nothing twice (the engine answers 'unchanged').

A scan looks at the service's stop request between files (walking the folder, reading them,
registering them): a service told to stop (SIGTERM) does not wait for a large folder or a slow
filesystem. A scan stopped before it read every file changes nothing more: what it did not
see is neither registered nor unregistered, and the catalogue stays as it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.engine.errors import ForeignEngine
from scheduler.service import catalog
from scheduler.service.records import Definition, FlowSource, Indexed, InvalidSource
from scheduler.service.schedules import Schedules

log = logging.getLogger("flows.scheduler")

PATTERNS = ("*.yaml", "*.yml")
TEST_SUFFIXES = (".test.yaml", ".test.yml")
"""Flow test files (``flows test``) live beside flows; they are not flows."""


@dataclass
class ScanReport:
    """What one scan changed and what it could not load."""

    registered: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)
    """File → why it was not loaded (its previous registration is kept)."""
    findings: dict[str, tuple[object, ...]] = field(default_factory=dict)
    """File → the findings of a file of :attr:`invalid` that does not validate, as its source
    made them (:attr:`InvalidSource.findings`)."""
    files: int = 0
    stopped: bool = False
    """The service was told to stop: the scan ended before it read every file (so it
    unregistered nothing and published nothing)."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the last scan learned from one file: by (mtime, size), then by content hash."""

    stamp: tuple[int, int]
    hash: str
    definition: Definition | None
    error: str | None
    text: str | None = None  # for the catalogue (None: not read)
    findings: tuple[object, ...] = ()  # of a file that does not validate
    broken: bool = False  # it does not validate (its problem is logged by the scan)
    name: str | None = None  # the flow name a file that does not validate still declares


def flow_files(folder: Path, stop: threading.Event | None = None) -> Iterator[Path]:
    """Flow files under ``folder``, sorted, skipping hidden files and folders. Once ``stop``
    is set, those found so far: a caller that passes it must look at it afterwards."""
    found: set[Path] = set()
    for pattern in PATTERNS:
        for path in folder.rglob(pattern):
            if stop is not None and stop.is_set():
                return iter(sorted(found))
            parts = path.relative_to(folder).parts
            if (
                path.is_file()
                and not any(part.startswith(".") for part in parts)
                and not path.name.endswith(TEST_SUFFIXES)
            ):
                found.add(path)
    return iter(sorted(found))


def _unreadable(error: OSError | UnicodeDecodeError) -> str:
    """Why a file could not be read, in the words flows validate uses for text not UTF-8."""
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte {error.start})"
    return str(error)


def _digest(text: str) -> str:
    """Change detection only: the registered hash is the flow source's."""
    return hashlib.sha256(text.encode()).hexdigest()


class Reloader:
    """Scans ``folder`` and registers what changed as source ``origin`` (see the module doc;
    default: the folder's name). Without ``log_invalid`` the files it cannot load are only in
    its reports (for a caller that prints them itself: ``flows scheduler --once``). ``settle``
    handles the due ticks of a schedule whose fire times a change moves before it is
    registered (:meth:`Schedules.register`; the service fires them). Once ``stop`` is set, a
    scan in progress ends at the next file (see the module doc)."""

    def __init__(
        self,
        schedules: Schedules,
        source: FlowSource,
        folder: Path,
        origin: str | None = None,
        *,
        log_invalid: bool = True,
        settle: Callable[[str, float], object] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.schedules = schedules
        self.settle = settle
        self.stop = stop
        self.source = source
        self.folder = folder.resolve()
        self.origin = origin or default_origin(self.folder)
        self.log_invalid = log_invalid
        self._seen: dict[Path, _Seen] = {}
        # What was logged of each file's problem, at the last scan and at this one: a problem
        # that stays is logged once, not at every scan.
        self._said: dict[str, str] = {}
        self._saying: dict[str, str] = {}
        self._published: str | None = None  # the catalogue's content last published
        self._published_files: dict[str, str] = {}  # and its files
        # Schedule → the files (paths in the folder) that do not validate, declare no name, and
        # appeared when its registered file went: it stays registered while one of them is so.
        self._held_by_nameless: dict[str, frozenset[str]] = {}

    def scan(self, now: float) -> ScanReport:
        """One pass over the folder; ``now`` is the time fire times are computed from."""
        report = ScanReport()
        # Registrations first, then the folder: a schedule another service of this folder
        # registers in between is then one this scan lists the file of (and registers again,
        # the same), never one held without a file (and unregistered as gone).
        registered = self.schedules.index(now=now)
        paths = list(flow_files(self.folder, self.stop))
        # A first scan saw nothing appear: every file is new to it, none evidence of a move.
        fresh = {self._relative(p) for p in paths if p not in self._seen} if self._seen else set()
        read = self._read(paths, now, report)
        if read is None:
            return report
        candidates, broken = read
        for gone in set(self._seen) - set(paths):
            del self._seen[gone]
        wanted: dict[str, Definition] = {}
        for name, definitions in candidates.items():
            held = registered.get(name)
            if held is not None and not self._ours(held):
                for other in definitions:
                    self._refuse(other, held, report)
                continue
            wanted[name] = self._pick(definitions, held.file if held else None, report)
        for name, definition in wanted.items():
            if self._stopped(report, len(paths)):
                return report
            held = registered.get(name)
            if held is None or (held.hash, held.origin, self._path_of(held)) != (
                definition.hash,
                self.origin,
                definition.path,
            ):
                self._register(definition, now, report)
        kept = self._keep_broken(broken, paths, registered, wanted, fresh)
        self._unregister_gone(registered, wanted, kept, report, now)
        self._publish(paths, now, {self._path_of(registered[name]) for name in kept})
        if not wanted and not report.invalid:
            self._say_unscheduled(len(paths))
        self._said, self._saying = self._saying, {}
        return report

    def _say_unscheduled(self, files: int) -> None:
        """Say, once, that nothing in the folder has a schedule: a service that fires nothing
        would otherwise stay silent (flows without `schedule:`, the wrong folder)."""
        if files:
            has = f"has a schedule ({files} read)"
            message = f"no flow file in {self.folder} {has}: nothing to fire"
        else:
            message = f"no flow files (*.yaml, *.yml) in {self.folder}: nothing to fire"
        self._say(str(self.folder), message, logging.INFO, "%s", message)

    def _read(
        self, paths: list[Path], now: float, report: ScanReport
    ) -> tuple[dict[str, list[Definition]], dict[Path, _Seen]] | None:
        """Every file read and judged: the definitions by flow name and the files that do not
        validate; None when the service was told to stop first (the walk included)."""
        candidates: dict[str, list[Definition]] = {}
        broken: dict[Path, _Seen] = {}
        for path in paths:
            if self._stopped(report, len(paths)):
                return None
            seen = self._load(path, now)
            report.files += 1
            if seen.error is not None:
                report.invalid[str(path)] = seen.error
                if seen.findings:
                    report.findings[str(path)] = seen.findings
                if seen.broken:
                    broken[path] = seen
            elif seen.definition is not None:
                candidates.setdefault(seen.definition.name, []).append(seen.definition)
        if self._stopped(report, len(paths)):
            return None
        return candidates, broken

    def _stopped(self, report: ScanReport, files: int) -> bool:
        """Whether the service was told to stop; then the scan ends (with what it did)."""
        if self.stop is None or not self.stop.is_set():
            return False
        report.stopped = True
        self._saying = {}
        log.info(
            "scan of %s stopped after %d of the %d files found: the service is stopping",
            self.folder,
            report.files,
            files,
        )
        return True

    def _say(self, key: str, message: str, level: int, text: str, *args: object) -> None:
        """Log ``text % args`` about ``key`` (a file) unless the last scan logged ``message``
        about it already: a problem that stays is logged once, and again when it changes."""
        self._saying[key] = message
        if self.log_invalid and self._said.get(key) != message:
            log.log(level, text, *args)

    def _keep_broken(
        self,
        broken: dict[Path, _Seen],
        paths: list[Path],
        registered: dict[str, Indexed],
        wanted: dict[str, Definition],
        fresh: set[str],
    ) -> set[str]:
        """The schedules that files that do not validate keep, each file's problem logged
        with what it keeps: the schedule registered from that very file, or (moved and broken
        in one change) the schedule of the flow it declares whose registered file is gone, or,
        for a file whose flow's name cannot be read, the schedules whose files went when it
        appeared (:meth:`_held_while_nameless`)."""
        present = {self._relative(path) for path in paths}
        by_path = {
            self._path_of(held): name
            for name, held in registered.items()
            if self._ours(held) and name not in wanted
        }
        kept: set[str] = set()
        statuses: dict[Path, str] = {}
        nameless: set[str] = set()
        for path, seen in broken.items():
            name = by_path.get(self._relative(path))
            held = registered.get(seen.name) if seen.name else None
            if name is not None:
                statuses[path] = f"its schedule {name} stays as registered"
            elif (
                held is not None
                and seen.name not in wanted
                and self._ours(held)
                and self._path_of(held) not in present
            ):
                name = seen.name
                statuses[path] = (
                    f"schedule {name} stays as registered from {held.file}, which is gone, "
                    "until this file validates"
                )
            elif seen.name is None:
                nameless.add(self._relative(path))
            if name is not None:
                kept.add(name)
        gone = {
            name: held
            for name, held in registered.items()
            if self._ours(held)
            and name not in wanted
            and name not in kept
            and self._path_of(held) not in present
        }
        holding = self._held_while_nameless(gone, nameless, fresh)
        kept |= set(holding)
        for path, seen in broken.items():
            status = statuses.get(path)
            names = sorted(name for name, files in holding.items() if self._relative(path) in files)
            if status is None and names:
                files = ", ".join(gone[name].file for name in names)
                status = (
                    f"schedule {', '.join(names)} stays as registered from {files}, which is "
                    "gone, until this file validates (its flow's name cannot be read: it may be "
                    "where that file moved)"
                )
            status = status or "no schedule is registered from it"
            self._say(
                str(path),
                f"{status}\n{seen.error}",
                logging.ERROR,
                "%s does not validate; %s:\n%s",
                path,
                status,
                seen.error,
            )
        return kept

    def _held_while_nameless(
        self, gone: dict[str, Indexed], nameless: set[str], fresh: set[str]
    ) -> dict[str, frozenset[str]]:
        """The schedules of ``gone`` (this source's, whose registered file is gone from the
        folder and that no file validating or declaring their name keeps) that files of
        ``nameless`` (they do not validate and their flow's name cannot be read: YAML that
        does not parse, say) keep, each with those files.

        A file moved and broken in one change cannot say which flow it is: a schedule whose
        file went in the scan in which such a file appeared (``fresh``: the files this
        reloader had not seen before) stays registered
        while one of the files that appeared with it is still so, rather than stop firing
        over a typo. Once that file validates, it is registered from where it is if it is the
        same flow, and the schedule is unregistered if not; so it is when the file goes. A
        service's first scan saw no file appear (``fresh`` is empty): a file broken before it
        started, maybe for months, is no evidence of a move, and a schedule kept so by the
        service before it is unregistered (until that file validates)."""
        holding: dict[str, frozenset[str]] = {}
        appeared = frozenset(nameless & fresh)
        for name in gone:
            still = self._held_by_nameless.get(name, frozenset()) & nameless
            files = still | appeared
            if files:
                holding[name] = files
        self._held_by_nameless = holding
        return holding

    def _publish(self, paths: list[Path], now: float, moved: set[str]) -> None:
        """Every flow file of the folder that validates, scheduled or not, into the catalogue
        (``flows ui`` lists and starts them), when the files or their texts changed since last
        published (at ``now``); a file gone bad keeps what was published of it, and so does
        the gone file (``moved``: paths) of a schedule that a moved file gone bad keeps."""
        files = {p: self._published_files[p] for p in moved if p in self._published_files}
        for path in paths:
            seen = self._seen.get(path)
            if seen is not None and seen.error is not None:
                # A file that does not validate changes nothing (its error is logged): what was
                # published of it stays, as its schedule stays registered.
                kept = self._published_files.get(self._relative(path))
                if kept is not None:
                    files[self._relative(path)] = kept
                continue
            if seen is None or seen.text is None:
                continue
            if len(seen.text.encode()) > catalog.MAX_TEXT:
                log.warning("%s is over %d bytes: not in the catalogue", path, catalog.MAX_TEXT)
                continue
            files[self._relative(path)] = seen.text
        content = catalog.digest(files)
        if content == self._published:
            return
        try:
            catalog.publish(self.schedules.client, self.origin, str(self.folder), files, now=now)
        except ForeignEngine:  # not the catalogue's to say: the service stops over it, once
            raise
        except Exception as error:  # the catalogue is for listing: a refusal must not stop the scan
            log.warning("cannot publish the flow files of %s: %s", self.folder, error)
            return
        self._published = content
        self._published_files = files

    def _unregister_gone(
        self,
        registered: dict[str, Indexed],
        wanted: dict[str, Definition],
        kept: set[str],
        report: ScanReport,
        now: float,
    ) -> None:
        """This source's schedules that no file of it schedules any more (a file that does not
        validate keeps its schedule: ``kept``, and those of the files that could not be read)."""
        invalid = {self._relative(Path(file)) for file in report.invalid}
        for name, held in registered.items():
            if name in wanted or name in kept or not self._ours(held):
                continue
            if self._path_of(held) in invalid:
                continue
            outcome = self.schedules.unregister(name, held.hash, now=now)
            if outcome == "unregistered":
                log.info("unregistered schedule %s (%s no longer schedules it)", name, held.file)
                report.unregistered.append(name)

    def texts(self) -> dict[Path, tuple[str, str]]:
        """The files of the last scan that validate: path → (content hash, text)."""
        return {
            path: (seen.hash, seen.text)
            for path, seen in self._seen.items()
            if seen.error is None and seen.text is not None
        }

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
            text = path.read_text(
                encoding="utf-8-sig"
            )  # a byte order mark dropped, as flows run does
        except (OSError, UnicodeDecodeError) as error:
            # Unreadable right now (being replaced, permissions): keep what we knew, or report
            # it (which also keeps its registration), and look again next scan.
            why = _unreadable(error)
            message = f"{path}: cannot read: {why}"
            self._say(str(path), message, logging.WARNING, "cannot read %s: %s", path, why)
            return old or _Seen((0, 0), "", None, message)
        digest = _digest(text)
        if old is not None and old.hash == digest:
            seen = dataclasses.replace(old, stamp=stamp, text=text)
        else:
            seen = dataclasses.replace(self._judge(path, text, digest, stamp, now), text=text)
        self._seen[path] = seen
        return seen

    def _judge(
        self, path: Path, text: str, digest: str, stamp: tuple[int, int], now: float
    ) -> _Seen:
        try:
            definition = self.source.load(path, text, now)
            if definition is not None:
                definition = dataclasses.replace(
                    definition, origin=self.origin, path=self._relative(path)
                )
        except InvalidSource as invalid:
            # Logged by the scan, which knows what registration the file keeps.
            return _Seen(
                stamp,
                digest,
                None,
                str(invalid),
                findings=invalid.findings,
                broken=True,
                name=invalid.name,
            )
        except Exception as error:  # a bug in one check must not stop the other files
            log.exception("cannot load %s", path)
            return _Seen(stamp, digest, None, f"{path}: {type(error).__name__}: {error}")
        return _Seen(stamp, digest, definition, None)

    def _register(self, definition: Definition, now: float, report: ScanReport) -> None:
        try:
            outcome = self.schedules.register(definition, now, settle=self.settle)
        except Exception as error:  # one refused registration must not stop the scan
            log.exception("cannot register %s", definition.name)
            report.invalid[definition.file] = f"{type(error).__name__}: {error}"
            return
        if outcome == "owned":  # another source registered it since this scan looked
            held = self.schedules.index(now=now).get(definition.name)
            if held is not None:
                self._refuse(definition, held, report)
        elif outcome == "registered":
            log.info(
                "registered schedule %s from %s: %s",
                definition.name,
                definition.file,
                definition.timing,
            )
            report.registered.append(definition.name)
        elif outcome == "updated":
            log.info(
                "updated schedule %s from %s: %s",
                definition.name,
                definition.file,
                definition.timing,
            )
            report.updated.append(definition.name)

    def _pick(
        self, definitions: list[Definition], owner_file: str | None, report: ScanReport
    ) -> Definition:
        """Of files naming one flow, the registered one (else the first); the rest are
        reported."""
        chosen = next((d for d in definitions if d.file == owner_file), definitions[0])
        for other in definitions:
            if other is not chosen:
                message = (
                    f"{other.file}: flow '{other.name}' is already scheduled by {chosen.file}; "
                    "rename one of the flows"
                )
                self._say(other.file, message, logging.ERROR, "%s", message)
                report.invalid[other.file] = message
        return chosen

    def _ours(self, held: Indexed) -> bool:
        """Whether a registration is this source's: by name, or (registered before sources
        existed) by its file lying under this folder."""
        if held.origin:
            return held.origin == self.origin
        return bool(held.file) and Path(held.file).is_relative_to(self.folder)

    def _relative(self, path: Path) -> str:
        """A file's path within the folder, the same on every machine."""
        try:
            return path.resolve().relative_to(self.folder).as_posix()
        except ValueError:
            return str(path)

    def _path_of(self, held: Indexed) -> str:
        return held.path or self._relative(Path(held.file))

    def _refuse(self, definition: Definition, held: Indexed, report: ScanReport) -> None:
        owner = f"source '{held.origin}'" if held.origin else "no source"
        message = (
            f"{definition.file}: flow '{definition.name}' is scheduled by {owner} "
            f"({held.file}), not '{self.origin}'; `flows schedule remove {definition.name}` "
            "to schedule it from here"
        )
        self._say(definition.file, message, logging.ERROR, "%s", message)
        report.invalid[definition.file] = message


def default_origin(folder: Path) -> str:
    """A folder's source name: its own name (``pipelines`` for ``/srv/repo/pipelines``), so
    the same checkout at another path is the same source."""
    name = folder.resolve().name or "root"
    return "".join("_" if char.isspace() else char for char in name)[:256]


__all__ = ["PATTERNS", "Reloader", "ScanReport", "default_origin", "flow_files"]
