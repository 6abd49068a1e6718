"""The `pytest11` plugin in a real pytest process: SIGTERM (a cancelled CI job) leaves nothing
behind, neither a real step's processes nor the private server, and pytest ends on it as it
always did outside a flow case."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged, read_until

from scheduler.embedded import EmbeddedServer, wheel_binary

SLEEPY = """\
version: 1
name: sleepy
steps:
  nap:
    run: |
      echo $$ > "$FIFO"
      exec sleep 120
    env: {{FIFO: "{fifo}"}}
"""


def _pytest(
    folder: Path, temp: Path, url: str | None, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``pytest ARGS... folder`` in a process of its own, its temp files under ``temp``; on
    ``url``'s server, or on a private one when None."""
    env = {**{k: v for k, v in os.environ.items() if k != "FLOWS_REDIS_URL"}, **(env or {})}
    if url is not None:
        env["FLOWS_REDIS_URL"] = url
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, str(folder)],
        cwd=folder,
        env={**env, "TMPDIR": str(temp)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_fifo(fd: int, process: subprocess.Popen[str], timeout: float = 60) -> str:
    """A line written to the FIFO open at ``fd``, read as it comes."""
    seen = ""
    deadline = time.monotonic() + timeout
    while not seen.endswith("\n"):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        if select.select([fd], [], [], 0.5)[0]:
            seen += os.read(fd, 64).decode()
    return seen


def _gone(pid: int, timeout: float = 10) -> bool:
    """Whether process ``pid`` ends within ``timeout`` (waited for on its pidfd, not polled)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _server_pid(temp: Path) -> int:
    [pid_file] = temp.glob("flows-test-server-*/server.pid")
    return int(pid_file.read_text())


def _left_in(temp: Path) -> list[Path]:
    """What the session left in its temp folder: a server's folder, a case's sandbox, a
    socket."""
    return [*temp.glob("flows-test-*"), *(p for p in temp.rglob("*") if not p.is_dir())]


@pytest.mark.parametrize("private", [True, False], ids=["private server", "FLOWS_REDIS_URL"])
def test_sigterm_in_a_flow_case_stops_it_and_leaves_nothing_behind(
    tmp_path: Path, short_tmp: Path, url: str, redis_client: redis.Redis, private: bool
) -> None:
    """SIGTERM ended pytest at once: the real step ran on, and so did the private server (or the
    case's namespace stayed on the server named). The case now stops as on Ctrl-C, and pytest
    ends as `flows test` does, with exit code 143 and no traceback."""
    folder, temp, fifo = tmp_path / "project", short_tmp, tmp_path / "step.fifo"
    folder.mkdir()
    os.mkfifo(fifo)
    (folder / "sleepy.yaml").write_text(SLEEPY.format(fifo=fifo))
    (folder / "sleepy.test.yaml").write_text("flow: sleepy.yaml\ncases:\n  - name: naps\n")
    reader = os.open(fifo, os.O_RDWR)  # never an end of file: the step's line is awaited
    step = 0
    try:
        with assert_unchanged(redis_client):
            process = _pytest(folder, temp, None if private else url, "-q")
            step = int(_read_fifo(reader, process))
            server = _server_pid(temp) if private else 0
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
        assert process.returncode == 128 + signal.SIGTERM, out + err
        assert "terminated (SIGTERM) in flow test case 'naps'" in out, out + err
        assert "Traceback" not in out + err, out + err
        assert _gone(step), f"the step's process {step} outlived pytest"
        if private:
            assert _gone(server), f"the private server {server} outlived pytest"
        assert _left_in(temp) == []
    finally:
        os.close(reader)
        if step:
            with contextlib.suppress(ProcessLookupError):
                os.kill(step, signal.SIGKILL)
        for server_folder in temp.glob("flows-test-server-*"):  # a failed run's: not left
            EmbeddedServer(server_folder).stop()


# The case's step runs in a thread of the pytest process: a Python step that says it runs,
# then waits to be stopped. The kernel may hand a signal sent to the process to any thread that
# does not block it; the main thread blocks SIGTERM from the start (conftest.py), the step's
# thread lets it through, so that one takes it every time, not by luck of timing.
HANDED_OVER = {
    "conftest.py": (
        "import signal\n\nsignal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM}})\n"
    ),
    "tasks.py": (
        "import signal\n\n\ndef nap(ctx):\n"
        "    signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGTERM}})\n"
        "    with open({fifo!r}, 'w') as fifo:\n"
        "        fifo.write('napping\\n')\n"
        "    ctx.stopped.wait(120)\n"
    ),
    "napping.yaml": "version: 1\nname: napping\nsteps:\n  nap: {{job: tasks.nap}}\n",
    "napping.test.yaml": "flow: napping.yaml\ncases:\n  - name: naps\n",
}


def test_sigterm_another_thread_took_still_stops_the_case_at_once(
    tmp_path: Path, short_tmp: Path, url: str, redis_client: redis.Redis
) -> None:
    """Python runs a signal's handler in the main thread, and a signal another thread took
    wakes no lock that thread waits on: the wait for a real step slept through SIGTERM until
    the step ended (or its limit, ten minutes)."""
    folder, fifo = tmp_path / "project", tmp_path / "step.fifo"
    folder.mkdir()
    os.mkfifo(fifo)
    for name, text in HANDED_OVER.items():
        (folder / name).write_text(text.format(fifo=str(fifo)))
    reader = os.open(fifo, os.O_RDWR)
    try:
        with assert_unchanged(redis_client):
            process = _pytest(folder, short_tmp, url, "-q")
            try:
                assert _read_fifo(reader, process) == "napping\n"
                process.send_signal(signal.SIGTERM)
                out, err = process.communicate(timeout=30)  # the step waits 120 s
            finally:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
        assert process.returncode == 128 + signal.SIGTERM, out + err
        assert "terminated (SIGTERM) in flow test case 'naps'" in out, out + err
        assert "Traceback" not in out + err, out + err
        assert _left_in(short_tmp) == []
    finally:
        os.close(reader)


WAITS = """\
import sys


def test_waits():
    print("waiting", flush=True)
    sys.stdin.readline()
"""


def test_sigterm_outside_a_flow_case_ends_pytest_as_before_and_stops_the_server(
    tmp_path: Path, short_tmp: Path
) -> None:
    """A Python test runs after a flow case started the private server: SIGTERM ends pytest as
    it always did (by the signal, at once: no KeyboardInterrupt in someone else's test), the
    server stopped and its folder removed first."""
    folder, temp = tmp_path / "project", short_tmp
    folder.mkdir()
    (folder / "flow.yaml").write_text(
        "version: 1\nname: quick\nsteps:\n  a: {run: echo hi}\n"
        "tests:\n  - name: stubbed\n    mock: all\n    expect: {status: succeeded}\n"
    )
    (folder / "test_waits.py").write_text(WAITS)
    process = _pytest(folder, temp, None, "-v", "-s")
    try:
        said = read_until(process, "waiting\n")
        assert "flow.yaml::stubbed PASSED" in said, said
        server = _server_pid(temp)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == -signal.SIGTERM, said + out + err
        assert "KeyboardInterrupt" not in said + out + err
        assert _gone(server), f"the private server {server} outlived pytest"
        assert _left_in(temp) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        for server_folder in temp.glob("flows-test-server-*"):
            EmbeddedServer(server_folder).stop()


# The server binary as the embedded server runs it (its config file the argument): the real one
# daemonizes, then this says the daemon's pid and holds the start there, until it is killed.
HELD_START = """\
#!/bin/sh
"{real}" "$@" || exit
while [ ! -s server.pid ]; do sleep 0.01; done
cat server.pid > "{fifo}"
exec sleep 120
"""


def test_sigterm_while_the_private_server_starts_stops_it(tmp_path: Path, short_tmp: Path) -> None:
    """The private server is started by the first flow case: a SIGTERM then stops the start, and
    the daemon it had already launched, which ran on once its folder was removed."""
    real = wheel_binary()
    assert real is not None
    folder, fifo, binary = tmp_path / "project", tmp_path / "server.fifo", tmp_path / "server"
    folder.mkdir()
    os.mkfifo(fifo)
    binary.write_text(HELD_START.format(real=real, fifo=fifo))
    binary.chmod(0o755)
    (folder / "flow.yaml").write_text(
        "version: 1\nname: quick\nsteps:\n  a: {run: echo hi}\n"
        "tests:\n  - name: stubbed\n    mock: all\n"
    )
    reader = os.open(fifo, os.O_RDWR)
    server = 0
    try:
        process = _pytest(folder, short_tmp, None, "-q", env={"FLOWS_SERVER_BIN": str(binary)})
        server = int(_read_fifo(reader, process))
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 128 + signal.SIGTERM, out + err
        assert "Traceback" not in out + err, out + err
        assert _gone(server), f"the private server {server} outlived pytest"
        assert _left_in(short_tmp) == []
    finally:
        os.close(reader)
        if server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server, signal.SIGKILL)
