"""Filling a worker's slots: fetch, prefetch and refill its buffer of jobs.

A slot that needs a job takes one from the buffer; when the buffer is empty it becomes the one
slot fetching (:mod:`scheduler.worker.fetching`): it pops for every free slot plus a prefetch
sized to how fast jobs finish, or, when the queues are empty, waits idle until the engine hands
it the next job put. The slot that fetched runs the first job itself, so a job starts with no
hand over between threads. While prefetched jobs run, a refiller thread pops the next ones, so
the engine's work overlaps with the jobs'. Pending completes go in the same round trip as each
pop (:meth:`~scheduler.worker.reporting.Reporter.flush_and_call`). A buffered job held so long
that its lock or the worker's lease may have run out (the process was paused) is checked with
the engine before it starts.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

import redis

from scheduler.engine.backoff import hopeless
from scheduler.engine.client import Client
from scheduler.engine.errors import ClusterError, EngineError
from scheduler.engine.job import Job
from scheduler.worker.context import JobContext
from scheduler.worker.envelope import BrokenPayload, decode, split
from scheduler.worker.fetching import Fetcher, Raw
from scheduler.worker.held import Active, Held
from scheduler.worker.leases import Keeper
from scheduler.worker.reporting import Reporter
from scheduler.worker.settings import WorkerSettings

log = logging.getLogger("flows.worker")

# Prefetch: jobs popped beyond the free slots, enough for about this many seconds of work at the
# recent pace, and never more than `prefetch`. Slow jobs get none, so a worker never sits on
# jobs another worker could start now.
PREFETCH_WINDOW = 0.02
# Weight of the latest run in the running mean of run times.
PACE_WEIGHT = 0.1


class Slots:
    """The buffer of jobs popped but not started, and who fills it. ``burst_over`` is set when
    a burst worker finds its queues empty and nothing running."""

    def __init__(
        self,
        client: Client,
        settings: WorkerSettings,
        held: Held,
        keeper: Keeper,
        reporter: Reporter,
        sandbox_root: Path,
        burst_over: threading.Event,
    ) -> None:
        self.client = client
        self.name = client.worker_name
        self.settings = settings
        self.held = held
        self.keeper = keeper
        self.reporter = reporter
        self.sandbox_root = sandbox_root
        self.fetcher = Fetcher(client, settings.queues, settings.strategy, settings.poll_interval)
        self.buffer: collections.deque[Active] = collections.deque()
        self.stopping = False
        self.halt = threading.Event()  # set once when stopping: ends pauses between retries
        self._burst_over = burst_over
        self._fetching = False
        # The error that ended the worker (hopeless at fetch), raised by Worker.run.
        self.fatal: Exception | None = None
        self._running = 0
        self._pace: float | None = None  # running mean of run times, seconds
        self._refill = threading.Event()  # for the refiller: the buffer runs low
        # Faults of the server (away, full, read-only) are waited out, logged once per change.
        self._backoff = keeper.backoff("fetching", client=client.redis)

    def stop(self) -> None:
        self.stopping = True
        self.halt.set()
        self._refill.set()

    # -- a slot's next job ----------------------------------------------------------------------

    def next_job(self) -> Active | None:
        """The next buffered job for this slot, fetching when the buffer is empty; None: stop.

        The completes this slot left go with its fetch's first call; a slot that does not
        fetch hands them over to the monitor (:meth:`Reporter.hand_over`)."""
        while True:
            active: Active | None = None
            with self.held.wake:
                while True:
                    if self.stopping:
                        self.reporter.hand_over()
                        return None
                    if self.buffer:
                        self.reporter.hand_over()
                        active = self.buffer.popleft()
                        # Refill while there is something left to run (an empty buffer is
                        # the slots' to fill: they may have to wait idle).
                        if (
                            self.buffer
                            and not self._fetching
                            and len(self.buffer) <= self._prefetch() // 2
                        ):
                            self._refill.set()
                        if self.held.superseded(active):
                            active = None  # popped again meanwhile: that pop's copy runs
                            continue
                        if self.keeper.may_start(active):
                            active.taken = True
                            self._running += 1
                            return active
                        break  # checked below, outside the lock
                    if not self._fetching:
                        self._fetching = True
                        break
                    self.reporter.hand_over()  # the fetch under way may wait idle
                    self.held.wake.wait()
            if active is not None:
                self._check(active)
                continue
            jobs: list[Active] = []
            try:
                jobs = self._fetch()
                self._backoff.succeeded()
            except Exception as error:
                if hopeless(error):  # waiting cannot mend it: the worker ends with it
                    self._give_up(error)
                else:  # the other slots wait for this one's next attempt
                    self.reporter.hand_over()  # the fetch may have failed before sending
                    self.halt.wait(self._backoff.failed(error))
            finally:
                self._end_fetch(jobs)

    def _give_up(self, error: Exception) -> None:
        """Stop the worker on an error no retry can mend; :meth:`Worker.run` raises it."""
        with self.held.wake:
            if self.fatal is None:
                self.fatal = error
        self.stop()
        self._burst_over.set()  # wakes Worker.run, which then stops the other slots

    def _check(self, active: Active) -> None:
        """A job that may have lost its lock while buffered: back to the front of the buffer
        if the engine says it is still ours, else let go of, not run."""
        if self.keeper.still_ours(active):
            with self.held.wake:
                self.buffer.appendleft(active)
            return
        log.warning("job %s: its lock ran out before it started; not run", active.ctx.jid)
        active.settled = True
        self.held.let_go(active, ran=False)

    def ended(self, active: Active, elapsed: float) -> None:
        """A job's run ended after ``elapsed`` seconds: its slot is free (once)."""
        pace = self._pace
        self._pace = elapsed if pace is None else pace + PACE_WEIGHT * (elapsed - pace)
        self.free(active)

    def free(self, active: Active) -> None:
        with self.held.wake:
            if not active.slot_freed:
                active.slot_freed = True
                self._running -= 1
                self.held.ended.notify_all()

    def unbuffer(self, active: Active) -> bool:
        """Take a job out of the buffer (it is stopped before it started); False if not there."""
        with self.held.wake:
            if active not in self.buffer:
                return False
            self.buffer.remove(active)
            active.settled = True
            return True

    def give_back_buffer(self) -> None:
        """Stopping: hand back the jobs not started."""
        with self.held.wake:
            # Not one a later pop replaced: its release would hand back the job that pop holds.
            unstarted = [active for active in self.buffer if not self.held.superseded(active)]
            self.buffer.clear()
        for active in unstarted:
            self.reporter.give_back(active)

    def wake_fetcher(self) -> None:
        """Stopping: slots waiting for a job return, and so does a fetch blocked idle, whose
        wait is cancelled first: a job released meanwhile (one of its own, stopped) is not
        handed to it again."""
        with self.held.wake:
            self.held.wake.notify_all()
            self.held.ended.notify_all()  # a burst's fetch waiting for running jobs to end
            idle = self._fetching
        if idle:
            with contextlib.suppress(redis.RedisError, ClusterError, EngineError):
                self.fetcher.cancel()
            with contextlib.suppress(redis.RedisError, ClusterError):
                self.fetcher.wake()

    # -- fetching -------------------------------------------------------------------------------

    def _wanted(self) -> int:
        with self.held.lock:
            return self.settings.threads - self._running + self._prefetch() - len(self.buffer)

    def _fetch(self) -> list[Active]:
        """Jobs for the free slots (and the prefetch); waits idle when there are none."""
        wanted = self._wanted()
        # A library swapped since the engine was checked stops the worker here (hopeless).
        self.client.engine.check_library()
        # Until its jobs are held, the lease renewals say that a fetch is in flight.
        with self.held.fetching() as fetch:
            asked = time.monotonic()
            # Outcomes first, in the same round trip: they may make jobs ready, and free locks.
            raws = self.fetcher.pop(wanted, self.reporter.flush_and_call)
            if not raws and not self.settings.burst and not self.stopping:
                fetch.again()  # nothing popped so far: no older reply to wait for
                # A job handed over was popped at some point while this thread waited: its
                # lock runs from no earlier than the start of the wait.
                asked = time.monotonic()
                raws = self.fetcher.wait(wanted, lambda: self.stopping)
            jobs = self._hold_all(raws, asked)
        if not raws and self.settings.burst:
            self._burst_wait()
        return jobs

    def _end_fetch(self, jobs: list[Active]) -> None:
        """Buffer what a fetch got (or hand it back when stopping) and let the slots go on."""
        with self.held.wake:
            self._fetching = False
            late: list[Active] = jobs if self.stopping else []
            if not late:
                self.buffer.extend(jobs)
            self.held.wake.notify_all()
        for active in late:
            self.reporter.give_back(active)

    def refiller(self) -> None:
        """Pop ahead in the background while the slots run what is buffered, so the engine's work
        for the next jobs overlaps with running these (started only with a prefetch)."""
        while not self.stopping:
            self._refill.wait(0.5)
            self._refill.clear()
            with self.held.wake:
                if self.stopping or self._fetching or not self.buffer:
                    continue  # an empty buffer is the slots' to fill (they may wait idle)
                self._fetching = True
            jobs: list[Active] = []
            try:
                wanted = self._wanted()
                if wanted > 0:
                    with self.held.fetching():
                        asked = time.monotonic()
                        raws = self.fetcher.pop(wanted, self.reporter.flush_and_call)
                        jobs = self._hold_all(raws, asked)
                else:
                    self.reporter.flush()
            except Exception:
                log.warning("worker %s could not pop ahead", self.name, exc_info=True)
            finally:
                self._end_fetch(jobs)

    def _prefetch(self) -> int:
        prefetch = self.settings.prefetch
        if not prefetch or self._pace is None:
            return 0
        return min(prefetch, int(PREFETCH_WINDOW / max(self._pace, 1e-6)))

    def _burst_wait(self) -> None:
        """Nothing to pop in a burst: done when nothing runs either, else wait for a job to end."""
        with self.held.wake:
            if self.held.jobs or self.reporter.pending():
                self.held.ended.wait(self.settings.poll_interval)
                return
            self.stopping = True
            self.held.wake.notify_all()
        self._burst_over.set()

    def _hold_all(self, raws: list[Raw], asked: float) -> list[Active]:
        return [active for raw in raws if (active := self.hold(raw, asked)) is not None]

    def hold(self, raw: Raw, asked: float) -> Active | None:
        """A popped job, now held: buffered until a slot runs it. None for a broken payload.

        ``asked``: when (monotonic) the call that popped it was made: its lock runs from then.
        """
        # The data is decoded here, once (a broken payload is reported, not raised); `raw` is
        # this worker's own copy of the reply, so it takes the decoded data in place.
        try:
            data = decode(raw.get("data") or "{}")
            user_data, options = split(data)
        except (ValueError, BrokenPayload) as error:
            raw["data"] = {}
            self.reporter.broken(Job(self.client, raw), error)
            return None
        raw["data"] = data
        job = Job(self.client, raw)
        job.data = data
        # Heartbeated at a third of the lock the engine gave, however short (a 0.6 s ttr is
        # renewed every 0.2 s); only a lock that reads as none is taken as a second.
        lock_seconds = job.expires - _popped_at(raw)
        if lock_seconds <= 0:
            lock_seconds = 1.0
        # The sandbox is the slot's, set when a slot starts the job.
        ctx = JobContext(job=job, data=user_data, options=options, sandbox=self.sandbox_root)
        active = Active(
            ctx=ctx,
            lock_seconds=lock_seconds,
            lock_deadline=asked + lock_seconds,
            next_heartbeat=asked + lock_seconds / 3,
        )
        if not self.held.add(active):
            log.warning(
                "job %s: popped again while this worker runs it or sends its outcome (its "
                "lock lapsed meanwhile): the earlier run stands",
                job.jid,
            )
            return None
        return active


def _popped_at(raw: dict[str, Any]) -> float:
    """The server time of the latest pop, from the job's history."""
    if raw.get("popped") is not None:
        return float(raw["popped"])
    history = raw.get("history") or []
    for entry in reversed(history if isinstance(history, list) else []):
        if entry.get("what") == "popped":
            return float(entry.get("when", 0))
    return float(raw.get("expires", 0)) - 60
