"""The sessions a worker's jobs started, killed when the worker process ends at once.

A shell step runs its command in a session of its own, so that stopping the step kills all it
started. A worker that ends without stopping its jobs (told to stop at once, or exiting for a
clean process when a job would not stop) would leave those sessions running while their jobs,
given back, run again elsewhere: two copies of one step at work. So a job registers each
session while it runs (:func:`started`, :func:`ended`), and those exits kill them first
(:func:`kill_all`). A job starts a session inside :func:`starting`: a process forked but not yet
registered when the worker ends is waited for and killed too, and none starts after that.
Lock-free, since an exit may run in a signal handler: sets whose copy (``list()``) is taken
under the interpreter's lock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

_sessions: set[int] = set()
_starting: set[int] = set()  # the threads inside starting()
_ending = False  # kill_all was called: the process is ending, no session may start

STARTING_WAIT = 2.0
"""Seconds :func:`kill_all` waits at most for sessions being started to be registered."""


class Ending(RuntimeError):
    """A session was to be started while the worker process ends at once."""


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """Around starting a session and registering it with :func:`started`; raises
    :class:`Ending` when the process is ending at once."""
    thread = threading.get_ident()
    _starting.add(thread)  # before _ending is read: kill_all sets it before it reads this
    try:
        if _ending:
            raise Ending("the worker is stopping at once: nothing may start")
        yield
    finally:
        _starting.discard(thread)


def started(pid: int) -> None:
    """A job started a process in a session of its own, whose id is ``pid``."""
    _sessions.add(pid)


def ended(pid: int) -> None:
    """The session's leader ``pid`` ended (its job has read its last output)."""
    _sessions.discard(pid)


def kill_all() -> int:
    """SIGKILL every registered session's process group, once the sessions being started are
    registered (within :data:`STARTING_WAIT`); no session starts after it. How many were
    signalled."""
    global _ending
    _ending = True
    deadline = time.monotonic() + STARTING_WAIT
    me = {threading.get_ident()}  # a handler that interrupted a start cannot wait for it
    while _starting - me and time.monotonic() < deadline:
        time.sleep(0.001)  # the starting threads run meanwhile
    killed = 0
    for pid in list(_sessions):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed += 1
    return killed


__all__ = ["STARTING_WAIT", "Ending", "ended", "kill_all", "started", "starting"]
