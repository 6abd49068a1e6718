"""A pytest plugin: ``pytest`` collects ``*.test.yaml`` files and the flow files with a ``tests:``
section, and runs each case as a test item.

Registered under the ``pytest11`` entry point, so a project that installs redis-flows has its
flow tests run by its own ``pytest`` (``pytest examples/``, or wherever its flows live). Cases
run on ``$FLOWS_REDIS_URL`` or a private embedded server, one namespace each. A test file with a
mistake fails as one item whose message is its file:line:col findings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from flows.flowfile.cases import Case
    from flows.testing.files import TestFile

SUFFIX = ".test.yaml"  # flows.testing.files's, not imported: every pytest run loads this plugin
_server: Any = None


def _redis() -> Any:
    """$FLOWS_REDIS_URL's server, else a private embedded one for the session."""
    global _server
    if _server is None:
        import atexit
        import os

        from flows.testing.session import private_server

        if os.environ.get("FLOWS_REDIS_URL"):
            from scheduler.connect import connect

            _server = connect()
        else:
            session = private_server()
            _server = session.__enter__()
            atexit.register(session.__exit__, None, None, None)
    return _server


class FlowTestFailure(Exception):
    """A case whose expectation did not hold (its diff is the message)."""


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(SUFFIX):
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
        from flows.testing.session import check_case

        report = check_case(_redis(), str(self.path), self.test, self.case)
        if not report.passed:
            raise FlowTestFailure("\n".join(report.failure))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, FlowTestFailure):
            return f"{self.path}:{self.case.line}: case {self.case.name!r}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"flow test: {self.case.name}"
