"""Server-sent events: the engine's events, and a job's log lines as they are written.

Each stream holds one of the server's worker threads while it is open, so at most
:data:`MAX_STREAMS` are open at once (more get 503). A comment line is sent every
:data:`KEEPALIVE` seconds without events, so proxies keep the connection and a stream whose
client left (a dashboard page closed or navigated away) notices within that time and gives
its place back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from flows.steplogs import Follower
from scheduler.engine.client import Client

MAX_STREAMS = 32
KEEPALIVE = 2.0

_open = threading.BoundedSemaphore(MAX_STREAMS)


def stream(events: Iterator[str]) -> StreamingResponse:
    """An event-stream response over ``events`` (each a whole event's text)."""
    if not _open.acquire(blocking=False):
        raise HTTPException(503, f"too many open event streams (at most {MAX_STREAMS})")
    return StreamingResponse(
        _Held(events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class _Held:
    """Events holding one of the open streams' places, given back when the stream ends, or when
    it is dropped without ever being read (a client gone before the first event)."""

    def __init__(self, events: Iterator[str]) -> None:
        self.events = events
        self.released = False

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self.events
        finally:
            self.release()

    def release(self) -> None:
        if not self.released:
            self.released = True
            _open.release()

    def __del__(self) -> None:
        self.release()


def event(data: object, kind: str | None = None) -> str:
    head = f"event: {kind}\n" if kind else ""
    return f"{head}data: {json.dumps(data, sort_keys=True)}\n\n"


def engine_events(client: Client) -> Iterator[str]:
    """What the engine publishes on ``P log``, each event's JSON as one ``data:`` line."""
    pubsub = client.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    channel = client.engine.key_prefix + "log"
    try:
        pubsub.subscribe(channel)
        yield ": listening\n\n"
        quiet_since = time.monotonic()
        while True:
            message = pubsub.get_message(timeout=1.0)
            if message is None:
                if time.monotonic() - quiet_since > KEEPALIVE:
                    quiet_since = time.monotonic()
                    yield ": keepalive\n\n"
                continue
            quiet_since = time.monotonic()
            try:
                data = json.loads(message["data"])
            except ValueError:
                continue
            yield event(data)
    finally:
        pubsub.close()


def log_lines(client: Client, jid: str, interval: float = 0.2) -> Iterator[str]:
    """The job's lines (``event: line``), then ``event: end`` once it has ended. Something is
    sent at least every :data:`KEEPALIVE` seconds, so a stream whose client left ends then."""
    yield ": following\n\n"
    follower = Follower(client, [(jid, jid)])
    quiet_since = time.monotonic()
    while True:
        lines = follower.poll()
        for item in lines:
            yield event({"attempt": item.attempt, **item.line.as_dict()}, "line")
        if follower.done:
            break
        if lines:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > KEEPALIVE:
            quiet_since = time.monotonic()
            yield ": keepalive\n\n"
        time.sleep(interval)
    yield event({"jid": jid}, "end")
