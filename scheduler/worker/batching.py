"""Engine calls sent in batches: many jobs' outcomes in one pipeline round trip.

A worker running short jobs would otherwise spend a round trip per job on its ``complete``.
Calls wait here until the worker flushes: before it asks for more jobs, when a batch is full,
or when the oldest call has waited :data:`MAX_DELAY` seconds (the monitor thread sees to that).
Flushes are serialized, so calls reach the engine in the order they were added.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from scheduler.scripts import Engine

log = logging.getLogger("flows.worker")

# A full batch is sent at once.
MAX_BATCH = 256
# The longest a call waits for its batch, in seconds.
MAX_DELAY = 0.002

OnReply = Callable[[Any], None]


@dataclass(frozen=True)
class Call:
    command: str
    args: tuple[Any, ...]
    on_reply: OnReply


class Batcher:
    """Pending engine calls, each with a callback that receives its reply (or its error).

    A call whose batch could not be sent (the connection failed) gets the
    :class:`redis.RedisError` as its reply.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._pending: list[Call] = []
        self._oldest = 0.0
        self._lock = threading.Lock()
        self._sending = threading.Lock()

    def add(self, command: str, *args: Any, on_reply: OnReply) -> int:
        """Queue a call; returns how many are pending now (flush at :data:`MAX_BATCH`; whoever
        sends late batches needs waking at 1)."""
        with self._lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append(Call(command, args, on_reply))
            return len(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def due_in(self) -> float | None:
        """Seconds until the oldest pending call is due (<= 0: now); None when none is pending."""
        with self._lock:
            if not self._pending:
                return None
            return self._oldest + MAX_DELAY - time.monotonic()

    def flush(self) -> None:
        """Send every pending call in one round trip, then run their callbacks in order."""
        with self._sending:
            with self._lock:
                calls, self._pending = self._pending, []
            if not calls:
                return
            pipe = self.engine.pipeline()
            for call in calls:
                pipe.call(call.command, *call.args)
            replies: list[Any]
            try:
                replies = pipe.execute()
            except redis.RedisError as error:
                log.warning("could not report %d job outcomes (%s)", len(calls), error)
                replies = [error] * len(calls)
            for call, reply in zip(calls, replies, strict=True):
                call.on_reply(reply)
