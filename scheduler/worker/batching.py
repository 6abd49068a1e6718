"""Completes sent in batches: many jobs' completes in one engine call (``complete.many``).

A worker running short jobs would otherwise spend a round trip and an engine call per job on
its ``complete``. Completes wait here until the worker flushes: before it asks for more jobs,
when a batch is full, or when the oldest has waited :data:`MAX_DELAY` seconds (the monitor
thread sees to that). Flushes are serialized, so completes reach the engine in the order they
were added.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from scheduler.errors import translate
from scheduler.scripts import Engine

log = logging.getLogger("flows.worker")

# A full batch is sent at once (the engine takes up to 1,000 per call).
MAX_BATCH = 256
# The longest a complete waits for its batch, in seconds.
MAX_DELAY = 0.002

OnReply = Callable[[Any], None]


@dataclass(frozen=True)
class Completion:
    jid: str
    queue: str
    result: str  # JSON text, or "" for none
    on_reply: OnReply


class Batcher:
    """Pending completes of ``worker``, each with a callback that receives its reply: the job's
    new state, or the error the engine refused it with (an :class:`~scheduler.errors.EngineError`,
    or the :class:`redis.RedisError` that kept the batch from being sent).
    """

    def __init__(self, engine: Engine, worker: str) -> None:
        self.engine = engine
        self.worker = worker
        self._pending: list[Completion] = []
        self._oldest = 0.0
        self._lock = threading.Lock()
        self._sending = threading.Lock()

    def add(self, jid: str, queue: str, result: str, on_reply: OnReply) -> int:
        """Queue a complete; returns how many are pending now (flush at :data:`MAX_BATCH`;
        whoever sends late batches needs waking at 1)."""
        with self._lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(Completion(jid, queue, result, on_reply))
            return len(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def due_in(self) -> float | None:
        """Seconds until the oldest pending complete is due (<= 0: now); None when none is."""
        with self._lock:
            if not self._pending:
                return None
            return self._oldest + MAX_DELAY - time.monotonic()

    def flush(self) -> None:
        """Send every pending complete, then run their callbacks in order."""
        with self._sending:
            with self._lock:
                batch, self._pending = self._pending, []
            for first in range(0, len(batch), MAX_BATCH):
                self._send(batch[first : first + MAX_BATCH])

    def _send(self, batch: list[Completion]) -> None:
        args: list[str] = []
        for completion in batch:
            args += [completion.jid, completion.queue, completion.result]
        replies: list[Any]
        try:
            texts = json.loads(self.engine.call("complete.many", self.worker, *args))
            replies = [_reply(text) for text in texts]
        except redis.RedisError as error:
            log.warning("could not report %d completes (%s)", len(batch), error)
            replies = [error] * len(batch)
        for completion, reply in zip(batch, replies, strict=True):
            completion.on_reply(reply)


def _reply(text: str) -> Any:
    """A job's new state, or the engine's error for it as its exception."""
    return translate(redis.ResponseError(text), "complete") or text
