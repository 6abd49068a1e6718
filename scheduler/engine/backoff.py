"""Waiting out a fault of the server: exponential pauses, capped, one log line per change.

A worker or the scheduler service that cannot reach its server, or finds it full or read-only,
keeps trying with growing pauses (``first``, doubled each attempt up to ``cap``, with jitter so
that many processes do not retry in step). The cap is 2 s, so once a failover or a healed
partition gives the server back, every process is working again within 2 s (a 30 s cap kept
workers idle for up to half a minute after the server was back). It logs a warning when the
fault starts or changes (unreachable → out of memory), and one line when it is over, rather
than a line per attempt. A process whose server has a
:class:`~scheduler.engine.connections.Keeper` (the embedded server of the default data directory,
registered by :mod:`scheduler.connect`) starts it again when it is down, as any ``flows`` command
would.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

import redis

from scheduler.engine import faults
from scheduler.engine.connections import keeper_of
from scheduler.engine.errors import ClusterError, FlowsError, NamespaceNotInOneSlot, counted

FIRST = 0.1
CAP = 2.0
#: Seconds a lost connection lasts before an :class:`Outage` says it.
OUTAGE_GRACE = 1.0

#: The exit status of a long-running process (``flows worker``, ``flows scheduler``) stopped by
#: an error that restarting it cannot mend (:func:`hopeless`: a bad URL, a wrong password, a
#: missing permission, a server configured unsafely, a Functions library that is not this
#: release's engine): sysexits' EX_CONFIG, so a supervisor can tell it from a crash
#: (systemd: ``RestartPreventExitStatus=78``).
EXIT_CONFIG = 78

# Our own generator: moving the process's shared `random` state from a library thread would
# disturb whoever seeded it (a test's property generator, a user's simulation).
_jitter = random.Random()


#: The errors that waiting may cure (:func:`transient` tells the exceptions among them).
FAULTS: tuple[type[Exception], ...] = (
    # a cluster or Sentinel with no master for the namespace (a failover that outlasted the
    # client's own wait), replicas away (NotReplicated): they come back
    ClusterError,
    faults.ServerUnavailable,
    faults.ServerOutOfMemory,
    faults.ServerReadOnly,
    faults.ServerWithoutReplicas,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.BusyLoadingError,
)


def transient(error: BaseException) -> bool:
    """Whether waiting may cure ``error``: the server is away, full or read-only. A wrong
    password or a missing permission stays wrong however long one waits."""
    if faults.access_refused(error):
        return False
    if isinstance(error, NamespaceNotInOneSlot):  # a wrong namespace stays wrong
        return False
    return isinstance(error, FAULTS)


def hopeless(error: BaseException) -> bool:
    """Whether ``error`` says the process itself is wrong, so that retrying the call can never
    succeed: one of this project's errors that is not :func:`transient` (a wrong password, a
    missing permission, an argument the engine refuses, a server without what the engine
    needs). A bug (any other exception) is not: it may depend on what was read."""
    return isinstance(error, FlowsError) and not transient(error)


def connection_lost(error: BaseException) -> bool:
    """Whether ``error`` says the way to the server is gone (down, unreachable, a broken or
    timed-out connection), not that the server refused something: a refused login is not."""
    return isinstance(error, (redis.ConnectionError, redis.TimeoutError)) and not (
        faults.access_refused(error)
    )


class Outage:
    """The connection to one server, as every activity of a process sees it: a warning when it
    is lost (naming the server) and one line when it is back (saying how long it was away),
    however many activities fail meanwhile. Their :class:`Backoff` says the rest of their
    faults themselves. A connection that is back within :data:`OUTAGE_GRACE` (one the server
    dropped and the next attempt opens again, or that it refuses the login of: then that is
    said) is no outage and is not said. ``meanwhile`` says what the process does until it is
    back. Thread-safe."""

    def __init__(self, log: logging.Logger, what: str, where: str, meanwhile: str) -> None:
        self.log = log
        self.what = what
        self.where = where
        self.meanwhile = meanwhile
        self._since: float | None = None
        self._said = False
        self._lock = threading.Lock()

    def lost(self, error: BaseException) -> None:
        with self._lock:
            now = time.monotonic()
            if self._since is None:
                self._since = now
            if self._said or now - self._since < OUTAGE_GRACE:
                return
            self._said = True
        self.log.warning(
            "%s: lost the connection to %s: %s (%s)",
            self.what,
            self.where,
            faults.one_line(error),
            self.meanwhile,
        )

    def back(self) -> None:
        if self._since is None:
            return
        with self._lock:
            since, said = self._since, self._said
            self._since, self._said = None, False
        if since is not None and said:
            away = time.monotonic() - since
            self.log.info(
                "%s: the connection to %s is back after %.1f s", self.what, self.where, away
            )


#: A :class:`Backoff`'s fault while its :class:`Outage` speaks for it.
_AWAY = "connection lost"


class Backoff:
    """The pauses between attempts of one activity (``what``) under faults; thread-safe. Given
    the process's ``outage``, a lost connection is said there, once for every activity."""

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        *,
        first: float = FIRST,
        cap: float = CAP,
        client: redis.Redis | None = None,
        outage: Outage | None = None,
    ) -> None:
        self.log = log
        self.what = what
        self.first = first
        self.cap = cap
        self.client = client
        self.outage = outage
        self.attempts = 0
        self._state: str | None = None
        self._lock = threading.Lock()

    @property
    def failing(self) -> bool:
        return self._state is not None

    def failed(self, error: BaseException) -> float:
        """Note a failed attempt; returns the seconds to pause before the next one."""
        with self._lock:
            state = type(error).__name__
            if self.outage is not None and connection_lost(error):
                self.outage.lost(error)
                state = _AWAY
            if state != self._state and state != _AWAY:
                # A bug (not a fault of the server) also gets its traceback, once.
                known = isinstance(error, (redis.RedisError, FlowsError))
                self.log.warning(
                    "%s: %s (retrying, at most every %gs)",
                    self.what,
                    faults.one_line(error),
                    self.cap,
                    exc_info=None if known else error,
                )
            self._state = state
            pause = min(self.cap, self.first * 2 ** min(self.attempts, 30))
            self.attempts += 1
        if isinstance(error, redis.ConnectionError):
            self._revive()
        return float(pause * _jitter.uniform(0.5, 1.0))

    def succeeded(self) -> None:
        """Note a successful attempt: the fault, if any, is over."""
        if self._state is None:
            return
        if self.outage is not None:
            self.outage.back()
        with self._lock:
            if self._state not in (None, _AWAY):
                self.log.info(
                    "%s: working again after %s", self.what, counted(self.attempts, "failure")
                )
            self._state = None
            self.attempts = 0

    def _revive(self) -> None:
        """Start the server again if its keeper can (the embedded server) and it is down."""
        keeper = keeper_of(self.client)
        if keeper is None:
            return
        try:
            if keeper.start():
                self.log.warning("%s: started the embedded server again", self.what)
        except Exception as error:  # retried at the next failure
            self.log.debug("%s: could not start the embedded server: %s", self.what, error)


def wait_for_server(
    log: logging.Logger,
    what: str,
    attempt: Callable[[], object],
    *,
    stop: threading.Event | None = None,
    client: redis.Redis | None = None,
) -> bool:
    """Call ``attempt`` until it succeeds (True), or ``stop`` is set meanwhile (False).

    A long-lived process starting while its server is away (down, or a Sentinel with no master
    during a failover) waits for it with the pauses of :class:`Backoff`, one log line per
    change, as pool workers do. Faults that waiting cannot cure raise at once."""
    backoff = Backoff(log, what, client=client)
    while stop is None or not stop.is_set():
        try:
            attempt()
        except Exception as error:
            if not transient(error):
                raise
            pause = backoff.failed(error)
            if stop is None:
                time.sleep(pause)
            else:
                stop.wait(pause)
            continue
        backoff.succeeded()
        return True
    return False


__all__ = [
    "CAP",
    "EXIT_CONFIG",
    "FIRST",
    "Backoff",
    "Outage",
    "connection_lost",
    "hopeless",
    "transient",
    "wait_for_server",
]
