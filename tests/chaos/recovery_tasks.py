"""The job of the recovery scenario (test_recovery.py), imported by the worker processes."""

from __future__ import annotations

import os
import time

from scheduler.worker import JobContext


def hold(job: JobContext) -> str:
    """Mark ``started <jid> <pid> <time>`` in ``data["marks"]``; run a minute on the worker named
    ``data["hold_on"]`` (the one to be killed), a moment anywhere else; mark ``finished``."""
    marks = str(job.data["marks"])
    _mark(marks, f"started {job.jid} {os.getpid()} {time.time():.6f}")
    seconds = 60.0 if job.job.worker == job.data.get("hold_on") else 0.05
    end = time.monotonic() + seconds
    while time.monotonic() < end and not job.stopping:
        time.sleep(0.01)
    _mark(marks, f"finished {job.jid} {os.getpid()} {time.time():.6f}")
    return "done"


def _mark(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
