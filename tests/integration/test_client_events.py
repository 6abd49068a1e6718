"""EventListener over the real embedded server: iteration, callbacks in a thread, namespaces.

Waiting here is only for a published message to arrive (bounded by a timeout); no test sleeps
to let engine time pass.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from scheduler import Client, Event, EventListener, ServerUnavailable
from scheduler.engine.events import EVENT_KINDS
from scheduler.engine.scripts import Engine

WAIT = 5.0  # generous bound on delivery of one message


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="worker-1")


@pytest.fixture
def listener(client: Client) -> Iterator[EventListener]:
    events = EventListener(client)
    with events:
        yield events


def next_event(events: EventListener, kind: str | None = None, channel: str | None = None) -> Event:
    """The next event (of ``kind`` / on ``channel`` when given), skipping others."""
    while True:
        event = events.get(timeout=WAIT)
        assert event is not None, f"no {kind or 'event'} within {WAIT}s"
        if (kind is None or event.kind == kind) and (channel is None or event.channel == channel):
            return event


def test_put_is_reported_on_the_log_channel(client: Client, listener: EventListener) -> None:
    jid = client.queues["q"].put("k", {})
    event = next_event(listener)
    assert event == Event("ql:log", "put", jid, {"jid": jid, "event": "put", "queue": "q"})


def test_job_lifecycle_on_the_log(client: Client, listener: EventListener) -> None:
    jid = client.queues["q"].put("k", {})
    [job] = client.queues["q"].pop()
    job.complete("next")
    [job] = client.queues["next"].pop()
    job.fail("boom", "it broke")
    kinds = [(e.kind, e.jid) for e in listener.listen(timeout=0.5)]
    assert kinds == [("put", jid), ("advanced", jid), ("failed", jid)]


def test_tracked_job_transitions_on_their_channels(client: Client, listener: EventListener) -> None:
    jid = client.queues["q"].put("k", {})
    client.jobs[jid].track()
    [job] = client.queues["q"].pop()
    job.complete()
    tracked = [e for e in listener.listen(timeout=0.5) if e.channel != "ql:log"]
    assert [(e.channel, e.kind, e.jid, e.data) for e in tracked] == [
        ("ql:track", "track", jid, {}),
        ("ql:popped", "popped", jid, {}),
        ("ql:completed", "completed", jid, {}),
    ]


def test_a_worker_hears_that_its_lock_was_lost(client: Client, listener: EventListener) -> None:
    client.queues["q"].put("k", {})
    [job] = client.queues["q"].pop()
    job.timeout()
    event = next_event(listener, "lock_lost", channel="ql:w:worker-1")
    assert event.jid == job.jid and event.data["worker"] == "worker-1"


def test_only_the_chosen_workers_channels(client: Client) -> None:
    other = Client.from_engine(client.engine, worker_name="worker-2")
    with EventListener(client, workers=["worker-2"], log=False, tracked=False) as events:
        assert events.channels == ["ql:w:worker-2"]
        for who in (client, other):
            who.queues["q"].put("k", {})
            [job] = who.queues["q"].pop()
            job.cancel()
        [event] = list(events.listen(timeout=0.5))
        assert (event.kind, event.data["worker"]) == ("canceled", "worker-2")


def test_config_events_have_no_jid(client: Client, listener: EventListener) -> None:
    client.config["heartbeat"] = 30
    del client.config["heartbeat"]
    first, second = next_event(listener), next_event(listener)
    assert (first.kind, first.jid, first.data["option"]) == ("config_set", None, "heartbeat")
    assert (second.kind, second.data["option"]) == ("config_unset", "heartbeat")


def test_extra_channels(client: Client) -> None:
    with EventListener(client, log=False, tracked=False, channels=["ready:q"]) as events:
        client.queues["q"].put("k", {})
        event = next_event(events)
    assert (event.channel, event.kind, event.jid) == ("ql:ready:q", "ready", None)
    assert event.data == {"message": "q"}


def test_iteration_ends_after_the_timeout(client: Client) -> None:
    with EventListener(client, timeout=0.1) as events:
        assert list(events) == []
        assert events.get(timeout=0) is None


def test_waiting_blocks_instead_of_polling(client: Client, monkeypatch: Any) -> None:
    events = EventListener(client).subscribe()
    assert events._pubsub is not None
    calls = 0
    real = events._pubsub.get_message

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(events._pubsub, "get_message", counting)
    assert events.get(timeout=0.3) is None
    assert calls <= 2
    events.stop()


def test_namespaces_do_not_hear_each_other(client: Client, engine_ns: Engine) -> None:
    spaced = Client.from_engine(engine_ns, worker_name="worker-1")
    with EventListener(spaced) as events:
        assert all(channel.startswith("{test}:") for channel in events.channels)
        client.queues["q"].put("k", {})
        jid = spaced.queues["q"].put("k", {})
        event = next_event(events)
        assert (event.channel, event.jid) == ("{test}:log", jid)
        assert events.get(timeout=0.2) is None


# -- callbacks ------------------------------------------------------------------------------------


def test_callbacks_run_in_a_background_thread(client: Client) -> None:
    completed: queue.Queue[Event] = queue.Queue()
    changes: queue.Queue[Event] = queue.Queue()
    everything: queue.Queue[Event] = queue.Queue()
    threads: set[str] = set()

    listener = EventListener(client)
    listener.on("completed", completed.put)
    listener.on("*", everything.put)

    def on_change(event: Event) -> None:
        threads.add(threading.current_thread().name)
        changes.put(event)

    listener.on_task_change(on_change)
    listener.start()
    assert listener.running
    try:
        client.config["heartbeat"] = 30  # no jid: not a task change
        jid = client.queues["q"].put("k", {})
        [job] = client.queues["q"].pop()
        job.complete()
        assert completed.get(timeout=WAIT).jid == jid
        assert [changes.get(timeout=WAIT).kind for _ in range(2)] == ["put", "completed"]
        assert [everything.get(timeout=WAIT).kind for _ in range(3)] == [
            "config_set",
            "put",
            "completed",
        ]
        assert threads == {"flows-events"}
        with pytest.raises(RuntimeError):
            next(iter(listener))
    finally:
        listener.stop()
    assert not listener.running
    listener.stop()  # twice is fine


def test_context_manager_starts_and_stops_the_thread(client: Client) -> None:
    seen: queue.Queue[Event] = queue.Queue()
    listener = EventListener(client)
    listener.on_task_change(seen.put)
    with listener:
        assert listener.running
        jid = client.queues["q"].put("k", {})
        assert seen.get(timeout=WAIT).jid == jid
    assert not listener.running


def test_a_failing_callback_is_logged_and_the_thread_goes_on(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    seen: queue.Queue[Event] = queue.Queue()

    def broken(event: Event) -> None:
        raise ValueError("callback bug")

    listener = EventListener(client)
    listener.on("put", broken)
    listener.on("put", seen.put)
    with caplog.at_level(logging.ERROR, logger="scheduler.engine.events"), listener:
        first = client.queues["q"].put("k", {})
        second = client.queues["q"].put("k", {})
        assert [seen.get(timeout=WAIT).jid for _ in range(2)] == [first, second]
    assert "callback bug" in caplog.text


def test_stop_from_inside_a_callback(client: Client) -> None:
    stopped = threading.Event()
    listener = EventListener(client)

    def stop(event: Event) -> None:
        listener.stop()
        stopped.set()

    listener.on("put", stop)
    listener.start()
    client.queues["q"].put("k", {})
    assert stopped.wait(WAIT)
    listener.stop()
    assert not listener.running


def test_client_events_shortcut(client: Client) -> None:
    with client.events(tracked=False, timeout=0.5) as events:
        jid = client.queues["q"].put("k", {})
        assert [e.jid for e in events] == [jid]


def test_a_listener_on_an_unreachable_server_raises_the_clients_fault() -> None:
    # It raised redis-py's bare ConnectionError, where every other call of the client raises
    # ServerUnavailable (a ServerError naming the server, and still a redis ConnectionError).
    with Client("redis://127.0.0.1:1/0") as unreachable, pytest.raises(ServerUnavailable) as raised:
        unreachable.events().get(timeout=0.1)
    assert isinstance(raised.value, redis.ConnectionError)
    assert str(raised.value).startswith("cannot reach Redis at 127.0.0.1:1 (namespace ql:)")


def test_a_subscription_cut_while_reading_raises_the_clients_fault(
    client: Client, listener: EventListener, redis_client: redis.Redis
) -> None:
    assert redis_client.client_kill_filter(_type="pubsub") >= 1
    with pytest.raises(ServerUnavailable, match=r"^cannot reach Redis at "):
        listener.get(timeout=WAIT)


# -- kinds ------------------------------------------------------------------------------------


def test_an_unknown_kind_is_refused_at_once_with_a_guess(client: Client) -> None:
    listener = EventListener(client)
    with pytest.raises(ValueError, match=r"on\(\): no event kind 'faild'.*did you mean 'failed'"):
        listener.on("faild", print)
    assert listener._callbacks == {}


def test_every_engine_kind_and_an_extra_channels_kind_is_accepted(client: Client) -> None:
    listener = EventListener(client, channels=["alerts:etl"])
    for kind in (*EVENT_KINDS, "*", "alerts"):
        listener.on(kind, print)
    with pytest.raises(ValueError, match="no event kind 'alert'"):
        listener.on("alert", print)
