"""The jobs a worker holds (popped and locked to it: buffered, running or being reported).

Every part of the worker reads this one registry: the slots add to it, the lock keeper
heartbeats and times out what is in it, the reporter lets a job go once the engine has its
outcome. ``lock`` guards it and the slots' state; ``wake`` wakes slots waiting for a job,
``ended`` those waiting for held jobs to end (kept apart so that a job ending does not wake a
slot waiting for the next fetch).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from scheduler.worker.capture import JobOutput, LogShipper, end_capture, start_capture
from scheduler.worker.context import JobContext


@dataclass(eq=False)
class Active:
    """A job this worker holds: buffered (popped, not started), running, or being reported."""

    ctx: JobContext
    lock_seconds: float
    lock_deadline: float  # monotonic: when the lock runs out unless heartbeated
    next_heartbeat: float
    started: float | None = None  # monotonic; None while buffered
    # A slot took it from the buffer to run it (set under the held lock, before `started`).
    taken: bool = False
    deadline: float | None = None
    stop_requested: float | None = None
    interruptible: bool = False
    # Set once, under `guard`, by whoever reports the outcome: the job's thread, or the monitor
    # when the thread is stuck past kill_after (the thread's late outcome is then dropped).
    settled: bool = False
    # Whether its slot was given back (by the slot, or by the monitor abandoning a stuck thread).
    slot_freed: bool = False
    # How many times its complete was queued again, unacknowledged (Reporter.batch).
    resends: int = 0
    guard: threading.Lock = field(default_factory=threading.Lock)


class Running:
    """Around a job's function: the job may be stopped by an exception raised in its thread,
    and what it writes is its step log. Gives False when it was stopped before it started."""

    __slots__ = ("active", "logs", "output")

    def __init__(self, active: Active, logs: LogShipper | None) -> None:
        self.active = active
        self.logs = logs
        self.output: JobOutput | None = None

    def __enter__(self) -> bool:
        active = self.active
        self.output = start_capture(active.ctx, self.logs)
        with active.guard:
            active.interruptible = not active.ctx.stopping
            return active.interruptible

    def __exit__(self, *exc: object) -> None:
        try:
            end_capture(self.output)
        finally:
            with self.active.guard:
                self.active.interruptible = False


class Held:
    """Every job held, by jid, and how many ran; and the fetches whose jobs may not be held yet
    (:meth:`fetching`), which each lease renewal reports as ``settled`` (lua/include/lease.lua).
    """

    def __init__(self) -> None:
        self.jobs: dict[str, Active] = {}
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.ended = threading.Condition(self.lock)
        self.processed = 0
        # The number of the latest lease renewal whose reply came back (the keeper sets it).
        self.renewed = 0
        # Each fetch in flight -> `renewed` when it sent the first call whose jobs it still has
        # to add here.
        self._fetches: dict[Fetch, int] = {}

    def fetching(self) -> Fetch:
        """A fetch starting (``with held.fetching() as fetch:``): its pops' jobs are added before
        it ends, and until then no renewal lets the engine take them for jobs not held."""
        return Fetch(self)

    def settled(self) -> int:
        """The renewal number every fetch in flight was sent after: the pops sent before that
        renewal's reply came back are done with, their jobs here or let go. Under ``lock``."""
        return min(self._fetches.values(), default=self.renewed)

    def add(self, active: Active) -> bool:
        """Hold a popped job; False when this worker already runs it. Besides a new attempt
        (the earlier one's outcome put the job back: a retry, a release), the engine hands a
        job to this worker again only once its earlier lock lapsed (a failover that kept the
        worker from heartbeating, a pause). An earlier run still under way, or whose outcome
        is being sent again, then stands when nothing is stopping it (its heartbeats and its
        outcome are this worker's, as the engine's lock now is), and the later pop is not run
        a second time; one being stopped (its lock found lost) gives way to the later pop, as
        before. An earlier pop still buffered is replaced, and never starts
        (:meth:`superseded`)."""
        with self.lock:
            earlier = self.jobs.get(active.ctx.jid)
            if (
                earlier is not None
                and earlier.stop_requested is None
                and ((earlier.taken and not earlier.settled) or earlier.resends > 0)
            ):
                return False
            self.jobs[active.ctx.jid] = active
            return True

    def superseded(self, active: Active) -> bool:
        """Whether a later pop of the same job replaced this buffered one (:meth:`add`). Under
        ``lock``."""
        return self.jobs.get(active.ctx.jid) is not active

    def holds(self, active: Active) -> bool:
        with self.lock:
            return self.jobs.get(active.ctx.jid) is active

    def all(self) -> list[Active]:
        with self.lock:
            return list(self.jobs.values())

    def let_go(self, active: Active, *, ran: bool = True) -> None:
        """The job is no longer this worker's (its outcome reported, or handed back)."""
        with self.lock:
            # Only this run's entry: after a lost lock this worker may hold a newer run of it.
            if self.jobs.get(active.ctx.jid) is active:
                del self.jobs[active.ctx.jid]
            if ran:
                self.processed += 1
            self.ended.notify_all()


class Fetch:
    """One fetch of jobs in flight (:meth:`Held.fetching`)."""

    def __init__(self, held: Held) -> None:
        self.held = held

    def __enter__(self) -> Fetch:
        self.again()
        return self

    def again(self) -> None:
        """Nothing this fetch popped so far is on its way: it counts from the next call on."""
        with self.held.lock:
            self.held._fetches[self] = self.held.renewed

    def __exit__(self, *exc: object) -> None:
        with self.held.lock:
            self.held._fetches.pop(self, None)
