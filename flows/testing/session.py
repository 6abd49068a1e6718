"""Running test files on a server and reporting like pytest (``flows test``).

Each file is read first (a file with findings fails, its findings printed as ``flows validate``
prints them, and its cases are not run); each case then runs in its own namespace
(:func:`flows.testing.driver.run_case`).
"""

from __future__ import annotations

import signal
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import redis

from flows.flowfile.cases import Case
from flows.flowfile.findings import Finding
from flows.testing.driver import CaseError, Observed, run_case
from flows.testing.expect import diff
from flows.testing.files import Reading, read_test_file


@contextmanager
def private_server() -> Iterator[redis.Redis]:
    """A server of its own for a test session: the embedded one, in a temp folder, keeping no
    append-only file (a test's data is thrown away with the folder, and writing the file after
    every call costs the server a tenth of its time), latency histograms nor slow log (each
    command a script calls recorded one and was weighed for the other: about 1 % each of a
    schedule case's server instructions, for figures nobody reads); stopped and removed
    afterwards."""
    from scheduler.embedded import EmbeddedServer
    from scheduler.engine.connections import connect

    with tempfile.TemporaryDirectory(prefix="flows-test-server-") as folder:
        server = EmbeddedServer(Path(folder), appendfsync="no", scratch=True)
        try:  # a start interrupted (Ctrl-C, SIGTERM) may have launched the daemon: stopped too
            server.start()
            client = connect(server.url)
            try:
                with suppress(redis.ResponseError):  # a server before 7.0 keeps none
                    client.config_set("latency-tracking", "no")
                client.config_set("slowlog-log-slower-than", -1)
                yield client
            finally:
                client.close()
        finally:
            server.stop()


@contextmanager
def sigterm_as_ctrl_c(terminated: list[int]) -> Iterator[None]:
    """SIGTERM (a CI job cancelled, `timeout`, a container stopped) stops the cases as Ctrl-C
    does: a real step's commands are stopped, the case's namespace and the private server
    removed. By default it ended the process at once, and left them all running. Only the
    first one counts (`timeout` signals the process, then its whole group: one request, two
    deliveries); a Ctrl-C after it still stops a step's commands at once. ``terminated`` gets
    the signal's number when it came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None or previous == signal.SIG_IGN:  # ignored by whoever started us
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        if not terminated:
            terminated.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class CaseReport:
    file: str
    case: str
    line: int
    failure: list[str] = field(default_factory=list)
    observed: Observed | None = None

    @property
    def passed(self) -> bool:
        return not self.failure

    @property
    def nodeid(self) -> str:
        return f"{self.file}::{self.case}"


@dataclass
class SessionReport:
    cases: list[CaseReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings and all(c.passed for c in self.cases)


def check_case(server: redis.Redis, file: str, test: object, case: Case) -> CaseReport:
    """Run one case and compare; an error running it is its failure (never a traceback)."""
    from flows.testing.files import TestFile

    assert isinstance(test, TestFile)
    report = CaseReport(file, case.name, case.line)
    try:
        observed = run_case(server, test, case)
    except CaseError as error:
        report.failure = [f"the case could not run: {error}"]
        return report
    except Exception as error:  # an engine refusal, a server fault: the case's, said plainly
        report.failure = [f"the case could not run: {type(error).__name__}: {error}"]
        return report
    report.observed = observed
    report.failure = diff(case, observed)
    if report.failure and observed.failures:
        report.failure += ["", "how its jobs failed:", *(f"  {f}" for f in observed.failures)]
    return report


def run_files(
    server: redis.Redis,
    paths: Sequence[Path],
    on_case: Callable[[CaseReport], None] = lambda _: None,
    select: str | None = None,
) -> SessionReport:
    """Run every case of ``paths`` (``select``: only cases whose name contains it, in any case
    of letters, as pytest's ``-k`` matches)."""
    return run_readings(server, read_files(paths), on_case, select)


def read_files(paths: Sequence[Path]) -> dict[Path, Reading]:
    """Each file of ``paths`` read once (a file named twice runs once, as in pytest)."""
    return {path: read_test_file(path) for path in dict.fromkeys(paths)}


def run_readings(
    server: redis.Redis,
    readings: Mapping[Path, Reading],
    on_case: Callable[[CaseReport], None] = lambda _: None,
    select: str | None = None,
    names: Mapping[Path, Collection[str]] | None = None,
) -> SessionReport:
    """Run the cases of files read (``select`` as :func:`run_files`'s; ``names``: of the files
    it has, only the cases of those names, as ``FILE::NAME`` selects them)."""
    session = SessionReport()
    for path, reading in readings.items():
        session.findings.extend(reading.findings)
        if reading.test is None:
            continue
        named = (names or {}).get(path)
        for case in reading.test.cases:
            if named is not None and case.name not in named:
                continue
            if select is not None and select.casefold() not in case.name.casefold():
                continue
            report = check_case(server, str(path), reading.test, case)
            session.cases.append(report)
            on_case(report)
    return session
