"""Following what the engine does, as it happens: :class:`EventListener` and :class:`Event`.

The engine publishes on Redis channels under the namespace's prefix ``P`` (``lua/README.md``):
JSON events on ``P log`` (put, popped, completed, failed, canceled, lock_lost, config_set, ...),
events for one worker on ``P w:<worker>`` (lock_lost, canceled), and, for tracked jobs, the bare
jid on ``P track``, ``P untrack``, ``P put``, ``P popped``, ``P completed``, ``P failed``,
``P stalled``, ``P canceled``, and ours ``P expired`` and ``P buried``. A listener subscribes to
them on its own connection and either hands out :class:`Event` objects by iteration::

    with EventListener(client) as events:
        for event in events.listen(timeout=5):      # ends after 5 s without an event
            print(event.kind, event.jid)

or runs callbacks in a background thread (like the Tarantool queue's ``on_task_change``)::

    listener = EventListener(client)
    listener.on("failed", lambda event: alert(event.jid))
    listener.on_task_change(lambda event: print(event.kind, event.jid))
    listener.start()   # ... listener.stop()

Reading blocks on the socket; nothing polls in a loop. Note that a tracked job's transitions are
reported twice, once on ``P log`` and once on its tracking channel (``event.channel`` tells which).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, TypedDict

import redis
from redis.client import PubSub

from scheduler.engine import faults
from scheduler.engine.errors import carrying_given
from scheduler.engine.faults import one_line

logger = logging.getLogger(__name__)


class Subscriber(Protocol):
    """What a listener needs of its :class:`~scheduler.engine.client.Client`: named here, so this
    module does not depend on the client module (which builds listeners)."""

    @property
    def prefix(self) -> str: ...

    @property
    def redis(self) -> redis.Redis: ...

    @property
    def worker_name(self) -> str: ...


#: Channels on which the engine publishes a tracked job's bare jid.
TRACKED_CHANNELS = (
    "track",
    "untrack",
    "put",
    "popped",
    "completed",
    "failed",
    "stalled",
    "canceled",
    "expired",
    "buried",
)
#: Every kind of event the engine publishes (an :class:`Event`'s ``kind``): the ``event`` of its
#: JSON messages, the tracking channels, and ``ready`` (``P ready:<queue>``). The one list of them:
#: the engine's tests check each message they see against it, and a test reads the Lua sources
#: for the kinds they publish (tests/lua/test_event_kinds.py).
EVENT_KINDS = frozenset(
    {
        *TRACKED_CHANNELS,
        "ready",
        # jobs
        "advanced",
        "awaiting",
        "deleted",
        "failed_dropped",
        "fanout",
        "kicked",
        "lock_lost",
        "signaled",
        "skipped",
        "subflow_waiting",
        # queues, configuration, throttles
        "config_set",
        "config_unset",
        "queue_dropped",
        "queue_truncated",
        "throttle_set",
        "throttle_unset",
        # runs, backfills, schedules
        "run_canceled",
        "run_rerun",
        "run_submitted",
        "backfill_canceled",
        "backfill_created",
        "backfill_done",
        "backfill_resumed",
        "schedule_buffered",
        "schedule_fired",
        "schedule_paused",
        "schedule_registered",
        "schedule_resumed",
        "schedule_skipped",
        "schedule_triggered",
        "schedule_unregistered",
    }
)
#: What :meth:`EventListener.on` takes besides a kind: every event.
EVERY_KIND = "*"
#: How long :meth:`EventListener.subscribe` waits for the server to confirm the subscriptions.
SUBSCRIBE_TIMEOUT = 10.0

Callback = Callable[["Event"], object]


@dataclass(frozen=True)
class Event:
    """One message from the engine.

    ``channel``: the full Redis channel. ``kind``: what happened (``put``, ``advanced``,
    ``completed``, ``failed``, ``canceled``, ``lock_lost``, ``config_set``, ... for JSON events;
    the channel's name, such as ``popped``, for a tracked job's bare jid; the channel name's first
    part, such as ``ready``, for other plain text). ``jid``: the job concerned, if any. ``data``:
    the decoded JSON event (empty for a bare jid; ``{"message": text}`` for other plain text).
    """

    channel: str
    kind: str
    jid: str | None
    data: dict[str, Any] = field(default_factory=dict)


class ListenerOptions(TypedDict, total=False):
    """The options of an :class:`EventListener` (its defaults: those of its constructor), as
    :meth:`~scheduler.engine.client.Client.events` takes them: typed, so a misspelt one is an
    error to a type checker."""

    workers: Iterable[str] | None
    log: bool
    tracked: bool
    channels: Iterable[str]
    timeout: float | None


class EventListener:
    """Subscribes to one namespace's event channels (see the module documentation).

    ``workers``: whose ``w:<worker>`` channel to follow (default: the client's worker).
    ``log`` / ``tracked``: whether to follow ``P log`` / the tracking channels. ``channels``:
    further channel names under the prefix (for example ``ready:etl``). ``timeout``: how long
    plain iteration (``for event in listener``) waits for the next event before it ends (None:
    for ever).
    """

    def __init__(
        self,
        client: Subscriber,
        *,
        workers: Iterable[str] | None = None,
        log: bool = True,
        tracked: bool = True,
        channels: Iterable[str] = (),
        timeout: float | None = None,
    ) -> None:
        self.client = client
        self.prefix = client.prefix
        self.timeout = timeout
        names = [*(["log"] if log else []), *(TRACKED_CHANNELS if tracked else ())]
        followed = [client.worker_name] if workers is None else list(workers)
        names += [f"w:{worker}" for worker in followed]
        extra = list(channels)
        names += extra
        # Kinds of plain text on the extra channels, as parse() names them.
        self._channel_kinds = {name.split(":", 1)[0] for name in extra}
        self.channels = [self.prefix + name for name in dict.fromkeys(names)]
        # Published to by stop() to wake the reading thread at once.
        self._wake = f"{self.prefix}events:wake:{uuid.uuid4().hex}"
        self._callbacks: dict[str, list[Callback]] = {}
        self._task_callbacks: list[Callback] = []
        self._pubsub: PubSub | None = None
        self._buffer: deque[dict[str, Any]] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._close_on_exit = False
        self._closing = threading.Lock()

    # -- subscribing ------------------------------------------------------------------------------

    def subscribe(self) -> EventListener:
        """Subscribe (idempotent), waiting for the server to confirm: no later event is lost."""
        if self._pubsub is not None:
            return self
        pubsub = self.client.redis.pubsub()  # type: ignore[no-untyped-call]
        pending = {*self.channels, self._wake}
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
        try:
            pubsub.subscribe(*self.channels, self._wake)
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise redis.TimeoutError(f"no subscription confirmed for {sorted(pending)}")
                message = pubsub.get_message(timeout=remaining)
                if message is None:
                    continue
                if message["type"] == "subscribe":
                    pending.discard(message["channel"])
                else:
                    self._buffer.append(message)
        except redis.RedisError as error:
            pubsub.close()
            raise self._fault(error) from error
        except BaseException:
            pubsub.close()
            raise
        self._pubsub = pubsub
        return self

    def _fault(self, error: redis.RedisError) -> Exception:
        """``error`` as the client's calls raise it: a fault of the server or the connection
        as its :mod:`~scheduler.engine.faults` class (a ``ServerError`` naming the server and
        namespace, and still the redis-py class it replaces)."""
        return faults.translate(error, self.client.redis, self.prefix, "subscribe") or error

    # -- reading -----------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting up to ``timeout`` seconds (None: for ever); None if none came."""
        pubsub = self.subscribe()._pubsub
        assert pubsub is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            message = self._buffer.popleft() if self._buffer else None
            if message is None:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                # redis-py documents timeout=None as "wait for ever" but types it as float.
                try:
                    message = pubsub.get_message(
                        ignore_subscribe_messages=True,
                        timeout=wait,  # type: ignore[arg-type]
                    )
                except redis.RedisError as error:
                    raise self._fault(error) from error
            if message is not None and message["type"] == "message":
                if message["channel"] == self._wake:
                    return None
                return self.parse(message["channel"], message["data"])
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def listen(self, timeout: float | None = None) -> Iterator[Event]:
        """Events as they come; ends after ``timeout`` seconds without one (None: never)."""
        if self._thread is not None:
            raise RuntimeError("this listener is running callbacks in a thread; stop() it first")
        while (event := self.get(timeout)) is not None:
            yield event

    def __iter__(self) -> Iterator[Event]:
        return self.listen(self.timeout)

    def parse(self, channel: str, payload: str) -> Event:
        """Turn one published message into an :class:`Event`."""
        name = channel[len(self.prefix) :] if channel.startswith(self.prefix) else channel
        try:
            decoded = json.loads(payload)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            jid = decoded.get("jid")
            kind = decoded.get("event") or name
            return Event(channel, str(kind), None if jid is None else str(jid), decoded)
        if name in TRACKED_CHANNELS:
            return Event(channel, name, payload)
        # Another channel's plain text, e.g. `ready:<queue>` carrying the queue: kind "ready".
        return Event(channel, name.split(":", 1)[0], None, {"message": payload})

    # -- callbacks ---------------------------------------------------------------------------

    def on(self, kind: str, callback: Callback) -> Callback:
        """Call ``callback(event)`` for every event of ``kind`` (``"*"``: every event).

        ``kind`` is one of :data:`EVENT_KINDS` or the first part of one of this listener's
        ``channels`` (``alerts`` for ``alerts:etl``); another raises ``ValueError`` at once,
        since no event would ever match it."""
        self._check_kind(kind)
        self._callbacks.setdefault(kind, []).append(callback)
        return callback

    def _check_kind(self, kind: str) -> None:
        known = sorted({EVERY_KIND, *EVENT_KINDS, *self._channel_kinds})
        if kind in known:
            return
        close = difflib.get_close_matches(str(kind), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"kinds: {', '.join(known)}"
        raise ValueError(f"on(): no event kind {kind!r}, so it would never fire ({hint})")

    def on_task_change(self, callback: Callback) -> Callback:
        """Call ``callback(event)`` for every event that concerns a job (``event.jid`` is set)."""
        self._task_callbacks.append(callback)
        return callback

    def dispatch(self, event: Event) -> None:
        """Run the callbacks that match ``event``; a callback's exception is logged, not raised."""
        callbacks = [*self._callbacks.get(event.kind, ()), *self._callbacks.get("*", ())]
        if event.jid is not None:
            callbacks += self._task_callbacks
        for callback in callbacks:
            try:
                callback(event)
            except Exception:
                logger.exception("event callback %r failed on %r", callback, event)

    def start(self) -> EventListener:
        """Subscribe and run the callbacks in a background (daemon) thread."""
        if self._thread is not None and self._stopping.is_set():
            self.stop()  # stopped from a callback and not yet joined
        if self._thread is None:
            self.subscribe()
            self._stopping.clear()
            self._thread = threading.Thread(
                target=carrying_given(self._run), name="flows-events", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                # A finite wait only as a safety net: stop() wakes the read at once.
                event = self.get(timeout=1.0)
            except redis.RedisError as error:
                # redis-py reconnects and re-subscribes on the next read.
                logger.warning("event subscription failed (%s); retrying in 1 s", one_line(error))
                self._stopping.wait(1.0)
                continue
            if event is not None:
                self.dispatch(event)
        if self._close_on_exit:
            self._close_pubsub()

    @property
    def running(self) -> bool:
        """Whether the callback thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the callback thread (if any) and unsubscribe; safe twice, or from a callback."""
        self._stopping.set()
        thread = self._thread
        if thread is threading.current_thread():
            # Called from a callback: the thread closes the subscription when its loop ends,
            # and a later stop() from outside joins it.
            self._close_on_exit = True
            return
        self._thread = None
        if thread is not None:
            # If this fails, the thread still notices _stopping within a second.
            with contextlib.suppress(redis.RedisError):
                self.client.redis.publish(self._wake, "stop")
            thread.join(timeout)
            if thread.is_alive():
                logger.warning("event callback thread did not stop within %ss", timeout)
                self._close_on_exit = True
                return
        self._close_pubsub()

    def _close_pubsub(self) -> None:
        with self._closing:
            if self._pubsub is not None:
                self._pubsub.close()
                self._pubsub = None
            self._buffer.clear()
            self._close_on_exit = False

    close = stop

    def __enter__(self) -> EventListener:
        """Subscribe; with callbacks registered, also :meth:`start` the thread."""
        self.subscribe()
        if self._callbacks or self._task_callbacks:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["EVENT_KINDS", "TRACKED_CHANNELS", "Event", "EventListener", "Subscriber"]
