"""The sessions a worker's jobs started, killed when the worker process ends at once.

A shell step runs its command in a session of its own, so that stopping the step kills all it
started. A worker that ends without stopping its jobs (told to stop at once, or exiting for a
clean process when a job would not stop) would leave those sessions running while their jobs,
given back, run again elsewhere: two copies of one step at work. So a job registers each
session while it runs (:func:`started`, :func:`ended`), and those exits kill them first
(:func:`kill_all`). Lock-free, since an exit may run in a signal handler: a set whose copy
(``list()``) is taken under the interpreter's lock.
"""

from __future__ import annotations

import contextlib
import os
import signal

_sessions: set[int] = set()


def started(pid: int) -> None:
    """A job started a process in a session of its own, whose id is ``pid``."""
    _sessions.add(pid)


def ended(pid: int) -> None:
    """The session's leader ``pid`` ended (its job has read its last output)."""
    _sessions.discard(pid)


def kill_all() -> int:
    """SIGKILL every registered session's process group; how many were signalled."""
    killed = 0
    for pid in list(_sessions):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed += 1
    return killed


__all__ = ["ended", "kill_all", "started"]
