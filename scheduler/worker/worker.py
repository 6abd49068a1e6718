"""The worker: pops jobs from its queues, runs them on threads, keeps their locks, reports outcomes.

One :class:`Worker` is one process's worth of work (the pool in :mod:`scheduler.worker.pool` runs
several in child processes). Inside it:

* the main loop pops as many jobs as it has free threads, in ``ordered`` or ``round-robin`` order
  over its queues, and otherwise sleeps until the engine announces work (``P ready:<queue>``), a
  job finishes, or the polling fallback fires;
* a listener thread turns engine messages into wake-ups and stops (``lock_lost``, ``canceled`` on
  ``P w:<worker>``);
* a monitor thread heartbeats every running job at a third of its lock time and stops jobs that
  overrun their timeout or lose their lock;
* job threads run :func:`scheduler.worker.runner.run` and apply the outcome.

Stopping a job: its :class:`JobContext` is told (``stopped`` event, ``on_stop`` callbacks: the
shell task kills its process group), then an exception is raised inside its thread. A thread stuck
in C code past ``kill_after`` makes a pool child exit, and the pool starts a fresh one.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import redis

from scheduler.client import Client
from scheduler.errors import EngineError
from scheduler.job import Job, dumps
from scheduler.safety import check_eviction_policy
from scheduler.worker import runner
from scheduler.worker.context import JobContext
from scheduler.worker.envelope import BrokenPayload, split
from scheduler.worker.outcomes import (
    FailJob,
    JobInterrupted,
    LockLostInterrupt,
    ShutdownInterrupt,
    TimeoutInterrupt,
)

log = logging.getLogger("flows.worker")

Strategy = Literal["ordered", "round-robin"]
Prepare = Callable[[JobContext], None]

# Exit code of a pool child that had to abandon a job stuck in C code (the pool restarts it).
EXIT_STUCK = 75


@dataclass
class Active:
    """A job this worker is running."""

    ctx: JobContext
    lock_seconds: float
    next_heartbeat: float
    deadline: float | None
    started: float = field(default_factory=time.monotonic)
    stop_requested: float | None = None
    interruptible: bool = False
    # Set once, under `guard`, by whoever reports the outcome: the job's thread, or the monitor
    # when the thread is stuck past kill_after (the thread's late outcome is then dropped).
    settled: bool = False
    guard: threading.Lock = field(default_factory=threading.Lock)


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _safe_name(jid: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in jid)[:120]


class Worker:
    """Runs jobs from ``queues`` until stopped (or, with ``burst``, until they are empty).

    ``threads`` jobs run at once. ``prepare`` runs before each job (flows resolves upstream
    outputs there). ``shutdown_grace``: seconds running jobs get to finish on the first SIGTERM
    or SIGINT before they are handed back; a second signal stops at once.
    """

    def __init__(
        self,
        client: Client,
        queues: Sequence[str],
        *,
        strategy: Strategy = "ordered",
        threads: int = 1,
        burst: bool = False,
        poll_interval: float = 1.0,
        shutdown_grace: float = 30.0,
        kill_after: float = 10.0,
        sandbox_root: Path | None = None,
        prepare: Prepare | None = None,
        exit_on_stuck: bool = False,
    ) -> None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if strategy not in ("ordered", "round-robin"):
            raise ValueError(f"unknown strategy {strategy!r}: use 'ordered' or 'round-robin'")
        self.client = client
        self.name = client.worker_name
        self.queues = list(queues)
        self.strategy = strategy
        self.threads = max(1, threads)
        self.burst = burst
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self.kill_after = kill_after
        self.prepare = prepare
        self.exit_on_stuck = exit_on_stuck
        self._own_sandbox = sandbox_root is None
        self.sandbox_root = sandbox_root or Path(tempfile.mkdtemp(prefix="flows-worker-"))
        self._active: dict[str, Active] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._monitor_wake = threading.Event()
        self._done = threading.Event()
        self._stopping = False
        self._signals = 0
        self._rr = 0
        self.processed = 0
        self._abandoned = 0
        # Spare threads: a job stuck in C code after being stopped keeps its thread, not its slot.
        self._executor = ThreadPoolExecutor(self.threads * 2 + 4, thread_name_prefix="flows-job")

    # -- public ------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; returns the exit code (0 after a graceful stop or a burst).

        Raises :class:`~scheduler.safety.UnsafeServer` before taking any job when the server's
        eviction policy could drop jobs.
        """
        check_eviction_policy(self.client.redis, who=f"worker {self.name}")
        self._install_signals()
        self._register()
        helpers = [
            threading.Thread(target=self._listen, name="flows-listener", daemon=True),
            threading.Thread(target=self._monitor, name="flows-monitor", daemon=True),
        ]
        for helper in helpers:
            helper.start()
        log.info(
            "worker %s started on %s (%s, %d threads)",
            self.name,
            ",".join(self.queues),
            self.strategy,
            self.threads,
        )
        try:
            self._loop()
            self._drain()
        finally:
            self._done.set()
            self._monitor_wake.set()
            # A thread abandoned while stuck cannot be joined; do not hang on it.
            self._executor.shutdown(wait=self._abandoned == 0, cancel_futures=True)
            for helper in helpers:
                helper.join(timeout=2)
            with contextlib.suppress(redis.RedisError, EngineError):
                self.client.engine.call("worker.deregister", self.name)
            if self._own_sandbox:
                shutil.rmtree(self.sandbox_root, ignore_errors=True)
            log.info("worker %s stopped after %d jobs", self.name, self.processed)
        return 0

    def stop(self) -> None:
        """Stop popping; running jobs get ``shutdown_grace`` seconds, then are handed back."""
        self._stopping = True
        self._wake.set()

    # -- the main loop -------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            free = self.threads - len(self._active)
            jobs = self._pop(free) if free > 0 else []
            for raw in jobs:
                self._start(raw)
            if jobs:
                continue
            if self.burst and not self._active:
                return
            self._wake.wait(self.poll_interval)

    def _pop(self, free: int) -> list[dict[str, Any]]:
        try:
            if self.strategy == "ordered":
                return self._pop_ordered(free)
            return self._pop_round_robin(free)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            log.warning("worker %s cannot reach Redis (%s); retrying", self.name, error)
            time.sleep(min(self.poll_interval, 1.0))
            return []

    def _pop_ordered(self, free: int) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = []
        for queue in self.queues:
            jobs += json.loads(self.client.engine.call("pop", queue, self.name, free - len(jobs)))
            if len(jobs) >= free:
                break
        return jobs

    def _pop_round_robin(self, free: int) -> list[dict[str, Any]]:
        """One job from each queue in turn, starting after the queue served last."""
        jobs: list[dict[str, Any]] = []
        idle = 0
        while len(jobs) < free and idle < len(self.queues):
            queue = self.queues[self._rr % len(self.queues)]
            self._rr += 1
            got = json.loads(self.client.engine.call("pop", queue, self.name, 1))
            idle = 0 if got else idle + 1
            jobs += got
        return jobs

    # -- starting and finishing jobs ---------------------------------------------------------

    def _start(self, raw: dict[str, Any]) -> None:
        job = Job(self.client, {**raw, "data": "{}"})
        try:
            data = json.loads(raw.get("data") or "{}")
            user_data, options = split(data)
        except (ValueError, BrokenPayload) as error:
            self._report_broken(job, error)
            return
        job.data = data
        lock_seconds = max(1.0, job.expires - _popped_at(raw))
        now = time.monotonic()
        ctx = JobContext(
            job=job,
            data=user_data,
            options=options,
            sandbox=self.sandbox_root / f"{_safe_name(job.jid)}-{job.retries - job.remaining}",
        )
        active = Active(
            ctx=ctx,
            lock_seconds=lock_seconds,
            next_heartbeat=now + lock_seconds / 3,
            deadline=None if options.timeout is None else now + options.timeout,
        )
        with self._lock:
            self._active[job.jid] = active
        self._monitor_wake.set()
        log.info(
            "job %s started: %s in %s (attempt %d)", job.jid, job.klass, job.queue, ctx.attempt
        )
        self._executor.submit(self._execute, active)

    def _report_broken(self, job: Job, error: Exception) -> None:
        log.error("job %s has a broken payload: %s", job.jid, error)
        with contextlib.suppress(EngineError):
            self.client.engine.call(
                "fail.held",
                job.jid,
                self.name,
                "broken-payload",
                f"{type(error).__name__}: {error}",
            )

    def _execute(self, active: Active) -> None:
        ctx = active.ctx
        ctx.thread_id = threading.get_ident()
        outcome: runner.Outcome
        try:
            ctx.sandbox.mkdir(parents=True, exist_ok=True)
            with self._in_sandbox(ctx.sandbox):
                if self.prepare is not None:
                    self.prepare(ctx)
                with active.guard:
                    active.interruptible = not ctx.stopped.is_set()
                outcome = runner.run(ctx) if active.interruptible else _stopped_outcome(ctx)
                with active.guard:
                    active.interruptible = False
        except JobInterrupted as interrupt:
            # Raised after the job function returned but before we stopped accepting interrupts.
            outcome = _stopped_outcome(ctx, interrupt)
        except FailJob as fail:  # from prepare: the job cannot run as it is
            outcome = runner.failure(fail.group, fail.message)
        except Exception as error:
            outcome = runner.failure("prepare-error", f"{type(error).__name__}: {error}")
        finally:
            shutil.rmtree(ctx.sandbox, ignore_errors=True)
        self._settle(active, outcome)

    def _settle(self, active: Active, outcome: runner.Outcome) -> None:
        """Report a job's outcome once and free its slot."""
        with active.guard:
            if active.settled:
                log.warning("job %s: late outcome %s dropped", active.ctx.jid, outcome.kind)
                return
            active.settled = True
        try:
            self._apply(active, outcome)
        finally:
            with self._lock:
                # Only this run's entry: after a lost lock this worker may hold a newer run of it.
                if self._active.get(active.ctx.jid) is active:
                    del self._active[active.ctx.jid]
                self.processed += 1
            self._wake.set()

    @contextlib.contextmanager
    def _in_sandbox(self, sandbox: Path) -> Any:
        # The working directory is per process: only a single-threaded worker may move it.
        if self.threads != 1:
            yield
            return
        previous = os.getcwd()
        os.chdir(sandbox)
        try:
            yield
        finally:
            os.chdir(previous)

    def _apply(self, active: Active, outcome: runner.Outcome) -> None:
        ctx, job = active.ctx, active.ctx.job
        elapsed = (time.monotonic() - active.started) * 1000
        try:
            if outcome.kind == "complete":
                job.complete(result=outcome.result)
                log.info("job %s done in %.1f ms", job.jid, elapsed)
            elif outcome.kind == "retry":
                left = job.retry(outcome.delay, outcome.group, outcome.message)
                if left < 0:
                    log.warning(
                        "job %s failed (%s) after %.1f ms: no retries left",
                        job.jid,
                        outcome.group,
                        elapsed,
                    )
                else:
                    log.warning(
                        "job %s retried in %.1fs (%s, %d retries left)",
                        job.jid,
                        outcome.delay,
                        outcome.group,
                        left,
                    )
            elif outcome.kind == "fail":
                self.client.engine.call(
                    "fail.held", job.jid, self.name, outcome.group, outcome.message
                )
                log.warning("job %s failed (%s) after %.1f ms", job.jid, outcome.group, elapsed)
            elif outcome.kind == "release":
                self.client.engine.call("release", job.jid, self.name, outcome.delay)
                log.info("job %s released for %.1fs", job.jid, outcome.delay)
            elif outcome.kind == "bury":
                job.bury(outcome.message or None)
                log.warning("job %s buried: %s", job.jid, outcome.message or "(no reason)")
            else:
                log.warning(
                    "job %s stopped (%s) after %.1f ms; not reported",
                    job.jid,
                    ctx.stop_reason or outcome.message,
                    elapsed,
                )
        except EngineError as error:
            # The lock was lost meanwhile: the job belongs to someone else now.
            log.warning("job %s: lock lost, outcome %s dropped (%s)", job.jid, outcome.kind, error)

    # -- stopping jobs ---------------------------------------------------------------------------

    def _stop_job(self, active: Active, reason: str, exc: type[JobInterrupted]) -> None:
        ctx = active.ctx
        if ctx.stopped.is_set():
            return
        log.warning("job %s: stopping (%s)", ctx.jid, reason)
        active.stop_requested = time.monotonic()
        ctx.request_stop(reason)
        with active.guard:
            if active.interruptible and ctx.interrupt_thread and ctx.thread_id is not None:
                _raise_in_thread(ctx.thread_id, exc)

    def _drain(self) -> None:
        """Let running jobs finish for up to shutdown_grace, then stop and hand back the rest.

        A stopped job is handed back by its own thread once it has stopped (its outcome is
        `release`), or by the monitor when the thread is stuck past kill_after: never while it may
        still be running here, and the wait for a stuck thread is bounded.
        """
        deadline = time.monotonic() + self.shutdown_grace
        while self._active and time.monotonic() < deadline and self._signals < 2:
            self._wake.wait(0.05)
            self._wake.clear()
        with self._lock:
            remaining = list(self._active.values())
        for active in remaining:
            self._stop_job(active, "shutdown", ShutdownInterrupt)
        deadline = time.monotonic() + self.kill_after + 1
        while self._active and time.monotonic() < deadline and self._signals < 2:
            self._wake.wait(0.05)
            self._wake.clear()
        with self._lock:
            stuck = list(self._active.values())
        for active in stuck:  # the monitor did not get to them: give up on their threads here
            self._abandoned += 1
            self._settle(active, _stopped_outcome(active.ctx))

    # -- helper threads -------------------------------------------------------------------------

    def _listen(self) -> None:
        prefix = self.client.engine.key_prefix
        channels = [f"{prefix}ready:{queue}" for queue in self.queues]
        mine = f"{prefix}w:{self.name}"
        while not self._done.is_set():
            pubsub = self.client.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(mine, *channels)
                self._wake.set()  # anything put while we were not listening is waiting now
                while not self._done.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is None:
                        continue
                    if message["channel"] == mine:
                        self._on_worker_message(message["data"])
                    else:
                        self._wake.set()
            except (redis.ConnectionError, redis.TimeoutError):
                self._done.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _on_worker_message(self, data: str) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        active = self._active.get(str(event.get("jid")))
        if active is None or event.get("event") not in ("lock_lost", "canceled"):
            return
        if self._holds(active):
            # The message is about an earlier run: this worker has popped the job again since
            # (a pop that reclaims an expired lock tells its old worker after handing it out).
            log.info("job %s: stale %s ignored, the lock is held", active.ctx.jid, event["event"])
            return
        self._stop_job(active, str(event["event"]).replace("_", "-"), LockLostInterrupt)

    def _holds(self, active: Active) -> bool:
        """Whether this worker still holds the job's lock (the engine decides: a heartbeat)."""
        try:
            active.ctx.job.heartbeat()
        except (EngineError, redis.RedisError):
            return False
        return True

    def _monitor(self) -> None:
        while not self._done.is_set():
            now = time.monotonic()
            with self._lock:
                actives = list(self._active.values())
            self._heartbeat(
                [a for a in actives if a.next_heartbeat <= now and not a.ctx.stopped.is_set()]
            )
            for active in actives:
                if active.deadline is not None and active.deadline <= now:
                    self._stop_job(active, "timeout", TimeoutInterrupt)
                stuck = (
                    active.stop_requested is not None
                    and now - active.stop_requested > self.kill_after
                )
                if stuck:
                    self._abandon(active)
            waits = [a.next_heartbeat - now for a in actives] + [0.5]
            waits += [a.deadline - now for a in actives if a.deadline is not None]
            self._monitor_wake.wait(max(0.01, min(waits)))
            self._monitor_wake.clear()

    def _abandon(self, active: Active) -> None:
        """A stopped job's thread did not return within kill_after: report it without the thread.

        In a pool child the process then hands back its other jobs and exits (the pool starts a
        fresh one, and the stuck code dies with the process). In-process, the thread is left
        behind: Python cannot kill a thread.
        """
        log.error("job %s did not stop within %.0fs", active.ctx.jid, self.kill_after)
        self._abandoned += 1
        self._settle(active, _stopped_outcome(active.ctx))
        if not self.exit_on_stuck:
            return
        with self._lock:
            others = list(self._active.values())
        for other in others:
            with contextlib.suppress(EngineError, redis.RedisError):
                self.client.engine.call("release", other.ctx.jid, self.name, 0)
        log.error("worker %s: exiting so the pool can start a clean process", self.name)
        os._exit(EXIT_STUCK)

    def _heartbeat(self, due: list[Active]) -> None:
        if not due:
            return
        pipe = self.client.engine.pipeline()
        for active in due:
            pipe.call("heartbeat", active.ctx.jid, self.name)
        try:
            results = pipe.execute()
        except redis.RedisError as error:
            log.warning("heartbeat failed (%s); will try again", error)
            return
        now = time.monotonic()
        for active, result in zip(due, results, strict=True):
            if isinstance(result, EngineError):
                self._stop_job(active, "lock-lost", LockLostInterrupt)
            elif isinstance(result, Exception):
                log.warning("heartbeat of %s failed: %s", active.ctx.jid, result)
            else:
                active.next_heartbeat = now + active.lock_seconds / 3

    # -- process plumbing ----------------------------------------------------------------------

    def _register(self) -> None:
        info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": self.queues,
            "threads": self.threads,
            "strategy": self.strategy,
            "started": time.time(),
        }
        self.client.engine.call("worker.register", self.name, dumps(info))

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info(
                "worker %s: %s, finishing running jobs (again to stop at once)",
                self.name,
                signal.Signals(signum).name,
            )
            self.stop()
        else:
            log.warning("worker %s: second signal, stopping at once", self.name)
            os._exit(1)


def _popped_at(raw: dict[str, Any]) -> float:
    """The server time of the latest pop, from the job's history."""
    history = raw.get("history") or []
    for entry in reversed(history if isinstance(history, list) else []):
        if entry.get("what") == "popped":
            return float(entry.get("when", 0))
    return float(raw.get("expires", 0)) - 60


def _stopped_outcome(ctx: JobContext, interrupt: JobInterrupted | None = None) -> runner.Outcome:
    reason = ctx.stop_reason or (interrupt.reason if interrupt else "interrupted")
    return runner.stopped(ctx, reason)
