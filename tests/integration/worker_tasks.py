"""Job functions for the worker's end-to-end tests (tests/integration/test_worker.py).

Worker subprocesses import this module by the ``_flows.pythonpath`` envelope option the tests put
on every job (this file's folder), so it must stay importable on its own: no imports from the test
suite. Jobs write what they did to files named in their data, one ``O_APPEND`` write per line (a
single write of a short line is atomic, even from several processes):

* ``data["log"]``: the job's own record (``record`` writes ``<tag or jid>``);
* ``data["marks"]``: ``<event> <jid> <pid> <attempt> <time>`` lines (``started``, ``finished``),
  so a test can wait for a job to be running and learn which process runs it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from scheduler.worker import BuryJob, FailJob, JobContext, ReleaseJob, RetryJob


def append_line(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def mark(job: JobContext, event: str) -> None:
    marks = job.data.get("marks")
    if marks:
        append_line(str(marks), f"{event} {job.jid} {os.getpid()} {job.attempt} {time.time():.6f}")


def _popped_count(job: JobContext) -> int:
    return sum(1 for entry in job.job.history if entry.get("what") == "popped")


# -- plain jobs ---------------------------------------------------------------------------------


def record(job: JobContext) -> dict[str, Any]:
    """Append ``data["tag"]`` (default: the jid) to ``data["log"]``; complete."""
    append_line(str(job.data["log"]), str(job.data.get("tag") or job.jid))
    return {"pid": os.getpid()}


def started_at(job: JobContext) -> float:
    """Complete with the time (this machine's clock) the job started."""
    return time.time()


def echo(job: JobContext) -> Any:
    """Complete with ``data["value"]``."""
    return job.data.get("value")


def depth(job: JobContext) -> int:
    """Complete with how deeply ``data["value"]`` nests (0 for a scalar)."""
    value, levels = job.data.get("value"), 0
    while isinstance(value, list):
        value, levels = (value[0] if value else None), levels + 1
    return levels


# -- long jobs ----------------------------------------------------------------------------------


def busy(job: JobContext) -> str:
    """Run Python code for ``data["seconds"]`` (default 60) without ever looking at ``stopped``.

    Only the worker's interrupt (an exception raised in this thread) can end it early.
    """
    mark(job, "started")
    end = time.monotonic() + float(job.data.get("seconds", 60))
    while time.monotonic() < end:
        time.sleep(0.005)
    mark(job, "finished")
    return "finished"


def sleeps(job: JobContext) -> str:
    """One ``time.sleep(data["seconds"])``: C code an interrupt cannot reach until it returns."""
    mark(job, "started")
    time.sleep(float(job.data.get("seconds", 60)))
    mark(job, "finished")
    return "finished"


#: Holds ``blocked`` jobs of an in-process worker until a test sets it.
GATE = threading.Event()


def blocked(job: JobContext) -> str:
    """Wait in C code (a lock acquire) for :data:`GATE`, as a job stuck in a C call would.

    Interrupts raised in this thread wait until the call returns; set the gate to end it.
    """
    mark(job, "started")
    GATE.wait(60)
    mark(job, "finished")
    return "finished"


def gated(job: JobContext) -> str:
    """Run until the file ``data["gate"]`` exists (a test opens it once it has stopped the
    worker), then finish: a job that takes as long as the test needs."""
    mark(job, "started")
    while not os.path.exists(str(job.data["gate"])):
        time.sleep(0.01)
    mark(job, "finished")
    return "finished"


def where_after_gate(job: JobContext) -> dict[str, str]:
    """``gated``, then the working directory it ends in and its sandbox."""
    gated(job)
    return {"cwd": os.getcwd(), "sandbox": str(job.sandbox)}


def blocked_first_attempt(job: JobContext) -> int:
    """Attempt 1 is ``blocked``; later attempts are ``busy`` for ``data["seconds"]``."""
    if job.attempt == 1:
        blocked(job)
    else:
        busy(job)
    return job.attempt


def busy_first_attempt(job: JobContext) -> int:
    """Attempt 1 runs ``busy`` (so a test can kill its worker); later attempts complete at once."""
    if job.attempt == 1:
        busy(job)
    else:
        mark(job, "started")
    return job.attempt


def complete_race(job: JobContext) -> str:
    """Attempt 1 waits, deaf to stop requests, for the file ``data["gate"]``, then completes the
    job itself (Redis Work Queue style) and marks ``completed`` or ``refused``; later attempts
    complete at once. A test freezes the first worker past its lock so a second one takes over."""
    mark(job, "started")
    if job.attempt > 1:
        return "second"
    job.interrupt_thread = False
    gate = str(job.data["gate"])
    while not os.path.exists(gate):
        time.sleep(0.01)
    mark(job, "completed" if job.job.try_complete(result="first") else "refused")
    return "first"


# -- outcomes -----------------------------------------------------------------------------------


class Boom(Exception):
    """A job's own failure; its class name is the failure group."""


def fails(job: JobContext) -> None:
    """Always raise :class:`Boom` (retried with backoff, then failed in group ``Boom``)."""
    mark(job, "started")
    raise Boom(f"attempt {job.attempt} failed")


def fails_naming_an_undecodable_file(job: JobContext) -> None:
    """Raise :class:`Boom` naming a file whose name is not UTF-8, as ``os.fsdecode`` gives it:
    with a lone surrogate."""
    mark(job, "started")
    name = os.fsdecode(b"/data/orders-\xff.csv")
    raise Boom(f"cannot read {name}")


def fails_oddly_named(job: JobContext) -> None:
    """Raise an exception whose class name and ``group`` the engine would refuse as a group:
    white space, a control character, more than 256 bytes."""
    mark(job, "started")
    error = type("Bad Name", (Exception,), {})(f"attempt {job.attempt} failed")
    if job.attempt > 1:
        error.group = "tab\there " + "x" * 300  # type: ignore[attr-defined]
    raise error


def retry_once(job: JobContext) -> int:
    """Attempt 1 asks for a retry (group ``again``, no delay); attempt 2 completes."""
    mark(job, "started")
    if job.attempt == 1:
        raise RetryJob("not yet", delay=0, group="again")
    return job.attempt


def exits(job: JobContext) -> None:
    """Raise what ends a script, not a job: ``SystemExit(data["code"])`` (``sys.exit``), or
    ``KeyboardInterrupt`` with ``data["interrupt"]``."""
    import sys

    if job.data.get("interrupt"):
        raise KeyboardInterrupt
    sys.exit(job.data.get("code", 3))


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("repr() of this object fails")


def unprintable_result(job: JobContext) -> dict[str, Any]:
    """Return a result JSON cannot hold whose repr() raises."""
    return {"value": _Unprintable()}


def huge_number(job: JobContext) -> dict[str, Any]:
    """Return a number the engine refuses (past a double's range: it reads as Infinity) though
    Python encodes it as JSON."""
    return {"value": 10**400}


def fail_now(job: JobContext) -> None:
    """Fail in group ``given-up`` without using a retry."""
    raise FailJob("given-up", "the job decided to fail")


def fail_saying(job: JobContext) -> None:
    """Fail in group ``said`` with the message in the job's data, without using a retry."""
    raise FailJob("said", str(job.data["message"]))


def raises_saying(job: JobContext) -> None:
    """Raise with the message in the job's data (retried while retries are left)."""
    raise RuntimeError(str(job.data["message"]))


def release_once(job: JobContext) -> int:
    """The first run hands the job back (no retry used) for ``data["delay"]`` seconds (default
    0); the second completes."""
    runs = _popped_count(job)
    mark(job, "started")
    if runs == 1:
        raise ReleaseJob(float(job.data.get("delay", 0)))
    return runs


def bury_me(job: JobContext) -> None:
    """Bury the job with the reason ``data["reason"]``."""
    raise BuryJob(str(job.data.get("reason", "")))


def outlive_deadline(job: JobContext) -> str:
    """Wait (at most 10 s) until the job's ttl deadline has passed, then hand it back for 60 s:
    it is delayed past its deadline, so it expires while delayed."""
    deadline = job.job.deadline
    assert deadline is not None, "put the job with a ttl"
    give_up = time.monotonic() + 10
    while time.time() < deadline + 0.05 and time.monotonic() < give_up:
        time.sleep(0.01)
    raise ReleaseJob(60)


class Tasks:
    """A class klass: ``Tasks.special`` runs jobs of queue ``special``, ``process`` the others."""

    def __init__(self) -> None:
        self.kind = "instance"

    def process(self, job: JobContext) -> dict[str, str]:
        return {"method": "process", "queue": job.queue, "kind": self.kind}

    def special(self, job: JobContext) -> dict[str, str]:
        return {"method": "special", "queue": job.queue, "kind": self.kind}


class StaticTasks:
    """A class klass whose ``process`` is a static method (called on the class)."""

    @staticmethod
    def process(job: JobContext) -> str:
        return f"static:{job.queue}"


def prepare(job: JobContext) -> None:
    """A ``--prepare`` hook: record that it ran before the job."""
    mark(job, "prepared")


def litter(job: JobContext) -> list[str]:
    """Leave a file and a folder in the sandbox; complete with what was there before."""
    found = sorted(os.listdir(job.sandbox))
    (job.sandbox / "left-behind.txt").write_text(job.jid)
    (job.sandbox / "left-behind").mkdir()
    return found


# -- step logs (tests/integration/test_step_logs.py) ---------------------------------------------

_side_by_side = threading.Barrier(2, timeout=10)


def bytes_out(job: JobContext) -> None:
    """Writes bytes to ``sys.stdout.buffer`` and ``sys.stderr.buffer``: a terminal's control
    sequence, a byte that is not UTF-8, and a character cut in two by two writes."""
    import sys

    sys.stdout.buffer.write(b"\x1b[2J clear \xff\n")
    sys.stdout.buffer.write("caf\u00e9".encode()[:-1])
    sys.stdout.buffer.write("caf\u00e9\n".encode()[-2:])
    sys.stdout.buffer.flush()
    sys.stderr.buffer.writelines([b"err ", b"bytes"])


def chatty(job: JobContext) -> None:
    """Writes ``data["lines"]`` lines tagged with ``data["tag"]`` to stdout, one to stderr and
    a logging record; with ``data["together"]``, first waits for a second chatty job to run at
    the same time (in another thread), so that their lines interleave."""
    import logging
    import sys

    tag = job.data["tag"]
    if job.data.get("together"):
        _side_by_side.wait()
    for i in range(int(job.data.get("lines", 3))):
        print(f"{tag} {i}")
        if job.data.get("together"):
            time.sleep(0)  # let the other thread write too
    print(f"{tag} warns", file=sys.stderr)
    logging.getLogger("tasks.chatty").warning("%s logged", tag)
    if job.data.get("fail_first") and job.attempt == 1:
        raise RuntimeError(f"{tag} fails its first attempt")


def flood(job: JobContext) -> None:
    """Prints ``data["lines"]`` numbered lines as fast as it can."""
    for i in range(int(job.data["lines"])):
        print(i)


def alternating(job: JobContext) -> None:
    """Writes ``data["rounds"]`` pairs of lines, stdout then stderr, flushing each, with a
    logging record every tenth round: the log must keep the order they were written in."""
    import logging
    import sys

    for i in range(int(job.data["rounds"])):
        print(f"out {i}", flush=True)
        print(f"err {i}", file=sys.stderr, flush=True)
        if i % 10 == 0:
            logging.getLogger("tasks.alternating").warning("record %d", i)


def long_line(job: JobContext) -> None:
    """Writes one line of ``data["size"]`` characters in pieces, then a short one."""
    import sys

    piece = "y" * 65536
    for _ in range(int(job.data["size"]) // len(piece)):
        sys.stdout.write(piece)
    sys.stdout.write("\nafter\n")


def fault_wording(job: JobContext) -> str:
    """Where this thread's fault messages tell a user to fix the Redis URL."""
    from scheduler.engine.faults import login_fix

    return login_fix()
