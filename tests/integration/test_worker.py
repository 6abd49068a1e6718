"""The worker end to end: real jobs, real threads and processes, on the embedded server.

Job functions live in ``worker_tasks.py`` next to this file; every job carries that folder in its
``_flows.pythonpath`` envelope option, so worker subprocesses import it the way they would import a
flow's modules. In-process workers (``Worker.run()`` in a thread, ended with ``stop()``) cover what
needs no process; ``python -m scheduler.worker`` and :class:`WorkerPool` processes cover kill -9,
signals, registration and restarts. Lock expiry is real time here: queues that need it get a
one-second ``<queue>-heartbeat`` and ``grace-period`` 0. Nothing sleeps for a fixed time where a
condition can be polled: :func:`wait_for` polls with a deadline.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
import redis
import worker_tasks
from helpers import assert_unchanged

from scheduler.embedded import EmbeddedServer
from scheduler.engine import doctor, limits
from scheduler.engine.client import Client
from scheduler.engine.errors import LockLost
from scheduler.engine.job import Job, RanBy
from scheduler.engine.replies import dumps
from scheduler.engine.scripts import Engine
from scheduler.secrets import remember
from scheduler.worker import Worker, WorkerPool
from scheduler.worker.context import JobContext
from scheduler.worker.envelope import JobOptions
from scheduler.worker.held import Active, Held
from scheduler.worker.reporting import FAILURE_LINE, Reporter
from scheduler.worker.runner import Outcome

T = TypeVar("T")

TASKS_DIR = str(Path(__file__).resolve().parent)
ROOT = Path(__file__).resolve().parents[2]
SHELL = "flows.runtime.tasks.shell"
# How long a condition is polled before the test fails: a bound on a hang, never on speed (on a
# machine busy with other work, three worker processes took over 10 s to start).
PATIENCE = 60.0

# The worker on Redis 7.0 as well (tests/conftest.py, pytest_generate_tests), except the tests of
# the processes alone (signals, timeouts, restarts): their engine calls are the other tests' too.
pytestmark = pytest.mark.system_server
ONLY_ON_THE_SUITE_SERVER = pytest.mark.system_server(False)


# -- helpers ------------------------------------------------------------------------------------


def wait_for(
    condition: Callable[[], T | Literal[False] | None],
    timeout: float = PATIENCE,
    what: str = "condition",
) -> T:
    """Poll ``condition`` until it returns something truthy (returned), or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


def put(
    client: Client,
    queue: str,
    task: str,
    data: dict[str, Any] | None = None,
    *,
    timeout: float | None = None,
    retry: dict[str, Any] | None = None,
    pythonpath: list[str] | None = None,
    **options: Any,
) -> str:
    """Put a job of ``worker_tasks.<task>`` (or a dotted klass) with its run options."""
    envelope: dict[str, Any] = {"pythonpath": [TASKS_DIR, *(pythonpath or [])]}
    if timeout is not None:
        envelope["timeout"] = timeout
    if retry is not None:
        envelope["retry"] = retry
    klass = task if "." in task else f"worker_tasks.{task}"
    return client.queues[queue].put(klass, {**(data or {}), "_flows": envelope}, **options)


NO_BACKOFF = {"backoff": "fixed", "delay": 0, "jitter": 0}


def raw_job(engine: Engine, jid: str) -> dict[str, Any]:
    """The job as the engine describes it (data left as text: it may not be JSON)."""
    reply = engine.call("get", jid)
    assert reply, f"job {jid} does not exist"
    job: dict[str, Any] = json.loads(reply)
    return job


def state_of(client: Client, jid: str) -> str:
    return str(raw_job(client.engine, jid)["state"])


def wait_state(client: Client, jid: str, *states: str, timeout: float = PATIENCE) -> Job:
    wait_for(lambda: state_of(client, jid) in states, timeout, f"job {jid} to be {states}")
    return client.jobs[jid]


def history(job: Job, what: str) -> list[dict[str, Any]]:
    return [entry for entry in job.history if entry.get("what") == what]


def read_marks(path: Path, event: str | None = None) -> list[list[str]]:
    """``[event, jid, pid, attempt, time]`` lines written by ``worker_tasks.mark``."""
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line]
    return [row for row in rows if event is None or row[0] == event]


def wait_marks(
    path: Path, event: str, count: int = 1, timeout: float = PATIENCE
) -> list[list[str]]:
    return wait_for(
        lambda: len(read_marks(path, event)) >= count and read_marks(path, event),
        timeout,
        f"{count} {event!r} mark(s) in {path.name}",
    )


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@contextmanager
def in_process_worker(
    engine: Engine, queues: list[str], name: str = "w1", **options: Any
) -> Iterator[Worker]:
    """A Worker running in a thread of this process; stopped and joined at the end."""
    options.setdefault("poll_interval", 0.1)
    options.setdefault("shutdown_grace", 1.0)
    worker = Worker(Client.from_engine(engine, worker_name=name), queues, **options)
    thread = threading.Thread(target=worker.run, name=f"worker-{name}", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive(), "the worker did not stop"


def run_burst(engine: Engine, queues: list[str], name: str = "w1", **options: Any) -> int:
    """Run a burst worker in a thread until its queues are empty; its exit code."""
    worker = Worker(Client.from_engine(engine, worker_name=name), queues, burst=True, **options)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the burst worker did not end"
    return codes[0]


class Processes:
    """Worker subprocesses of one test; any still running at the end is killed."""

    def __init__(self, server: EmbeddedServer, tmp_path: Path) -> None:
        self.server = server
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def env(self) -> dict[str, str]:
        return dict(os.environ, FLOWS_REDIS_URL=self.server.url)

    def spawn(self, command: list[str], label: str) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"{label}-{len(self.started)}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                command, env=self.env(), cwd=ROOT, stdout=output, stderr=subprocess.STDOUT
            )
        self.started.append((process, log))
        return process

    def worker(
        self, queues: list[str], *args: str, name: str | None = None, log_level: str = "INFO"
    ) -> subprocess.Popen[bytes]:
        """``python -m scheduler.worker`` on ``queues``."""
        command = [sys.executable, "-m", "scheduler.worker", "-q", ",".join(queues)]
        command += ["--poll-interval", "0.1", "--log-level", log_level, *args]
        if name:
            command += ["--name", name]
        return self.spawn(command, name or "worker")

    def log(self, process: subprocess.Popen[bytes]) -> str:
        for started, log in self.started:
            if started is process:
                return log.read_text(errors="replace")
        return ""

    def wait_exit(self, process: subprocess.Popen[bytes], timeout: float = PATIENCE) -> int:
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"process {process.pid} still running after {timeout:g}s:\n{self.log(process)}"
            ) from None

    def close(self) -> None:
        """SIGTERM what still runs (a pool passes it on to its children), then SIGKILL."""
        running = [process for process, _ in self.started if process.poll() is None]
        for process in running:
            process.terminate()
        for process in running:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="test-client")


@pytest.fixture
def procs(server: EmbeddedServer, tmp_path: Path, redis_client: redis.Redis) -> Iterator[Processes]:
    processes = Processes(server, tmp_path)
    try:
        yield processes
    finally:
        processes.close()


def worker_info(engine: Engine) -> dict[str, dict[str, Any]]:
    info: dict[str, dict[str, Any]] = json.loads(engine.call("worker.info"))
    return info


def worker_names(engine: Engine) -> list[str]:
    return [entry["name"] for entry in json.loads(engine.call("workers"))]


# -- order --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("ordered", "C C C B B A A A A A"),
        ("round-robin", "C B A C B A C A A A"),
    ],
)
def test_strategy_decides_the_order_jobs_run_in(
    client: Client, engine: Engine, tmp_path: Path, strategy: str, expected: str
) -> None:
    log = tmp_path / "order.log"
    for queue, count in (("A", 5), ("B", 2), ("C", 3)):
        for _ in range(count):
            put(client, queue, "record", {"log": str(log), "tag": queue})
    assert run_burst(engine, ["C", "B", "A"], strategy=strategy, threads=1) == 0
    assert log.read_text().split() == expected.split()


# -- many jobs, several processes ---------------------------------------------------------------


def test_many_jobs_over_two_processes_run_exactly_once(
    client: Client,
    engine: Engine,
    server: EmbeddedServer,
    tmp_path: Path,
    redis_client: redis.Redis,
) -> None:
    log = tmp_path / "bulk.log"
    data = dumps({"log": str(log), "_flows": {"pythonpath": [TASKS_DIR]}})
    jids = [f"bulk-{n:04d}" for n in range(2000)]
    pipe = engine.pipeline()
    for jid in jids:
        pipe.call("put", "test-client", "bulk", jid, "worker_tasks.record", data, 0)
    pipe.execute()

    pool = WorkerPool(
        server.url, ["bulk"], processes=2, burst=True, poll_interval=0.1, log_level="WARNING"
    )
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(pool.run()), daemon=True)
    thread.start()
    thread.join(50)
    if thread.is_alive():
        for child in pool._children.values():
            child.process.kill()
        raise AssertionError("the pool did not finish its burst")
    assert codes == [0]

    runs = Counter(log.read_text().split())
    assert set(runs) == set(jids)
    assert [jid for jid, n in runs.items() if n != 1] == []
    states = redis_client.pipeline(transaction=False)
    for jid in jids:
        states.hget(f"ql:j:{jid}", "state")
    assert Counter(states.execute()) == {"complete": 2000}
    assert doctor.check(client, deep=True).clean  # every job where its state says


# -- crashes and lock expiry --------------------------------------------------------------------


def test_a_job_whose_worker_is_killed_runs_again_after_its_lock_expires(
    client: Client, engine: Engine, procs: Processes, tmp_path: Path
) -> None:
    client.config["crash-heartbeat"] = 1
    client.config["grace-period"] = 0
    marks = tmp_path / "marks"
    # No retries of its own (a flow step's default): a dead worker is not the job's error.
    jid = put(client, "crash", "busy_first_attempt", {"marks": str(marks)}, retries=0)
    victim = procs.worker(["crash"], name="victim")
    [started] = wait_marks(marks, "started")
    assert started[2] == str(victim.pid)

    victim.kill()
    victim.wait()
    with in_process_worker(engine, ["crash"], name="rescuer", poll_interval=0.05):
        job = wait_state(client, jid, "complete")
    assert job.result == 2
    assert [(h["what"], h.get("worker")) for h in job.history if h["what"] != "put"] == [
        ("popped", "victim"),
        ("popped", "rescuer"),
        ("done", "rescuer"),
    ]
    assert job.remaining == job.retries == 0


def test_a_worker_restarted_under_its_name_says_whose_jobs_it_gives_back(
    client: Client, engine: Engine, procs: Processes
) -> None:
    """A supervisor restarting a killed ``--name w`` worker: the new process finds the old
    one's job locked to its name. Its log line must name that cause, not only a lost reply."""
    jid = put(client, "same", SHELL, {"command": "true"}, retries=0)
    killed = Client.from_engine(engine, worker_name="w-same")
    assert [job.jid for job in killed.queues["same"].pop()] == [jid]  # then it died

    worker = procs.worker(["same"], name="w-same")
    wait_state(client, jid, "complete")
    line = wait_for(
        lambda: next((x for x in procs.log(worker).splitlines() if "given back" in x), None),
        10,
        "the worker to say it gave the job back",
    )
    assert "an earlier process named w-same" in line, line


def test_two_worker_processes_raced_on_one_job_and_exactly_one_complete_succeeds(
    client: Client, engine: Engine, procs: Processes, tmp_path: Path
) -> None:
    """Redis Work Queue's promise: complete succeeds exactly once, however many workers ran it."""
    client.config["race-heartbeat"] = 1
    client.config["grace-period"] = 0
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    jid = put(client, "race", "complete_race", {"marks": str(marks), "gate": str(gate)})
    first = procs.worker(["race"], name="first")
    wait_marks(marks, "started")
    first.send_signal(signal.SIGSTOP)  # frozen: no heartbeat, its lock expires
    try:
        wait_state(client, jid, "stalled")
        second = procs.worker(["race"], name="second")
        job = wait_state(client, jid, "complete")
        gate.touch()
    finally:
        first.send_signal(signal.SIGCONT)  # it finishes its run and completes it too
    [refused] = wait_marks(marks, "refused")
    assert refused[2] == str(first.pid)
    assert read_marks(marks, "completed") == []
    started = read_marks(marks, "started")
    assert [(row[2], row[3]) for row in started] == [(str(first.pid), "1"), (str(second.pid), "2")]
    job = client.jobs[jid]
    assert job.result == "second"
    assert [h.get("worker") for h in history(job, "done")] == ["second"]
    assert job.ran_by == RanBy("second", socket.gethostname(), second.pid)
    assert doctor.check(client, deep=True).clean


# -- timeouts -----------------------------------------------------------------------------------


@ONLY_ON_THE_SUITE_SERVER
def test_a_python_job_over_its_timeout_is_retried_then_failed_as_timeout(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "busy", {"marks": str(marks)}, timeout=0.3, retry=NO_BACKOFF, retries=1)
    with in_process_worker(engine, ["q"], poll_interval=0.05):
        job = wait_state(client, jid, "failed")
    assert job.failure is not None
    assert job.failure["group"] == "timeout"
    assert "timeout" in job.failure["message"]
    assert [h.get("group") for h in history(job, "retried")] == ["timeout"]
    assert len(read_marks(marks, "started")) == 2
    assert read_marks(marks, "finished") == []


@ONLY_ON_THE_SUITE_SERVER
def test_a_shell_job_over_its_timeout_is_killed_retried_then_failed_as_timeout(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    command = f'sleep 30 & echo "$$ $!" >> {pids}; wait'
    # Long enough for bash to start and write its pids on a loaded machine: killed before
    # that, an attempt leaves no pids to check (0.3 s was not, now and then).
    jid = put(client, "q", SHELL, {"command": command}, timeout=1.0, retry=NO_BACKOFF, retries=1)
    with in_process_worker(engine, ["q"], poll_interval=0.05):
        job = wait_state(client, jid, "failed")
    assert job.failure is not None
    assert job.failure["group"] == "timeout"
    assert [h.get("group") for h in history(job, "retried")] == ["timeout"]
    started = [int(pid) for line in pids.read_text().splitlines() for pid in line.split()]
    assert len(started) == 4  # the shell and its sleep, on each of the two attempts
    wait_for(
        lambda: not any(process_alive(pid) for pid in started), 5, "the shell processes to die"
    )


def slot_threads() -> list[str]:
    """The names of the slot threads of in-process workers still running, in order."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("flows-slot-"))


@contextmanager
def gate_closed() -> Iterator[None]:
    """``worker_tasks.blocked`` jobs block until the end of the block; then their threads end
    (the slot threads left behind stuck), before the test's server connection closes."""
    worker_tasks.GATE.clear()
    try:
        yield
    finally:
        worker_tasks.GATE.set()
        wait_for(lambda: not slot_threads(), what="the blocked job threads to end")


@ONLY_ON_THE_SUITE_SERVER
def test_a_job_stuck_in_c_code_past_its_timeout_is_given_up_after_kill_after(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "blocked", {"marks": str(marks)}, timeout=0.2, retries=0)
    with gate_closed(), in_process_worker(engine, ["q"], kill_after=0.3):
        job = wait_state(client, jid, "failed", timeout=5)
        assert job.failure is not None
        assert job.failure["group"] == "timeout"
        # The worker goes on with a fresh thread while the stuck one is left behind.
        assert wait_state(client, put(client, "q", "echo"), "complete", timeout=5)
    assert read_marks(marks, "finished") == []


@ONLY_ON_THE_SUITE_SERVER
def test_the_slot_started_in_place_of_a_stuck_one_ends_cleanly_where_the_worker_started(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """A single-threaded worker's slot runs in its own folder, and the worker goes back to its
    working directory when it stops: also after a slot started in place of an abandoned one,
    which started while the process was in the stuck slot's folder (removed with the worker:
    going back there raised in the thread, after the worker had stopped)."""
    home = os.getcwd()
    jid = put(client, "q", "blocked", {"marks": str(tmp_path / "marks")}, timeout=0.2, retries=0)
    with gate_closed():
        with in_process_worker(engine, ["q"], kill_after=0.3):
            wait_state(client, jid, "failed", timeout=5)
            assert wait_state(client, put(client, "q", "echo"), "complete", timeout=5)
        # The worker waited for the slot it started meanwhile; only the stuck one is left.
        assert slot_threads() == ["flows-slot-1"]
        assert os.getcwd() == home


@ONLY_ON_THE_SUITE_SERVER
def test_a_stuck_slot_that_comes_back_leaves_the_running_job_where_it_is(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """A single-threaded worker's jobs run in their slot's folder, the process's working
    directory. The abandoned slot thread, when its stuck call returns at last, ends without
    moving the process: the job its replacement runs meanwhile stays in its own folder."""
    stuck = put(client, "q", "blocked", {"marks": str(tmp_path / "marks")}, timeout=0.2, retries=0)
    gate, marks = tmp_path / "gate", tmp_path / "marks2"
    with gate_closed(), in_process_worker(engine, ["q"], kill_after=0.3):
        wait_state(client, stuck, "failed", timeout=5)
        jid = put(client, "q", "where_after_gate", {"gate": str(gate), "marks": str(marks)})
        wait_for(lambda: marks.exists(), what="the second job to start")
        worker_tasks.GATE.set()  # the stuck call returns, and its slot thread ends
        wait_for(lambda: slot_threads() == ["flows-slot-2"], what="the stuck slot to end")
        gate.touch()
        where = wait_state(client, jid, "complete", timeout=5).result
    assert where["cwd"] == where["sandbox"], where


# -- lock lost while running ----------------------------------------------------------------------


def test_a_shell_job_whose_lock_is_taken_away_is_killed_and_never_completed(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    pids, again = tmp_path / "pids", tmp_path / "again"
    command = f'[ -e {again} ] && exit 0; sleep 30 & echo "$$ $!" > {pids}; wait'
    jid = put(client, "q", SHELL, {"command": command})
    with in_process_worker(engine, ["q"], name="w1", poll_interval=0.05):
        wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="the shell")
        started = [int(pid) for pid in pids.read_text().split()]
        client.queues["q"].pause()  # so that w1 does not take the job straight back
        client.jobs[jid].timeout()
        wait_for(lambda: not any(process_alive(pid) for pid in started), 5, "the shell to die")

        # w1 reports nothing for the stopped run, and could not: its lock is gone.
        job = client.jobs[jid]
        assert history(job, "done") == []
        assert job.state == "stalled"
        stale = Client.from_engine(engine, worker_name="w1").jobs[jid]
        with pytest.raises(LockLost):
            stale.complete()
        assert history(client.jobs[jid], "done") == []

        # The next pop takes the job back (its lock was lost: none of its retries used) and
        # this run completes.
        again.touch()
        client.queues["q"].unpause()
        job = wait_state(client, jid, "complete")
    assert [h["what"] for h in job.history] == ["put", "popped", "timed-out", "popped", "done"]
    assert job.remaining == job.retries


def test_a_new_run_of_a_job_is_not_disturbed_by_its_stale_run_ending(
    client: Client, engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Run 1 loses its lock but is stuck in C code; the same worker pops the job again (run 2).
    # When run 1 finally ends, run 2 must stay tracked (heartbeats, slot) and complete the job.
    # Run 2 outlasts its lock, so only its heartbeats keep it; the lock is 3 s, not 1 s, since a
    # loaded machine can leave a heartbeat (due every second of a 3 s lock) late by a second.
    client.config["q-heartbeat"] = 3
    client.config["grace-period"] = 0
    marks = tmp_path / "marks"
    jid = put(client, "q", "blocked_first_attempt", {"marks": str(marks), "seconds": 4})
    with gate_closed(), in_process_worker(engine, ["q"], threads=2, poll_interval=0.05):
        wait_marks(marks, "started")
        client.queues["q"].pause()
        client.jobs[jid].timeout()
        wait_for(lambda: f"job {jid}: stopping (lock-lost)" in caplog.text, what="the stop")
        client.queues["q"].unpause()
        [_, second] = wait_marks(marks, "started", 2)
        assert second[3] == "2"
        worker_tasks.GATE.set()  # run 1 ends now, run 2 goes on for 4 s on a 3 s lock
        job = wait_state(client, jid, "complete")
    assert [h["what"] for h in job.history] == ["put", "popped", "timed-out", "popped", "done"]
    assert job.result == 2
    assert len(read_marks(marks, "started")) == 2


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_a_canceled_job_is_stopped_and_the_worker_goes_on(
    client: Client, engine: Engine, tmp_path: Path, kind: str
) -> None:
    marks, pids, log = tmp_path / "marks", tmp_path / "pids", tmp_path / "log"
    if kind == "python":
        jid = put(client, "q", "busy", {"marks": str(marks)})
    else:
        jid = put(client, "q", SHELL, {"command": f'sleep 30 & echo "$$ $!" > {pids}; wait'})
    with in_process_worker(engine, ["q"], threads=1):
        if kind == "python":
            wait_marks(marks, "started")
        else:
            wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="shell")
        assert client.jobs.cancel(jid) == [jid]
        after = put(client, "q", "record", {"log": str(log)})
        wait_state(client, after, "complete", timeout=5)  # the slot was freed
    assert client.jobs.get(jid) is None
    assert read_marks(marks, "finished") == []
    if kind == "shell":
        started = [int(pid) for pid in pids.read_text().split()]
        wait_for(lambda: not any(process_alive(pid) for pid in started), 5, "the shell to die")


# -- shutdown -----------------------------------------------------------------------------------


def test_sigterm_hands_unfinished_jobs_back_after_the_grace(
    client: Client, procs: Processes, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "busy", {"marks": str(marks)})
    worker = procs.worker(["q"], "--shutdown-grace", "0.3", name="leaver")
    wait_marks(marks, "started")
    worker.send_signal(signal.SIGTERM)
    assert procs.wait_exit(worker) == 0
    job = client.jobs[jid]
    assert job.state == "waiting"
    assert job.remaining == job.retries
    assert job.history[-1]["what"] == "released"
    assert job.history[-1]["worker"] == "leaver"
    assert read_marks(marks, "finished") == []


@ONLY_ON_THE_SUITE_SERVER
def test_sigterm_lets_a_job_finish_within_the_grace(
    client: Client, procs: Processes, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "busy", {"marks": str(marks), "seconds": 0.3})
    worker = procs.worker(["q"], "--shutdown-grace", "10")
    wait_marks(marks, "started")
    worker.send_signal(signal.SIGTERM)
    assert procs.wait_exit(worker) == 0
    assert client.jobs[jid].state == "complete"


@ONLY_ON_THE_SUITE_SERVER
def test_stop_hands_back_a_job_stuck_in_c_code_after_kill_after(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "blocked", {"marks": str(marks)})
    worker = Worker(
        Client.from_engine(engine, worker_name="w1"),
        ["q"],
        poll_interval=0.1,
        shutdown_grace=0.1,
        kill_after=0.3,
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    with gate_closed():
        thread.start()
        wait_marks(marks, "started")
        assert state_of(client, jid) == "running"
        worker.stop()
        thread.join(5)  # the job would block until the gate opens
        assert not thread.is_alive(), "the worker waited for a job stuck in C code"
        job = client.jobs[jid]
        assert job.state == "waiting"
        assert job.remaining == job.retries
        assert job.history[-1]["what"] == "released"
    assert read_marks(marks, "finished") == []


@ONLY_ON_THE_SUITE_SERVER
def test_a_second_signal_stops_at_once(client: Client, procs: Processes, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "busy", {"marks": str(marks)})
    worker = procs.worker(["q"], "--shutdown-grace", "60")
    wait_marks(marks, "started")
    worker.send_signal(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in procs.log(worker), what="the first signal")
    worker.send_signal(signal.SIGTERM)
    assert procs.wait_exit(worker, timeout=3) == 1
    assert client.jobs[jid].state == "running"  # its lock expires; it was not handed back


# -- failures -------------------------------------------------------------------------------------


def test_import_errors_fail_the_job_in_the_users_terms(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """A missing module or attribute is one sentence; a module that raises shows its own
    frames, none of the worker's."""
    module = f"broken_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text("raise RuntimeError('broken at import')\n")
    missing = put(client, "q", "no_such_module_for_flows.run")
    no_attribute = put(client, "q", "worker_tasks.no_such_function")
    raising = put(client, "q", f"{module}.run", pythonpath=[str(tmp_path)])
    # A function put from a script run as `python script.py`: the worker's __main__ is its own.
    from_a_script = put(client, "q", "__main__.send_report")
    # Ran, and was retried, as a TypeError raised in the worker's own frame.
    (tmp_path / f"{module}_tasks.py").write_text("def no_job():\n    return 1\n")
    takes_no_job = put(client, "q", f"{module}_tasks.no_job", pythonpath=[str(tmp_path)])
    assert run_burst(engine, ["q"]) == 0
    expected = {
        missing: "No module named 'no_such_module_for_flows'",
        no_attribute: "has no attribute 'no_such_function'",
        takes_no_job: f"klass '{module}_tasks.no_job' cannot be given the job: no_job() takes"
        " no argument (a job function takes one, the job: def no_job(job))",
        from_a_script: "module '__main__' has no attribute 'send_report': '__main__' is the"
        " worker's own main module, not the script that put the job: put the function in a"
        " module the worker can import, and the job by that module's path",
        raising: "RuntimeError: broken at import",
    }
    for jid, text in expected.items():
        job = client.jobs[jid]
        assert job.state == "failed"
        assert job.failure is not None
        assert job.failure["group"] == "import-error"
        message = job.failure["message"]
        assert ("Traceback (most recent call last)" in message) == (jid == raising)
        assert text in message
        assert "scheduler/worker" not in message and "importlib" not in message
        assert job.remaining == job.retries  # an import error is not retried
    assert f'{module}.py", line 1, in <module>' in client.jobs[raising].failure["message"]


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ("this is not JSON", "JSONDecodeError"),
        ("[1, 2, 3]", "not a JSON object: list"),
        ('{"_flows": 3}', "job data has _flows 3 (int): the worker's run options"),
        ('{"_flows": {"timeout": "soon"}}', 'job data has _flows.timeout "soon" (str): seconds'),
    ],
)
def test_a_broken_payload_fails_the_job(
    client: Client, engine: Engine, redis_client: redis.Redis, data: str, text: str
) -> None:
    jid = put(client, "q", "echo")
    redis_client.hset(f"ql:j:{jid}", "data", data)
    assert run_burst(engine, ["q"]) == 0
    job = raw_job(engine, jid)
    assert job["state"] == "failed"
    assert job["failure"]["group"] == "broken-payload"
    assert text in job["failure"]["message"]


def test_broken_jobs_are_kept_aside_and_never_block_the_queue(
    client: Client, engine: Engine, redis_client: redis.Redis
) -> None:
    """hworker's broken jobs: kept, with their payload as it was, in a group of their own, while
    the jobs behind them run; fixed and put back, they run too."""
    broken = put(client, "q", "echo", priority=-1)
    redis_client.hset(f"ql:j:{broken}", "data", "{not json")
    missing = put(client, "q", "no_such_module_for_flows.run", priority=-1)
    good = [put(client, "q", "echo", {"value": n}) for n in range(5)]
    assert run_burst(engine, ["q"]) == 0
    assert [client.jobs[jid].result for jid in good] == [0, 1, 2, 3, 4]
    assert client.failed() == {"broken-payload": 1, "import-error": 1}
    kept = raw_job(engine, broken)
    assert kept["data"] == "{not json"  # the payload is kept as it was, for a person to fix
    assert kept["remaining"] == kept["retries"]  # and no retry was used on it
    assert client.jobs[missing].failure["group"] == "import-error"  # type: ignore[index]
    assert client.queues["q"].load()["backlog"] == 0

    repaired = {"value": "fixed", "_flows": {"pythonpath": [TASKS_DIR]}}
    redis_client.hset(f"ql:j:{broken}", "data", dumps(repaired))
    assert client.unfail("q", "broken-payload") == 1
    assert run_burst(engine, ["q"]) == 0
    assert client.jobs[broken].result == "fixed"
    assert client.failed() == {"import-error": 1}


def data_nested(levels: int) -> str:
    """Job data as an older version may have stored it: ``value`` nested ``levels`` deep."""
    envelope = dumps({"pythonpath": [TASKS_DIR]})
    return f'{{"value":{"[" * levels}{"]" * levels},"_flows":{envelope}}}'


# Deeper than Python's JSON decoder goes (about sys.getrecursionlimit() levels).
UNREADABLE = 5000


def test_data_too_deep_to_read_fails_its_job_and_the_batch_runs(
    client: Client, engine: Engine, redis_client: redis.Redis
) -> None:
    """Data kept from before the nesting limits, too deep for the worker's decoder: that job
    fails at once in broken-payload, popped once; the jobs popped with it run, and so do the
    next ones."""
    jids = [put(client, "q", "echo", {"value": n}) for n in range(3)]
    deep = jids[1]
    redis_client.hset(f"ql:j:{deep}", "data", data_nested(UNREADABLE))
    readable = put(client, "q", "depth")
    redis_client.hset(f"ql:j:{readable}", "data", data_nested(limits.MAX_SHOWN_DEPTH + 10))
    with in_process_worker(engine, ["q"], threads=4):
        for jid in jids:
            wait_state(client, jid, "complete", "failed")
        later = put(client, "q", "echo", {"value": "later"})
        assert wait_state(client, later, "complete").result == "later"
        wait_state(client, readable, "complete")
    assert [client.jobs[jid].result for jid in (jids[0], jids[2])] == [0, 2]
    # Deeper than the limits but readable: the task gets all of it, nothing cut.
    assert client.jobs[readable].result == limits.MAX_SHOWN_DEPTH + 10
    job = raw_job(engine, deep)
    assert job["state"] == "failed"
    assert job["failure"]["group"] == "broken-payload"
    assert "job data nests too deeply to be read" in job["failure"]["message"]
    assert [entry["what"] for entry in job["history"]] == ["put", "popped", "failed"]
    assert job["remaining"] == job["retries"]  # no retry used: the next run would fail alike
    assert redis_client.hget(f"ql:j:{deep}", "data") == data_nested(UNREADABLE)  # kept


def test_a_recurring_job_with_data_too_deep_spawns_jobs_that_fail(
    client: Client, engine: Engine, redis_client: redis.Redis
) -> None:
    """A recurring job's data kept from before the limits is copied into each job it spawns:
    each fails in broken-payload, and the recurring job goes on spawning."""
    recurring = client.queues["q"].recur(
        "worker_tasks.echo", {"value": 1, "_flows": {"pythonpath": [TASKS_DIR]}}, 60
    )
    redis_client.hset(f"ql:r:{recurring}", "data", data_nested(UNREADABLE))
    good = put(client, "q", "echo", {"value": "good"})
    assert run_burst(engine, ["q"], threads=2) == 0
    engine.call("maintain", "q", 10, now=time.time() + 61)  # the next one is due
    assert run_burst(engine, ["q"], threads=2) == 0
    assert client.jobs[good].result == "good"
    spawned = [f"{recurring}-1", f"{recurring}-2"]
    for jid in spawned:
        failure = raw_job(engine, jid)["failure"]
        assert failure["group"] == "broken-payload"
        assert "job data nests too deeply to be read" in failure["message"]
    assert client.failed() == {"broken-payload": 2}
    template = client.jobs.recurring(recurring)
    assert template is not None
    template.update(data={"value": "mended", "_flows": {"pythonpath": [TASKS_DIR]}})
    engine.call("maintain", "q", 10, now=time.time() + 122)
    assert run_burst(engine, ["q"]) == 0
    assert client.jobs[f"{recurring}-3"].result == "mended"


def test_a_shell_exit_code_fails_the_job_with_the_output_tail(
    client: Client, engine: Engine
) -> None:
    command = "for i in $(seq 1 100); do echo line-$i; done; echo oops >&2; exit 3"
    jid = put(client, "q", SHELL, {"command": command}, retries=0)
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "failed"
    assert job.failure is not None
    assert job.failure["group"] == "exit-code-3"
    message = job.failure["message"]
    assert "command exited with code 3" in message
    # The last 60 lines, in the order the command wrote them: stderr's line last.
    lines = message.split("command exited with code 3\n", 1)[1].splitlines()
    assert lines == [*(f"line-{n}" for n in range(42, 101)), "oops"]
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("data", "group", "words"),
    [
        (
            {"command": "echo never", "env": {"NOTE": "a\x00b"}},
            "bad-value",
            "$NOTE holds a NUL character",
        ),
        (
            {"command": "printf 'k=\\377\\n' >> \"$FLOWS_OUTPUT\""},
            "bad-output",
            "$FLOWS_OUTPUT is not UTF-8 text (byte 2 of the file)",
        ),
        (
            {"command": "printf 'rows=1\\nnot a line\\n' > \"$FLOWS_OUTPUT\""},
            "bad-output",
            "$FLOWS_OUTPUT line 2: expected key=value, got 'not a line'",
        ),
        (
            {"command": "printf 'k<<END\\nx\\n' > \"$FLOWS_OUTPUT\""},
            "bad-output",
            "$FLOWS_OUTPUT line 3: no closing 'END' for 'k'",
        ),
        (
            {"command": "echo 'bad key=1' > \"$FLOWS_OUTPUT\""},
            "bad-output",
            "$FLOWS_OUTPUT line 1: 'bad key' is not a valid output name",
        ),
        (
            {"command": "head -c 600000 /dev/zero | tr '\\0' a > \"$FLOWS_OUTPUT\""},
            "bad-output",
            "$FLOWS_OUTPUT holds 600000 bytes: a step's outputs may hold 524288 at most",
        ),
        (
            {"command": 'ln -sf /dev/zero "$FLOWS_OUTPUT"'},
            "bad-output",
            "$FLOWS_OUTPUT is no longer a regular file",
        ),
        (
            {"command": 'rm "$FLOWS_OUTPUT" && mkfifo "$FLOWS_OUTPUT"'},
            "bad-output",
            "$FLOWS_OUTPUT is no longer a regular file",
        ),
        # A job put by hand: `flows validate` refuses these in a flow file.
        (
            {"command": "printf '\x00'"},
            "bad-command",
            "the command contains a NUL character, which no shell can run",
        ),
        (
            {"command": "pwd", "cwd": "a\x00b"},
            "bad-value",
            "the working directory contains a NUL character, which no path can hold",
        ),
        (
            {"command": "echo never", "env": {"A=B": "x"}},
            "bad-value",
            "'A=B' cannot name a variable: it holds NUL or '='",
        ),
        (
            {"command": "pwd", "cwd": "/no/such/folder"},
            "bad-cwd",
            "the working directory /no/such/folder does not exist or is no folder",
        ),
    ],
)
def test_a_shell_job_that_can_never_run_or_report_fails_saying_why(
    client: Client, engine: Engine, data: dict[str, Any], group: str, words: str
) -> None:
    """Not a worker's traceback in many lines, and no retry spent on what would fail the same
    way."""
    jid = put(client, "q", SHELL, data, retries=3)
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "failed" and job.failure is not None, job.history
    assert job.failure["group"] == group and words in job.failure["message"]
    assert "Traceback" not in job.failure["message"]
    assert "\n" not in job.failure["message"]  # one line
    assert history(job, "retried") == []


def test_shell_outputs_become_the_result(client: Client, engine: Engine) -> None:
    lines = [
        "rows=42",
        "# a comment",
        "name=$GREETING",
        "cwd=$(pwd)",
        "sandbox=$FLOWS_SANDBOX",
        "jid=$FLOWS_JID",
    ]
    command = "; ".join(f'echo "{line}" >> "$FLOWS_OUTPUT"' for line in lines)
    command += '; printf "notes<<END\\nline 1\\nline 2\\nEND\\n" >> "$FLOWS_OUTPUT"'
    command += '; echo "printed, not an output"'
    jid = put(client, "q", SHELL, {"command": command, "env": {"GREETING": "hi"}})
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "complete", job.history
    result = job.result
    assert result.pop("cwd") == result.pop("sandbox")
    assert result == {"rows": "42", "name": "hi", "jid": jid, "notes": "line 1\nline 2"}


def test_a_shell_step_that_removes_its_output_file_completes_with_no_outputs(
    client: Client, engine: Engine
) -> None:
    """Before, reading the file raised FileNotFoundError: a worker's traceback, retried."""
    jid = put(client, "q", SHELL, {"command": 'echo k=v > "$FLOWS_OUTPUT"; rm "$FLOWS_OUTPUT"'})
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "complete", job.failure
    assert job.result in ({}, None)


def test_a_group_the_engine_would_refuse_is_made_an_id_not_a_job_run_forever(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """Before, the refused retry call was taken for a lost lock: the outcome was dropped and
    the job ran again as attempt 1, for ever."""
    marks = tmp_path / "marks"
    jid = put(client, "q", "fails_oddly_named", {"marks": str(marks)}, retries=1, retry=NO_BACKOFF)
    with in_process_worker(engine, ["q"], poll_interval=0.02):
        job = wait_state(client, jid, "failed")
    assert job.failure is not None
    assert job.failure["group"] == "tab_here_" + "x" * 247  # cut at 256 bytes
    assert [h["group"] for h in history(job, "retried")] == ["Bad_Name"]
    assert len(read_marks(marks, "started")) == 2


def test_a_failure_message_with_a_lone_surrogate_is_retried_with_it_escaped(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """A job's error naming a file whose name is not UTF-8 (a lone surrogate, which the
    engine cannot be sent) is retried as any error, its message holding the escape. Before,
    the retry was refused (an UnicodeEncodeError past every handler), the job left locked."""
    marks = tmp_path / "marks"
    jid = put(
        client,
        "q",
        "fails_naming_an_undecodable_file",
        {"marks": str(marks)},
        retries=1,
        retry=NO_BACKOFF,
    )
    with in_process_worker(engine, ["q"], poll_interval=0.02):
        job = wait_state(client, jid, "failed")
    assert job.failure is not None
    assert job.failure["group"] == "Boom"
    assert "cannot read /data/orders-\\udcff.csv" in job.failure["message"]
    assert [h["group"] for h in history(job, "retried")] == ["Boom"]
    assert len(read_marks(marks, "started")) == 2


def test_retries_back_off_then_fail_in_the_exception_type_group(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    backoff = {"backoff": "exponential", "delay": 0.15, "jitter": 0}
    jid = put(client, "q", "fails", {"marks": str(marks)}, retries=2, retry=backoff)
    with in_process_worker(engine, ["q"], poll_interval=0.02):
        job = wait_state(client, jid, "failed")
    assert job.failure is not None
    assert job.failure["group"] == "Boom"
    assert "attempt 3 failed" in job.failure["message"]
    assert "Traceback (most recent call last)" in job.failure["message"]
    retried = history(job, "retried")
    assert [h["group"] for h in retried] == ["Boom", "Boom"]
    assert [h["delay"] for h in retried] == pytest.approx([0.15, 0.3])
    times = [float(row[4]) for row in read_marks(marks, "started")]
    assert len(times) == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps[0] >= 0.14
    assert gaps[1] >= 0.29


# -- what a job may ask for -----------------------------------------------------------------------


def test_retry_job_uses_a_retry_in_its_group(client: Client, engine: Engine) -> None:
    jid = put(client, "q", "retry_once")
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "complete"
    assert job.result == 2
    assert [(h["group"], h["message"]) for h in history(job, "retried")] == [("again", "not yet")]
    assert job.remaining == job.retries - 1


def test_fail_job_fails_at_once_in_its_group(client: Client, engine: Engine) -> None:
    jid = put(client, "q", "fail_now")
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "failed"
    assert job.failure is not None
    assert (job.failure["group"], job.failure["message"]) == (
        "given-up",
        "the job decided to fail",
    )
    assert job.remaining == job.retries
    assert history(job, "retried") == []


@pytest.mark.parametrize(
    ("data", "group", "last_line"),
    [
        ({"code": 3}, "SystemExit", "SystemExit: 3"),
        ({"code": 0}, "SystemExit", "SystemExit: 0"),
        ({"interrupt": True}, "KeyboardInterrupt", "KeyboardInterrupt"),
    ],
)
def test_a_job_raising_system_exit_or_keyboard_interrupt_fails_and_the_slot_goes_on(
    client: Client, engine: Engine, data: dict[str, Any], group: str, last_line: str
) -> None:
    """Before, they went past the runner and ended the slot's thread: the job stayed running,
    heartbeated, for ever, and the worker had one thread less (none with --threads 1)."""
    jid = put(client, "q", "exits", data, retries=1, retry=NO_BACKOFF)
    after = put(client, "q", "echo", {"value": "after"})
    with in_process_worker(engine, ["q"], threads=1, poll_interval=0.02):
        job = wait_state(client, jid, "failed")
        assert wait_state(client, after, "complete").result == "after"
    assert job.failure is not None
    assert job.failure["group"] == group
    assert job.failure["message"].rstrip().endswith(last_line)
    assert "Traceback (most recent call last)" in job.failure["message"]
    assert [h["group"] for h in history(job, "retried")] == [group]


def test_a_result_holding_an_object_json_cannot_carry_fails_and_the_slot_goes_on(
    client: Client, engine: Engine
) -> None:
    """The object is named by its place and type: its repr() (which raises here) is not read."""
    jid = put(client, "q", "unprintable_result", retries=2, retry=NO_BACKOFF)
    after = put(client, "q", "echo", {"value": "after"})
    with in_process_worker(engine, ["q"], threads=1, poll_interval=0.02):
        job = wait_state(client, jid, "failed")
        assert wait_state(client, after, "complete").result == "after"
    assert job.failure is not None
    assert job.failure["group"] == "bad-result"
    assert job.failure["message"].startswith(
        "the result of worker_tasks.unprintable_result cannot be stored: result.value is a"
        " worker_tasks._Unprintable, which JSON cannot carry; a result holds JSON values"
    ), job.failure["message"]
    assert history(job, "retried") == []  # the same result every time: failed at once


def test_a_result_the_engine_refuses_fails_the_job_at_once_in_bad_result(
    client: Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A result the engine would refuse (a number past a double's range reads as Infinity
    there) is no lost lock: the job fails in ``bad-result`` at once, the message saying where
    the number is and why (the worker's own check refuses it now, before the engine's "NaN and
    Infinity"). Before, the worker logged "lock lost" and dropped it: the job ran again when its
    lock ran out, to be refused again, retry after retry."""
    jid = put(client, "q", "huge_number", retries=2, retry=NO_BACKOFF)
    after = put(client, "q", "echo", {"value": "after"})
    with (
        caplog.at_level(logging.INFO, logger="flows.worker"),
        in_process_worker(engine, ["q"], threads=1, poll_interval=0.02),
    ):
        # Well before the job's lock (60 s) could run out.
        job = wait_state(client, jid, "failed", "complete")
        assert wait_state(client, after, "complete").result == "after"
    assert job.state == "failed"
    assert job.failure is not None
    assert job.failure["group"] == "bad-result"
    assert job.failure["message"] == (
        'the job\'s result cannot be stored: Complete(): Arg "result" at value: an integer of '
        "the order of 1e400, past what JSON readers hold (a double: about 1.8e308 either way; "
        "beyond, they read infinity); give it as text"
    )
    assert history(job, "retried") == []
    assert len(history(job, "popped")) == 1
    assert "lock lost" not in caplog.text
    assert f"job {jid} failed (bad-result)" in caplog.text


def test_a_failed_jobs_log_line_says_why_and_where_to_see_more(
    client: Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The line of a failed job gave only its group (`failed (flows-secret) after 0.6 ms`): now
    the failure's first line too, cut short, a secret in it masked, and the command that shows
    the rest (a run's step: its logs; any other job: the job)."""
    secret = "Cut-" + uuid.uuid4().hex
    remember([secret])
    message = "secret DB_PASSWORD: " + "x" * 500 + secret + "\nsecond line"
    plain = put(client, "q", "fail_saying", {"message": message})
    cut = put(client, "q", "fail_saying", {"message": "a" * (FAILURE_LINE - 5) + secret})
    step = client.queues["q"].put(
        "worker_tasks.fail_saying",
        {
            "message": f"no secret {secret}",
            "_flows": {"pythonpath": [TASKS_DIR], "run": "r-1", "step": "load"},
        },
    )
    with (
        caplog.at_level(logging.INFO, logger="flows.worker"),
        in_process_worker(engine, ["q"], threads=1, poll_interval=0.02),
    ):
        for jid in (plain, cut, step):
            wait_state(client, jid, "failed")
    lines = {
        jid: next(r.getMessage() for r in caplog.records if f"job {jid} failed" in r.getMessage())
        for jid in (plain, cut, step)
    }
    for line in lines.values():
        assert "\n" not in line and secret[:3] not in line.replace("secret", ""), line
        assert len(line) < FAILURE_LINE + 200, line
    assert lines[plain].startswith(f"job {plain} failed (said) after "), lines[plain]
    assert ": secret DB_PASSWORD: xxx" in lines[plain], lines[plain]
    assert "more characters" in lines[plain] and "second line" not in lines[plain]
    assert lines[plain].endswith(f"; see `flows job {plain}`"), lines[plain]
    assert "a" * (FAILURE_LINE - 5) + "***" in lines[cut], lines[cut]
    assert ": no secret ***; see `flows logs r-1 load`" in lines[step], lines[step]


def test_a_retried_jobs_log_line_says_why_as_a_failed_ones_does(
    client: Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The line of a retried job gave only its group (`retried in 0.0s (RuntimeError, 0
    retries left)`): now why too, said as a failed job's line says it (one line, cut, secrets
    masked, and where to see the rest)."""
    secret = "Retry-" + uuid.uuid4().hex
    remember([secret])
    jid = put(
        client,
        "q",
        "raises_saying",
        {"message": f"no secret {secret}"},
        retries=1,
        retry=NO_BACKOFF,
    )
    with (
        caplog.at_level(logging.INFO, logger="flows.worker"),
        in_process_worker(engine, ["q"], threads=1, poll_interval=0.02),
    ):
        wait_state(client, jid, "failed")
    retried = [r.getMessage() for r in caplog.records if f"job {jid} retried" in r.getMessage()]
    assert len(retried) == 1, retried
    assert retried[0].startswith(f"job {jid} retried in 0.0s (RuntimeError, 0 retries left): ")
    assert retried[0].endswith(f": RuntimeError: no secret ***; see `flows job {jid}`"), retried
    assert "\n" not in retried[0] and "Traceback" not in retried[0], retried


def test_a_worker_with_one_thread_says_so_in_the_singular(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="flows.worker"):
        assert run_burst(engine, ["empty"], threads=1, strategy="ordered") == 0
    started = [r.getMessage() for r in caplog.records if " started on " in r.getMessage()]
    assert started and started[0].endswith("(ordered, 1 thread)"), started


def hold(held: Held, popped: dict[str, Job], sandbox: Path) -> dict[str, Active]:
    """Each popped job held as a worker holds a job it runs (its lock kept 60 s), by jid."""
    actives = {}
    for jid, job in popped.items():
        ctx = JobContext(job=job, data={}, options=JobOptions(), sandbox=sandbox)
        actives[jid] = Active(ctx=ctx, lock_seconds=60, lock_deadline=0, next_heartbeat=0)
        held.add(actives[jid])
    return actives


def test_a_job_popped_again_by_the_worker_that_holds_it_runs_once(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """A lock lapsed while its worker could not heartbeat (a failover, a pause), and the engine
    handed the job to the same worker again. A run of the earlier pop under way stands: the
    later pop is not held, so not run, and the earlier run's outcome completes the job. An
    earlier pop still buffered is replaced by the later one, never starts, and is not handed
    back (its release would hand back the job the later pop holds)."""
    worker = Client.from_engine(engine, worker_name="w1")
    held = Held()
    reporter = Reporter(worker, held, None, lambda: None)
    for jid in ("running", "buffered"):
        client.queues["q"].put("tasks.t", {}, jid=jid)
    first = hold(held, {job.jid: job for job in worker.queues["q"].pop(2)}, tmp_path)
    first["running"].taken = True  # a slot took it to run
    for active in first.values():
        active.ctx.job.timeout()  # its lock lapsed: the engine gives the job out again
    again = {job.jid: job for job in worker.queues["q"].pop(2)}
    assert sorted(again) == ["buffered", "running"]
    second = {
        jid: Active(
            ctx=JobContext(job=job, data={}, options=JobOptions(), sandbox=tmp_path),
            lock_seconds=60,
            lock_deadline=0,
            next_heartbeat=0,
        )
        for jid, job in again.items()
    }
    assert held.add(second["running"]) is False  # the run under way stands
    assert held.add(second["buffered"]) is True
    with held.lock:
        assert held.superseded(first["buffered"]) and not held.superseded(second["buffered"])
        assert not held.superseded(first["running"])
    reporter.settle(first["running"], Outcome("complete", result='{"n":1}'))
    reporter.settle(second["buffered"], Outcome("complete", result='{"n":2}'))
    reporter.flush()
    assert client.jobs["running"].state == client.jobs["buffered"].state == "complete"
    assert held.all() == []
    # A run whose outcome was sent (a retry, sent with the next pop) is over: the job popped
    # again is its next attempt, and runs.
    client.queues["q"].put("tasks.t", {}, jid="retried")
    [earlier] = hold(held, {job.jid: job for job in worker.queues["q"].pop(1)}, tmp_path).values()
    earlier.taken = earlier.settled = True
    earlier.ctx.job.timeout()
    [job] = worker.queues["q"].pop(1)
    later = Active(
        ctx=JobContext(job=job, data={}, options=JobOptions(), sandbox=tmp_path),
        lock_seconds=60,
        lock_deadline=0,
        next_heartbeat=0,
    )
    assert held.add(later) is True


def test_a_batch_with_a_refused_result_fails_that_job_and_drops_a_lost_one(
    client: Client, engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch path told apart: in one batch, a complete whose result the engine refuses
    (built past the nesting limit, which the runner itself would have caught) fails its job in
    ``bad-result``; a complete whose lock was lost is dropped, the job left to its new holder;
    the third completes."""
    worker = Client.from_engine(engine, worker_name="w1")
    held = Held()
    reporter = Reporter(worker, held, None, lambda: None)
    for jid in ("deep", "lost", "fine"):
        client.queues["q"].put("tasks.t", {}, jid=jid)
    popped = {job.jid: job for job in worker.queues["q"].pop(3)}
    popped["lost"].timeout()  # its lock taken away: the engine refuses its complete

    deep = "[" * (limits.MAX_RESULT_DEPTH + 1) + "]" * (limits.MAX_RESULT_DEPTH + 1)
    outcomes = {
        "deep": Outcome("complete", result=deep),
        "lost": Outcome("complete", result='{"n":1}'),
        "fine": Outcome("complete", result='{"n":2}'),
    }
    actives = hold(held, popped, tmp_path)
    with (
        assert_unchanged(client.redis, "ql:j:lost*"),
        caplog.at_level(logging.INFO, logger="flows.worker"),
    ):
        for jid, active in actives.items():
            reporter.settle(active, outcomes[jid])
        assert reporter.pending() == 3
        reporter.flush()

    refused = client.jobs["deep"]
    assert refused.state == "failed"
    assert refused.failure is not None and refused.failure["group"] == "bad-result"
    assert refused.failure["message"] == (
        'the job\'s result cannot be stored: Complete(): Arg "result" nests more than '
        f"{limits.MAX_RESULT_DEPTH} levels deep"
    )
    assert refused.failure["worker"] == "w1"
    assert client.jobs["fine"].state == "complete"
    assert client.jobs["lost"].state != "complete"
    assert held.all() == []  # every job let go of
    assert "job deep failed (bad-result)" in caplog.text
    assert "the engine refused its result" in caplog.text
    assert "job deep: lock lost" not in caplog.text
    assert "job lost: lock lost" in caplog.text


def test_a_release_the_engine_refuses_fails_the_job_at_once_in_bad_outcome(
    client: Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A real worker's job releases itself with a delay the engine refuses (negative): the job
    fails at once in ``bad-outcome`` with the engine's words, well before its lock (60 s) could
    run out. Before, the worker logged the refusal and let the job go while it stayed running,
    locked to this worker, until the lock ran out and it ran again, to be refused again."""
    jid = put(client, "q", "release_once", {"delay": -1}, retries=2, retry=NO_BACKOFF)
    after = put(client, "q", "echo", {"value": "after"})
    with (
        caplog.at_level(logging.INFO, logger="flows.worker"),
        in_process_worker(engine, ["q"], threads=1, poll_interval=0.02),
    ):
        job = wait_state(client, jid, "failed", "complete")
        assert wait_state(client, after, "complete").result == "after"
    assert job.state == "failed"
    assert job.failure is not None
    assert job.failure["group"] == "bad-outcome"
    assert job.failure["message"].startswith("the job's release was refused: Release(): ")
    assert '"delay"' in job.failure["message"]
    assert job.failure["worker"] == "w1"
    assert len(history(job, "popped")) == 1
    assert f"job {jid} failed (bad-outcome)" in caplog.text


def test_outcomes_the_engine_refuses_fail_their_jobs_and_a_lost_one_is_dropped(
    client: Client, engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Reporter on the real engine, each outcome built to be refused for what it says: a
    retry's and a release's negative delay, a skip's message with a lone surrogate (not UTF-8:
    the client refuses it before sending), a bury's message past the size limit, a fail's
    group with a space. Each job fails at once in ``bad-outcome``, held by this worker, the
    message naming the outcome, the refusal and (its end, as valid text) the outcome's own
    message; a refused fail too (this fail differs from it in its group and message, all the
    engine can refuse of it). A retry refused for a lost lock is dropped, its job left as it
    is: it is someone else's; so is the failure of a refused retry whose lock was lost."""
    worker = Client.from_engine(engine, worker_name="w1")
    held = Held()
    reporter = Reporter(worker, held, None, lambda: None)
    outcomes = {
        "retry": Outcome("retry", delay=-1, group="oops", message="try again"),
        "release": Outcome("release", delay=-5),
        "skip": Outcome("skip", message="no input at /data/\udcff.csv"),
        "bury": Outcome("bury", message="x" * (limits.MAX_PAYLOAD_BYTES + 1)),
        "fail": Outcome("fail", group="bad group", message="it broke"),
        "lost": Outcome("retry", delay=0, group="oops", message="try again"),
        "lost-bad": Outcome("retry", delay=-1, group="oops", message="try again"),
    }
    for jid in outcomes:
        client.queues["q"].put("tasks.t", {}, jid=jid)
    popped = {job.jid: job for job in worker.queues["q"].pop(len(outcomes))}
    for jid in ("lost", "lost-bad"):  # their locks taken away
        popped[jid].timeout()
    actives = hold(held, popped, tmp_path)
    with (
        assert_unchanged(client.redis, "ql:j:lost*"),
        caplog.at_level(logging.INFO, logger="flows.worker"),
    ):
        for jid, active in actives.items():
            reporter.settle(active, outcomes[jid])

    said = {
        "retry": ("Retry(): ", '"delay"', "its message: try again"),
        "release": ("Release(): ", '"delay"'),
        "skip": ("lone surrogate", "its message: no input at /data/\\udcff.csv"),
        "bury": ("Bury(): ", "bytes, more than the limit of", "its message: ..." + "x" * 4096),
        "fail": ("FailHeld(): ", '"group"', "its message: it broke"),
    }
    for kind, words in said.items():
        job = client.jobs[kind]
        assert job.state == "failed", kind
        assert job.failure is not None and job.failure["group"] == "bad-outcome", kind
        message = job.failure["message"]
        assert message.startswith(f"the job's {kind} was refused: "), message
        for word in words:
            assert word in message, (kind, word, message[:300])
        assert job.failure["worker"] == "w1"
        assert f"job {kind} failed (bad-outcome)" in caplog.text
    assert client.jobs["lost"].state != "failed"
    assert client.jobs["lost-bad"].state != "failed"
    assert "job lost: lock lost" in caplog.text
    assert "job lost-bad: the engine refused its retry" in caplog.text
    assert "lock lost, its failure dropped" in caplog.text
    assert held.all() == []  # every job let go of


def test_release_job_hands_the_job_back_without_using_a_retry(
    client: Client, engine: Engine
) -> None:
    jid = put(client, "q", "release_once")
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "complete"
    assert job.result == 2
    assert [h["worker"] for h in history(job, "released")] == ["w1"]
    assert job.remaining == job.retries


@pytest.mark.parametrize(
    ("klass", "queue", "result"),
    [
        (
            "worker_tasks.Tasks",
            "plain",
            {"method": "process", "queue": "plain", "kind": "instance"},
        ),
        (
            "worker_tasks.Tasks",
            "special",
            {"method": "special", "queue": "special", "kind": "instance"},
        ),
        ("worker_tasks.StaticTasks", "plain", "static:plain"),
    ],
)
def test_a_class_klass_runs_its_queue_method_or_process(
    client: Client, engine: Engine, klass: str, queue: str, result: Any
) -> None:
    jid = put(client, queue, klass)
    assert run_burst(engine, [queue]) == 0
    job = client.jobs[jid]
    assert job.state == "complete", job.failure
    assert job.result == result


# -- processes ------------------------------------------------------------------------------------


@ONLY_ON_THE_SUITE_SERVER
def test_burst_exits_0_once_the_queues_are_empty(
    client: Client, procs: Processes, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    jids = [put(client, queue, "record", {"log": str(log)}) for queue in ("a", "b", "b")]
    worker = procs.worker(["a", "b"], "--burst")
    assert procs.wait_exit(worker) == 0
    assert [state_of(client, jid) for jid in jids] == ["complete"] * 3
    assert sorted(log.read_text().split()) == sorted(jids)

    idle = procs.worker(["a", "b"], "--burst")
    assert procs.wait_exit(idle) == 0


@ONLY_ON_THE_SUITE_SERVER
def test_the_pool_restarts_a_child_that_dies(
    client: Client, engine: Engine, procs: Processes, tmp_path: Path
) -> None:
    script = (
        "import os, sys\n"
        "from scheduler.worker import WorkerPool\n"
        "pool = WorkerPool(os.environ['FLOWS_REDIS_URL'], ['q'], processes=2, poll_interval=0.1,"
        " shutdown_grace=1, log_level='WARNING')\n"
        "sys.exit(pool.run())\n"
    )
    pool = procs.spawn([sys.executable, "-c", script], "pool")
    first = wait_for(
        lambda: len(worker_info(engine)) == 2 and worker_info(engine), what="2 children"
    )
    victim = next(iter(first.values()))["pid"]
    os.kill(victim, signal.SIGKILL)

    def respawned() -> set[int]:
        pids = {info["pid"] for info in worker_info(engine).values()}
        return pids - {info["pid"] for info in first.values()}

    [fresh] = wait_for(respawned, what="a new child")
    assert process_alive(fresh)
    log = tmp_path / "log"
    jids = [put(client, "q", "record", {"log": str(log)}) for _ in range(20)]
    for jid in jids:
        wait_state(client, jid, "complete")

    pool.send_signal(signal.SIGTERM)
    assert procs.wait_exit(pool) == 0
    # The children deregistered; only the killed one is left in the registry.
    assert [info["pid"] for info in worker_info(engine).values()] == [victim]


def test_a_worker_registers_itself_and_deregisters_on_exit(
    engine: Engine, procs: Processes
) -> None:
    worker = procs.worker(["q", "r"], "--threads", "2", name="registered")
    info = wait_for(lambda: worker_info(engine).get("registered"), what="the registration")
    assert info["host"] == socket.gethostname()
    assert info["pid"] == worker.pid
    assert info["queues"] == ["q", "r"]
    assert info["threads"] == 2
    assert "registered" in worker_names(engine)

    worker.send_signal(signal.SIGTERM)
    assert procs.wait_exit(worker) == 0
    assert "registered" not in worker_info(engine)
    assert "registered" not in worker_names(engine)


# -- latency --------------------------------------------------------------------------------------


def test_put_to_start_latency_with_an_idle_worker_is_small(client: Client, engine: Engine) -> None:
    latencies = []
    with in_process_worker(engine, ["q"], poll_interval=5):
        for _ in range(50):
            before = time.time()
            jid = put(client, "q", "started_at")
            job = wait_state(client, jid, "complete")
            latencies.append(job.result - before)
    assert statistics.median(latencies) < 0.2, latencies


def test_a_new_job_wakes_an_idle_worker_before_its_poll_interval(
    client: Client, engine: Engine, redis_client: redis.Redis
) -> None:
    with in_process_worker(engine, ["q"], poll_interval=30):
        wait_for(lambda: redis_client.zcard("ql:q:q-idle") >= 1, what="the worker to wait idle")
        warm_up = put(client, "q", "started_at")
        wait_state(client, warm_up, "complete", timeout=5)
        before = time.time()
        jid = put(client, "q", "started_at")
        job = wait_state(client, jid, "complete", timeout=5)
    assert job.result - before < 1.0


# -- Tarantool-queue extensions: concurrency keys, ttr, release with delay, ttl, bury ------------


def _run_interval(job: Job) -> tuple[float, float]:
    """(popped, done) server times of the job's one run."""
    [popped] = history(job, "popped")
    [done] = history(job, "done")
    return float(popped["when"]), float(done["when"])


def test_concurrency_keys_run_one_at_a_time_in_order_and_keys_in_parallel(
    client: Client, engine: Engine, procs: Processes
) -> None:
    keys = ("a.example", "b.example", "c.example")
    jids = {key: [f"{key}-{n}" for n in range(3)] for key in keys}
    for n in range(3):
        for key in keys:
            put(client, "utube", "sleeps", {"seconds": 0.3}, jid=jids[key][n], concurrency_key=key)
    workers = [procs.worker(["utube"], "--burst", name=f"crawler-{i}") for i in range(3)]
    for worker in workers:
        assert procs.wait_exit(worker, timeout=30) == 0, procs.log(worker)

    intervals: dict[str, list[tuple[float, float]]] = {}
    for key in keys:
        jobs = [client.jobs[jid] for jid in jids[key]]
        assert [job.state for job in jobs] == ["complete"] * 3
        intervals[key] = [_run_interval(job) for job in jobs]
        # one at a time, in put order: each starts once the one before it is done
        for (_, done), (started, _) in itertools.pairwise(intervals[key]):
            assert started >= done, (key, intervals[key])
    every = sorted((start, end) for runs in intervals.values() for start, end in runs)
    overlapping = max(sum(1 for s, e in every if s <= start < e) for start, _ in every)
    assert overlapping >= 2, every  # different keys ran at the same time
    assert client.queues["utube"].counts()["parked"] == 0


def test_a_jobs_ttr_is_its_lock_time_and_it_is_heartbeated_at_a_third_of_it(
    client: Client, engine: Engine
) -> None:
    client.config["grace-period"] = 0
    client.config["ttr-heartbeat"] = 600
    # a 0.9 s lock beaten every 0.3 s: 0.6 s of slack on a loaded machine
    jid = put(client, "ttr", "sleeps", {"seconds": 2.0}, ttr=0.9)
    # a second worker polls the queue: it would take the job over as soon as its lock lapsed
    with in_process_worker(engine, ["ttr"], name="w1") as w1:
        started = wait_for(lambda: state_of(client, jid) == "running" and client.jobs[jid])
        assert started.ttr == 0.9
        # the lock the engine gave, however short, is what the worker beats a third of
        held = wait_for(lambda: w1.held.jobs.get(jid))  # held once its pop's reply is read
        assert held.lock_seconds == pytest.approx(0.9, abs=0.01)
        with in_process_worker(engine, ["ttr"], name="w2", poll_interval=0.05):
            job = wait_state(client, jid, "complete")
    assert [h["worker"] for h in history(job, "popped")] == ["w1"]
    assert [h["worker"] for h in history(job, "done")] == ["w1"]


def test_release_with_a_delay_runs_the_job_again_later_without_using_a_retry(
    client: Client, engine: Engine
) -> None:
    jid = put(client, "q", "release_once", {"delay": 0.5}, retries=1)
    with in_process_worker(engine, ["q"], poll_interval=0.05):
        job = wait_state(client, jid, "complete")
    [released] = history(job, "released")
    assert released["delay"] == 0.5
    popped = [float(h["when"]) for h in history(job, "popped")]
    assert len(popped) == 2 and popped[1] - float(released["when"]) >= 0.5
    assert job.remaining == job.retries == 1
    assert client.queues["q"].statistics()["calls"]["release"] == 1


def test_ttl_expires_a_job_waiting_or_delayed_past_its_deadline(
    client: Client, engine: Engine, redis_client: redis.Redis
) -> None:
    seconds, micros = redis_client.time()
    server_now = seconds + micros / 1e6
    # Put as if 100 s ago: one job ready then, one due 50 s ago; both had 10 s to start.
    stale = put(client, "ttl", "echo", {"value": 1}, ttl=10, now=server_now - 100)
    stale_delayed = put(client, "ttl", "echo", {}, ttl=10, delay=50, now=server_now - 100)
    fresh = put(client, "ttl", "echo", {"value": 2}, ttl=60)
    # This one starts in time, then outlives its deadline and is handed back for 60 s: it expires
    # while delayed, at the worker's next pop of the queue.
    outlived = put(client, "ttl", "outlive_deadline", ttl=1)
    with in_process_worker(engine, ["ttl"], poll_interval=0.05):
        assert wait_state(client, fresh, "complete").result == 2
        job = wait_state(client, outlived, "expired")
    assert [h["what"] for h in job.history][-3:] == ["popped", "released", "expired"]
    for jid in (stale, stale_delayed):
        expired = client.jobs[jid]
        assert expired.state == "expired"
        assert history(expired, "popped") == []
    assert client.queues["ttl"].statistics()["calls"]["expire"] == 3


def test_bury_job_buries_the_job_until_it_is_kicked(client: Client, engine: Engine) -> None:
    jid = put(client, "q", "bury_me", {"reason": "needs a human"})
    assert run_burst(engine, ["q"]) == 0
    job = client.jobs[jid]
    assert job.state == "buried"
    assert history(job, "buried")[0]["message"] == "needs a human"
    assert client.queues["q"].jobs.buried() == [jid]
    assert client.queues["q"].kick() == 1
    assert client.jobs[jid].state == "waiting"
