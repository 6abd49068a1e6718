"""Job functions run by the benchmark's workers (their ``klass`` is ``benchmarks.tasks.<name>``)."""

from __future__ import annotations

import time
from typing import Any

from scheduler.worker import JobContext

#: Where :func:`stamp` reports when it started (a list of ``"<jid> <monotonic ns>"``).
STAMPS_KEY = "bench:stamps"


def noop(job: JobContext) -> None:
    """Nothing: the job completes without a result."""


def stamp(job: JobContext) -> None:
    """Record the moment the job function starts (CLOCK_MONOTONIC is system-wide on Linux)."""
    started = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    job.job.client.redis.rpush(STAMPS_KEY, f"{job.jid} {started}")


def counted(job: JobContext) -> None:
    """Append the job's id to the file ``data.starts`` names, once per start: how many times the
    function ran, kept off the server (a failover may lose what a job wrote there). One short
    line per ``write`` in append mode, so concurrent workers' lines do not mix."""
    with open(job.data["starts"], "a") as starts:
        starts.write(f"{job.jid}\n")


def echo(job: JobContext) -> dict[str, Any]:
    """Return ``{"n": data.n}``: an output that downstream steps of a flow read."""
    return {"n": job.data.get("n")}


def say(job: JobContext) -> None:
    """One line on stdout (captured into the job's step log)."""
    print("hello from", job.jid)


def flood(job: JobContext) -> None:
    """``data.lines`` lines on stdout, as fast as print goes."""
    for i in range(int(job.data.get("lines", 100_000))):
        print("line", i)


def flood_devnull(job: JobContext) -> None:
    """The same lines as :func:`flood`, written to /dev/null (not captured): what the writing
    itself costs."""
    import os

    with open(os.devnull, "w") as sink:
        for i in range(int(job.data.get("lines", 100_000))):
            print("line", i, file=sink)


def link(job: JobContext) -> None:
    """A step of a chain: records when it starts, on the clock the server's history uses
    (CLOCK_REALTIME, shared by every process of the machine)."""
    job.job.client.redis.rpush(STAMPS_KEY, f"{job.jid} {time.time_ns()}")
