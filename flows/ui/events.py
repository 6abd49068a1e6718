"""Server-sent events: the engine's events, and a job's log lines as they are written.

Each stream holds one of the server's worker threads while it is open, so at most
:data:`MAX_STREAMS` are open at once (more get 503). A comment line is sent every
:data:`KEEPALIVE` seconds without events, so proxies keep the connection and a stream whose
client left (a dashboard page closed or navigated away) notices within that time and gives
its place back. A client that closes its connection is noticed sooner, within one poll: each
source yields :data:`IDLE` after every poll that found nothing, and the response sends nothing
for it, so the thread following a stream is back at least that often to be told to stop.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

import anyio
from fastapi import HTTPException
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from flows.runs.logs import Follower, job_label
from flows.ui.state import refusal
from scheduler.engine.client import Client
from scheduler.engine.errors import ForeignEngine
from scheduler.engine.limits import read_json

MAX_STREAMS = 32
KEEPALIVE = 2.0
#: What a source yields after a poll that found nothing: not sent, a point to stop at.
IDLE = ""

#: A stream's answer in the OpenAPI document: events, not JSON.
ANSWER = {
    "description": "Server-sent events (`event:` and a `data:` JSON object each) as they happen.",
    "content": {"text/event-stream": {}},
}

_open = threading.BoundedSemaphore(MAX_STREAMS)
# Set when the server stops: every stream ends by itself, so the stop waits for none of them.
_stopping = threading.Event()


def stop_all() -> None:
    """End every open stream (within a poll's interval): the server is stopping."""
    _stopping.set()


def stream(
    events: Iterator[str],
    engine_library: Callable[[], None],
    still_allowed: Callable[[], bool] | None = None,
) -> StreamingResponse:
    """An event-stream response over ``events`` (each a whole event's text).

    Every :data:`KEEPALIVE` seconds or so it calls ``engine_library`` (which raises
    :class:`ForeignEngine` once the engine's library is not this release's: the stream then ends
    with ``event: refused``, ``{"detail": ...}`` as the API's errors, and so does an engine call
    of ``events`` refused so), and asks ``still_allowed`` whether the credential the stream was
    opened with still works; once it does not (a user revoked), the stream ends with ``event:
    revoked``."""
    if not _open.acquire(blocking=False):
        raise HTTPException(503, f"too many open event streams (at most {MAX_STREAMS})")
    return _Held(_watched(events, engine_library, still_allowed))


def _watched(
    events: Iterator[str],
    engine_library: Callable[[], None],
    still_allowed: Callable[[], bool] | None,
) -> Iterator[str]:
    """``events`` for as long as the engine's library is this release's and ``still_allowed()``
    says yes, looked at every :data:`KEEPALIVE` seconds (each source yields at least that
    often)."""
    looked = time.monotonic()
    try:
        while True:
            try:
                chunk = next(events, None)
                due = time.monotonic() - looked >= KEEPALIVE
                if due:
                    looked = time.monotonic()
                    engine_library()
            except ForeignEngine as error:
                yield event({"detail": refusal(error)}, "refused")
                return
            if chunk is None:
                return
            if due and still_allowed is not None and not still_allowed():
                yield event({"detail": "the token was revoked: this stream ends"}, "revoked")
                return
            yield chunk
    finally:
        close = getattr(events, "close", None)
        if close is not None:  # its own finally runs: a subscription is dropped
            close()


class _Held(StreamingResponse):
    """An event stream holding one of the open streams' places.

    The place is given back, and ``events`` closed (its ``finally`` runs: a subscription is
    dropped), as soon as the response ends for any reason: the events ran out, the client went
    (a close or a reset, noticed by the server as a disconnect or as a failed write), or the
    server stops. Only a response that is never sent at all falls back on ``__del__``.
    """

    def __init__(self, events: Iterator[str]) -> None:
        self.events = events
        self.released = False
        super().__init__(
            self._chunks(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _chunks(self) -> AsyncIterator[str]:
        while True:
            # Not abandoned on cancel: the thread's next() ends within a poll's timeout, and
            # the generator must be idle before it can be closed.
            chunk = await anyio.to_thread.run_sync(next, self.events, None)
            if chunk is None:
                return
            if chunk != IDLE:
                yield chunk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()

    def release(self) -> None:
        if not self.released:
            self.released = True
            _open.release()
            close = getattr(self.events, "close", None)
            if close is not None:
                # ValueError: still running in its thread (a server stopping): it ends with it
                with contextlib.suppress(ValueError):
                    close()

    def __del__(self) -> None:
        self.release()


def event(data: object, kind: str | None = None) -> str:
    head = f"event: {kind}\n" if kind else ""
    return f"{head}data: {json.dumps(data, sort_keys=True)}\n\n"


def engine_events(client: Client, poll: float = 1.0) -> Iterator[str]:
    """What the engine publishes on ``P log``, each event's JSON as one ``data:`` line
    (:data:`IDLE` after each ``poll`` seconds without one)."""
    pubsub = client.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    channel = client.engine.key_prefix + "log"
    try:
        pubsub.subscribe(channel)
        yield ": listening\n\n"
        quiet_since = time.monotonic()
        while not _stopping.is_set():
            message = pubsub.get_message(timeout=poll)
            if message is None:
                if time.monotonic() - quiet_since > KEEPALIVE:
                    quiet_since = time.monotonic()
                    yield ": keepalive\n\n"
                else:
                    yield IDLE
                continue
            quiet_since = time.monotonic()
            try:
                data = read_json(message["data"])
            except ValueError:
                continue
            yield event(data)
    finally:
        pubsub.close()


def log_lines(client: Client, jid: str, interval: float = 0.2) -> Iterator[str]:
    """The job's lines (``event: line``, each in the shape ``flows logs --json`` prints:
    :meth:`~flows.runs.logs.StepLine.as_dict`), then ``event: end`` once it has ended. Something is
    sent at least every :data:`KEEPALIVE` seconds, so a stream whose client left ends then
    (:data:`IDLE` after each look every ``interval`` seconds that found nothing)."""
    yield ": following\n\n"
    follower = Follower(client, [(job_label(client, jid), jid)])
    quiet_since = time.monotonic()
    while not _stopping.is_set():
        lines = follower.poll()
        for item in lines:
            yield event(item.as_dict(), "line")
        if follower.done:
            break
        if lines:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > KEEPALIVE:
            quiet_since = time.monotonic()
            yield ": keepalive\n\n"
        else:
            yield IDLE
        time.sleep(interval)
    yield event({"jid": jid}, "end")
