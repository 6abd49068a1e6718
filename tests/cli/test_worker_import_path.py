"""``flows worker`` imports job modules from the folder it is started in, in every mode, and
from each ``--path``: real ``flows`` console-script processes on the session's server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

# The console script, as a user runs it: its own folder (not the working directory) is what
# Python puts first on the import path, which is what made the modes differ.
FLOWS = str(Path(sys.executable).parent / "flows")

TASK = "def hello(job):\n    return {'from': __file__}\n"


@pytest.fixture
def client(server: EmbeddedServer, redis_client: redis.Redis) -> Iterator[Client]:
    with Client(server.url) as client:
        yield client


def burst(server: EmbeddedServer, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [FLOWS, "worker", "-q", "q", "--burst", "--log-level", "WARNING", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def checkout_worker(cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``flows worker OPTIONS`` started in ``cwd`` from this checkout's code (not the console
    script), with no ``FLOWS_`` setting of the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    code = "import sys; sys.argv[0] = 'flows'; from flows.entry import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "worker", *options],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("processes", ["0", "1"])
def test_a_job_module_in_the_working_directory_imports(
    server: EmbeddedServer, client: Client, tmp_path: Path, processes: str
) -> None:
    (tmp_path / "localtasks.py").write_text(TASK)
    jid = client.queues["q"].put("localtasks.hello", {})
    done = burst(server, tmp_path, "--processes", processes)
    assert done.returncode == 0, done.stderr
    job = client.jobs[jid]
    assert (job.state, job.failure) == ("complete", None)
    assert job.result == {"from": str(tmp_path / "localtasks.py")}


@pytest.mark.parametrize("processes", ["0", "2"])
def test_path_adds_a_folder_to_import_from(
    server: EmbeddedServer, client: Client, tmp_path: Path, processes: str
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libtasks.py").write_text(TASK)
    start = tmp_path / "elsewhere"
    start.mkdir()
    jid = client.queues["q"].put("libtasks.hello", {})
    done = burst(server, start, "--processes", processes, "--path", "../lib")
    assert done.returncode == 0, done.stderr
    assert client.jobs[jid].result == {"from": str(lib / "libtasks.py")}


def test_flows_run_imports_job_modules_from_the_working_directory(
    server: EmbeddedServer, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "cwdtasks.py").write_text(TASK)
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    flow = "version: 1\nname: cwdimport\nsteps:\n  hello:\n    job: cwdtasks.hello\n"
    (pipelines / "f.yaml").write_text(flow)
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [FLOWS, "run", "pipelines/f.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [jid] = [j for j in client.redis.keys("ql:j:*") if j.endswith(":hello")]
    job = client.jobs[jid.removeprefix("ql:j:")]
    assert job.result == {"from": str(tmp_path / "cwdtasks.py")}


def test_a_job_module_not_found_says_where_the_worker_looked(
    server: EmbeddedServer, client: Client, tmp_path: Path
) -> None:
    # A worker started in another folder than the module's: the failure says which folders
    # it imports from and how to add the right one, not only "No module named".
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "faraway_tasks.py").write_text(TASK)
    start = tmp_path / "elsewhere"
    start.mkdir()
    jid = client.queues["q"].put("faraway_tasks.hello", {})
    options = ["-q", "q", "--burst", "--processes", "0", "--redis", server.url]
    done = checkout_worker(start, *options)
    assert done.returncode == 0, done.stderr
    job = client.jobs[jid]
    assert job.state == "failed" and job.failure is not None
    assert job.failure["message"] == (
        "cannot import module 'faraway_tasks' for klass 'faraway_tasks.hello': No module named "
        f"'faraway_tasks' in {start} (where the worker started) or the installed packages: "
        "start the worker in the folder that holds it, or add that folder with --path"
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nomod:prepare", "cannot import module 'nomod': ModuleNotFoundError: No module named"),
        ("broken:prepare", "cannot import module 'broken': RuntimeError: needs FOO"),
        ("hooks:nothere", "module 'hooks' has no 'nothere'"),
        ("hooks:NAME", "'NAME' is not callable"),
    ],
)
def test_a_prepare_hook_that_does_not_import_stops_the_pool_with_one_line(
    server: EmbeddedServer, tmp_path: Path, spec: str, says: str
) -> None:
    # It was an "unexpected error (ModuleNotFoundError ...)", and the pool restarted its
    # process over it for ever: now a configuration error, which stops the pool.
    (tmp_path / "hooks.py").write_text("NAME = 'x'\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('needs FOO')\n")
    options = ["-q", "q", "--processes", "1", "--redis", server.url, "--prepare", spec]
    pool = checkout_worker(tmp_path, *options)
    assert pool.returncode == 78, pool.stderr
    assert f"--prepare {spec!r}: {says}" in pool.stderr, pool.stderr
    assert "cannot work (see above); stopping" in pool.stderr, pool.stderr
    assert "restarting" not in pool.stderr and "unexpected error" not in pool.stderr
