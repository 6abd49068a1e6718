"""SIGTERM and SIGINT for the long-lived processes: the first asks to stop, another stops now.

A Python signal handler runs in the main thread between two bytecodes, and that can be while
the thread holds the lock inside a ``threading.Event`` it waits on (``Event.wait`` holds it on
its way in and out of each wait). A handler that sets that Event, as asking to stop does, then
waits for a lock its own thread holds, and the process hangs instead of stopping. So the handler
here only counts: the first signal's stopping runs in a thread of its own, and a later signal's
``again`` must take no lock (``os._exit``, killing children).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType


def install(first: Callable[[int], None], again: Callable[[int, int], None]) -> bool:
    """Handle SIGTERM and SIGINT: ``first(signum)`` once, in a new thread; ``again(signum,
    count)`` for each later one (count 2, 3, ...), in the handler itself. False (nothing
    installed) outside the main thread, where Python cannot install handlers."""
    if threading.current_thread() is not threading.main_thread():
        return False
    count = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal count
        count += 1
        if count == 1:
            threading.Thread(target=first, args=(signum,), name="flows-stop", daemon=True).start()
        else:
            again(signum, count)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handle)
    return True


__all__ = ["install"]
