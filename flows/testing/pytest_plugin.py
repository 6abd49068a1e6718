"""A pytest plugin: ``pytest`` collects ``*.test.yaml`` files and the flow files with a ``tests:``
section, and runs each case as a test item.

Registered under the ``pytest11`` entry point, so a project that installs redis-flows has its
flow tests run by its own ``pytest`` (``pytest examples/``, or wherever its flows live). Cases
run on ``$FLOWS_REDIS_URL`` or a private embedded server, one namespace each. A test file with a
mistake fails as one item whose message is its file:line:col findings.

SIGTERM (a cancelled CI job, ``timeout``) leaves nothing behind. While a case runs it stops the
case as Ctrl-C does (a real step's processes, the case's namespace and sandbox), then the session
with exit code 143, as ``flows test`` ends. At any other moment (collecting, a Python test)
pytest ends on it as it always did, its private server stopped first.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from flows.flowfile.cases import Case
    from flows.runs.logs import StepLine
    from flows.testing.files import TestFile

SUFFIXES = (".test.yaml", ".test.yml")  # flows.testing.files's, not imported: every pytest
# run loads this plugin
_server: Any = None
_private: AbstractContextManager[Any] | None = None
"""The private server's context (None: none runs, or $FLOWS_REDIS_URL's is used)."""
_previous_sigterm: Any = None
"""SIGTERM's handler before :func:`_stop_then_sigterm` (None: that one is not installed)."""


def _redis() -> Any:
    """$FLOWS_REDIS_URL's server, else a private embedded one for the session."""
    global _server, _private
    if _server is None:
        import atexit
        import os

        from flows.testing.session import private_server

        if os.environ.get("FLOWS_REDIS_URL"):
            from scheduler.connect import connect

            _server = connect()
        else:
            session = private_server()
            atexit.register(_close)
            _server = session.__enter__()  # a start cut short stops what it started
            _private = session
    return _server


def _close() -> None:
    """Stop the private server and remove its folder (once), and give SIGTERM back."""
    global _server, _private, _previous_sigterm
    session, _private, _server = _private, None, None
    if _previous_sigterm is not None:
        if signal.getsignal(signal.SIGTERM) == _stop_then_sigterm:
            signal.signal(signal.SIGTERM, _previous_sigterm)
        _previous_sigterm = None
    if session is not None:
        with suppress(Exception):  # a server already gone: nothing is left to stop
            session.__exit__(None, None, None)


def _watch_sigterm() -> None:
    """Outside a case, SIGTERM ends pytest as it did before this plugin ran (by default at
    once): the private server, a daemon, would outlive it, so it is stopped first."""
    global _previous_sigterm
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None or previous == signal.SIG_IGN:  # ignored by whoever started us
        return
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _stop_then_sigterm)


def _stop_then_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _previous_sigterm
    _close()  # gives SIGTERM its previous handler back
    if callable(previous):
        previous(signum, frame)
    else:
        signal.raise_signal(signum)


def pytest_unconfigure(config: pytest.Config) -> None:
    _close()


class FlowTestFailure(Exception):
    """A case whose expectation did not hold (its diff is the message)."""


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(SUFFIXES):
        return FlowTestFile.from_parent(parent, path=file_path)
    if file_path.suffix in (".yaml", ".yml"):
        from flows.testing.files import has_tests  # only where there is YAML to look at

        if has_tests(file_path):
            return FlowTestFile.from_parent(parent, path=file_path)
    return None


class FlowTestFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from flows.testing.files import read_test_file

        reading = read_test_file(self.path)
        if reading.test is None:
            yield FindingsItem.from_parent(
                self, name="findings", findings=[f.format() for f in reading.findings]
            )
            return
        for case in reading.test.cases:
            yield FlowCaseItem.from_parent(self, name=case.name, test=reading.test, case=case)


def _output_text(output: list[StepLine]) -> str:
    """A case's real steps' lines, ``step | text`` each (``!`` for stderr, ``~`` a record)."""
    from flows.runs.logs import MARKS

    lines = []
    for item in output:
        line = item.line
        text = f"{line.level} {line.text}" if line.level else line.text
        lines.append(f"{item.label} {MARKS.get(line.stream, '?')} {text}")
    return "\n".join(lines)


class FindingsItem(pytest.Item):
    def __init__(self, *, findings: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.findings = findings

    def runtest(self) -> None:
        raise FlowTestFailure("\n".join(self.findings))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.path.name}: findings"


class FlowCaseItem(pytest.Item):
    def __init__(self, *, test: TestFile, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.test = test
        self.case = case

    def runtest(self) -> None:
        from flows.testing.session import check_case, sigterm_as_ctrl_c

        terminated: list[int] = []
        try:
            # The server's start too: a start cut short stops the server it launched.
            with sigterm_as_ctrl_c(terminated):
                report = check_case(_redis(), str(self.path), self.test, self.case)
            if _private is not None and _previous_sigterm is None:
                _watch_sigterm()  # under the case's handler, SIGTERM's own: the one it gave back
        except KeyboardInterrupt:
            if not terminated:
                raise  # Ctrl-C: pytest's own interruption
            # The case stopped as on Ctrl-C; the session ends as `flows test` does on SIGTERM
            # (pytest.exit: no traceback, and the private server is stopped at unconfigure).
            pytest.exit(
                f"terminated (SIGTERM) in flow test case {self.case.name!r}",
                returncode=128 + signal.SIGTERM,
            )
        if report.observed is not None and report.observed.output:
            # Shown as pytest shows what a test printed: with a failure, or with -rP.
            self.add_report_section("call", "output", _output_text(report.observed.output))
        if not report.passed:
            raise FlowTestFailure("\n".join(report.failure))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, FlowTestFailure):
            return f"{self.path}:{self.case.line}: case {self.case.name!r}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"flow test: {self.case.name}"
