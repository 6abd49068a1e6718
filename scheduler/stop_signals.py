"""SIGTERM and SIGINT for the long-lived processes: the first asks to stop, another stops now.

A Python signal handler runs in the main thread between two bytecodes, and that can be while
the thread holds the lock inside a ``threading.Event`` it waits on (``Event.wait`` holds it on
its way in and out of each wait). A handler that sets that Event, as asking to stop does, then
waits for a lock its own thread holds, and the process hangs instead of stopping. So the handler
here only counts: the first signal's stopping runs in a thread of its own, and a later signal's
``again`` must take no lock (``os._exit``, killing children).

The children of a process that passes the signal on (a worker pool, a command serving several
namespaces) must not count to two: one stop request often reaches them twice, passed on and
straight from the kernel, as a signal sent to the process group does (``kill --
-PGID``, a terminal's Ctrl-C, ``timeout``) and systemd's default stop (every process of the
service). Such a parent starts its children with :func:`child_env`: for them SIGTERM and SIGINT
only ask to stop, however many come, and stopping now is the parent's word alone, :data:`NOW`
(SIGUSR1, which nobody sends by accident).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

from scheduler.engine.errors import carrying_given

NOW: Final = signal.SIGUSR1
"""Sent by a parent to the children it started with :func:`child_env`: stop at once."""

ENV: Final = "FLOWS_STOP_SIGNALS"

_supervised = False


def child_env() -> dict[str, str]:
    """The environment a parent gives a child whose stop signals it passes on."""
    return {ENV: "passed-on"}


def supervised() -> bool:
    """Whether :func:`install` took this process for a child its parent passes signals to."""
    return _supervised


def install(first: Callable[[int], None], again: Callable[[int, int], None]) -> bool:
    """Handle SIGTERM and SIGINT: ``first(signum)`` once, in a new thread; ``again(signum,
    count)`` for each later one (count 2, 3, ...), in the handler itself. In a child started
    with :func:`child_env`, SIGTERM and SIGINT call ``first`` only and :data:`NOW` calls
    ``again``. False (nothing installed) outside the main thread, where Python cannot install
    handlers."""
    global _supervised
    # Taken out of the environment: what this process starts (a job's commands) is not a child
    # whose signals it passes on.
    passed_on = os.environ.pop(ENV, None) is not None
    if threading.current_thread() is not threading.main_thread():
        return False
    _supervised = passed_on
    count = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal count
        if count == 0:
            count = 1
            threading.Thread(
                target=carrying_given(first), args=(signum,), name="flows-stop", daemon=True
            ).start()
            # NOW may come first (pending signals are delivered lowest number first): stopping
            # now is stopping too.
            if not (passed_on and signum == NOW):
                return
        elif passed_on and signum != NOW:
            return  # the same request again, passed on or straight from the kernel
        count += 1
        again(signum, count)

    for signum in (signal.SIGTERM, signal.SIGINT, *((NOW,) if passed_on else ())):
        signal.signal(signum, handle)
    return True


__all__ = ["ENV", "NOW", "child_env", "install", "supervised"]
