"""Completes sent in batches: many jobs' completes in one engine call (``complete.many``).

A worker running short jobs would otherwise spend a round trip and an engine call per job on
its ``complete``. Completes wait here until the worker flushes: before it asks for more jobs
(:meth:`Batcher.flush_and_call`: the pending completes and the pop go in one engine call,
``complete.pop``, so a job they release is popped in the same call), when a batch is full, or
when the oldest has waited :data:`MAX_DELAY` seconds (the monitor thread sees to that). Flushes
are serialized, so completes reach the engine in the order they were added. The step log lines
waiting (:mod:`scheduler.worker.capture`) go ahead of a batch in its round trip: a job's lines
are stored before it is reported complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import redis

from scheduler.engine.errors import ClusterError, EngineError, translate
from scheduler.engine.scripts import Engine, EnginePipeline
from scheduler.worker.capture import LogShipper, Queued

log = logging.getLogger("flows.worker")

OUTCOME_RECORD = "job_outcome"
"""An attribute set (true) on the worker's records that tell a job's outcome (done, failed,
retried, buried, skipped, released, handed over): a command that shows the outcomes of the jobs
it works in its own words (``flows run``) leaves these records out of its stderr."""
OUTCOME: dict[str, object] = {OUTCOME_RECORD: True}
"""``extra`` of those records."""

# A full batch is sent at once (the engine takes up to 1,000 per call).
MAX_BATCH = 256
# The longest a complete waits for its batch, in seconds.
MAX_DELAY = 0.002

OnReply = Callable[[Any], None]


class Completion(NamedTuple):  # a tuple: made once per job, cheaper than a dataclass
    jid: str
    queue: str
    result: str  # JSON text, or "" for none
    on_reply: OnReply


class Batcher:
    """Pending completes of ``worker``, each with a callback that receives its reply: the job's
    new state, or the error the engine refused it with (an
    :class:`~scheduler.engine.errors.EngineError`),
    or the error that kept the whole batch from being reported (a :class:`redis.RedisError`, or
    the engine's refusal of the whole call).
    """

    def __init__(self, engine: Engine, worker: str, logs: LogShipper | None = None) -> None:
        self.engine = engine
        self.worker = worker
        self.logs = logs
        self._pending: list[Completion] = []
        self._oldest = 0.0
        self._not_before = 0.0  # monotonic: a complete sent again waits until then
        self._told = False  # whoever sends late batches was told of the pending one
        self._lock = threading.Lock()
        self._sending = threading.Lock()
        self._done: list[str] = []  # jids reported complete, for the next "jobs done" line

    def add(
        self, jid: str, queue: str, result: str, on_reply: OnReply, *, after: float = 0.0
    ) -> int:
        """Queue a complete; returns how many are pending now (flush at :data:`MAX_BATCH`;
        whoever sends late batches needs waking at 1). ``after``: the batch is not due before
        that many seconds (a complete sent again after a fault; a fetch still takes it)."""
        with self._lock:
            now = time.monotonic()
            if not self._pending:
                self._oldest = now
            self._not_before = max(self._not_before, now + after)
            self._pending.append(Completion(jid, queue, result, on_reply))
            return len(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def untold(self) -> bool:
        """Whether completes are pending that whoever sends late batches was not told of yet
        (true once per batch: the caller tells it now)."""
        if not self._pending:  # most calls: the slot's fetch sent them (no lock needed to see)
            return False
        with self._lock:
            if not self._pending or self._told:
                return False
            self._told = True
            return True

    def due_in(self) -> float | None:
        """Seconds until the oldest pending complete is due (<= 0: now); None when none is."""
        with self._lock:
            if not self._pending:
                return None
            return max(self._oldest + MAX_DELAY, self._not_before) - time.monotonic()

    def flush(self) -> None:
        """Send every pending complete, then run their callbacks in order."""
        with self._sending:
            for batch in self._take():
                self._send(batch)
        self.log_done()

    def log_done(self) -> None:
        """Log the jobs reported complete since the last line, in one line at INFO.

        Not written as a reply comes in: in a chain of steps that write would sit between a
        step's complete and the start of the next step its reply hands over (a third of a
        short job's time in the worker). The monitor thread writes it (Keeper), and a flush.
        """
        with self._lock:
            done, self._done = self._done, []
        if done:
            count = len(done)
            log.info(
                "%d job%s done: %s", count, "" if count == 1 else "s", " ".join(done), extra=OUTCOME
            )

    def flush_and_call(self, command: str, *args: Any) -> Any:
        """Flush, with the engine call ``command`` sent after the completes in the same round
        trip (a pop: the completes free their locks and may make jobs ready first; a
        ``pop.lean`` goes in the same engine call, ``complete.pop``); returns its reply, or
        raises its error."""
        with self._sending:
            batches = self._take()
            if not batches:
                return self.engine.call(command, *args)
            for batch in batches[:-1]:
                self._send(batch)
            last = batches[-1]
            # A pop goes in the completes' own call (complete.pop): a job they release is
            # popped at once, with no second engine call.
            joined = command == "pop.lean"
            if joined and (self.logs is None or not self.logs.pending):
                return self._complete_and_pop(last, *args)
            pipe = self.engine.pipeline()
            with self._logs_into(pipe) as logged:
                if joined:
                    queue, worker, count = args
                    pipe.call("complete.pop", worker, queue, count, *_arguments(last))
                else:
                    pipe.call("complete.many", self.worker, *_arguments(last))
                    pipe.call(command, *args)
                try:
                    replies = pipe.execute()
                except (redis.RedisError, ClusterError) as error:
                    logged.replied(error)
                    self._deliver(last, error)
                    raise
                logged.replied(replies)
            if joined:
                both = replies[len(logged)]
                texts, reply = (both, both) if isinstance(both, Exception) else both
            else:
                texts, reply = replies[len(logged) :]
            self._deliver(last, texts)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def _complete_and_pop(
        self, batch: list[Completion], queue: str, worker: str, count: int
    ) -> Any:
        """The completes and the pop in one engine call (``complete.pop``): a job they release
        into ``queue`` is popped in the same call. Returns the pop's reply."""
        try:
            texts, reply = self.engine.call(
                "complete.pop", worker, queue, count, *_arguments(batch)
            )
        except (redis.RedisError, ClusterError, EngineError) as error:
            self._deliver(batch, error)
            raise
        self._deliver(batch, texts)
        return reply

    def _take(self) -> list[list[Completion]]:
        """The pending completes, in batches of at most :data:`MAX_BATCH`; none are left."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._told = False
            self._not_before = 0.0
        return [pending[first : first + MAX_BATCH] for first in range(0, len(pending), MAX_BATCH)]

    def _send(self, batch: list[Completion]) -> None:
        if self.logs is not None and self.logs.pending:
            pipe = self.engine.pipeline()
            with self._logs_into(pipe) as logged:
                pipe.call("complete.many", self.worker, *_arguments(batch))
                try:
                    replies = pipe.execute()
                except redis.RedisError as error:
                    logged.replied(error)
                    self._deliver(batch, error)
                    return
                logged.replied(replies)
            self._deliver(batch, replies[-1])
            return
        try:
            texts = self.engine.call("complete.many", self.worker, *_arguments(batch))
        except (redis.RedisError, ClusterError, EngineError) as error:
            texts = error
        self._deliver(batch, texts)

    def _logs_into(self, pipe: EnginePipeline) -> AbstractContextManager[Queued]:
        """The waiting step log lines queued on ``pipe`` (nothing without a shipper)."""
        if self.logs is None:
            return contextlib.nullcontext(Queued())
        return self.logs.into(pipe)

    def _deliver(self, batch: list[Completion], texts: Any) -> None:
        """Run the callbacks with the engine's replies (the JSON list ``complete.many`` replied,
        or the error that kept the whole batch from being reported); log the jobs done."""
        replies: list[Any]
        if isinstance(texts, Exception):  # a connection error, or the whole call refused
            # Said by each job's callback (an outage's once: scheduler.worker.unsent).
            log.debug("could not report %d completes (%s)", len(batch), texts)
            replies = [texts] * len(batch)
        else:
            replies = [_reply(text) for text in json.loads(texts)]
        for completion, reply in zip(batch, replies, strict=True):
            completion.on_reply(reply)
        # Logged later, many batches a line (log_done): a line per job would cost more than
        # handling a short job.
        done = [c.jid for c, reply in zip(batch, replies, strict=True) if isinstance(reply, str)]
        if done:
            with self._lock:
                self._done += done


def _arguments(batch: list[Completion]) -> list[str]:
    """``complete.many``'s arguments after the worker: ``jid queue result`` per job."""
    args: list[str] = []
    for completion in batch:
        args += [completion.jid, completion.queue, completion.result]
    return args


def _reply(text: str) -> Any:
    """A job's new state, or the engine's error for it as its exception."""
    if text.islower():  # a state ("complete", "waiting", ...); error codes are upper case
        return text
    return translate(redis.ResponseError(text), "complete") or text
