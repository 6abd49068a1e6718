"""What the deliverers keep of an outbox entry, channel by channel (scheduler.notify.tries), and
which rules an event sent again is for (scheduler.notify.events)."""

from __future__ import annotations

import json

from scheduler.notify.events import Event, concerned
from scheduler.notify.tries import Channel, Tries


def test_each_channel_keeps_its_own_outcome_through_a_round_trip() -> None:
    tries = Tries()
    tries.channel(0).delivered = True
    tries.channel(0).attempts = 1
    failing = tries.channel(1)
    failing.attempts, failing.due, failing.error = 2, 1010.0, "HTTP 502 Bad Gateway"
    tries.channel(2).unable["host:etl"] = ("secret KEY not found", 1000.0)
    tries.channel(2).stranded = 1000.0
    tries.released = True
    again = Tries.loads(tries.dumps())
    assert again == tries
    assert [again.channel(i).status() for i in (0, 1, 2)] == ["delivered", "retrying", "left"]
    assert again.attempts == 2 and again.next_due() == 1010.0
    assert again.errors() == {"1": "HTTP 502 Bad Gateway", "2": "host:etl: secret KEY not found"}
    assert Channel().status() == "pending"


def test_a_state_written_before_channels_were_followed_reads_as_its_channels() -> None:
    legacy = json.dumps({"attempts": 3, "due": 1020.0, "done": [0], "errors": {"1": "HTTP 500"}})
    tries = Tries.loads(legacy)
    assert tries.channel(0).delivered and not tries.released
    assert (tries.channel(1).attempts, tries.channel(1).due) == (3, 1020.0)
    assert tries.channel(1).error == "HTTP 500"
    assert Tries.loads(None) == Tries() == Tries.loads("not json") == Tries.loads("[1]")


def test_an_event_sent_again_concerns_only_the_rules_that_missed_it() -> None:
    rules = [{"on": ["failure"], "step": None, "webhook": {"url": f"http://h/{i}"}} for i in (0, 1)]
    fields = {"kind": "run_failure", "run": "r", "jid": "r:a", "at": "0"}
    assert concerned(Event.from_entry("1-0", fields), rules) == [(0, "failure"), (1, "failure")]
    again = Event.from_entry("2-0", {**fields, "rules": "1"})
    assert again.rules == (1,) and concerned(again, rules) == [(1, "failure")]
