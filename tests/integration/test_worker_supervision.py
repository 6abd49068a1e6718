"""Knowing workers are alive: pool children stop when their supervisor dies, however it dies
(a real ``kill -9`` of a supervisor process, and the portable lifeline, a pipe, on its own), and
a live worker keeps saying so while a killed one is marked silent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from test_worker import (
    Processes,
    process_alive,
    put,
    state_of,
    wait_for,
    wait_marks,
    worker_info,
)

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.worker.supervision import ENV, Lifeline

POOL = (
    "import os, sys\n"
    "from scheduler.worker import WorkerPool\n"
    "pool = WorkerPool(os.environ['FLOWS_REDIS_URL'], ['q'], processes=1, poll_interval=0.1,"
    " shutdown_grace=0.5, log_level='INFO')\n"
    "sys.exit(pool.run())\n"
)


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="test-client")


class Supervised(Processes):
    """Processes, and children that may outlive them (the bug): ended at the end too."""

    def __init__(self, server: EmbeddedServer, tmp_path: Path) -> None:
        super().__init__(server, tmp_path)
        self.orphans: list[int] = []

    def close(self) -> None:
        super().close()
        for pid in self.orphans:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def procs(
    server: EmbeddedServer, tmp_path: Path, redis_client: redis.Redis
) -> Iterator[Supervised]:
    processes = Supervised(server, tmp_path)
    try:
        yield processes
    finally:
        processes.close()


def test_children_stop_and_hand_back_their_jobs_when_the_supervisor_is_killed(
    client: Client, engine: Engine, procs: Supervised, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    jid = put(client, "q", "busy", {"marks": str(marks), "seconds": 120})
    pool = procs.spawn([sys.executable, "-c", POOL], "pool")
    [started] = wait_marks(marks, "started", timeout=20)
    child = int(started[2])
    procs.orphans.append(child)
    assert child != pool.pid and process_alive(child)

    pool.kill()  # SIGKILL: no chance to pass anything on
    pool.wait()

    wait_for(lambda: not process_alive(child), timeout=15, what="the orphaned child to exit")
    # It stopped as on SIGTERM: the job was handed back (no retry used), the worker deregistered.
    assert state_of(client, jid) == "waiting"
    job = client.jobs[jid]
    assert job.remaining == job.retries
    assert [h["what"] for h in job.history][-1] == "released"
    assert child not in [info["pid"] for info in worker_info(engine).values()]


def test_a_child_stops_when_its_lifeline_closes(
    client: Client, engine: Engine, procs: Supervised, tmp_path: Path
) -> None:
    """The portable path alone: this process plays the supervisor and stays alive (so no
    parent-death signal comes); closing the pipe's write end is the supervisor dying."""
    lifeline = Lifeline()
    env = dict(procs.env(), **lifeline.env)
    command = [sys.executable, "-m", "scheduler.worker", "-q", "q", "--poll-interval", "0.1"]
    child = subprocess.Popen(command, env=env, pass_fds=(lifeline.fd,))
    lifeline.started()
    procs.orphans.append(child.pid)
    try:
        wait_for(lambda: worker_info(engine), timeout=15, what="the child to register")
        assert child.poll() is None
        lifeline.close()
        assert child.wait(15) == 0  # a clean stop
        assert worker_info(engine) == {}
    finally:
        lifeline.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert ENV not in os.environ


def test_a_busy_worker_keeps_saying_it_is_alive_and_a_killed_one_turns_silent(
    client: Client, engine: Engine, procs: Supervised, tmp_path: Path
) -> None:
    """A job with a long lock is heartbeated rarely: the worker renews its registration at a
    third of worker-silent-after, so only a dead worker is marked silent."""
    client.config["worker-silent-after"] = 1.5
    marks = tmp_path / "marks"
    put(client, "q", "busy", {"marks": str(marks), "seconds": 60}, ttr=600)
    worker = procs.worker(["q"], name="steady")
    wait_marks(marks, "started", timeout=20)

    def silent() -> bool | None:
        [entry] = client.workers.registry()
        return bool(entry["silent"])

    started = time.monotonic()
    while time.monotonic() - started < 3:  # twice worker-silent-after, heartbeats 200 s apart
        assert silent() is False
        time.sleep(0.1)
    worker.kill()
    worker.wait()
    wait_for(silent, timeout=10, what="the killed worker to be marked silent")


def test_a_worker_per_namespace_stops_when_the_command_serving_them_is_killed(
    procs: Supervised, redis_client: redis.Redis
) -> None:
    import psutil

    flows = [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())"]
    command = [*flows, "worker", "-q", "q", "--processes", "0", "--namespace", "{a}:,{b}:"]
    parent = procs.spawn(command, "fanout")

    def registered() -> bool:
        replies = [Engine(redis_client, prefix=p).call("workers") for p in ("{a}:", "{b}:")]
        return all(json.loads(reply) for reply in replies)

    wait_for(registered, timeout=30, what="a worker in each namespace")
    children = [p.pid for p in psutil.Process(parent.pid).children()]
    procs.orphans.extend(children)
    assert len(children) == 2

    parent.kill()  # SIGKILL: it cannot pass anything on
    parent.wait()

    wait_for(
        lambda: not any(process_alive(pid) for pid in children),
        timeout=20,
        what="each namespace's worker to stop",
    )
