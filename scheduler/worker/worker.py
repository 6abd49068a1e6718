"""The worker: takes jobs from its queues, runs them on slot threads, keeps their locks, reports.

One :class:`Worker` is one process's worth of work (the pool in :mod:`scheduler.worker.pool` runs
several in child processes). Inside it:

* ``threads`` slot threads each run one job at a time. A slot that needs a job takes one from
  the worker's buffer; when the buffer is empty it becomes the one slot fetching
  (:mod:`scheduler.worker.fetching`): it pops for every free slot plus a prefetch sized to how
  fast jobs finish, or, when the queues are empty, waits idle until the engine hands it the
  next job put. The slot that fetched runs the first job itself, so a job starts with no hand
  over between threads. While prefetched jobs run, a refiller thread pops the next ones, so
  the engine's work overlaps with the jobs'. A buffered job held so long that its lock may have
  run out (the process was paused) is checked with the engine before it starts;
* outcomes are reported in batches (:mod:`scheduler.worker.batching`): completes queue up and
  go as one ``complete.many`` call ahead of the next pop, in the same round trip, when a batch
  is full, or after a couple of milliseconds; the other outcomes are reported at once;
* a listener thread turns engine messages (``lock_lost``, ``canceled`` on ``P w:<worker>``) into
  stops;
* a monitor thread renews the worker's liveness lease every ``lease_seconds / 5`` (so that if
  the process dies, its jobs go back to other workers within seconds: lua/include/lease.lua),
  heartbeats every job the worker holds (buffered, running or being reported) at a third of its
  lock time, stops jobs that overrun their timeout, abandons jobs stuck past ``kill_after`` and
  sends batches that waited long enough. A buffered job is also checked before it starts once
  the lease may have lapsed (the process was paused): its jobs may be another worker's by then.

Stopping a job: its :class:`JobContext` is told (``stopped`` event, ``on_stop`` callbacks: the
shell task kills its process group), then an exception is raised inside its thread. A thread stuck
in C code past ``kill_after`` is abandoned: a fresh slot thread takes its place (and a pool child
exits, so the pool starts a clean process).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from scheduler.engine import limits
from scheduler.engine.backoff import Backoff, transient
from scheduler.engine.client import Client
from scheduler.engine.errors import ClusterError, EngineError, NotReplicated
from scheduler.engine.faults import ServerOutOfMemory
from scheduler.engine.job import Job, dumps
from scheduler.engine.safety import check_eviction_policy
from scheduler.worker import capture, runner
from scheduler.worker.batching import MAX_BATCH, Batcher
from scheduler.worker.context import JobContext
from scheduler.worker.envelope import BrokenPayload, split
from scheduler.worker.fetching import Fetcher, Raw, Strategy
from scheduler.worker.outcomes import (
    FailJob,
    HandedOver,
    JobInterrupted,
    LockLostInterrupt,
    ShutdownInterrupt,
    SkipJob,
    TimeoutInterrupt,
)
from scheduler.worker.sandboxes import Sandbox, SlotFolder, sweep

log = logging.getLogger("flows.worker")

Prepare = Callable[[JobContext], None]

# Exit code of a pool child that had to abandon a job stuck in C code (the pool restarts it).
EXIT_STUCK = 75
# Prefetch: jobs popped beyond the free slots, enough for about this many seconds of work at the
# recent pace, and never more than `prefetch`. Slow jobs get none, so a worker never sits on
# jobs another worker could start now.
PREFETCH_WINDOW = 0.02
# Weight of the latest run in the running mean of run times.
PACE_WEIGHT = 0.1
# The registration is renewed at this fraction of the engine's `worker-silent-after`, so that
# `flows workers` marks silent only a worker that stopped talking (a job with a long lock is
# heartbeated rarely; an idle worker talks at every poll anyway).
PRESENCE_FRACTION = 1 / 3
# The liveness lease: how long it lasts past its last renewal (seconds), and how many renewals
# fit in that time. A dead worker's jobs wait about LEASE_SECONDS + a survivor's renewal period.
LEASE_SECONDS = 5.0
LEASE_RENEWALS = 5


@dataclass(eq=False)
class Active:
    """A job this worker holds: buffered (popped, not started), running, or being reported."""

    ctx: JobContext
    lock_seconds: float
    lock_deadline: float  # monotonic: when the lock runs out unless heartbeated
    next_heartbeat: float
    started: float | None = None  # monotonic; None while buffered
    deadline: float | None = None
    stop_requested: float | None = None
    interruptible: bool = False
    # Set once, under `guard`, by whoever reports the outcome: the job's thread, or the monitor
    # when the thread is stuck past kill_after (the thread's late outcome is then dropped).
    settled: bool = False
    # Whether its slot was given back (by the slot, or by the monitor abandoning a stuck thread).
    slot_freed: bool = False
    guard: threading.Lock = field(default_factory=threading.Lock)


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


class Worker:
    """Runs jobs from ``queues`` until stopped (or, with ``burst``, until they are empty).

    ``threads`` jobs run at once. ``prefetch``: at most this many jobs popped ahead of the free
    slots while jobs finish quickly (0: never). ``prepare`` runs before each job (flows resolves
    upstream outputs there). ``shutdown_grace``: seconds running jobs get to finish on the first
    SIGTERM or SIGINT before they are handed back; a second signal stops at once.
    ``capture_logs``: store what each job writes as its step log (:mod:`scheduler.worker.capture`).
    ``lease_seconds``: the liveness lease's length (0: none; the jobs of a worker that died then
    come back only when their own locks expire).
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
        prefetch: int = 64,
        capture_logs: bool = True,
        wait_for_server: bool = False,
        lease_seconds: float = LEASE_SECONDS,
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
        self.prefetch = max(0, prefetch)
        self.wait_for_server = wait_for_server
        self.lease_seconds = max(0.0, lease_seconds)
        self._own_sandbox: Sandbox | None = None
        if sandbox_root is None:
            sweep()  # the sandboxes of workers that died without removing theirs
            self._own_sandbox = Sandbox()
            sandbox_root = self._own_sandbox.path
        self.sandbox_root = sandbox_root
        self._fetcher = Fetcher(client, self.queues, strategy, poll_interval)
        # Step logs (scheduler.worker.capture): stored ahead of each batch of completes.
        self._logs = capture.LogShipper(client.engine) if capture_logs else None
        self._batcher = Batcher(client.engine, self.name, self._logs)
        # Every job held, by jid; the buffer (popped, not started) and the slots' state, under
        # `_lock`. `_cond` wakes slots waiting for a job (buffered, fetch over, stopping);
        # `_ended` wakes those waiting for held jobs to end (burst, shutdown): kept apart so
        # that a job ending does not wake a slot waiting for the next fetch.
        self._active: dict[str, Active] = {}
        self._buffer: collections.deque[Active] = collections.deque()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ended = threading.Condition(self._lock)
        self._fetching = False
        self._running = 0
        self._slots: list[threading.Thread] = []
        self._slot_count = 0
        self._retired: set[int] = set()  # idents of abandoned slot threads
        self._pace: float | None = None  # running mean of run times, seconds
        self._wake = threading.Event()  # for run(): stop requested, or a burst is over
        self._halt = threading.Event()  # set once by stop(): ends pauses between retries
        # Faults of the server (away, full, read-only) are waited out, logged once per change.
        self._fetch_backoff = Backoff(log, f"worker {self.name}: fetching", client=client.redis)
        self._beat_backoff = Backoff(log, f"worker {self.name}: heartbeats", client=client.redis)
        self._refill = threading.Event()  # for the refiller: the buffer runs low
        self._monitor_wake = threading.Event()
        self._done = threading.Event()
        self._stopping = False
        self._signals = 0
        self.processed = 0
        self._abandoned = 0
        self._info: dict[str, Any] = {}
        self._presence_every = 20.0
        self._next_presence = 0.0
        self._lease_guard = threading.Lock()
        self._leased = False  # a renewal has succeeded since the worker started
        self._lease_until = 0.0  # monotonic: the lease surely runs until then
        self._next_lease = float("inf")

    # -- public ------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; returns the exit code (0 after a graceful stop or a burst).

        Raises :class:`~scheduler.engine.safety.UnsafeServer` before taking any job when the
        server's
        eviction policy could drop jobs.
        """
        self._install_signals()
        if not self._start_up():
            return 0
        if self._logs is not None:
            capture.install()
            self._logs.start()
        helpers = [
            threading.Thread(target=self._listen, name="flows-listener", daemon=True),
            threading.Thread(target=self._monitor, name="flows-monitor", daemon=True),
        ]
        if self.prefetch:
            helpers.append(
                threading.Thread(target=self._refiller, name="flows-refiller", daemon=True)
            )
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
            for _ in range(self.threads):
                self._add_slot()
            while not self._stopping:
                self._wake.wait(1.0)
            self._wake_fetcher()
            self._drain()
        finally:
            self._done.set()
            self._monitor_wake.set()
            self._refill.set()
            self._batcher.flush()
            if self._logs is not None:
                self._logs.stop()
            for slot in self._slots:
                slot.join(timeout=0 if self._abandoned else 2)
            for helper in helpers:
                helper.join(timeout=2)
            with contextlib.suppress(redis.RedisError, ClusterError, EngineError):
                # Jobs handed over since the last wait go back (worker.deregister does too).
                self.client.engine.call("worker.deregister", self.name)
            if self._own_sandbox is not None:
                self._own_sandbox.remove()
            log.info("worker %s stopped after %d jobs", self.name, self.processed)
        return 0

    def stop(self) -> None:
        """Stop taking jobs; running jobs get ``shutdown_grace`` seconds, then are handed back."""
        self._stopping = True
        self._halt.set()
        self._wake.set()

    def _start_up(self) -> bool:
        """Check the server and register, waiting out a full server (a worker must not
        crash-loop on one) and, with ``wait_for_server``, one that is away (a pool's worker
        restarted while it is); False if stopped meanwhile. Other faults raise."""
        backoff = Backoff(log, f"worker {self.name}: starting", client=self.client.redis)
        while not self._stopping:
            try:
                check_eviction_policy(self.client.redis, who=f"worker {self.name}")
                self._register()
            except Exception as error:
                # A master without the replicas `?wait=N` asks for refuses writes until they
                # are back: waited out as a full server is.
                waits = isinstance(error, ServerOutOfMemory | NotReplicated) or (
                    self.wait_for_server and transient(error)
                )
                if not waits:
                    raise
                self._halt.wait(backoff.failed(error))
                continue
            backoff.succeeded()
            return True
        return False

    # -- slots: take a job, run it, report it ----------------------------------------------------

    def _add_slot(self) -> None:
        self._slot_count += 1
        sandbox = self.sandbox_root / f"slot-{self._slot_count}"
        slot = threading.Thread(
            target=self._slot, args=(sandbox,), name=f"flows-slot-{self._slot_count}", daemon=True
        )
        self._slots.append(slot)
        slot.start()

    def _slot(self, sandbox: Path) -> None:
        folder = SlotFolder(sandbox)
        home = os.getcwd()
        try:
            while True:
                active = self._next_job()
                if active is None:
                    return
                self._execute(active, folder)
                if threading.get_ident() in self._retired:
                    return  # abandoned while stuck: a fresh slot has taken this one's place
        finally:
            if self.threads == 1:
                os.chdir(home)

    def _next_job(self) -> Active | None:
        """The next buffered job for this slot, fetching when the buffer is empty; None: stop."""
        while True:
            active: Active | None = None
            with self._cond:
                while True:
                    if self._stopping:
                        return None
                    if self._buffer:
                        active = self._buffer.popleft()
                        # Refill while there is something left to run (an empty buffer is
                        # the slots' to fill: they may have to wait idle).
                        if (
                            self._buffer
                            and not self._fetching
                            and len(self._buffer) <= self._prefetch() // 2
                        ):
                            self._refill.set()
                        if not _lock_may_be_gone(active) and not self._lease_may_be_gone():
                            self._running += 1
                            return active
                        break  # checked below, outside the lock
                    if not self._fetching:
                        self._fetching = True
                        break
                    self._cond.wait()
            if active is not None:
                self._check_lock(active)
                continue
            jobs: list[Active] = []
            try:
                jobs = self._fetch()
                self._fetch_backoff.succeeded()
            except Exception as error:  # the other slots wait for this one's next attempt
                self._halt.wait(self._fetch_backoff.failed(error))
            finally:
                self._end_fetch(jobs)

    def _check_lock(self, active: Active) -> None:
        """A job held so long (the process was paused?) that another worker may have it by now:
        starting it then would run it twice. The lease is renewed first (a lease reaped meanwhile
        lets go of every job held). The engine decides: a heartbeat renews a lock still held,
        and the job goes back to the front of the buffer; otherwise it is let go."""
        if self._lease_may_be_gone():
            self._renew_lease()
        if self._holds(active):
            active.lock_deadline = time.monotonic() + active.lock_seconds
            with self._cond:
                self._buffer.appendleft(active)
            return
        log.warning("job %s: its lock ran out before it started; not run", active.ctx.jid)
        active.settled = True
        self._let_go(active, ran=False)

    def _end_fetch(self, jobs: list[Active]) -> None:
        """Buffer what a fetch got (or hand it back when stopping) and let the slots go on."""
        with self._cond:
            self._fetching = False
            late: list[Active] = jobs if self._stopping else []
            if not late:
                self._buffer.extend(jobs)
            self._cond.notify_all()
        self._give_back(late)

    def _give_back(self, unstarted: list[Active]) -> None:
        """Hand back jobs this worker holds but will not start (it is stopping)."""
        for active in unstarted:
            active.settled = True
            with contextlib.suppress(EngineError, ClusterError, redis.RedisError):
                self.client.engine.call("release", active.ctx.jid, self.name, 0)
            self._let_go(active, ran=False)

    def _refiller(self) -> None:
        """Pop ahead in the background while the slots run what is buffered, so the engine's work
        for the next jobs overlaps with running these (started only with a prefetch)."""
        while not self._stopping:
            self._refill.wait(0.5)
            self._refill.clear()
            with self._cond:
                if self._stopping or self._fetching or not self._buffer:
                    continue  # an empty buffer is the slots' to fill (they may wait idle)
                self._fetching = True
            jobs: list[Active] = []
            try:
                with self._lock:
                    wanted = self.threads - self._running + self._prefetch() - len(self._buffer)
                if wanted > 0:
                    asked = time.monotonic()
                    raws = self._fetcher.pop(wanted, self._batcher.flush_and_call)
                    jobs = self._hold_all(raws, asked)
                else:
                    self._batcher.flush()
            except Exception:
                log.warning("worker %s could not pop ahead", self.name, exc_info=True)
            finally:
                self._end_fetch(jobs)

    def _fetch(self) -> list[Active]:
        """Jobs for the free slots (and the prefetch); waits idle when there are none."""
        with self._lock:
            wanted = self.threads - self._running + self._prefetch() - len(self._buffer)
        asked = time.monotonic()
        # Outcomes first, in the same round trip: they may make jobs ready, and free locks.
        raws = self._fetcher.pop(wanted, self._batcher.flush_and_call)
        if not raws and self.burst:
            self._burst_wait()
            return []
        if not raws and not self._stopping:
            # A job handed over was popped at some point while this thread waited: its lock
            # runs from no earlier than the start of the wait.
            asked = time.monotonic()
            raws = self._fetcher.wait(wanted)
        return self._hold_all(raws, asked)

    def _hold_all(self, raws: list[Raw], asked: float) -> list[Active]:
        return [active for raw in raws if (active := self._hold(raw, asked)) is not None]

    def _prefetch(self) -> int:
        if not self.prefetch or self._pace is None:
            return 0
        return min(self.prefetch, int(PREFETCH_WINDOW / max(self._pace, 1e-6)))

    def _burst_wait(self) -> None:
        """Nothing to pop in a burst: done when nothing runs either, else wait for a job to end."""
        with self._cond:
            if self._active or len(self._batcher):
                self._ended.wait(self.poll_interval)
                return
            self._stopping = True
            self._cond.notify_all()
        self._wake.set()

    def _hold(self, raw: Raw, asked: float) -> Active | None:
        """A popped job, now held: buffered until a slot runs it. None for a broken payload.

        ``asked``: when (monotonic) the call that popped it was made: its lock runs from then.
        """
        # The data is decoded here, once (a broken payload is reported, not raised); `raw` is
        # this worker's own copy of the reply, so it takes the decoded data in place.
        try:
            data = json.loads(raw.get("data") or "{}")
            user_data, options = split(data)
        except (ValueError, BrokenPayload) as error:
            raw["data"] = {}
            self._report_broken(Job(self.client, raw), error)
            return None
        raw["data"] = data
        job = Job(self.client, raw)
        job.data = data
        lock_seconds = max(1.0, job.expires - _popped_at(raw))
        # The sandbox is the slot's, set when a slot starts the job.
        ctx = JobContext(job=job, data=user_data, options=options, sandbox=self.sandbox_root)
        active = Active(
            ctx=ctx,
            lock_seconds=lock_seconds,
            lock_deadline=asked + lock_seconds,
            next_heartbeat=asked + lock_seconds / 3,
        )
        with self._lock:
            self._active[job.jid] = active
        return active

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

    def _execute(self, active: Active, folder: SlotFolder) -> None:
        ctx = active.ctx
        ctx.thread_id = threading.get_ident()
        ctx.sandbox = sandbox = folder.path
        started = time.monotonic()
        with active.guard:
            active.started = started
            if ctx.options.timeout is not None:
                active.deadline = started + ctx.options.timeout
        if ctx.options.timeout is not None:
            self._monitor_wake.set()
        if log.isEnabledFor(logging.DEBUG):  # spares the arguments (on every job's path)
            log.debug(
                "job %s started: %s in %s (attempt %d)", ctx.jid, ctx.klass, ctx.queue, ctx.attempt
            )
        outcome: runner.Outcome
        try:
            self._enter_sandbox(sandbox)
            if self.prepare is not None:
                self.prepare(ctx)
            with active.guard:
                active.interruptible = not ctx.stopping
            with capture.capturing(ctx, self._logs):
                outcome = runner.run(ctx) if active.interruptible else _stopped_outcome(ctx)
            with active.guard:
                active.interruptible = False
        except JobInterrupted as interrupt:
            # Raised after the job function returned but before we stopped accepting interrupts.
            outcome = _stopped_outcome(ctx, interrupt)
        except FailJob as fail:  # from prepare: the job cannot run as it is
            outcome = runner.failure(fail.group, fail.message)
        except SkipJob as skip:  # from prepare: the job need not run
            outcome = runner.skipped(skip.message)
        except HandedOver as handed:  # from prepare: its engine call took the job (a cache hit)
            outcome = runner.Outcome("handed", message=handed.message)
        except Exception as error:
            outcome = runner.failure("prepare-error", f"{type(error).__name__}: {error}")
        finally:
            folder.empty()
        elapsed = time.monotonic() - started
        self._pace = (
            elapsed if self._pace is None else self._pace + PACE_WEIGHT * (elapsed - self._pace)
        )
        self._free_slot(active)
        self._settle(active, outcome)

    def _enter_sandbox(self, sandbox: Path) -> None:
        # The working directory is per process: only a single-threaded worker may move it. It
        # stays there between runs (the slot moves back when it ends), saving two system calls
        # per job; a job that moved elsewhere is moved back by the next run's chdir.
        if self.threads == 1:
            os.chdir(sandbox)

    def _free_slot(self, active: Active) -> None:
        with self._cond:
            if not active.slot_freed:
                active.slot_freed = True
                self._running -= 1
                self._ended.notify_all()

    # -- reporting outcomes ----------------------------------------------------------------------

    def _settle(self, active: Active, outcome: runner.Outcome) -> None:
        """Report a job's outcome once; the job is let go of once the engine has it."""
        with active.guard:
            if active.settled:
                log.warning("job %s: late outcome %s dropped", active.ctx.jid, outcome.kind)
                return
            active.settled = True
        outcome = runner.masked_outcome(outcome)  # no secret this process resolved leaves it
        if outcome.kind == "complete":
            self._complete(active, outcome)
            return
        if self._logs is not None and self._logs.pending:
            self._logs.flush()  # the job's lines are stored before its outcome is
        try:
            self._apply(active, outcome)
        finally:
            self._let_go(active)

    def _complete(self, active: Active, outcome: runner.Outcome) -> None:
        """Queue the complete for the next batch (see the module's docstring). The job keeps
        the data it has: the engine is not sent it back."""
        job = active.ctx.job
        result = ""  # none
        if outcome.result is not None:
            result = limits.encode_payload("complete", "result", outcome.result)
        elapsed = (time.monotonic() - (active.started or time.monotonic())) * 1000

        def on_reply(reply: Any) -> None:
            try:
                if isinstance(reply, EngineError):
                    # The lock was lost meanwhile: the job belongs to someone else now.
                    log.warning("job %s: lock lost, outcome complete dropped (%s)", job.jid, reply)
                elif isinstance(reply, Exception):
                    log.warning("job %s: complete not reported (%s)", job.jid, reply)
                else:
                    # At INFO the batch is logged in one line (batching.py): a line per job
                    # would cost more than the rest of a short job's handling.
                    job.state, job.worker = str(reply), ""
                    log.debug("job %s done in %.1f ms", job.jid, elapsed)
            finally:
                self._let_go(active)

        pending = self._batcher.add(job.jid, job.queue, result, on_reply)
        if pending >= MAX_BATCH:
            self._batcher.flush()
        elif pending == 1:
            self._monitor_wake.set()  # it sends the batch if nobody else has within MAX_DELAY

    def _let_go(self, active: Active, *, ran: bool = True) -> None:
        with self._cond:
            # Only this run's entry: after a lost lock this worker may hold a newer run of it.
            if self._active.get(active.ctx.jid) is active:
                del self._active[active.ctx.jid]
            if ran:
                self.processed += 1
            self._ended.notify_all()

    def _apply(self, active: Active, outcome: runner.Outcome) -> None:
        ctx, job = active.ctx, active.ctx.job
        elapsed = (time.monotonic() - (active.started or time.monotonic())) * 1000
        try:
            if outcome.kind == "retry":
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
            elif outcome.kind == "skip":
                self.client.engine.call(
                    "complete", job.jid, self.name, job.queue, "", "skipped", outcome.message
                )
                log.info("job %s skipped: %s", job.jid, outcome.message)
            elif outcome.kind == "release":
                self.client.engine.call("release", job.jid, self.name, outcome.delay)
                log.info("job %s released for %.1fs", job.jid, outcome.delay)
            elif outcome.kind == "bury":
                job.bury(outcome.message or None)
                log.warning("job %s buried: %s", job.jid, outcome.message or "(no reason)")
            elif outcome.kind == "handed":
                log.info("job %s handed over: %s", job.jid, outcome.message)
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
        except (redis.RedisError, ClusterError) as error:
            log.warning("job %s: outcome %s not reported (%s)", job.jid, outcome.kind, error)

    # -- stopping jobs ---------------------------------------------------------------------------

    def _stop_job(self, active: Active, reason: str, exc: type[JobInterrupted]) -> None:
        ctx = active.ctx
        if ctx.stopped.is_set():
            return
        with self._cond:
            buffered = active in self._buffer
            if buffered:  # never started: nothing runs, nothing to report
                self._buffer.remove(active)
                active.settled = True
        if buffered:
            log.warning("job %s: dropped before it started (%s)", ctx.jid, reason)
            ctx.request_stop(reason)
            self._let_go(active, ran=False)
            return
        log.warning("job %s: stopping (%s)", ctx.jid, reason)
        active.stop_requested = time.monotonic()
        ctx.request_stop(reason)
        with active.guard:
            if active.interruptible and ctx.interrupt_thread and ctx.thread_id is not None:
                _raise_in_thread(ctx.thread_id, exc)

    def _wake_fetcher(self) -> None:
        """Stopping: slots waiting for a job return, and so does a fetch blocked idle."""
        with self._cond:
            self._cond.notify_all()
            self._ended.notify_all()  # a burst's fetch waiting for running jobs to end
            idle = self._fetching
        if idle:
            with contextlib.suppress(redis.RedisError, ClusterError):
                self._fetcher.wake()

    def _drain(self) -> None:
        """Hand back jobs not started; let running jobs finish for up to shutdown_grace, then
        stop and hand back the rest.

        A stopped job is handed back by its own thread once it has stopped (its outcome is
        `release`), or by the monitor when the thread is stuck past kill_after: never while it may
        still be running here, and the wait for a stuck thread is bounded.
        """
        with self._cond:
            unstarted = list(self._buffer)
            self._buffer.clear()
        self._give_back(unstarted)
        deadline = time.monotonic() + self.shutdown_grace
        self._wait_for_jobs(deadline)
        with self._lock:
            remaining = list(self._active.values())
        for active in remaining:
            self._stop_job(active, "shutdown", ShutdownInterrupt)
        self._wait_for_jobs(time.monotonic() + self.kill_after + 1)
        with self._lock:
            stuck = list(self._active.values())
        for active in stuck:  # the monitor did not get to them: give up on their threads here
            self._abandoned += 1
            self._settle(active, _stopped_outcome(active.ctx))

    def _wait_for_jobs(self, deadline: float) -> None:
        while self._active and time.monotonic() < deadline and self._signals < 2:
            self._batcher.flush()
            with self._lock:
                if self._active:
                    self._ended.wait(0.05)

    # -- helper threads -------------------------------------------------------------------------

    def _listen(self) -> None:
        mine = f"{self.client.engine.key_prefix}w:{self.name}"
        while not self._done.is_set():
            pubsub = self.client.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(mine)
                while not self._done.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None and message["channel"] == mine:
                        self._on_worker_message(message["data"])
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
        except (EngineError, ClusterError, redis.RedisError):
            return False
        return True

    def _monitor(self) -> None:
        while not self._done.is_set():
            now = time.monotonic()
            if now >= self._next_presence:
                self._renew_presence(now)
            if now >= self._next_lease:
                self._renew_lease()
            with self._lock:
                actives = list(self._active.values())
            self._heartbeat([a for a in actives if a.next_heartbeat <= now and not a.ctx.stopping])
            for active in actives:
                if active.deadline is not None and active.deadline <= now:
                    self._stop_job(active, "timeout", TimeoutInterrupt)
                stuck = (
                    active.stop_requested is not None
                    and not active.settled
                    and now - active.stop_requested > self.kill_after
                )
                if stuck:
                    self._abandon(active)
            report = self._batcher.due_in()
            if report is not None and report <= 0:
                self._batcher.flush()
                report = None
            waits = [a.next_heartbeat - now for a in actives] + [0.5, self._next_presence - now]
            waits.append(self._next_lease - now)
            waits += [a.deadline - now for a in actives if a.deadline is not None]
            if report is not None:
                waits.append(report)
            self._monitor_wake.wait(max(0.001, min(waits)))
            self._monitor_wake.clear()

    def _abandon(self, active: Active) -> None:
        """A stopped job's thread did not return within kill_after: report it without the thread.

        In a pool child the process then hands back its other jobs and exits (the pool starts a
        fresh one, and the stuck code dies with the process). In-process, the thread is left
        behind (Python cannot kill a thread) and a fresh slot thread takes its place.
        """
        log.error("job %s did not stop within %.0fs", active.ctx.jid, self.kill_after)
        self._abandoned += 1
        if active.ctx.thread_id is not None:
            self._retired.add(active.ctx.thread_id)
        self._free_slot(active)
        self._settle(active, _stopped_outcome(active.ctx))
        if not self.exit_on_stuck:
            if not self._stopping:
                self._add_slot()
            return
        with self._lock:
            others = list(self._active.values())
        for other in others:
            with contextlib.suppress(EngineError, ClusterError, redis.RedisError):
                self.client.engine.call("release", other.ctx.jid, self.name, 0)
        log.error("worker %s: exiting so the pool can start a clean process", self.name)
        if self._own_sandbox is not None:
            self._own_sandbox.remove()  # the stuck thread's files go too: it dies with us
        os._exit(EXIT_STUCK)

    def _heartbeat(self, due: list[Active]) -> None:
        if not due:
            return
        pipe = self.client.engine.pipeline()
        for active in due:
            pipe.call("heartbeat", active.ctx.jid, self.name)
        now = time.monotonic()  # the renewed locks run from (no earlier than) here
        try:
            results = pipe.execute()
        except (redis.RedisError, ClusterError) as error:
            self._beat_backoff.failed(error)  # retried at the next tick; logged once per fault
            return
        self._beat_backoff.succeeded()
        for active, result in zip(due, results, strict=True):
            if isinstance(result, EngineError):
                self._stop_job(active, "lock-lost", LockLostInterrupt)
            elif isinstance(result, Exception):
                log.warning("heartbeat of %s failed: %s", active.ctx.jid, result)
            else:
                active.lock_deadline = now + active.lock_seconds
                active.next_heartbeat = now + active.lock_seconds / 3

    # -- process plumbing ----------------------------------------------------------------------

    def _register(self) -> None:
        self._info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": self.queues,
            "threads": self.threads,
            "strategy": self.strategy,
            "started": time.time(),
        }
        self.client.engine.call("worker.register", self.name, dumps(self._info))
        silent_after = self.client.engine.call("config.get", "worker-silent-after")
        with contextlib.suppress(TypeError, ValueError):
            self._presence_every = max(0.1, float(silent_after) * PRESENCE_FRACTION)
        self._next_presence = time.monotonic() + self._presence_every
        if self.lease_seconds:
            self._renew_lease()

    def _renew_lease(self) -> None:
        """Renew the liveness lease (the monitor, every ``lease_seconds / LEASE_RENEWALS``).

        Each renewal names the jobs held: one locked to this worker that it does not hold is
        given back by the engine. A lease reaped since the last renewal (the process was paused
        longer than the lease, or could not reach Redis) means other workers have taken its jobs
        back: every job held is checked with the engine at once, and dropped or stopped when it
        is no longer ours.
        """
        with self._lease_guard:
            sent = time.monotonic()
            self._next_lease = sent + self.lease_seconds / LEASE_RENEWALS
            # The jobs held, so the engine gives back at once any job locked to this worker
            # that it does not hold (a pop's or a complete's reply lost: lua/include/lease.lua).
            with self._lock:
                held = dumps(list(self._active))
            try:
                reply = json.loads(
                    self.client.engine.call("worker.lease", self.name, self.lease_seconds, held)
                )
            except (redis.RedisError, EngineError, ClusterError, ValueError) as error:
                # ClusterError: a failover settling, or too few replicas (NotReplicated): the
                # renewal is tried again a second later.
                log.warning("worker %s: lease not renewed (%s)", self.name, error)
                return
            lost = self._leased and not reply.get("held")
            self._leased = True
            self._lease_until = sent + self.lease_seconds
        if reply.get("returned"):
            log.warning(
                "worker %s: %d job(s) locked to it that it did not hold were given back (a"
                " reply lost on the way)",
                self.name,
                reply["returned"],
            )
        if lost:
            log.warning("worker %s: its lease lapsed and its jobs were taken back", self.name)
            with self._lock:
                for active in self._active.values():
                    active.lock_deadline = active.next_heartbeat = 0.0
            self._monitor_wake.set()

    def _lease_may_be_gone(self) -> bool:
        """Whether the lease may have lapsed: the jobs held may be another worker's by now."""
        if not self._leased:
            return False
        margin = min(1.0, self.lease_seconds / 10)
        return time.monotonic() >= self._lease_until - margin

    def _renew_presence(self, now: float) -> None:
        """Say this worker is alive (the monitor, every ``_presence_every`` seconds)."""
        self._next_presence = now + self._presence_every
        try:
            self.client.engine.call("worker.register", self.name, dumps(self._info))
        except (redis.RedisError, EngineError, ClusterError) as error:
            log.warning("worker %s: registration not renewed (%s)", self.name, error)

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


def _lock_may_be_gone(active: Active) -> bool:
    """Whether the job's lock may have run out: it must not start then."""
    margin = min(1.0, active.lock_seconds / 10)
    return time.monotonic() >= active.lock_deadline - margin


def _popped_at(raw: dict[str, Any]) -> float:
    """The server time of the latest pop, from the job's history."""
    if raw.get("popped") is not None:
        return float(raw["popped"])
    history = raw.get("history") or []
    for entry in reversed(history if isinstance(history, list) else []):
        if entry.get("what") == "popped":
            return float(entry.get("when", 0))
    return float(raw.get("expires", 0)) - 60


def _stopped_outcome(ctx: JobContext, interrupt: JobInterrupted | None = None) -> runner.Outcome:
    reason = ctx.stop_reason or (interrupt.reason if interrupt else "interrupted")
    return runner.stopped(ctx, reason)
