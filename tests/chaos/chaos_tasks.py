"""The job the chaos harness runs: it writes what happened to an append-only log, then works.

Every run appends a ``start`` line before it works and an ``end`` line after (outcome ``ok``,
``raise``, ``fail`` or ``interrupted``), each one ``os.write`` of a short JSON line to a file
opened with ``O_APPEND`` (atomic between processes for lines this short). The log names the job,
the worker, the process, the attempt, a nonce that ties the two lines of one run together, and the
wall-clock time (CLOCK_REALTIME, read directly, so a worker whose ``time.time`` is skewed on
purpose still logs true time). The job's result names the worker and the nonce, so the harness
can tell which run's complete the engine accepted.

Job data: ``ms`` (work time), ``fail``: ``""`` (succeed), ``"first"`` (raise on the first attempt:
retried), ``"always"`` (FailJob in group ``chaos-bad``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from scheduler.worker import FailJob, JobContext

LOG_ENV = "FLOWS_CHAOS_LOG"


def wall_time() -> float:
    """True wall-clock time, even where ``time.time`` is patched to simulate a skewed clock."""
    return time.clock_gettime(time.CLOCK_REALTIME)


def append(record: dict[str, Any]) -> None:
    """One line to the log, in one write."""
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def work(ctx: JobContext) -> dict[str, Any]:
    """Log the start, work ``ms`` milliseconds (stopping early when told), log the end."""
    nonce = uuid.uuid4().hex[:12]
    base = {"jid": ctx.jid, "n": nonce}
    append(
        {
            **base,
            "e": "start",
            "w": ctx.worker,
            "pid": os.getpid(),
            "a": ctx.attempt,
            "t": wall_time(),
        }
    )
    outcome = "interrupted"
    try:
        deadline = time.monotonic() + float(ctx.data.get("ms", 50)) / 1000
        while time.monotonic() < deadline and not ctx.stopped.is_set():
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
        mode = ctx.data.get("fail", "")
        if mode == "always":
            outcome = "fail"
            raise FailJob("chaos-bad", f"{ctx.jid} is designed to fail")
        if mode == "first" and ctx.attempt == 1:
            outcome = "raise"
            raise RuntimeError(f"{ctx.jid}: flaky on its first attempt")
        outcome = "ok"
        return {"w": ctx.worker, "n": nonce}
    finally:
        append({**base, "e": "end", "o": outcome, "t": wall_time()})
