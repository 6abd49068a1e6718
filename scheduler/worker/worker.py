"""The worker: takes jobs from its queues, runs them on slot threads, keeps their locks, reports.

One :class:`Worker` is one process's worth of work (the pool in :mod:`scheduler.worker.pool` runs
several in child processes), in parts, each with one job:

* :mod:`~scheduler.worker.slots` fills the slots: ``threads`` slot threads each run one job at a
  time, from a buffer filled by fetches, prefetches and a refiller thread;
* :mod:`~scheduler.worker.runner` runs a job and decides its outcome, once;
* :mod:`~scheduler.worker.reporting` reports outcomes (completes in batches, the others at once);
* :mod:`~scheduler.worker.leases` keeps the locks and the lease (heartbeats, presence, timeouts,
  engine messages), on a monitor and a listener thread;
* :mod:`~scheduler.worker.held` is the registry of the jobs held that they share.

This module starts and stops them, runs each job in its slot and stops jobs. Stopping a job: its
:class:`JobContext` is told (``stopped`` event, ``on_stop`` callbacks: the shell task ends its
process group; a stop now also runs the ``on_kill`` ones first: the shell task SIGKILLs it), then
an exception is raised inside its thread. A thread stuck in C code past
``kill_after`` is abandoned: a fresh slot thread takes its place (and a pool child exits, so the
pool starts a clean process).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import redis

from scheduler import stop_signals
from scheduler.engine.client import Client
from scheduler.engine.errors import (
    ClusterError,
    EngineError,
    ForeignEngine,
    carrying_given,
    counted,
)
from scheduler.worker import capture, runner, sessions
from scheduler.worker.context import JobContext
from scheduler.worker.fetching import Strategy
from scheduler.worker.held import Active, Held, Running
from scheduler.worker.imports import load_object
from scheduler.worker.leases import Keeper
from scheduler.worker.outcomes import JobInterrupted, ShutdownInterrupt
from scheduler.worker.reporting import Reporter
from scheduler.worker.runner import Prepare
from scheduler.worker.sandboxes import Sandbox, SlotFolder, sweep
from scheduler.worker.settings import OVERRIDES, WorkerSettings, overridden
from scheduler.worker.slots import Slots

log = logging.getLogger("flows.worker")

__all__ = ["EXIT_STUCK", "Prepare", "Worker"]

# Exit code of a pool child that had to abandon a job stuck in C code (the pool restarts it).
EXIT_STUCK = 75


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


class Worker:
    """Runs jobs from its queues until stopped (or, with ``burst``, until none is ready or runs).

    ``settings`` (:class:`~scheduler.worker.settings.WorkerSettings`) say what it does; or give
    ``queues`` and any of its fields as keywords, which override the settings' values (None:
    the settings' value). ``prepare`` runs before each job (flows resolves upstream outputs
    there; default: the settings' ``prepare``, imported). ``sandbox_root``: where the slots'
    folders go (default: a folder of its own, removed when it stops).
    """

    def __init__(
        self,
        client: Client,
        queues: Sequence[str] = (),
        *,
        settings: WorkerSettings | None = None,
        prepare: Prepare | None = None,
        sandbox_root: Path | None = None,
        strategy: Strategy | None = None,
        threads: int | None = None,
        burst: bool | None = None,
        poll_interval: float | None = None,
        shutdown_grace: float | None = None,
        kill_after: float | None = None,
        exit_on_stuck: bool | None = None,
        prefetch: int | None = None,
        capture_logs: bool | None = None,
        wait_for_server: bool | None = None,
        lease_seconds: float | None = None,
    ) -> None:
        if not isinstance(client, Client):
            raise TypeError(
                f"Worker(): client must be a scheduler.Client, not {type(client).__name__}"
                " (a URL is WorkerPool's first argument)"
            )
        given = {name: value for name, value in locals().items() if name in OVERRIDES}
        settings = overridden(settings, queues, given)
        self.settings = settings
        self.client = client
        self.name = client.worker_name
        self.queues = list(settings.queues)
        self.prepare = prepare or (load_object(settings.prepare) if settings.prepare else None)
        self._own_sandbox: Sandbox | None = None
        if sandbox_root is None:
            sweep()  # the sandboxes of workers that died without removing theirs
            self._own_sandbox = Sandbox()
            sandbox_root = self._own_sandbox.path
        self.sandbox_root = sandbox_root
        self._wake = threading.Event()  # for run(): stop requested, or a burst is over
        self._stopping_now = False  # stop_now() was called: no grace for running jobs
        self._abandoned = 0
        self._slot_threads: list[threading.Thread] = []
        self._retired: set[int] = set()  # idents of abandoned slot threads
        # Where a single-threaded worker's slots go back to when they end (set by run()): not
        # the directory a slot started in, which may be a stuck slot's folder, removed with us.
        self._home = os.getcwd()
        # Step logs (scheduler.worker.capture): stored ahead of each batch of completes.
        self._logs = capture.LogShipper(client.engine) if settings.capture_logs else None
        self.held = Held()
        self.reporter = Reporter(client, self.held, self._logs, lambda: self.keeper.wake())
        self.keeper = Keeper(
            client, settings, self.held, self.reporter, self._stop_job, self._abandon
        )
        self.slots = Slots(
            client, settings, self.held, self.keeper, self.reporter, sandbox_root, self._wake
        )

    @property
    def processed(self) -> int:
        """How many jobs this worker ran."""
        return self.held.processed

    # -- public ------------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped; returns the exit code (0 after a graceful stop or a burst).

        Raises :class:`~scheduler.engine.safety.UnsafeServer` before taking any job when the
        server's eviction policy could drop jobs, and, after stopping, an error at fetching
        that waiting cannot mend (:func:`~scheduler.engine.backoff.hopeless`: a wrong
        password, a missing permission, a queue name the engine refuses).
        """
        self._install_signals()
        self._home = os.getcwd()
        if not self.keeper.start(lambda: self.slots.stopping, self.slots.halt):
            return 0
        if self._logs is not None:
            capture.install()
            self._logs.start()
        helpers = self.keeper.threads()
        if self.settings.prefetch:
            helpers.append(
                threading.Thread(
                    target=carrying_given(self.slots.refiller), name="flows-refiller", daemon=True
                )
            )
        for helper in helpers:
            helper.start()
        settings = self.settings
        queues = ",".join(self.queues)
        log.info(
            "worker %s started on %s (%s, %s)",
            *(self.name, queues, settings.strategy, counted(settings.threads, "thread")),
        )
        try:
            for _ in range(settings.threads):
                self._add_slot()
            while not self.slots.stopping:
                self._wake.wait(1.0)
            self.slots.wake_fetcher()
            self._drain()
        finally:
            self._wind_down(helpers)
        if self.slots.fatal is not None:  # an error no retry can mend ended it (at fetch)
            raise self.slots.fatal
        return 0

    def _wind_down(self, helpers: list[threading.Thread]) -> None:
        """After the last job: the threads stopped, the worker deregistered, its folders gone."""
        self.keeper.stop()
        self.slots.stop()
        self.reporter.flush()
        if self._logs is not None:
            self._logs.stop()
        for slot in self._slot_threads:
            # Only an abandoned slot is left behind: any other ends before its folder goes.
            slot.join(timeout=0 if slot.ident in self._retired else 2)
        if self.settings.threads == 1:
            # Back from the last job's folder, once the slots ended: never by a slot, as an
            # abandoned one that comes back at last would move its replacement's job.
            self._go_home()
        for helper in helpers:
            helper.join(timeout=2)
        with contextlib.suppress(redis.RedisError, ClusterError, EngineError, ForeignEngine):
            # Jobs handed over since the last wait go back (worker.deregister does too).
            self.client.engine.call("worker.deregister", self.name)
        if self._own_sandbox is not None:
            self._own_sandbox.remove()
        # What an outage kept back and no later send has said yet.
        self.reporter.unsent.sent()
        self.reporter.unsent_held.sent()
        if self._logs is not None:
            self._logs.unsent.sent()
        log.info("worker %s stopped after %d jobs", self.name, self.processed)

    def stop(self) -> None:
        """Stop taking jobs; running jobs get ``shutdown_grace`` seconds, then are handed back."""
        self.slots.stopping = True
        self.slots.halt.set()
        self._wake.set()

    def stop_now(self) -> None:
        """Stop taking jobs and stop the running ones now, with no grace (a second Ctrl-C on
        `flows run`): the commands their shell steps started are killed (SIGKILL to each
        process group) before this returns, and each job is handed back as soon as its thread
        has ended; :meth:`run` then returns (within ``kill_after`` for a thread that does not
        end). Unlike a worker process stopped at once by a signal, the jobs wait again now, not
        when its lease lapses. Call it from another thread than :meth:`run`'s."""
        self._stopping_now = True
        self.stop()
        self.slots.wake_fetcher()  # before any job is handed back: none is handed to it again
        for active in self.held.all():
            self._stop_job(active, "shutdown", ShutdownInterrupt, now=True)

    # -- slots: run their jobs ------------------------------------------------------------------

    def _add_slot(self) -> None:
        number = len(self._slot_threads) + 1
        slot = threading.Thread(
            target=carrying_given(self._slot),
            args=(self.sandbox_root / f"slot-{number}",),
            name=f"flows-slot-{number}",
            daemon=True,
        )
        self._slot_threads.append(slot)
        slot.start()

    def _slot(self, sandbox: Path) -> None:
        folder = SlotFolder(sandbox)
        try:
            while (active := self.slots.next_job()) is not None:
                self._execute(active, folder)
                if threading.get_ident() in self._retired:
                    return  # abandoned while stuck: a fresh slot has taken this one's place
        except BaseException:
            if threading.get_ident() not in self._retired:
                raise
            # Abandoned while stuck: what it raises when it comes back (the stop it was sent
            # arriving late, its job's end) is nobody's now, and no traceback for the user.
            log.debug("an abandoned slot thread ended with an error", exc_info=True)

    def _go_home(self) -> None:
        """Back to the worker's working directory (the worker stopping); an error is
        logged, not raised: the folder may be gone, and a stop ends without a traceback."""
        try:
            os.chdir(self._home)
        except OSError as error:
            log.warning("worker %s: could not go back to %s (%s)", self.name, self._home, error)

    def _execute(self, active: Active, folder: SlotFolder) -> None:
        ctx = active.ctx
        ctx.thread_id = threading.get_ident()
        ctx.sandbox = folder.path
        started = time.monotonic()
        with active.guard:
            active.started = started
            if ctx.options.timeout is not None:
                active.deadline = started + ctx.options.timeout
        if ctx.options.timeout is not None:
            self.keeper.wake()
        if log.isEnabledFor(logging.DEBUG):  # spares the arguments (on every job's path)
            log.debug(
                "job %s started: %s in %s (attempt %d)", ctx.jid, ctx.klass, ctx.queue, ctx.attempt
            )
        try:
            outcome = runner.run(ctx, self._prepare, Running(active, self._logs))
        finally:
            folder.empty()
        self.slots.ended(active, time.monotonic() - started)
        self.reporter.settle(active, outcome)

    def _prepare(self, ctx: JobContext) -> None:
        # The working directory is per process: only a single-threaded worker may move it. It
        # stays there between runs (the worker moves back when it stops), saving two system calls
        # per job; a job that moved elsewhere is moved back by the next run's chdir.
        if self.settings.threads == 1:
            os.chdir(ctx.sandbox)
        if self.prepare is not None:
            self.prepare(ctx)

    # -- stopping jobs ---------------------------------------------------------------------------

    def _stop_job(
        self, active: Active, reason: str, exc: type[JobInterrupted], *, now: bool = False
    ) -> None:
        ctx = active.ctx
        with active.guard:  # stopped once, though the monitor, the drain and stop_now may race
            again = active.stop_requested is not None
            if not again:
                active.stop_requested = time.monotonic()
        if again:
            if now:  # told to stop already: what it started is killed now, not after a grace
                ctx.request_stop(reason, now=True)
            return
        if self.slots.unbuffer(active):  # never started: nothing runs, nothing to report
            log.warning("job %s: dropped before it started (%s)", ctx.jid, reason)
            ctx.request_stop(reason)
            self.held.let_go(active, ran=False)
            return
        # A stop the worker was asked for (shutdown) is no warning; a timeout or a lost lock is.
        level = logging.INFO if reason == "shutdown" else logging.WARNING
        log.log(level, "job %s: stopping (%s%s)", ctx.jid, reason, ", now" if now else "")
        ctx.request_stop(reason, now=now)
        with active.guard:
            if active.interruptible and ctx.interrupt_thread and ctx.thread_id is not None:
                _raise_in_thread(ctx.thread_id, exc)

    def _drain(self) -> None:
        """Hand back jobs not started; let running jobs finish for up to shutdown_grace, then
        stop and hand back the rest.

        A stopped job is handed back by its own thread once it has stopped (its outcome is
        `release`), or by the monitor when the thread is stuck past kill_after: never while it may
        still be running here, and the wait for a stuck thread is bounded.
        """
        self.slots.give_back_buffer()
        self._wait_for_jobs(time.monotonic() + self.settings.shutdown_grace, grace=True)
        # A job that ran and whose complete the engine has not acknowledged is no longer waited
        # for: its complete goes once more (if lost, the job comes back to its queue).
        self.reporter.resending = False
        for active in self.held.all():
            if active.resends:
                self.held.let_go(active, ran=False)
                continue
            self._stop_job(active, "shutdown", ShutdownInterrupt, now=self._stopping_now)
        self._wait_for_jobs(time.monotonic() + self.settings.kill_after + 1)
        for active in self.held.all():  # the monitor did not get to them: give up here
            self._abandoned += 1
            self.reporter.settle(active, _stopped(active.ctx))

    def _wait_for_jobs(self, deadline: float, *, grace: bool = False) -> None:
        """Until no job is held or ``deadline``; a ``grace`` ends too when :meth:`stop_now`
        is called."""
        while self.held.jobs and time.monotonic() < deadline:
            if grace and self._stopping_now:
                return
            self.reporter.flush()
            with self.held.lock:
                if self.held.jobs:
                    self.held.ended.wait(0.05)

    def _abandon(self, active: Active) -> None:
        """A stopped job's thread did not return within kill_after: report it without the thread.

        In a pool child the process then hands back its other jobs and exits (the pool starts a
        fresh one, and the stuck code dies with the process). In-process, the thread is left
        behind (Python cannot kill a thread) and a fresh slot thread takes its place.
        """
        log.error("job %s did not stop within %gs", active.ctx.jid, self.settings.kill_after)
        self._abandoned += 1
        if active.ctx.thread_id is not None:
            self._retired.add(active.ctx.thread_id)
        self.slots.free(active)
        self.reporter.settle(active, _stopped(active.ctx))
        if not self.settings.exit_on_stuck:
            if not self.slots.stopping:
                self._add_slot()
            return
        for other in self.held.all():
            self.reporter.release(other.ctx.jid)
        log.error("worker %s: exiting so the pool can start a clean process", self.name)
        sessions.kill_all()  # the jobs given back must not run on here too
        if self._own_sandbox is not None:
            self._own_sandbox.remove()  # the stuck thread's files go too: it dies with us
        os._exit(EXIT_STUCK)

    # -- process plumbing ----------------------------------------------------------------------

    def _install_signals(self) -> None:
        stop_signals.install(self._on_signal, _exit_now)

    def _on_signal(self, signum: int) -> None:
        log.info(
            "worker %s: %s, finishing running jobs (%s to stop at once)",
            self.name,
            signal.Signals(signum).name,
            "signal its supervisor again" if stop_signals.supervised() else "again",
        )
        self.stop()


def _exit_now(signum: int, count: int) -> None:
    # No lock: see stop_signals.
    if stop_signals.supervised():  # only its supervisor's NOW comes here
        os.write(2, b"worker: stopping at once, as its supervisor says\n")
    else:
        os.write(2, b"worker: signalled again, stopping at once\n")
    # Its jobs are left to be given back: the commands they started must not run on meanwhile.
    sessions.kill_all()
    os._exit(1)


def _stopped(ctx: JobContext) -> runner.Outcome:
    return runner.stopped(ctx, ctx.stop_reason or "interrupted")
