"""What the listings show of the notifications (scheduler.notify.documents): one document per
event and per send, with fixed names and types, whatever version wrote what it is read from."""

from __future__ import annotations

import json
import shlex

from scheduler.notify.documents import (
    channel_document,
    event_document,
    given_up_document,
    send_document,
)
from scheduler.notify.events import Context, Event, approval
from scheduler.notify.tries import Channel, Tries


def test_an_event_is_named_as_its_webhook_names_it() -> None:
    run_end = Event(id="1-0", kind="run_failure", run="r@1", jid="r@1:load", at=5.0)
    step = Event(id="2-0", kind="failure", run="r@1", jid="r@1:load[2]", at=5.0, exhausted="retry")
    deadline = Event(id="3-0", kind="deadline", run="r@1", jid="", at=5.0)
    shown = [event_document(e, []) for e in (run_end, step, deadline)]
    assert [(d["kind"], d["scope"], d["step"], d["jid"]) for d in shown] == [
        ("failure", "run", None, "r@1:load"),
        ("failure", "step", "load[2]", "r@1:load[2]"),
        ("deadline", "run", None, None),
    ]
    assert shown[1]["exhausted"] == "retry" and shown[0]["exhausted"] is None


def test_a_channel_given_up_is_failed_with_no_next_try() -> None:
    tries = Tries()
    spent = tries.channel(0)
    spent.attempts, spent.error, spent.given_up = 10, "HTTP 502 Bad Gateway", True
    retried = tries.channel(1)
    retried.attempts, retried.due, retried.error = 2, 1010.0, "HTTP 500"
    again = Tries.loads(tries.dumps())
    assert again == tries and again.next_due() == 1010.0
    event = Event(id="1-0", kind="run_failure", run="r", jid="r:a", at=1.0)
    channels = [
        channel_document(i, "failure", f"webhook http://h/{i}", again.channel(i)) for i in (0, 1)
    ]
    document = event_document(event, channels)
    assert [(c["status"], c["due"]) for c in document["channels"]] == [
        ("failed", None),
        ("retrying", 1010.0),
    ]
    assert (document["attempts"], document["due"], document["failed_at"]) == (10, 1010.0, None)


def test_a_record_given_up_by_an_older_version_reads_as_today_s() -> None:
    legacy = {
        "id": "1732822800123-0",
        "kind": "run_failure",
        "run": "nightly@x",
        "jid": "nightly@x:load",
        "at": "1732822800.5",
        "exhausted": "",
        "attempts": 10,
        "failed_at": 1732823000,
        "undelivered": [
            {"rule": 0, "event": "failure", "channel": "webhook h", "error": "HTTP 502"}
        ],
    }
    document = given_up_document(json.loads(json.dumps(legacy)))
    assert document["kind"] == "failure" and document["scope"] == "run"
    assert (document["at"], document["failed_at"], document["attempts"]) == (
        1732822800.5,
        1732823000.0,
        10,
    )
    assert document["channels"] == [
        {
            "rule": 0,
            "event": "failure",
            "channel": "webhook h",
            "status": "failed",
            "attempts": 10,
            "due": None,
            "error": "HTTP 502",
        }
    ]
    assert (document["rules"], document["retry_of"], document["due"]) == (None, None, None)


def test_a_send_record_s_text_fields_are_read_as_numbers() -> None:
    fields = {
        "id": "1-0",
        "event": "retries_exhausted",
        "run": "r",
        "jid": "r:a",
        "channel": "slack (the URL in secret S)",
        "status": "failed",
        "attempt": "10",
        "error": "HTTP 500",
        "at": "7300.000",
        "by": "host:etl",
    }
    assert send_document("9-0", fields) == {
        "log_id": "9-0",
        **fields,
        "attempt": 10,
        "at": 7300.0,
        "retry_of": None,
    }
    assert send_document("9-1", {**fields, "jid": "", "retry_of": "0-5"})["jid"] is None
    assert Channel(given_up=True, attempts=3).status() == "failed"


def test_the_approve_command_a_message_shows_quotes_its_words_for_a_shell() -> None:
    """A run id may hold quotes and ``$(...)``; a reader pastes the line into a shell."""
    event = Event(id="1-0", kind="awaiting", run="r'$(touch x)'", jid="r'$(touch x)':gate", at=0)
    command = approval(event, Context())["command"]
    assert shlex.split(command) == ["flows", "approve", "r'$(touch x)'", "gate"]
    signal = approval(event, Context(signal="go"))["command"]
    assert shlex.split(signal) == ["flows", "signal", "r'$(touch x)'", "gate", "--data", "{}"]
