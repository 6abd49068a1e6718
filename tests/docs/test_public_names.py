"""The names the Python API and errors pages tell a reader to use are importable where the
pages say: the client's from ``scheduler``, a job function's and a worker's from
``scheduler.worker``."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
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


USER_CODE = """\
from scheduler import Client, JobNotFound, PutResult
from scheduler.worker import JobContext, WorkerPool


def main(client: Client) -> PutResult:
    jid = client.queues["q"].put("app.task", {"a": 1})
    reveal_type(client.jobs[jid])
    try:
        client.jobs["x"]
    except JobNotFound as error:
        print(error.command)
    return jid
"""


def _strict_mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict on ``code``, run by a user whose environment has the package installed
    (found through site-packages, as an installed or editable copy is)."""
    root = Path(__file__).resolve().parents[2]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "redis_flows_under_test.pth").write_text(f"{root}\n")
    (tmp_path / "app.py").write_text(code)
    # Absolute: a Python started through a relative PATH entry has a relative sys.executable,
    # which the run in tmp_path would not find (not resolved: the venv's link must stay).
    mypy = [os.path.abspath(sys.executable), "-m", "mypy", "--strict", "--no-incremental"]
    return subprocess.run(
        [*mypy, "--python-executable", str(python), "app.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )


def test_a_strict_type_checker_of_an_installed_copy_sees_the_types(tmp_path: Path) -> None:
    """mypy --strict gets the package's own type hints: only with a ``py.typed`` marker (PEP
    561) does it read them instead of refusing the import."""
    checked = _strict_mypy(tmp_path, USER_CODE)
    assert 'Revealed type is "scheduler.engine.job.Job"' in checked.stdout, checked.stdout
    assert checked.returncode == 0, checked.stdout


MISTAKES = """\
from scheduler import Client


def main(client: Client) -> None:
    job = client.jobs["jid"]
    print(job.reslt)
    client.events(timout=5)
"""


def test_a_strict_type_checker_finds_a_misspelt_attribute_or_keyword(tmp_path: Path) -> None:
    """A job's attribute and the options of ``client.events()`` are typed: a misspelt name is
    an error, not an ``Any`` (a job's lazily read details and a ``**options: Any`` hid them)."""
    checked = _strict_mypy(tmp_path, MISTAKES)
    assert 'app.py:6: error: "Job" has no attribute "reslt"' in checked.stdout, checked.stdout
    assert 'app.py:7: error: Unexpected keyword argument "timout"' in checked.stdout, checked.stdout


def test_every_error_class_is_exported_from_scheduler() -> None:
    """The Python API page: "every error class" is re-exported from ``scheduler`` (the cluster
    and Sentinel errors, ``UnsupportedServer`` and ``UnsafeServer``, which ``Worker.run()``
    raises, were not)."""
    from scheduler.engine import errors, faults, safety, server_support

    for module in (errors, faults, safety, server_support):
        for name, value in vars(module).items():
            ours = isinstance(value, type) and value.__module__ == module.__name__
            if ours and issubclass(value, Exception):
                assert name in scheduler.__all__, f"{module.__name__}.{name}"
                assert getattr(scheduler, name) is value


def _public_members(owner: type) -> list[tuple[str, object]]:
    members = []
    for name, value in vars(owner).items():
        if name.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(function):
            members.append((name, function))
    return members


def test_every_public_name_and_method_has_a_docstring() -> None:
    """What the reference pages render (and ``help()`` shows): no empty entry."""
    undocumented = []
    for package in (scheduler, scheduler.worker):
        for name in package.__all__:
            value = getattr(package, name)
            if not (value.__doc__ or "").strip():  # its own: getdoc() would take a base's
                undocumented.append(f"{package.__name__}.{name}")
            if inspect.isclass(value):
                undocumented += [
                    f"{package.__name__}.{name}.{member}"
                    for member, function in _public_members(value)
                    if not (getattr(function, "__doc__", None) or "").strip()
                ]
    assert undocumented == []
