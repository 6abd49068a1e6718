"""Processes the benchmark starts: worker pools, baseline consumers, ``--busy`` spinners.

Run as ``python -m benchmarks.processes pool --queue Q --processes N`` it is a
:class:`~scheduler.worker.WorkerPool` (what ``flows worker -q Q --processes N`` runs), with the
URL in ``$FLOWS_REDIS_URL``. Every process here is stopped by its own handle, never by name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.context import REPO_ROOT, Bench, wait_until
from scheduler.worker import WorkerPool
from scheduler.worker.settings import WorkerSettings

STOP_TIMEOUT = 30.0
START_TIMEOUT = 60.0

# A spinner never competes with real work: SCHED_IDLE (else nice 19) runs only on a CPU that
# would otherwise idle, and it ends itself when the benchmark that started it is gone.
_SPIN = """
import os
try:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
except (AttributeError, OSError):
    os.nice(19)
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


def spinner_policy() -> str:
    return "SCHED_IDLE" if hasattr(os, "SCHED_IDLE") else "nice 19"


@contextlib.contextmanager
def spinners(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` low-priority busy loops, so idle CPUs do not sleep (``--busy``)."""
    started = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(count)]
    try:
        yield started
    finally:
        stop_all(started)


def stop_all(processes: Sequence[subprocess.Popen[bytes]], sig: int = signal.SIGTERM) -> None:
    """Signal each process, wait for it, kill it if it lingers."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(sig)
    for process in processes:
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux ``/proc``); 0.0 if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def worker_pids(bench: Bench, queue: str) -> list[int]:
    """Pids of the live workers registered on ``queue`` (from ``worker.info``)."""
    infos = json.loads(bench.client.engine.call("worker.info") or "{}") or {}
    pids = []
    for info in infos.values():
        if queue in (info.get("queues") or []) and _alive(int(info.get("pid", 0))):
            pids.append(int(info["pid"]))
    return pids


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def idle_workers(bench: Bench, queue: str) -> int:
    """Workers waiting idle on ``queue`` for the engine to hand them a job."""
    return int(bench.redis.zcard(f"{bench.client.prefix}q:{queue}-idle"))


@contextlib.contextmanager
def worker_pool(
    bench: Bench, queue: str, processes: int, *, prepare: str | None = None, threads: int = 1
) -> Iterator[list[int]]:
    """A WorkerPool of ``processes`` workers on ``queue``; yields their pids once each waits."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.processes",
        "pool",
        "--queue",
        queue,
        "--processes",
        str(processes),
        "--log-level",
        bench.worker_log_level,
        "--threads",
        str(threads),
    ]
    if prepare:
        command += ["--prepare", prepare]
    with open(bench.workdir / "workers.log", "ab") as log:
        pool = subprocess.Popen(
            command, cwd=REPO_ROOT, env=bench.child_env(), stderr=log, stdout=log
        )
    try:

        def waiting() -> bool:
            if pool.poll() is not None:
                raise RuntimeError(f"the worker pool exited ({pool.returncode}); see workers.log")
            return (
                len(worker_pids(bench, queue)) >= processes
                and idle_workers(bench, queue) >= processes
            )

        wait_until(waiting, START_TIMEOUT, f"{processes} workers on {queue}")
        yield worker_pids(bench, queue)
    finally:
        stop_all([pool])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.processes")
    commands = parser.add_subparsers(dest="command", required=True)
    pool = commands.add_parser("pool", help="run a WorkerPool on one queue")
    pool.add_argument("--queue", required=True)
    pool.add_argument("--processes", type=int, default=1)
    pool.add_argument("--prepare")
    pool.add_argument("--log-level", default="INFO")
    pool.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    settings = WorkerSettings(
        queues=(args.queue,), prepare=args.prepare, log_level=args.log_level, threads=args.threads
    )
    return WorkerPool(os.environ["FLOWS_REDIS_URL"], settings, processes=args.processes).run()


if __name__ == "__main__":
    sys.exit(main())
