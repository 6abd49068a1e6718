"""Keeping a worker's locks and lease: what tells the engine, and the worker, who holds what.

A :class:`Keeper` runs two threads of a worker. The monitor renews the worker's liveness lease
every ``lease_seconds / 5`` (so that if the process dies, its jobs go back to other workers
within seconds: lua/include/lease.lua), renews its registration (``flows workers``),
heartbeats every job held (buffered, running or being reported) at a third of its lock time,
stops jobs that overrun their timeout, gives up on jobs stuck past ``kill_after`` and sends
batches of completes that waited long enough. The listener turns engine messages
(``lock_lost``, ``canceled`` on ``P w:<worker>``) into stops. The slots ask it whether a job
held a long time (the process was paused) may still start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from scheduler.engine.backoff import CAP, Backoff, Outage, transient
from scheduler.engine.client import Client
from scheduler.engine.errors import (
    ClusterError,
    EngineError,
    ForeignEngine,
    NotReplicated,
    carrying_given,
)
from scheduler.engine.faults import ServerOutOfMemory, where
from scheduler.engine.replies import dumps
from scheduler.engine.safety import check_eviction_policy
from scheduler.worker.held import Active, Held
from scheduler.worker.outcomes import JobInterrupted, LockLostInterrupt, TimeoutInterrupt
from scheduler.worker.reporting import Reporter
from scheduler.worker.settings import WorkerSettings

log = logging.getLogger("flows.worker")

LISTEN_LOOK = 0.5
"""Seconds the listener waits for a message before it looks whether the worker stopped (a
stop wakes it at once: :meth:`Keeper._wake_listener`)."""

# The registration is renewed at this fraction of the engine's `worker-silent-after`, so that
# `flows workers` marks silent only a worker that stopped talking (a job with a long lock is
# heartbeated rarely; an idle worker talks at every poll anyway).
PRESENCE_FRACTION = 1 / 3
# How many lease renewals fit in the lease's length. A dead worker's jobs wait about
# lease_seconds + a survivor's renewal period.
LEASE_RENEWALS = 5

StopJob = Callable[[Active, str, type[JobInterrupted]], None]


class Keeper:
    """The locks and lease of worker ``client.worker_name``. ``stop_job`` stops a job (lost,
    timed out); ``abandon`` gives up on one whose thread did not stop within ``kill_after``."""

    def __init__(
        self,
        client: Client,
        settings: WorkerSettings,
        held: Held,
        reporter: Reporter,
        stop_job: StopJob,
        abandon: Callable[[Active], None],
    ) -> None:
        self.client = client
        self.name = client.worker_name
        self.settings = settings
        self.held = held
        self.reporter = reporter
        self._stop_job = stop_job
        self._abandon = abandon
        self.done = threading.Event()  # the worker has stopped: the threads end
        self._wake = threading.Event()
        # Every activity of the worker meets the same lost connection: said once for them all.
        self.outage = Outage(
            log,
            f"worker {self.name}",
            where(client.redis, client.engine.key_prefix),
            f"running jobs go on; none is fetched until it is back, retrying at most every "
            f"{CAP:g}s",
        )
        self._beat_backoff = self.backoff("heartbeats", client=client.redis)
        self._listen_backoff = self.backoff("lock-lost messages", client=client.redis)
        # Renewals keep their own pace; these only say when a fault starts and ends.
        self._lease_backoff = self.backoff("lease renewals", cap=1.0)
        self._presence_backoff = self.backoff("registration", cap=20.0)
        self._info: dict[str, Any] = {}
        self._presence_every = 20.0
        self._next_presence = 0.0
        self._lease_guard = threading.Lock()
        self._leased = False  # a renewal has succeeded since the worker started
        self._lease_until = 0.0  # monotonic: the lease surely runs until then
        self._next_lease = float("inf")
        self._renewals = 0  # lease renewals sent, each numbered (lua/include/lease.lua)
        self._pubsub: Any = None  # the listener's subscription (see _wake_listener)

    def backoff(self, activity: str, **options: Any) -> Backoff:
        """The pauses of one ``activity`` of this worker, its lost connection said by
        :attr:`outage`."""
        return Backoff(log, f"worker {self.name}: {activity}", outage=self.outage, **options)

    def threads(self) -> list[threading.Thread]:
        return [
            threading.Thread(
                target=carrying_given(self._listen), name="flows-listener", daemon=True
            ),
            threading.Thread(
                target=carrying_given(self._monitor), name="flows-monitor", daemon=True
            ),
        ]

    def wake(self) -> None:
        """Have the monitor look again now (a deadline or a batch was added)."""
        self._wake.set()

    def stop(self) -> None:
        self.done.set()
        self._wake.set()
        self._wake_listener()

    def _wake_listener(self) -> None:
        """End the listener's wait for a message at once, not at its next half-second look: a
        worker that stops (``flows run`` at its run's end) would otherwise wait that long to
        exit. Shutting the socket down wakes the thread blocked reading it, no round trip
        needed (the server may be gone); the listener then closes it. redis-py keeps the
        socket as ``_sock``: without one there, the listener ends at its next look."""
        pubsub = self._pubsub
        sock = getattr(getattr(pubsub, "connection", None), "_sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # -- presence and the lease -----------------------------------------------------------------

    def start(self, stopping: Callable[[], bool], halt: threading.Event) -> bool:
        """Check the server and register, waiting out a full server (a worker must not
        crash-loop on one) and, with ``wait_for_server``, one that is away (a pool's worker
        restarted while it is); False if stopped meanwhile. Other faults raise."""
        # Not yet connected: said as its own fault, as the service and `flows ui` say theirs.
        backoff = Backoff(log, f"worker {self.name}: starting", client=self.client.redis)
        while not stopping():
            try:
                check_eviction_policy(self.client.redis, who=f"worker {self.name}")
                self.register()
            except Exception as error:
                # A master without the replicas `?wait=N` asks for refuses writes until they
                # are back: waited out as a full server is.
                waits = isinstance(error, ServerOutOfMemory | NotReplicated) or (
                    self.settings.wait_for_server and transient(error)
                )
                if not waits:
                    raise
                halt.wait(backoff.failed(error))
                continue
            backoff.succeeded()
            return True
        return False

    def register(self) -> None:
        settings = self.settings
        self._info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": list(settings.queues),
            "threads": settings.threads,
            "strategy": settings.strategy,
            "started": time.time(),
        }
        self.client.engine.call("worker.register", self.name, dumps(self._info))
        silent_after = self.client.engine.call("config.get", "worker-silent-after")
        with contextlib.suppress(TypeError, ValueError):
            self._presence_every = max(0.1, float(silent_after) * PRESENCE_FRACTION)
        self._next_presence = time.monotonic() + self._presence_every
        if settings.lease_seconds:
            self.renew_lease()

    def _renew_presence(self, now: float) -> None:
        """Say this worker is alive (the monitor, every ``_presence_every`` seconds)."""
        self._next_presence = now + self._presence_every
        try:
            self.client.engine.call("worker.register", self.name, dumps(self._info))
        except (redis.RedisError, EngineError, ClusterError) as error:
            self._presence_backoff.failed(error)
            return
        self._presence_backoff.succeeded()

    def renew_lease(self) -> None:
        """Renew the liveness lease (the monitor, every ``lease_seconds / LEASE_RENEWALS``).

        Each renewal names the jobs held: one locked to this worker that it does not hold is
        given back by the engine, once every pop that may have given it is done with (the
        renewals are numbered, and each says which number the fetches in flight were sent
        after: :meth:`Held.settled`; lua/include/lease.lua). A lease reaped since the last
        renewal (the process was paused longer than the lease, or could not reach Redis) means
        other workers have taken its jobs back: every job held is checked with the engine at
        once, and dropped or stopped when it is no longer ours.
        """
        seconds = self.settings.lease_seconds
        with self._lease_guard:
            sent = time.monotonic()
            self._next_lease = sent + seconds / LEASE_RENEWALS
            self._renewals += 1
            number = self._renewals
            # The jobs held, so the engine gives back at once any job locked to this worker
            # that it does not hold (a pop's reply lost: lua/include/lease.lua),
            # and, read with them, the fetches in flight, whose jobs are not held yet.
            with self.held.lock:
                jids = dumps(list(self.held.jobs))
                settled = self.held.settled()
            try:
                text = self.client.engine.call(
                    "worker.lease", self.name, seconds, jids, number, settled
                )
                reply = json.loads(text)
            except (redis.RedisError, EngineError, ClusterError, ValueError) as error:
                # ClusterError: a failover settling, or too few replicas (NotReplicated): the
                # renewal is tried again a second later.
                self._lease_backoff.failed(error)
                return
            self._lease_backoff.succeeded()
            with self.held.lock:
                # A pop sent from now on was sent after this renewal's reply came back.
                self.held.renewed = number
            lost = self._leased and not reply.get("held")
            self._leased = True
            self._lease_until = sent + seconds
        if reply.get("returned"):
            log.warning(
                "worker %s: %d job(s) locked to it that it did not hold were given back (an"
                " earlier process named %s died holding them, or a reply was lost on the way)",
                self.name,
                reply["returned"],
                self.name,
            )
        if lost:
            with self.held.lock:
                if self.held.jobs:
                    log.warning(
                        "worker %s: its lease lapsed and its jobs were taken back", self.name
                    )
                else:  # nothing was lost: not worth a warning
                    log.info("worker %s: its lease lapsed; it held no jobs", self.name)
                for active in self.held.jobs.values():
                    active.lock_deadline = active.next_heartbeat = 0.0
            self._wake.set()

    def lease_may_be_gone(self) -> bool:
        """Whether the lease may have lapsed: the jobs held may be another worker's by now."""
        if not self._leased:
            return False
        margin = min(1.0, self.settings.lease_seconds / 10)
        return time.monotonic() >= self._lease_until - margin

    # -- locks ----------------------------------------------------------------------------------

    def may_start(self, active: Active) -> bool:
        """Whether a buffered job surely is still this worker's (else: :meth:`still_ours`)."""
        margin = min(1.0, active.lock_seconds / 10)
        lock_ok = time.monotonic() < active.lock_deadline - margin
        return lock_ok and not self.lease_may_be_gone()

    def still_ours(self, active: Active) -> bool:
        """A job held so long (the process was paused?) that another worker may have it by now:
        starting it then would run it twice. The lease is renewed first (a lease reaped
        meanwhile lets go of every job held); then the engine decides: a heartbeat renews a lock
        still held."""
        if self.lease_may_be_gone():
            self.renew_lease()
        if self.holds(active):
            active.lock_deadline = time.monotonic() + active.lock_seconds
            return True
        return False

    def holds(self, active: Active) -> bool:
        """Whether this worker still holds the job's lock (the engine decides: a heartbeat)."""
        try:
            active.ctx.job.heartbeat()
        except (EngineError, ClusterError, redis.RedisError):
            return False
        return True

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

    # -- the threads ----------------------------------------------------------------------------

    def _monitor(self) -> None:
        try:
            self._keep()
        except ForeignEngine:
            # The engine's library was swapped (no call runs it now): the next fetch finds
            # it too and stops the worker, with one line (Slots._give_up).
            return

    def _keep(self) -> None:
        kill_after = self.settings.kill_after
        while not self.done.is_set():
            now = time.monotonic()
            if now >= self._next_presence:
                self._renew_presence(now)
            if now >= self._next_lease:
                self.renew_lease()
            actives = self.held.all()
            self._heartbeat([a for a in actives if a.next_heartbeat <= now and not a.ctx.stopping])
            for active in actives:
                if active.deadline is not None and active.deadline <= now:
                    self._stop_job(active, "timeout", TimeoutInterrupt)
                stuck = (
                    active.stop_requested is not None
                    and not active.settled
                    and now - active.stop_requested > kill_after
                )
                if stuck:
                    self._abandon(active)
            report = self.reporter.send_due()
            waits = [a.next_heartbeat - now for a in actives] + [0.5, self._next_presence - now]
            waits.append(self._next_lease - now)
            waits += [a.deadline - now for a in actives if a.deadline is not None]
            if report is not None:
                waits.append(report)
            self._wake.wait(max(0.001, min(waits)))
            self._wake.clear()

    def _listen(self) -> None:
        mine = f"{self.client.engine.key_prefix}w:{self.name}"
        while not self.done.is_set():
            pubsub = self.client.redis.pubsub()  # type: ignore[no-untyped-call]
            self._pubsub = pubsub
            try:
                # SUBSCRIBE's reply (or its refusal) comes as the first message: the fault is
                # over only when the server confirmed it, else a refused subscription would
                # be "working again" and refused anew at every retry, a warning each time.
                pubsub.subscribe(mine)
                while not self.done.is_set():
                    message = pubsub.get_message(timeout=LISTEN_LOOK)
                    if message is None or message["channel"] != mine:
                        continue
                    if message["type"] == "subscribe":
                        self._listen_backoff.succeeded()
                    elif message["type"] == "message":
                        self._on_worker_message(message["data"])
            except (redis.ConnectionError, redis.TimeoutError):
                # The server away (the fetch and the heartbeats say so), or the stop shutting
                # the socket down (_wake_listener).
                self.done.wait(0.5)
            except (redis.RedisError, ClusterError) as error:
                # The messages only hasten what a heartbeat finds too: any other refusal (a
                # user without `subscribe`) is said once and waited out, never the listener's
                # end.
                self.done.wait(self._listen_backoff.failed(error))
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _on_worker_message(self, data: str) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        active = self.held.jobs.get(str(event.get("jid")))
        if active is None or event.get("event") not in ("lock_lost", "canceled"):
            return
        if self.holds(active):
            # The message is about an earlier run: this worker has popped the job again since
            # (a pop that reclaims an expired lock tells its old worker after handing it out).
            log.info("job %s: stale %s ignored, the lock is held", active.ctx.jid, event["event"])
            return
        self._stop_job(active, str(event["event"]).replace("_", "-"), LockLostInterrupt)
