"""A killed worker's jobs back in seconds (``pytest -m chaos``): 3 kills in CI, 20 with
``FLOWS_CHAOS=long``; ``python -m pytest -m chaos tests/chaos/test_recovery.py -s`` prints p50 and
max.

Each round starts a victim worker process (1 slot) and has it hold three kinds of job with a
60 s lock: the one it runs, two popped in its name but not started (as its prefetch leaves
them), and one handed to it while it waits idle (the round registers it idle on the queue, as
the worker's own ``await`` does, and puts a job: the engine pops it into the victim's inbox).
Two fresh workers start, then the victim gets SIGKILL. Its liveness lease (lua/include/lease.lua)
lapses, a survivor's renewal reaps it and the jobs are handed to the survivors: each must start
again within BOUND seconds of the kill, far below its lock time, and complete exactly once.
The victim's sandbox folder is gone once the next worker has started.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

MODE = os.environ.get("FLOWS_CHAOS", "short") or "short"
KILLS = 20 if MODE == "long" else 3
# Seconds from the kill until each job runs elsewhere, at most: the lease (5 s), a survivor's
# next renewal (1 s) and slack for a loaded machine; each job's own lock is 60 s.
BOUND = 10.0
QUEUE = "work"
HERE = Path(__file__).parent

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(1800 if MODE == "long" else 300)]


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(0.02)
    return value


class Round:
    """Worker processes of the scenario, their marks file and their sandboxes' folder."""

    def __init__(self, server: EmbeddedServer, client: Client, tmp_path: Path) -> None:
        self.client = client
        self.marks = tmp_path / "marks"
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.logs = tmp_path
        self.env = dict(os.environ, FLOWS_REDIS_URL=server.url, TMPDIR=str(self.tmp))
        self.processes: list[subprocess.Popen[bytes]] = []

    def worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "scheduler.worker", "-q", QUEUE, "--name", name]
        command += ["--poll-interval", "0.2", "--shutdown-grace", "1", "--path", str(HERE), *args]
        with (self.logs / f"{name}.log").open("wb") as output:
            process = subprocess.Popen(
                command, env=self.env, stdout=output, stderr=subprocess.STDOUT
            )
        self.processes.append(process)
        leases = self.client.engine.key_prefix + "leases"
        wait_for(lambda: self.client.redis.zscore(leases, name) is not None, 30, f"{name} to start")
        return process

    def put(self, jid: str, victim: str) -> None:
        data = {"marks": str(self.marks), "hold_on": victim}
        self.client.queues[QUEUE].put("recovery_tasks.hold", data, jid=jid)

    def starts(self) -> list[tuple[str, int, float]]:
        """``(jid, pid, time)`` of every start so far."""
        return [
            (jid, int(pid), float(when))
            for what, jid, pid, when in self._marks()
            if what == "started"
        ]

    def finishes(self) -> list[str]:
        return [jid for what, jid, _, _ in self._marks() if what == "finished"]

    def _marks(self) -> list[list[str]]:
        if not self.marks.exists():
            return []
        return [line.split() for line in self.marks.read_text().splitlines() if line]

    def sandboxes(self) -> list[str]:
        return sorted(path.name for path in self.tmp.glob("flows-worker-*"))

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    def close(self) -> None:
        for process in self.processes:
            self.stop(process)


def kill_one(scenario: Round, n: int) -> list[float]:
    """One round (see the module's docstring); returns each held job's time to start again."""
    engine = scenario.client.engine
    victim_name = f"victim-{n}"
    victim = scenario.worker(victim_name, "--prefetch", "0")
    # The previous victim's sandbox was removed when this worker started: only its own is left.
    assert len(scenario.sandboxes()) == 1, scenario.sandboxes()
    running, prefetched, handed = f"run-{n}", [f"pre-{n}-a", f"pre-{n}-b"], f"inbox-{n}"
    scenario.put(running, victim_name)
    wait_for(
        lambda: any(jid == running for jid, _, _ in scenario.starts()), 30, f"{running} to start"
    )
    for jid in prefetched:
        scenario.put(jid, victim_name)
    popped = json.loads(engine.call("pop.lean", QUEUE, victim_name, len(prefetched)))
    assert sorted(job["jid"] for job in popped) == prefetched
    assert engine.call("await", victim_name, 60, 1, QUEUE) == "[]"
    scenario.put(handed, victim_name)
    held = [running, *prefetched, handed]
    assert sorted(json.loads(engine.call("workers", victim_name))["jobs"]) == sorted(held)

    survivors = [scenario.worker(f"survivor-{n}-{i}", "--threads", "2") for i in range(2)]
    killed_at = time.time()
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(10)

    def restarted() -> dict[str, float] | None:
        again = {
            jid: when for jid, pid, when in scenario.starts() if pid != victim.pid and jid in held
        }
        return again if len(again) == len(held) else None

    again = wait_for(restarted, 90, f"the jobs of {victim_name} to start again")
    wait_for(lambda: set(held) <= set(scenario.finishes()), 30, "the jobs to finish")
    for survivor in survivors:
        scenario.stop(survivor)
    for jid in held:
        assert scenario.client.jobs[jid].state == "complete", jid
    return [again[jid] - killed_at for jid in held]


def test_a_killed_worker_s_jobs_run_again_within_seconds(
    server: EmbeddedServer, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = Client.from_engine(engine, worker_name="scenario")
    scenario = Round(server, client, tmp_path)
    recoveries: list[float] = []
    try:
        for n in range(KILLS):
            recoveries += kill_one(scenario, n)
        scenario.worker("last")  # its start removes the last victim's sandbox
        assert len(scenario.sandboxes()) == 1, scenario.sandboxes()
    finally:
        scenario.close()
    # Every job completed exactly once: one finish per jid over all workers (the victim's
    # running job never finished: it was killed), and no job started by two survivors.
    finishes = scenario.finishes()
    assert len(finishes) == len(set(finishes)) == 4 * KILLS
    survivor_starts = [jid for jid, _, _ in scenario.starts() if not jid.startswith("run-")]
    assert len(survivor_starts) == len(set(survivor_starts))
    p50, worst = statistics.median(recoveries), max(recoveries)
    with capsys.disabled():
        print(
            f"\n[{MODE}] recovery after kill -9 over {KILLS} kills, {len(recoveries)} jobs "
            f"(running, prefetched, handed over idle): p50 {p50:.2f} s, max {worst:.2f} s"
        )
    assert worst < BOUND, recoveries
