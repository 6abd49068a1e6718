"""``flows worker`` stops as its help says however the signal reaches it: one SIGTERM/SIGINT
lets running jobs finish, a second stops at once, whether it is sent to the supervisor alone, to
the whole process group (``kill -- -PGID``, a terminal's Ctrl-C, ``timeout``) or to every
process of the tree (systemd's default stop signals every process of the service). Real
``flows worker`` processes, each in a session of its own, and real signals; the job runs until
the test opens its gate, so only a worker that waited for it completes it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import psutil  # type: ignore[import-untyped]
import pytest
import redis
from test_worker import (
    ROOT,
    Processes,
    put,
    state_of,
    wait_for,
    wait_marks,
)

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

FLOWS = [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())"]

How = Literal["supervisor", "group", "every process"]


class Commands(Processes):
    """``flows worker`` commands in sessions of their own; at the end every process of their
    trees is killed and the gates opened, so nothing outlives the test."""

    def __init__(self, server: EmbeddedServer, tmp_path: Path) -> None:
        super().__init__(server, tmp_path)
        self.gate = tmp_path / "gate"
        self.trees: list[psutil.Process] = []

    def flows_worker(self, *args: str) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"flows-worker-{len(self.started)}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [*FLOWS, "worker", *args],
                env=self.env(),
                cwd=ROOT,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, whose id is its pid
            )
        self.started.append((process, log))
        return process

    def tree(self, process: subprocess.Popen[bytes]) -> list[psutil.Process]:
        """The command and every process under it (what systemd signals on a stop)."""
        top = psutil.Process(process.pid)
        found = [top, *top.children(recursive=True)]
        self.trees.extend(found)
        return found

    def send(self, process: subprocess.Popen[bytes], signum: int, how: How) -> None:
        if how == "supervisor":
            process.send_signal(signum)
        elif how == "group":
            os.killpg(process.pid, signum)
        else:
            for each in self.tree(process):
                # Gone already: told to stop at once by a process signalled before it.
                with contextlib.suppress(psutil.NoSuchProcess):
                    each.send_signal(signum)

    def close(self) -> None:
        self.gate.touch()
        for process, _ in self.started:
            if process.poll() is None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.tree(process)
        for each in self.trees:
            with contextlib.suppress(psutil.NoSuchProcess):
                each.kill()
        super().close()


@pytest.fixture
def procs(server: EmbeddedServer, tmp_path: Path, redis_client: redis.Redis) -> Iterator[Commands]:
    commands = Commands(server, tmp_path)
    try:
        yield commands
    finally:
        commands.close()


def client_of(redis_client: redis.Redis, prefix: str | None = None) -> Client:
    engine = Engine(redis_client) if prefix is None else Engine(redis_client, prefix=prefix)
    return Client.from_engine(engine, worker_name="test-client")


def put_gated(client: Client, procs: Commands) -> str:
    marks = procs.tmp_path / "marks"
    return put(client, "q", "gated", {"gate": str(procs.gate), "marks": str(marks)})


def whats(client: Client, jid: str) -> list[str]:
    return [str(entry["what"]) for entry in client.jobs[jid].history]


def wait_running(client: Client, jid: str) -> None:
    wait_for(lambda: state_of(client, jid) == "running", 30, f"job {jid} to run")


def wait_started(procs: Commands, count: int = 1) -> None:
    """Until ``count`` gated jobs run their code. Popped is not enough: a stopping worker hands
    back a job it has not started yet (and, holding none, exits 0 at once) instead of
    finishing it."""
    wait_marks(procs.tmp_path / "marks", "started", count, timeout=30)


def wait_told(
    procs: Commands, worker: subprocess.Popen[bytes], times: int = 1, *, command: bool = True
) -> None:
    """Until ``times`` worker processes logged that they finish their jobs: the request to stop
    reached them, each process having seen it. With ``command``, until the command signalled
    said it took the request too (as a pool's supervisor, a per-namespace parent or a worker):
    a second signal sent before that may meet the first still pending, and the kernel keeps one
    of the two (signals do not queue), however long the test waits after. A child that logged
    tells nothing of its parent, which a loaded machine may not have run since."""

    def took(line: str) -> bool:
        return f"[{worker.pid}]" in line and (
            "passed on to" in line or "finishing running jobs" in line
        )

    def told() -> bool:
        log = procs.log(worker)
        if command and not any(took(line) for line in log.splitlines()):
            return False
        return log.count("finishing running jobs") >= times

    wait_for(told, 10, "the worker to take the request to stop")


@pytest.mark.parametrize(
    ("how", "signum"),
    [
        ("supervisor", signal.SIGTERM),
        ("group", signal.SIGTERM),
        ("group", signal.SIGINT),
        ("every process", signal.SIGTERM),
    ],
)
def test_one_signal_lets_the_running_job_finish(
    procs: Commands, redis_client: redis.Redis, how: How, signum: int
) -> None:
    client = client_of(redis_client)
    jid = put_gated(client, procs)
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60")
    wait_started(procs)

    procs.send(worker, signum, how)
    wait_told(procs, worker)
    assert worker.poll() is None
    assert state_of(client, jid) == "running"

    procs.gate.touch()
    assert procs.wait_exit(worker, timeout=20) == 0
    assert state_of(client, jid) == "complete"
    assert whats(client, jid)[-2:] == ["popped", "done"]
    assert "stopping at once" not in procs.log(worker)


@pytest.mark.parametrize("how", ["supervisor", "group", "every process"])
def test_a_second_signal_stops_at_once(
    procs: Commands, redis_client: redis.Redis, how: How
) -> None:
    client = client_of(redis_client)
    jid = put_gated(client, procs)
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60")
    wait_started(procs)

    procs.send(worker, signal.SIGTERM, how)
    wait_told(procs, worker)
    procs.send(worker, signal.SIGTERM, how)

    assert procs.wait_exit(worker, timeout=10) == 1
    assert "stopping at once" in procs.log(worker)
    # Left as it was (neither done nor handed back): reclaimed once the worker's lease lapses.
    assert state_of(client, jid) == "running"
    assert whats(client, jid)[-1] == "popped"


def test_a_second_signal_stops_at_once_when_the_supervisor_took_the_first_late(
    procs: Commands, redis_client: redis.Redis
) -> None:
    """The signal sent to the group reaches the pool's process first, its supervisor stopped
    meanwhile (as a loaded machine may leave it unscheduled): the test waits for the
    supervisor's word before the second signal, which then stops at once."""
    client = client_of(redis_client)
    jid = put_gated(client, procs)
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60")
    wait_started(procs)

    worker.send_signal(signal.SIGSTOP)
    try:
        procs.send(worker, signal.SIGTERM, "group")
        wait_told(procs, worker, command=False)  # the pool's process took it; not its supervisor
    finally:
        worker.send_signal(signal.SIGCONT)
    wait_told(procs, worker)
    procs.send(worker, signal.SIGTERM, "group")

    assert procs.wait_exit(worker, timeout=10) == 1
    assert "stopping at once" in procs.log(worker)
    assert state_of(client, jid) == "running"


@pytest.mark.parametrize("count", [1, 2])
def test_a_worker_per_namespace_counts_each_signal_once(
    procs: Commands, redis_client: redis.Redis, count: int
) -> None:
    """Every process of the tree signalled, as systemd does: the command's children in their
    own sessions get the signal from it and straight from the kernel too."""
    clients = [client_of(redis_client, prefix) for prefix in ("{a}:", "{b}:")]
    jids = [put_gated(client, procs) for client in clients]
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60", "--namespace", "{a}:,{b}:")
    wait_started(procs, count=2)

    procs.send(worker, signal.SIGTERM, "every process")
    wait_told(procs, worker, times=2)
    if count == 2:
        procs.send(worker, signal.SIGTERM, "every process")
        assert procs.wait_exit(worker, timeout=10) == 1
        assert all(state_of(c, jid) == "running" for c, jid in zip(clients, jids, strict=True))
        return
    assert worker.poll() is None
    procs.gate.touch()
    assert procs.wait_exit(worker, timeout=20) == 0
    for client, jid in zip(clients, jids, strict=True):
        assert state_of(client, jid) == "complete"
        assert whats(client, jid)[-2:] == ["popped", "done"]


def test_a_pool_process_signalled_on_its_own_finishes_and_is_replaced(
    procs: Commands, redis_client: redis.Redis
) -> None:
    """Only the supervisor's word stops a pool's process at once: SIGTERM sent to the process
    twice lets its job finish, then the supervisor starts a fresh process."""
    client = client_of(redis_client)
    jid = put_gated(client, procs)
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60")
    wait_running(client, jid)
    [started] = wait_marks(procs.tmp_path / "marks", "started")
    child = int(started[2])
    assert child != worker.pid
    for _ in range(2):
        os.kill(child, signal.SIGTERM)
        wait_told(procs, worker, command=False)  # its supervisor is not signalled

    procs.gate.touch()
    wait_for(lambda: state_of(client, jid) == "complete", 20, "the job to complete")
    wait_for(
        lambda: procs.log(worker).count("worker process 0 started") == 2,
        20,
        "a fresh worker process",
    )
    assert worker.poll() is None
    assert "stopping at once" not in procs.log(worker)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize(
    ("how", "signum", "processes"),
    [
        ("supervisor", signal.SIGTERM, "1"),
        ("group", signal.SIGTERM, "1"),
        ("group", signal.SIGINT, "1"),  # Ctrl-C twice in a terminal
        ("group", signal.SIGINT, "0"),  # ... on a worker without a pool
    ],
)
def test_a_stop_at_once_ends_the_commands_its_jobs_started(
    procs: Commands, redis_client: redis.Redis, how: How, signum: int, processes: str
) -> None:
    """A shell step's command runs in a session of its own, which no signal to the worker
    reaches. A worker stopped at once kills every process of it: none may run on while its
    job, given back when the worker's lease lapses, runs again elsewhere."""
    client = client_of(redis_client)
    pid_file = procs.tmp_path / "command.pids"
    command = f'sleep 300 & echo "$$ $!" > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait'
    jid = put(client, "q", "flows.runtime.tasks.shell", {"command": command})
    worker = procs.flows_worker("-q", "q", "--shutdown-grace", "60", "--processes", processes)
    wait_running(client, jid)
    wait_for(pid_file.exists, 30, "the command to start")
    pids = [int(pid) for pid in pid_file.read_text().split()]
    assert all(alive(pid) for pid in pids)

    procs.send(worker, signum, how)
    wait_told(procs, worker)
    procs.send(worker, signum, how)
    assert procs.wait_exit(worker, timeout=10) == 1
    wait_for(lambda: not any(alive(pid) for pid in pids), 10, "the job's command to end")
    assert state_of(client, jid) == "running"  # given back by the lease, not by the kill
