"""The stop signals' handler takes no lock: a signal that lands while the main thread holds the
lock of the Event it waits on still stops the process (it used to hang it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from scheduler import stop_signals

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


# A child whose parent passes its signals on: any number of SIGTERM/SIGINT is one request, and
# only the parent's NOW stops at once; what the child starts is not told the same.
PASSED_ON = textwrap.dedent(
    """
    import os, signal, threading
    from scheduler import stop_signals

    asked, seen = [], []
    stopped = threading.Event()
    first = lambda signum: (asked.append(signum), stopped.set())
    stop_signals.install(first, lambda signum, count: seen.append((signum, count)))
    assert stop_signals.ENV not in os.environ
    assert stop_signals.supervised()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
        os.kill(os.getpid(), signum)
        for _ in range(1000):
            pass
    assert stopped.wait(10), "the first signal's stop never ran"
    assert asked == [signal.SIGTERM] and seen == [], (asked, seen)
    os.kill(os.getpid(), stop_signals.NOW)
    for _ in range(1000):
        pass
    assert seen == [(stop_signals.NOW, 2)], seen
    print("one request, then now")
    """
)


def test_a_child_whose_signals_are_passed_on_takes_them_as_one_request() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PASSED_ON],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **stop_signals.child_env()},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "one request, then now"


def test_now_before_any_other_signal_also_asks_to_stop() -> None:
    """Pending signals are delivered lowest number first: NOW may come before SIGTERM."""
    script = (
        "import os, threading\nfrom scheduler import stop_signals\n"
        "stopped, seen = threading.Event(), []\n"
        "stop_signals.install(lambda s: stopped.set(), lambda s, count: seen.append(count))\n"
        "os.kill(os.getpid(), stop_signals.NOW)\n"
        "assert stopped.wait(10) and seen == [2], seen\nprint('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **stop_signals.child_env()},
    )
    assert done.stdout.strip() == "ok", done.stderr
