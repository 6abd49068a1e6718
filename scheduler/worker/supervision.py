"""A pool child stops when its supervisor dies, however it dies (``kill -9`` included).

The supervisor hands each child a *lifeline*: the read end of a pipe whose write end only the
supervisor holds, named with the supervisor's pid in ``$FLOWS_SUPERVISOR`` (``<pid>:<fd>``).
When the supervisor process ends, the kernel closes its write end and the child reads end of
file. The child then stops as on SIGTERM: it takes no more jobs, running jobs get the shutdown
grace, the rest are handed back; if it cannot (a job stuck in C code), it exits hard after
``hard_exit_after`` seconds and its jobs are reclaimed when their locks expire, as any dead
worker's are. On Linux the child also asks the kernel for SIGTERM when its parent goes
(``prctl(PR_SET_PDEATHSIG)``), which needs no thread of the child to be scheduled; the pipe is
the portable path, and catches a supervisor that died before the child asked.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from scheduler.engine.errors import carrying_given

log = logging.getLogger("flows.worker")

ENV = "FLOWS_SUPERVISOR"
_PR_SET_PDEATHSIG = 1
# Exit status of a child that had to leave without a clean stop after its supervisor died.
EXIT_ORPHANED = 70


class Lifeline:
    """The supervisor's side: one pipe per child. Pass :attr:`fd` to the child (``pass_fds``)
    with :attr:`env`, then call :meth:`started`; :meth:`close` once the child is gone."""

    def __init__(self) -> None:
        self.fd, self._write = os.pipe()  # both not inherited, except as pass_fds says
        self.env = {ENV: f"{os.getpid()}:{self.fd}"}

    def started(self) -> None:
        """The child has its copy of the read end: the supervisor's goes."""
        os.close(self.fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._write)


def watch_supervisor(stop: Callable[[], None], hard_exit_after: float) -> bool:
    """In a child: call ``stop`` once its supervisor is gone, and exit after ``hard_exit_after``
    more seconds if the process is still there. False when not started by a supervisor."""
    value = os.environ.pop(ENV, "")
    pid_text, _, fd_text = value.partition(":")
    if not (pid_text.isdigit() and fd_text.isdigit()):
        return False
    supervisor, fd = int(pid_text), int(fd_text)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    def watch() -> None:
        # The supervisor may have died before prctl: then the parent is already someone else.
        if os.getppid() == supervisor:
            with contextlib.suppress(OSError):
                while os.read(fd, 1):  # nothing is ever written: this returns at end of file
                    pass
        log.warning(
            "worker process %d: its supervisor %d is gone; stopping", os.getpid(), supervisor
        )
        stop()
        threading.Event().wait(hard_exit_after)
        log.error(
            "worker process %d: not stopped %.0fs after its supervisor; exiting",
            os.getpid(),
            hard_exit_after,
        )
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=carrying_given(watch), name="flows-lifeline", daemon=True).start()
    return True


def terminate_with_parent(parent: int) -> Callable[[], None]:
    """For ``subprocess.Popen(preexec_fn=...)``: the child gets SIGTERM when ``parent`` (the
    process starting it) dies, however it dies; a child whose parent is already gone exits.
    Linux only (elsewhere the child is left as it is); for a child that is a whole command with
    its own clean stop on SIGTERM, such as ``flows worker`` for one namespace."""

    def in_child() -> None:
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it died before prctl took effect
            os._exit(EXIT_ORPHANED)

    return in_child
