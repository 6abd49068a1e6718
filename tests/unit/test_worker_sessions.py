"""A worker ending at once (a second stop signal) kills the sessions its shell steps started,
the one still being started included: a real process forked but not yet registered when the
exit comes is waited for and killed, and no session starts after it."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from scheduler.worker import sessions


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry as a worker process starts with it, put back afterwards (kill_all marks the
    process as ending, for good)."""
    monkeypatch.setattr(sessions, "_sessions", set())
    monkeypatch.setattr(sessions, "_starting", set())
    monkeypatch.setattr(sessions, "_ending", False)
    yield


def test_a_session_being_started_when_the_worker_ends_is_killed_too() -> None:
    forked = threading.Event()
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:  # as the shell task starts its command, the exit landing in between
        with sessions.starting():
            process = subprocess.Popen(["sleep", "300"], start_new_session=True)
            started.append(process)
            forked.set()
            deadline = time.monotonic() + 10
            while not sessions._ending and time.monotonic() < deadline:
                time.sleep(0.001)
            sessions.started(process.pid)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    assert forked.wait(10)
    try:
        assert sessions.kill_all() == 1
        assert started[0].wait(10) == -signal.SIGKILL
    finally:
        with contextlib.suppress(ProcessLookupError):
            started[0].kill()
        thread.join(10)


def test_no_session_starts_once_the_worker_ends() -> None:
    assert sessions.kill_all() == 0
    with pytest.raises(sessions.Ending), sessions.starting():
        pytest.fail("a session was let start")
