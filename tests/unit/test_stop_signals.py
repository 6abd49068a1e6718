"""The stop signals' handler takes no lock: a signal that lands while the main thread holds the
lock of the Event it waits on still stops the process (it used to hang it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The main thread holds the Event's own lock (as Event.wait does on its way in and out of each
# wait) when the signal's handler runs: the handler must not wait for it.
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading
    from scheduler import stop_signals

    stopped = threading.Event()
    seen = []
    stop_signals.install(lambda signum: stopped.set(), lambda signum, count: seen.append(count))
    with stopped._cond:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # bytecodes: the handler runs among them, the lock held
            pass
    assert stopped.wait(10), "the first signal's stop never ran"
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass
    assert seen == [2], seen
    print("stopped")
    """
)


def test_a_signal_landing_while_the_main_thread_holds_the_event_lock_still_stops() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"


def test_only_the_main_thread_installs_handlers() -> None:
    script = (
        "import threading\nfrom scheduler import stop_signals\nout = []\n"
        "t = threading.Thread(target=lambda: out.append(stop_signals.install(print, print)))\n"
        "t.start(); t.join(); print(out)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.strip() == "[False]", done.stderr
