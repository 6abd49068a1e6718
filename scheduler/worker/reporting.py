"""Reporting outcomes: one table from a job's :class:`~scheduler.worker.runner.Outcome` to the
engine call that reports it.

A complete goes into the next batch (:mod:`scheduler.worker.batching`: it leaves with the next
pop, when the batch is full, or after a couple of milliseconds); every other outcome is sent at
once, after the job's waiting step log lines. Each outcome is reported once (the first to settle
a job wins: its thread, or the monitor giving up on a stuck thread), and the job is let go of
once the engine has it. An outcome the engine did not acknowledge (the connection broke, a
failover, no replica acknowledged it) is sent again, the job held meanwhile. A report refused
for a lost lock (LOCKLOST, WRONGSTATE, NOTFOUND) is dropped: the job is someone else's. One
refused for what it sent (INVALID, TOOLARGE) fails the job at once, since the same outcome would
be refused on every run: a complete in ``bad-result``, any other outcome (a fail too) in
``bad-outcome``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from scheduler import secrets
from scheduler.engine.backoff import CAP, FIRST, transient
from scheduler.engine.client import Client
from scheduler.engine.errors import (
    ClusterError,
    EngineError,
    InvalidArgument,
    JobNotFound,
    LockLost,
    TooLarge,
    WrongState,
)
from scheduler.engine.job import Job
from scheduler.worker.batching import MAX_BATCH, OUTCOME, Batcher
from scheduler.worker.capture import LogShipper
from scheduler.worker.held import Active, Held
from scheduler.worker.runner import Kind, Outcome, failure
from scheduler.worker.unsent import Unsent

log = logging.getLogger("flows.worker")


class Reporter:
    """Reports the outcomes of worker ``client.worker_name``'s jobs; ``wake_monitor`` is told
    of a batch no fetch is about to send (the monitor sends it once due: :meth:`hand_over`)."""

    def __init__(
        self, client: Client, held: Held, logs: LogShipper | None, wake_monitor: Callable[[], None]
    ) -> None:
        self.client = client
        self.name = client.worker_name
        self.held = held
        self.logs = logs
        self.batcher = Batcher(client.engine, self.name, logs)
        self._wake_monitor = wake_monitor
        self.unsent = Unsent(log, "outcome", "the engine hands the job out again")
        # An outcome sent again (:meth:`again`) is not given up on: its own count says so.
        self.unsent_held = Unsent(
            log, "outcome", "its job is held and the outcome sent again until the engine has it"
        )
        # Whether an outcome not acknowledged is sent again (:meth:`again`): until the
        # worker's shutdown grace is over.
        self.resending = True
        # Outcomes sent at once that wait to be sent again: (when, job, outcome), by the
        # monitor (:meth:`send_due`).
        self._later: list[tuple[float, Active, Outcome]] = []
        self._later_lock = threading.Lock()

    def settle(self, active: Active, outcome: Outcome) -> None:
        """Report a job's outcome once; the job is let go of once the engine has it."""
        with active.guard:
            if active.settled:
                log.warning("job %s: late outcome %s dropped", active.ctx.jid, outcome.kind)
                return
            active.settled = True
        _REPORTS[outcome.kind](self, active, outcome)

    def give_back(self, active: Active) -> None:
        """Hand back a job held but not started (the worker is stopping, or a lock ran out)."""
        active.settled = True
        self.release(active.ctx.jid)
        self.held.let_go(active, ran=False)

    def release(self, jid: str) -> None:
        with contextlib.suppress(EngineError, ClusterError, redis.RedisError):
            self.client.engine.call("release", jid, self.name, 0)

    def broken(self, job: Job, error: Exception) -> None:
        """A popped job whose payload cannot be read fails at once. When the fail cannot be
        sent (the server away or full), the job is not held: it goes back to its queue (the
        lease renewals, or its lock) and the next pop fails it. The fetch it came in goes on."""
        log.error("job %s has a broken payload: %s", job.jid, error)
        message = f"{type(error).__name__}: {error}"
        try:
            self.client.engine.call("fail.held", job.jid, self.name, "broken-payload", message)
        except EngineError:
            pass  # no longer this worker's
        except (redis.RedisError, ClusterError) as failure:
            log.warning("job %s: its fail was not sent (%s)", job.jid, failure)

    # -- the batch of completes -----------------------------------------------------------------

    def flush(self) -> None:
        self.batcher.flush()

    def flush_and_call(self, command: str, *args: Any) -> Any:
        """The pending completes, then ``command``, in one round trip (see the Batcher)."""
        return self.batcher.flush_and_call(command, *args)

    def pending(self) -> int:
        return len(self.batcher)

    def send_due(self) -> float | None:
        """Send the batch if it waited long enough (and log the jobs done since the last
        line), and the outcomes due to be sent again; seconds until the next is due, or
        None."""
        later = self._send_later()
        due = self.batcher.due_in()
        if due is not None and due <= 0:
            self.batcher.flush()
            return later
        self.batcher.log_done()
        return due if later is None else later if due is None else min(due, later)

    def _send_later(self) -> float | None:
        """Send again the outcomes whose pause is over; seconds until the next, or None."""
        if not self._later:  # the common case, without the lock
            return None
        now = time.monotonic()
        with self._later_lock:
            ready = [entry for entry in self._later if entry[0] <= now]
            self._later = [entry for entry in self._later if entry[0] > now]
            upcoming = min((when for when, _, _ in self._later), default=None)
        for _, active, outcome in ready:
            if self.held.holds(active):  # not given up on meanwhile (a stop's grace over)
                _REPORTS[outcome.kind](self, active, outcome)
        return None if upcoming is None else max(0.0, upcoming - now)

    def batch(self, active: Active, outcome: Outcome) -> None:
        """Queue the complete for the next batch. The job keeps the data it has: the engine is
        not sent it back. A complete the engine did not acknowledge is sent again
        (:meth:`again`)."""
        job = active.ctx.job
        started = active.started

        def on_reply(reply: Any) -> None:
            if isinstance(reply, Exception) and self.again(active, outcome, reply):
                return
            try:
                if refuses_result(reply):
                    self._refused(active, reply)
                elif lock_lost(reply) and active.resends:
                    _refused_again(active, outcome, reply)
                elif lock_lost(reply):
                    # The lock was lost meanwhile: the job belongs to someone else now.
                    log.warning("job %s: lock lost, outcome complete dropped (%s)", job.jid, reply)
                elif isinstance(reply, Exception):
                    self.unsent.failed(job.jid, reply, "complete")
                else:
                    self.unsent.sent()
                    self.unsent_held.sent()
                    # At INFO the batch is logged in one line (batching.py): a line per job
                    # would cost more than the rest of a short job's handling.
                    job.state, job.worker = str(reply), ""
                    if log.isEnabledFor(logging.DEBUG) and started is not None:
                        log.debug(
                            "job %s done in %.1f ms", job.jid, _elapsed_ms(active), extra=OUTCOME
                        )
            finally:
                self.held.let_go(active)

        # Sent with the slot's next fetch, or by the monitor when the slot does not fetch
        # next (hand_over): waking it here would cost every link of a chain a thread switch.
        # One sent again waits a growing pause (a fetch still takes it along), and never
        # flushes here: it is queued from a flush's replies.
        if not active.resends:
            if self.batcher.add(job.jid, job.queue, outcome.result, on_reply) >= MAX_BATCH:
                self.batcher.flush()
            return
        self.batcher.add(job.jid, job.queue, outcome.result, on_reply, after=_pause(active))

    def again(self, active: Active, outcome: Outcome, error: BaseException) -> bool:
        """Whether the outcome the engine did not acknowledge (``error``: the connection
        broke, a failover was under way, no replica acknowledged it) is sent again. It may not
        be where the job lives now: a promoted replica still has the job running, locked to
        this worker. Let go of, the job would be given back by the next lease renewals and run
        again. So, while the worker is not past its shutdown grace, it stays held (its lock and
        lease kept) and its outcome is sent again after a growing pause until the engine
        answers: done, or refused because the first one ran (or the job is someone else's).
        A complete goes in a later batch; any other outcome is sent by the monitor."""
        if not (transient(error) and self.resending and self.held.holds(active)):
            return False
        if not active.resends:
            self.unsent_held.failed(active.ctx.jid, error, outcome.kind)
        with active.guard:
            active.resends += 1
            active.deadline = None  # it ran: its timeout no longer applies
        if outcome.kind == "complete":
            self.batch(active, outcome)
            self.hand_over()
            return True
        with self._later_lock:
            self._later.append((time.monotonic() + _pause(active), active, outcome))
        self._wake_monitor()
        return True

    def hand_over(self) -> None:
        """A slot that batched completes goes on to something other than a fetch (whose first
        call sends them): the monitor sends them once due, woken once per batch."""
        if self.batcher.untold():
            self._wake_monitor()

    def _refused(self, active: Active, error: EngineError) -> None:
        """The engine refused the job's complete for its result (too large, too deep, a number
        it reads as Infinity): the job still holds its lock, and the same result would be
        refused on every run. It fails at once in ``bad-result`` with the engine's message, as
        the runner fails a result it can tell is unstorable before sending it."""
        self._fail_refused(active, result_refused(error), "its result", error)

    def outcome_refused(self, active: Active, outcome: Outcome, error: EngineError) -> None:
        """The engine (or the client, before sending) refused a job's retry, fail, skip,
        release or bury for what it said (a delay, group or message it cannot take: INVALID,
        TOOLARGE), not for a lost lock: the job still holds its lock, and the same outcome
        would be refused on every run. It fails at once in ``bad-outcome``, the message naming
        the outcome, the engine's words and the outcome's own message (its end, as valid
        text). A refused fail too: this fail differs from it in all the engine can refuse of a
        fail held (its group and message), so the job ends now, not when its lock runs out
        (to run again and be refused again)."""
        self._fail_refused(active, refused(outcome, error), f"its {outcome.kind}", error)

    def _fail_refused(
        self, active: Active, outcome: Outcome, what: str, error: EngineError
    ) -> None:
        jid = active.ctx.jid
        try:
            self.client.engine.call("fail.held", jid, self.name, outcome.group, outcome.message)
        except EngineError as lost:
            log.warning(
                "job %s: the engine refused %s (%s); lock lost, its failure dropped (%s)",
                jid,
                what,
                error,
                lost,
            )
        except (redis.RedisError, ClusterError) as fault:
            log.warning(
                "job %s: the engine refused %s (%s); its failure not reported (%s)",
                jid,
                what,
                error,
                fault,
            )
        else:
            log.warning(
                "job %s failed (%s) after %.1f ms: the engine refused %s (%s)",
                jid,
                outcome.group,
                _elapsed_ms(active),
                what,
                error,
                extra=OUTCOME,
            )


REFUSED_GROUPS = frozenset({"bad-result", "bad-outcome"})
"""The failure groups of a report the engine refused for what it said; the first line of their
message says what it refused and why."""


def lock_lost(error: BaseException) -> bool:
    """Whether the engine refused a report because the job is no longer the worker's (its lock
    lost: LOCKLOST, WRONGSTATE, NOTFOUND): the report is dropped. Any other refusal is for what
    the report said (INVALID, TOOLARGE), and fails the job (:func:`refused`)."""
    return isinstance(error, LockLost | WrongState | JobNotFound)


def result_refused(error: EngineError) -> Outcome:
    """The failure of a job whose complete the engine refused for its result: ``bad-result``
    with the engine's message."""
    return failure("bad-result", f"the job's result cannot be stored: {error}")


def refused(outcome: Outcome, error: EngineError) -> Outcome:
    """The failure of a job whose ``outcome`` (a retry, fail, skip, release or bury) the engine
    refused for what it said: ``bad-outcome``, the message naming the outcome, the engine's
    words and (its end, as valid text) the outcome's own message."""
    message = f"the job's {outcome.kind} was refused: {error}"
    if outcome.message:
        message += f"\nits message: {_readable(outcome.message)}"
    return failure("bad-outcome", message)


def refuses_result(reply: Any) -> bool:
    """Whether a batched complete's reply is the engine refusing that job's result (INVALID,
    TOOLARGE: the one argument of a job's complete the worker did not read from the engine),
    not a lost lock and not the whole call refused or unsent (named after ``complete.many`` or
    ``complete.pop``, every job of the batch has that reply: none is this job's fault)."""
    return isinstance(reply, InvalidArgument | TooLarge) and reply.command == "complete"


# What of a refused outcome's message its failure keeps: its end, as in the runner's messages.
_KEPT_OF_REFUSED = 4096


def _readable(message: str) -> str:
    """The end of a refused outcome's message, made text the engine takes (a lone surrogate,
    which is not UTF-8, written as its escape)."""
    if len(message) > _KEPT_OF_REFUSED:
        message = "..." + message[-_KEPT_OF_REFUSED:]
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


FAILURE_LINE = 300
"""The most characters of a failure's message a worker's log line quotes."""


def failure_line(active: Active, message: str) -> str:
    """What a worker's line about a failed or retried job says after its group: the message's
    line that says why (a traceback's last, any other message's first), cut to
    :data:`FAILURE_LINE` characters with any secret masked, and the command that shows the rest
    (a flow run's step: its logs; any other job: the job)."""
    lines = [line for line in message.splitlines() if line.strip() not in ("", "...")]
    why = ""
    if lines:
        line = lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]
        why = _cut(" ".join(line.split()))
    envelope = active.ctx.envelope
    run, step = envelope.get("run"), envelope.get("step")
    more = f"flows logs {run} {step}" if run and step else f"flows job {active.ctx.jid}"
    return f"{why or '(no message)'}; see `{more}`"


def _cut(line: str) -> str:
    if len(line) <= FAILURE_LINE:
        return secrets.masked(line)
    # masked_cut: the cut may go through a secret whose start alone would show
    left = len(line) - FAILURE_LINE
    return f"{secrets.masked_cut(line[:FAILURE_LINE])}... ({left:,} more characters)"


def _elapsed_ms(active: Active) -> float:
    return (time.monotonic() - (active.started or time.monotonic())) * 1000


# -- the table: outcome -> engine call ---------------------------------------------------------

Call = Callable[[Reporter, Active, Outcome, float], None]
Report = Callable[[Reporter, Active, Outcome], None]


def _at_once(call: Call) -> Report:
    """Report with ``call`` now, after the job's waiting log lines; then let the job go."""

    def report(reporter: Reporter, active: Active, outcome: Outcome) -> None:
        if reporter.logs is not None and reporter.logs.pending:
            reporter.logs.flush()  # the job's lines are stored before its outcome is
        jid = active.ctx.jid
        kept = False  # held, to be sent again
        try:
            call(reporter, active, outcome, _elapsed_ms(active))
            reporter.unsent.sent()
            reporter.unsent_held.sent()
        except EngineError as error:
            if lock_lost(error) and active.resends:
                _refused_again(active, outcome, error)
            elif lock_lost(error):
                # The lock was lost meanwhile: the job belongs to someone else now.
                log.warning("job %s: lock lost, outcome %s dropped (%s)", jid, outcome.kind, error)
            else:  # refused for what it sent (INVALID, TOOLARGE)
                reporter.outcome_refused(active, outcome, error)
        except (redis.RedisError, ClusterError) as error:
            kept = reporter.again(active, outcome, error)
            if not kept:
                reporter.unsent.failed(jid, error, outcome.kind)
        finally:
            if not kept:
                reporter.held.let_go(active)

    return report


def _pause(active: Active) -> float:
    """Seconds before an outcome is sent again: the backoff's pauses, growing with each send."""
    return float(min(CAP, FIRST * 2 ** (active.resends - 1)))


def _refused_again(active: Active, outcome: Outcome, error: Exception) -> None:
    log.warning(
        "job %s: its %s, sent again, was refused: the first one had run, or the job is no"
        " longer this worker's (%s)",
        active.ctx.jid,
        outcome.kind,
        error,
    )


def _retry(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    jid = active.ctx.jid
    left = active.ctx.job.retry(outcome.delay, outcome.group, outcome.message)
    if left < 0:
        log.warning(
            "job %s failed (%s) after %.1f ms, no retries left: %s",
            jid,
            outcome.group,
            elapsed,
            failure_line(active, outcome.message),
            extra=OUTCOME,
        )
    else:
        log.warning(
            "job %s retried in %.1fs (%s, %d retries left): %s",
            jid,
            outcome.delay,
            outcome.group,
            left,
            failure_line(active, outcome.message),
            extra=OUTCOME,
        )


def _fail(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    jid = active.ctx.jid
    reporter.client.engine.call("fail.held", jid, reporter.name, outcome.group, outcome.message)
    log.warning(
        "job %s failed (%s) after %.1f ms: %s",
        jid,
        outcome.group,
        elapsed,
        failure_line(active, outcome.message),
        extra=OUTCOME,
    )


def _skip(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    jid, queue = active.ctx.jid, active.ctx.job.queue
    reporter.client.engine.call(
        "complete", jid, reporter.name, queue, "", "skipped", outcome.message
    )
    log.info("job %s skipped: %s", jid, outcome.message, extra=OUTCOME)


def _release(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    reporter.client.engine.call("release", active.ctx.jid, reporter.name, outcome.delay)
    log.info("job %s released for %.1fs", active.ctx.jid, outcome.delay, extra=OUTCOME)


def _bury(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    active.ctx.job.bury(outcome.message or None)
    log.warning(
        "job %s buried: %s", active.ctx.jid, outcome.message or "(no reason)", extra=OUTCOME
    )


def _handed(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    log.info("job %s handed over: %s", active.ctx.jid, outcome.message, extra=OUTCOME)


def _lost(reporter: Reporter, active: Active, outcome: Outcome, elapsed: float) -> None:
    reason = active.ctx.stop_reason or outcome.message
    log.warning("job %s stopped (%s) after %.1f ms; not reported", active.ctx.jid, reason, elapsed)


_REPORTS: dict[Kind, Report] = {
    "complete": Reporter.batch,  # in the next batch; its reply lets the job go
    "retry": _at_once(_retry),
    "fail": _at_once(_fail),
    "skip": _at_once(_skip),
    "release": _at_once(_release),
    "bury": _at_once(_bury),
    "handed": _at_once(_handed),  # nothing to send: the job's own call took it
    "lost": _at_once(_lost),  # nothing to send: the job is someone else's
}
