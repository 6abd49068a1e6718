"""Ctrl-C ends every command with exit code 130 and one line, `interrupted`: real `flows`
processes sent SIGINT while they are still importing the command line, follow a run's log, run
a flow test's real step, or wait at a confirmation prompt (never click's `Aborted!` with exit 1,
never a traceback)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from cli_support import flows
from helpers import Reap, read_until

from flows.cli.run import SHUTDOWN_GRACE
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

FLOWS = str(Path(sys.executable).parent / "flows")


def _start(url: str, *args: str) -> subprocess.Popen[str]:
    """``flows ARGS...`` in a process of its own, SIGINT at its default (a shell that started
    the tests in the background may have left it ignored, and a child inherits that)."""
    return subprocess.Popen(
        [FLOWS, *args],
        env={**os.environ, "FLOWS_REDIS_URL": url},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _interrupted(process: subprocess.Popen[str]) -> str:
    """Send SIGINT; the process must end with exit code 130; returns its stderr."""
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Aborted!" not in err and "Traceback" not in err, err
    return err


PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

# Put on PYTHONPATH as sitecustomize (run before the script): the import of the module named by
# $FLOWS_TEST_SLOW_IMPORT says so on stdout, then waits for a signal. A Ctrl-C sent then lands
# in that import every time, not by luck of timing.
SLOW_IMPORT = """
import os, sys, time

class _Slow:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["FLOWS_TEST_SLOW_IMPORT"]:
            sys.meta_path.remove(self)
            os.write(1, b"importing " + name.encode() + b"\\n")
            time.sleep(120)
        return None

sys.meta_path.insert(0, _Slow())
"""


def _console_script(folder: Path) -> Path:
    """The ``flows`` script as pip writes it from pyproject.toml's [project.scripts] (the one in
    the environment was written when the package was installed, maybe from an older entry)."""
    entry = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]["flows"]
    module, _, function = entry.partition(":")
    script = folder / "flows"
    script.write_text(
        f"#!{sys.executable}\n"
        "import re\n"
        "import sys\n"
        f"from {module} import {function}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({function}())\n"
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    "module",
    [
        "flows.cli",  # the command line itself, before any of it exists
        "click",  # inside it
        "flows.cli.auditing",  # the audit log's part, around the command
        "flows.cli.schema",  # the command's module
    ],
)
def test_ctrl_c_while_the_command_line_is_imported(tmp_path: Path, module: str, reap: Reap) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_IMPORT)
    path = [str(hook), *filter(None, [os.environ.get("PYTHONPATH")])]
    process = reap(
        subprocess.Popen(
            [str(_console_script(tmp_path)), "schema"],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(path),
                "FLOWS_TEST_SLOW_IMPORT": module,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    )
    read_until(process, f"importing {module}\n")
    assert _interrupted(process) == "interrupted\n"


def test_ctrl_c_while_following_a_runs_log(
    url: str, client: Client, tmp_path: Path, reap: Reap
) -> None:
    flow = tmp_path / "wait.yaml"
    flow.write_text("version: 1\nname: wait\nqueue: nobody\nsteps:\n  a: {run: echo hi}\n")
    submitted = flows("run", str(flow), "--detach", "--run-id", "r1", "--redis", url)
    assert submitted.exit_code == 0, submitted.output
    # A line already in the log: once it is printed, `flows logs -f` is following the run,
    # which no worker works, so it would follow it forever.
    client.engine.call("log.append", "r1:a", 1, 0, 1, time.time(), "stdout", "", "hello")
    process = reap(_start(url, "logs", "-f", "r1"))
    read_until(process, "a | hello\n")
    assert _interrupted(process) == "interrupted\n"


def test_ctrl_c_while_a_flow_tests_real_step_runs(url: str, tmp_path: Path, reap: Reap) -> None:
    pid_file = tmp_path / "step.pid"
    (tmp_path / "sleepy.yaml").write_text(
        f"version: 1\nname: sleepy\nsteps:\n  nap:\n    run: echo $$ > {pid_file}; exec sleep 120\n"
    )
    test_file = tmp_path / "sleepy.test.yaml"
    test_file.write_text(
        "flow: sleepy.yaml\ncases:\n  - name: naps\n    expect: {status: succeeded}\n"
    )
    process = reap(_start(url, "test", str(test_file), "--redis", url))
    _written(pid_file, process)
    step = int(pid_file.read_text())
    try:
        assert _interrupted(process).splitlines()[-1] == "interrupted"
        # The step's process ends with the command, as a worker's would: none is left behind.
        _wait_gone(step)
    finally:
        _kill(step)


def test_sigterm_stops_a_flow_test_as_ctrl_c_does(
    tmp_path: Path, short_tmp: Path, reap: Reap
) -> None:
    """SIGTERM (a CI job cancelled, `timeout`) ended `flows test` at once: the real step's
    commands ran on, and so did the private server, its folder left behind. It now stops as
    Ctrl-C does, with exit code 143 and one line."""
    pid_file, temp = tmp_path / "step.pid", short_tmp
    (tmp_path / "sleepy.yaml").write_text(
        f"version: 1\nname: sleepy\nsteps:\n  nap:\n    run: echo $$ > {pid_file}; exec sleep 120\n"
    )
    test_file = tmp_path / "sleepy.test.yaml"
    test_file.write_text("flow: sleepy.yaml\ncases:\n  - name: naps\n")
    env = {k: v for k, v in os.environ.items() if k != "FLOWS_REDIS_URL"}
    process = reap(
        subprocess.Popen(
            [FLOWS, "test", str(test_file)],  # on a private server, in a temp folder of its own
            env={**env, "TMPDIR": str(temp)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    _written(pid_file, process)
    step = int(pid_file.read_text())
    try:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 143, err
        assert err.splitlines()[-1] == "terminated" and "Traceback" not in err, err
        _wait_gone(step)
        # The private server was stopped and its folder removed (its socket too, when it was
        # in the temp dir's flows-UID), the cases' sandbox too.
        assert list(temp.glob("flows-test-*")) == []
        assert [p for p in temp.rglob("*") if not p.is_dir()] == []
    finally:
        _kill(step)
        for folder in temp.glob("flows-test-server-*"):  # a failed run's server: not left
            EmbeddedServer(folder).stop()


STUBBORN = """\
version: 1
name: stubborn
steps:
  nap:
    run: |
      trap 'echo term > "$MARK"' TERM
      (trap '' TERM; exec sleep 120) &
      echo "$$ $!" > "$PIDS.tmp" && mv "$PIDS.tmp" "$PIDS"
      while :; do wait; done
    env: {{MARK: "{mark}", PIDS: "{pids}"}}
"""


def test_a_second_ctrl_c_kills_a_flow_tests_step_that_ignores_sigterm(
    url: str, tmp_path: Path, reap: Reap
) -> None:
    """The first Ctrl-C ends a real step with SIGTERM, then SIGKILL 5 s later; a step that
    shrugs SIGTERM off is killed at once by a second one, not left running by the exit."""
    mark, pids = tmp_path / "term", tmp_path / "step.pids"
    (tmp_path / "stubborn.yaml").write_text(STUBBORN.format(mark=mark, pids=pids))
    test_file = tmp_path / "stubborn.test.yaml"
    test_file.write_text("flow: stubborn.yaml\ncases:\n  - name: naps\n")
    process = reap(_start(url, "test", str(test_file), "--redis", url))
    _written(pids, process)
    step = [int(pid) for pid in pids.read_text().split()]
    try:
        process.send_signal(signal.SIGINT)
        _written(mark, process, mark=True)  # the step got its SIGTERM (and stays)
        assert all(_alive(pid) for pid in step)
        pressed = time.monotonic()
        assert _interrupted(process).splitlines()[-1] == "interrupted"
        assert time.monotonic() - pressed < 4, "the second Ctrl-C waited for the SIGKILL's grace"
        _wait_gone(*step)
    finally:
        _kill(*step)


def _written(path: Path, process: subprocess.Popen[str], *, mark: bool = False) -> None:
    """Wait for the command's step to write ``path`` (``mark``: only to create it), the command
    still running: a pid file read as soon as it exists can still be empty."""
    deadline = time.monotonic() + 60
    while not path.exists() or not (mark or path.read_text().strip()):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.05)


def _kill(*pids: int) -> None:
    """Kill the step's processes a failed test would leave running (those already gone too)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_gone(*pids: int) -> None:
    """Wait for the step's processes to end with the command: none may be left behind."""
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"the step's processes {pids} outlived the command"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie whose parent went away is reaped by init; its state says it is done.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    return True


def test_ctrl_c_at_a_confirmation_prompt(url: str, client: Client, reap: Reap) -> None:
    client.queues["q"].put("K", {}, jid="j1")
    process = reap(_start(url, "queue", "truncate", "q"))
    read_until(process, "[y/N]: ")
    assert _interrupted(process).splitlines()[-1] == "interrupted"
    assert client.jobs.get("j1") is not None


NAP = """\
version: 1
name: nap
queue: nap
steps:
  nap:
    run: |
      sleep 30 &
      echo "$$ $!" > "$PIDS.tmp" && mv "$PIDS.tmp" "$PIDS"
      wait
      echo end
    env: {{PIDS: "{pids}"}}
"""


@pytest.mark.parametrize(
    ("command", "signum"),
    [("run", signal.SIGINT), ("retry", signal.SIGINT), ("run", signal.SIGTERM)],
)
def test_a_second_ctrl_c_kills_the_steps_commands_and_hands_its_job_back(
    url: str,
    client: Client,
    tmp_path: Path,
    command: str,
    signum: signal.Signals,
    reap: Reap,
) -> None:
    """The first Ctrl-C gives the running step its grace (5 s); a second stops it now: every
    process of its group is killed (none left running on, re-parented to init) and its job
    waits again at once, as after the grace, not left running on a worker that is gone.
    SIGTERM (a service manager, `timeout`) does the same, and the exit code says which."""
    pids = tmp_path / "step.pids"
    flow = tmp_path / "nap.yaml"
    flow.write_text(NAP.format(pids=pids))
    if command == "run":
        process = reap(_start(url, "run", str(flow), "--run-id", "r1"))
    else:  # an interrupted run, resumed: worked here as `flows run` does
        assert flows("run", str(flow), "--detach", "--run-id", "r1", "--redis", url).exit_code == 0
        process = reap(_start(url, "retry", "r1"))
    _written(pids, process)
    shell, sleep = (int(pid) for pid in pids.read_text().split())
    try:
        process.send_signal(signum)
        said = read_until(process, "stopping: running jobs get", stream="stderr")
        assert _alive(shell) and _alive(sleep)  # the grace: nothing is killed yet
        pressed = time.monotonic()
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 128 + signum, said + err
        assert time.monotonic() - pressed < SHUTDOWN_GRACE, "it waited out the grace"
        again, how = (
            ("Ctrl-C", "interrupted") if signum == signal.SIGINT else ("SIGTERM", "terminated")
        )
        assert f"({again} again: stop them now)" in said + err
        assert "stopping now: running jobs are killed and wait again" in err
        assert "Traceback" not in err and f"{how}: run r1 is running" in err, err
        assert "WARNING" not in err, err  # a job stopped as asked is no warning
        _wait_gone(shell, sleep)  # SIGKILL was sent: only its delivery is waited
    finally:
        _kill(shell, sleep)
    job = client.jobs["r1:nap"]
    assert job is not None
    whats = [str(entry["what"]) for entry in job.history]
    # Handed back once, by the worker that ran it: not popped for it again while it stopped.
    assert (job.state, whats) == ("waiting", ["put", "popped", "released"]), job.history


def test_a_stop_while_the_run_is_first_read_gives_the_running_step_its_grace(
    url: str, tmp_path: Path, reap: Reap
) -> None:
    """A SIGTERM (or Ctrl-C) landing while `flows run` read the run for the first time, its
    worker already running a step, ended the command at once with "interrupted" and 130 and
    left the step's commands running on. It stops as at any later moment. That first read is
    held here for as long as the test likes: it says how to signal 400 waiting steps, more
    than stderr's pipe holds, and the test reads none of it until the step runs."""
    pids = tmp_path / "step.pids"
    flow = tmp_path / "crowded.yaml"
    waits = "".join(f"  {'w' * 60}{n:03}: {{wait: {{signal: go}}}}\n" for n in range(400))
    flow.write_text(NAP.format(pids=pids) + waits)
    process = reap(_start(url, "run", str(flow), "--run-id", "r1"))
    _written(pids, process)
    step = [int(pid) for pid in pids.read_text().split()]
    try:
        process.send_signal(signal.SIGTERM)
        said = read_until(process, "stopping: running jobs get", stream="stderr")
        process.send_signal(signal.SIGTERM)  # the grace is not what is tested: stop them now
        _, err = process.communicate(timeout=60)
        assert process.returncode == 143, said[-300:] + err
        assert "terminated: run r1 is " in err and "Traceback" not in err, err
        _wait_gone(*step)
    finally:
        _kill(*step)


GATE = """\
version: 1
name: gate
queue: gate
steps:
  gate:
    run: |
      touch "$DIR/started"
      while [ ! -e "$DIR/go" ]; do sleep 0.05; done
      echo end
    env: {{DIR: "{dir}"}}
"""


def test_a_run_that_ends_in_the_grace_after_ctrl_c_says_how_it_ended(
    url: str, client: Client, tmp_path: Path, reap: Reap
) -> None:
    """Its step finishes in the grace the first Ctrl-C gives it: the run succeeded, and the last
    line says so, not that it "is succeeded" with jobs left to resume."""
    flow = tmp_path / "gate.yaml"
    flow.write_text(GATE.format(dir=tmp_path))
    process = reap(_start(url, "run", str(flow), "--run-id", "g1"))
    _written(tmp_path / "started", process, mark=True)
    process.send_signal(signal.SIGINT)
    read_until(process, "stopping: running jobs get", stream="stderr")
    (tmp_path / "go").touch()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted: run g1 succeeded while stopping (1 of 1 steps done)" in err, err
    assert "resume it here" not in err and "is succeeded" not in err, err
    assert client.jobs["g1:gate"].state == "complete"


def test_a_stop_delivered_twice_before_it_is_said_counts_once() -> None:
    """`timeout` sends its signal to `flows run` and then to its whole process group: one
    request, two deliveries. Until the stop is announced a repeat is the same request (the step
    keeps its grace); after it, a signal is the second one that stops the steps now."""
    from flows.cli.run import _count_ctrl_c

    presses: list[int] = []
    announced: list[bool] = []
    previous = _count_ctrl_c(presses, announced)
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at the next instruction: never waited out
        os.kill(os.getpid(), signal.SIGTERM)  # the group's copy, before the stop was said
        assert presses == [signal.SIGTERM]
        announced.append(True)
        os.kill(os.getpid(), signal.SIGINT)  # a real second request
        assert presses == [signal.SIGTERM, signal.SIGINT]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
