"""What is shown of the notifications: one JSON document per event (waiting in the outbox, or
given up) and one per send record, each with fixed field names and types. ``flows
notifications`` (its tables and ``--json``), ``GET /api/v1/notifications`` and the dashboard's
page all render these. Pure.

An event's ``kind`` is its name where rules and webhooks know it (``failure``, ``success``,
``awaiting``, ``deadline``, as a webhook body's ``event``) and its ``scope`` whether it is the
run's or a step's (the body's ``scope``); each channel's ``event``, and a send's, is the name
that channel's rule knows it by (the body it got says the same): the kind, or
``retries_exhausted`` for a rule on a step's exhausted retries. Times are epoch seconds
(numbers), counts integers; a value that is not there is ``null``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

from scheduler.notify.events import Event
from scheduler.notify.tries import DELIVERED, FAILED, Channel


class ChannelDocument(TypedDict):
    """One channel of an event: its rule (index in the run's ``notify`` list), the name its
    rule knows the event by, which channel (``webhook https://...``), its status
    (``delivered``, ``pending``, ``retrying``, ``left`` or ``failed``), the attempts it took,
    when it is tried next (null: it is not) and its last error."""

    rule: int
    event: str
    channel: str
    status: str
    attempts: int
    due: float | None
    error: str


class UndeliveredDocument(TypedDict):
    rule: int
    event: str
    channel: str
    error: str


class EventDocument(TypedDict):
    """An event waiting to be sent (``failed_at`` null) or given up (``due`` null)."""

    id: str
    kind: str
    scope: str
    run: str
    step: str | None
    jid: str | None
    at: float
    exhausted: str | None
    rules: list[int] | None
    retry_of: str | None
    attempts: int
    due: float | None
    failed_at: float | None
    channels: list[ChannelDocument]
    errors: dict[str, str]
    undelivered: list[UndeliveredDocument]


class SendDocument(TypedDict):
    """One send record: an attempt (``delivered``, ``retrying``, or ``failed`` when it was the
    last), a channel given up untried (``failed``, attempt 0), or a sender that could not send
    it (``left``, once per sender and reason)."""

    log_id: str
    id: str
    event: str
    run: str
    jid: str | None
    channel: str
    status: str
    attempt: int
    error: str
    at: float
    by: str
    retry_of: str | None


class UnsendableDocument(TypedDict):
    """A notification channel of a flow file that a scheduler service (``service``, its id)
    cannot send as things are there, and why (``problem``): a secret missing, a URL kept in a
    secret that is none. Said by the service's health, checked when it loads the file."""

    service: str
    file: str
    channel: str
    problem: str


class Pinged(Protocol):
    """A scheduler service's last ping (:class:`~scheduler.service.records.ServiceHealth`)."""

    @property
    def id(self) -> str: ...

    @property
    def info(self) -> Mapping[str, Any]: ...


def unsendable(services: Iterable[Pinged]) -> list[UnsendableDocument]:
    """The channels each of ``services`` says it cannot send, as its last ping lists them."""
    out: list[UnsendableDocument] = []
    for service in services:
        entries = service.info.get("unsendable")
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, Mapping):
                out.append(
                    UnsendableDocument(
                        service=service.id,
                        file=str(entry.get("file", "")),
                        channel=str(entry.get("channel", "")),
                        problem=str(entry.get("problem", "")),
                    )
                )
    return out


def channel_document(index: int, name: str, described: str, channel: Channel) -> ChannelDocument:
    """The document of one channel of an event, from what the deliverers know of it."""
    status = channel.status()
    return {
        "rule": index,
        "event": name,
        "channel": described,
        "status": status,
        "attempts": channel.attempts,
        "due": (channel.due or None) if status not in (DELIVERED, FAILED) else None,
        "error": channel.last_error(),
    }


def event_document(
    event: Event, channels: Sequence[ChannelDocument], failed_at: float | None = None
) -> EventDocument:
    """The document of an event with its channels: waiting (``failed_at`` None) or given up.
    Its ``attempts`` are the most any channel took; ``due`` the next try of any channel;
    ``errors`` and ``undelivered`` say again, in short, what ``channels`` says of those that
    did not take it."""
    dues = [c["due"] for c in channels if c["due"] is not None]
    return {
        "id": event.id,
        "kind": event.name,
        "scope": event.scope,
        "run": event.run,
        "step": event.job_step if event.step is not None else None,
        "jid": event.jid or None,
        "at": event.at,
        "exhausted": event.exhausted or None,
        "rules": list(event.rules) if event.rules is not None else None,
        "retry_of": event.retry_of or None,
        "attempts": max((c["attempts"] for c in channels), default=0),
        "due": min(dues) if dues and failed_at is None else None,
        "failed_at": failed_at,
        "channels": list(channels),
        "errors": {str(c["rule"]): c["error"] for c in channels if c["error"]},
        "undelivered": [
            {"rule": c["rule"], "event": c["event"], "channel": c["channel"], "error": c["error"]}
            for c in channels
            if c["status"] != DELIVERED
        ],
    }


def given_up_document(record: Mapping[str, Any]) -> EventDocument:
    """The document of a given-up event from its record (``P notify:failed``), whatever
    version wrote it (one written before channels were followed has only ``undelivered``)."""
    rules = record.get("rules")
    event = Event(
        id=str(record.get("id", "")),
        kind=str(record.get("kind", "")),
        run=str(record.get("run", "")),
        jid=str(record.get("jid") or ""),
        at=_float(record.get("at")),
        exhausted=str(record.get("exhausted") or ""),
        rules=tuple(_int(i) for i in rules) if isinstance(rules, list) else None,
        retry_of=str(record.get("retry_of") or ""),
    )
    stored = record.get("channels")
    if not isinstance(stored, list):
        attempts = record.get("attempts", 0)
        stored = [
            {**u, "status": FAILED, "attempts": attempts} for u in record.get("undelivered", ())
        ]
    channels = []
    for raw in stored:
        state = Channel(
            delivered=raw.get("status") == DELIVERED,
            given_up=raw.get("status") != DELIVERED,
            attempts=_int(raw.get("attempts")),
            error=str(raw.get("error") or ""),
        )
        described = str(raw.get("channel", ""))
        channels.append(
            channel_document(_int(raw.get("rule")), str(raw.get("event", "")), described, state)
        )
    return event_document(event, channels, failed_at=_float(record.get("failed_at")))


def send_document(log_id: str, fields: Mapping[str, str]) -> SendDocument:
    """The document of a send record (an entry of ``P notify:log``, whose fields are text)."""
    return {
        "log_id": log_id,
        "id": fields.get("id", ""),
        "event": fields.get("event", ""),
        "run": fields.get("run", ""),
        "jid": fields.get("jid") or None,
        "channel": fields.get("channel", ""),
        "status": fields.get("status", ""),
        "attempt": _int(fields.get("attempt")),
        "error": fields.get("error", ""),
        "at": _float(fields.get("at")),
        "by": fields.get("by", ""),
        "retry_of": fields.get("retry_of") or None,
    }


def _int(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
