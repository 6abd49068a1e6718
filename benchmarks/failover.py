"""Kill a master mid-drain and account for every job: what the cluster tests assert and what
``benchmarks/cluster.py`` reports.

:func:`drain_through_failover` puts a drain of jobs, submits a flow run, starts worker processes
and a writer that puts one job at a time and notes each acknowledged jid in a ledger, kills the
namespace's master with SIGKILL once half the drain is done, and waits for the drain and the run
to finish on the promoted replica, and for a scheduler service started before the kill to tick
again. :class:`FailoverResult` then says which jobs completed, which ran more than once (their
function started twice: each drain job notes its starts in a file), which were popped again only
because the failover lost a pop's reply, how many acknowledged writes the failover lost, and how
long writes stopped.

``python -m benchmarks.failover write URL NAMESPACE LEDGER`` is the writer process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from benchmarks.processes import stop_all
from scheduler import Client
from scheduler.engine.doctor import deep_check
from scheduler.engine.errors import ClusterError, OutcomeUnknown
from scheduler.engine.queue import NewJob
from scheduler.service.schedules import Schedules

DRAIN = "drain"
LEDGER = "ledger"
FLOW_QUEUE = "flow"
KLASS = "benchmarks.tasks.noop"
DRAIN_KLASS = "benchmarks.tasks.counted"  # notes each start in the file its data names
SERVICE_ID = "failover-service"
LOCK_SECONDS = 3  # heartbeat: how soon a job held by a worker that lost its reply runs again

FLOW = """\
version: 1
name: failover
queue: flow
defaults: {heartbeat: 3s, retry: {attempts: 3, delay: 0}}
steps:
  one: {run: sleep 0.3}
  two: {run: sleep 0.3, needs: [one]}
  three: {run: sleep 0.3, needs: [two]}
  four: {run: sleep 0.3, needs: [three]}
"""


@dataclass
class FailoverResult:
    """What a failover did to a drain, a flow run and a stream of acknowledged writes."""

    mode: str
    jobs: int
    completed: int = 0
    missing: int = 0
    unfinished: dict[str, int] = field(default_factory=dict)
    reruns: int = 0
    """Drain jobs whose function ran more than once (an acknowledged completion lost)."""
    pop_replies_lost: int = 0
    """Drain jobs popped more than once that ran once: a pop's reply never reached its worker,
    and the job was given back (not a rerun)."""
    acknowledged: int = 0
    lost: int = 0
    unknown: int = 0
    recovery_seconds: float = 0.0
    drain_seconds: float = 0.0
    # From the kill to the drain's last job done: a job whose pop or complete reply the
    # failover lost comes back within seconds (the workers' leases name the jobs they hold).
    finished_after_kill: float = 0.0
    flow_status: str = ""
    doctor_problems: int = -1
    service_healthy: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _retrying(action: Callable[[], Any], deadline: float) -> Any:
    """``action()``, tried again while the failover settles (the caller's own reads)."""
    while True:
        try:
            return action()
        except (ClusterError, redis.RedisError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _put_drain(client: Client, jobs: int, starts: Path) -> list[str]:
    jids = [f"d-{i}" for i in range(jobs)]
    queue = client.queues[DRAIN]
    data = {"starts": str(starts)}
    for start in range(0, jobs, 1000):
        queue.put_many([NewJob(DRAIN_KLASS, data, jid) for jid in jids[start : start + 1000]])
    return jids


def _flows(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from flows.cli import main; sys.exit(main())",
                *args,
            ],
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def drain_through_failover(
    url: str,
    namespace: str,
    kill: Callable[[], None],
    *,
    jobs: int,
    workers: int = 2,
    threads: int = 4,
    mode: str = "async",
    timeout: float = 240.0,
    workdir: Path | None = None,
) -> FailoverResult:
    """Drain ``jobs`` jobs through a failover that ``kill()`` starts; see the module's notes.

    ``url`` may carry ``?wait=N`` (the durable mode); ``mode`` names it in the result.
    """
    workdir = workdir or Path(tempfile.mkdtemp(prefix="failover-"))
    result = FailoverResult(mode=mode, jobs=jobs)
    client = Client(url, namespace=namespace)
    client.config["heartbeat"] = LOCK_SECONDS
    client.config["grace-period"] = 0
    starts = workdir / "starts.txt"
    starts.touch()
    jids = _put_drain(client, jobs, starts)
    flow = workdir / "failover.yaml"
    flow.write_text(FLOW)
    submitted = subprocess.run(
        [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())",
         "run", str(flow), "--detach", "--redis", url, "--namespace", namespace],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    run_id = submitted.stdout.split()[0]
    ledger = workdir / "ledger.txt"
    common = ["--redis", url, "--namespace", namespace]
    # The service first, running before the drain starts: one still starting when the master is
    # killed would meet no master and stop with a start-up error instead of riding it out.
    (workdir / "flows").mkdir(exist_ok=True)
    service = _flows("scheduler", "--flows-dir", str(workdir / "flows"), "--id", SERVICE_ID,
                     "--tick-interval", "0.2", *common, log=workdir / "scheduler.log")  # fmt: skip
    launched, ready_by = time.time(), time.monotonic() + 60
    while not any(
        s.id == SERVICE_ID and s.last_tick >= launched for s in Schedules(client).services()
    ):
        if service.poll() is not None or time.monotonic() > ready_by:
            stop_all([service])
            raise RuntimeError(f"the scheduler service did not start: see {workdir}/scheduler.log")
        time.sleep(0.05)
    processes = [service] + [
        _flows("worker", "-q", f"{DRAIN},{FLOW_QUEUE}", "--strategy", "round-robin",
               "--processes", "0", "--threads", str(threads), *common,
               log=workdir / f"worker-{i}.log")
        for i in range(workers)
    ]  # fmt: skip
    writer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.failover", "write", url, namespace, str(ledger)],
        start_new_session=True,
    )
    processes.append(writer)
    started = time.monotonic()
    deadline = started + timeout
    try:
        while _retrying(lambda: client.queues[DRAIN].length(), deadline) > jobs // 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the drain did not reach half way")
            time.sleep(0.05)
        killed_at = time.time()
        kill()
        while (
            _retrying(lambda: client.queues[DRAIN].length(), deadline)
            or _retrying(lambda: client.queues[FLOW_QUEUE].length(), deadline)
        ) and time.monotonic() < deadline:
            time.sleep(0.1)
        result.drain_seconds = time.monotonic() - started
        result.finished_after_kill = round(time.time() - killed_at, 2)
        # The service survived if it ticks again on the new master: after the kill, that is.
        time.sleep(max(0.0, killed_at + 2.5 - time.time()))
        while time.monotonic() < deadline and not result.service_healthy:
            health = subprocess.run(
                [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())",
                 "scheduler", "--health", "--id", SERVICE_ID, "--max-age", "2", *common],
                capture_output=True, timeout=60,
            )  # fmt: skip
            result.service_healthy = health.returncode == 0 and service.poll() is None
        time.sleep(0.5)  # the writer's acknowledgements after recovery
    finally:
        stop_all(processes)
    _account(client, jids, starts, result, deadline)
    _read_ledger(client, ledger, killed_at, result, deadline)
    result.flow_status = _flow_status(url, namespace, run_id)
    result.doctor_problems = len(_retrying(lambda: deep_check(client), deadline).findings)
    client.close()
    return result


def _account(
    client: Client, jids: list[str], starts: Path, result: FailoverResult, deadline: float
) -> None:
    """The drain's jobs by state, missing ones, reruns (by the starts their function noted) and
    pops given back (popped again by the job's history, run once)."""
    ran = Counter(starts.read_text().split())
    states: Counter[str] = Counter()
    for start in range(0, len(jids), 500):
        chunk = jids[start : start + 500]
        found = _retrying(lambda c=chunk: client.jobs.multiget(*c), deadline)  # type: ignore[misc]
        result.missing += len(chunk) - len(found)
        for job in found:
            states[job.state] += 1
            if ran[job.jid] > 1:
                result.reruns += 1
            elif sum(1 for entry in job.history if entry.get("what") == "popped") > 1:
                result.pop_replies_lost += 1
    result.completed = states.pop("complete", 0)
    result.unfinished = dict(states)


def _read_ledger(
    client: Client, ledger: Path, killed_at: float, result: FailoverResult, deadline: float
) -> None:
    acknowledged: list[tuple[str, float]] = []
    for line in ledger.read_text().splitlines():
        kind, jid, when = line.split()
        if kind == "ack":
            acknowledged.append((jid, float(when)))
        else:
            result.unknown += 1
    result.acknowledged = len(acknowledged)
    names = [jid for jid, _ in acknowledged]
    present = 0
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        present += len(_retrying(lambda c=chunk: client.jobs.multiget(*c), deadline))  # type: ignore[misc]
    result.lost = len(names) - present
    # Writes stopped from the last acknowledgement before the kill to the first after it.
    times = sorted(when for _, when in acknowledged)
    gaps = [b - a for a, b in itertools.pairwise(times) if b > killed_at]
    result.recovery_seconds = round(max(gaps), 2) if gaps else -1.0


def _flow_status(url: str, namespace: str, run_id: str) -> str:
    shown = subprocess.run(
        [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())",
         "status", run_id, "--json", "--redis", url, "--namespace", namespace],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if shown.returncode != 0:
        return f"unknown ({shown.stderr.strip()})"
    return str(json.loads(shown.stdout)["status"])


# -- the writer process ----------------------------------------------------------------------


def write(url: str, namespace: str, ledger: Path) -> None:
    """Put one job at a time until SIGTERM; note each acknowledged jid, and each unknown one."""
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    client = Client(url, namespace=namespace, worker_name=f"writer-{os.getpid()}")
    queue = client.queues[LEDGER]
    with ledger.open("a", buffering=1) as out:
        i = 0
        while not stopping:
            jid = f"w-{i}"
            i += 1
            try:
                queue.put(KLASS, {}, jid=jid)
            except OutcomeUnknown:
                out.write(f"unknown {jid} {time.time()}\n")
                continue
            except (ClusterError, redis.RedisError):
                time.sleep(0.05)  # did not run: the next jid is tried
                continue
            out.write(f"ack {jid} {time.time()}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.failover")
    sub = parser.add_subparsers(dest="command", required=True)
    writer = sub.add_parser("write", help="the writer process (see the module's notes)")
    writer.add_argument("url")
    writer.add_argument("namespace")
    writer.add_argument("ledger", type=Path)
    args = parser.parse_args(argv)
    write(args.url, args.namespace, args.ledger)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["FailoverResult", "drain_through_failover"]
