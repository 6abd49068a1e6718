"""The names the Python API and errors pages tell a reader to use are importable where the
pages say: the client's from ``scheduler``, a job function's and a worker's from
``scheduler.worker``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import scheduler
import scheduler.worker

PAGES = Path(__file__).resolve().parents[2] / "docs" / "pages"


def _documented_classes() -> list[str]:
    """The `::: module.Name` entries of the Python API page that name a class."""
    text = (PAGES / "python-api.md").read_text()
    paths = re.findall(r"^::: (scheduler\.[\w.]+)$", text, re.MULTILINE)
    return [path for path in paths if path.rsplit(".", 1)[1][0].isupper()]


def _fault_classes() -> list[str]:
    """The first column of the errors page's table of fault classes, less those it places in
    another module (`UnsupportedServer` (`scheduler.engine.server_support`))."""
    text = (PAGES / "errors.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)


def test_the_pages_name_classes() -> None:
    assert len(_documented_classes()) > 10
    assert "ServerUnavailable" in _fault_classes()


@pytest.mark.parametrize("path", _documented_classes())
def test_each_class_of_the_python_api_page_is_exported(path: str) -> None:
    module, name = path.rsplit(".", 1)
    package = scheduler.worker if module.startswith("scheduler.worker") else scheduler
    assert name in package.__all__
    assert getattr(package, name).__name__ == name


@pytest.mark.parametrize("name", _fault_classes())
def test_each_fault_class_of_the_errors_page_is_exported(name: str) -> None:
    assert name in scheduler.__all__
    assert issubclass(getattr(scheduler, name), scheduler.ServerError)


def test_what_put_returns_is_exported() -> None:
    assert "a `PutResult`" in (PAGES / "python-api.md").read_text()
    assert scheduler.PutResult.__module__ == "scheduler.engine.queue"
    assert "PutResult" in scheduler.__all__
