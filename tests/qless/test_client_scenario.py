"""A qless client's whole scenario on the bundle: put, pop, complete, depends, retry, fail,
failed groups, unfail, recur with update, workers and events, each step as a qless client
sees it (the client in qless_client.py makes qless-py's calls; the clock is the test's)."""

from __future__ import annotations

import json

import pytest
import redis
from qless_client import Client, Job, RecurringJob
from qless_support import Events


def popped(client: Client, queue: str, count: int = 10) -> list[str]:
    return [job.jid for job in client.queue(queue).pop(count)]


def test_a_qless_client_scenario(redis_client: redis.Redis, events: Events) -> None:
    client = Client(redis_client)
    queue = client.queue("testing")
    assert client.config["application"] == "qless"
    assert client.config.all()["heartbeat"] == 60

    # put, pop, complete
    jid = queue.put("tasks.Add", {"a": 1}, jid="add", tags=["math"])
    assert (jid, len(queue)) == ("add", 1)
    job = queue.pop()[0]
    assert (job.jid, job.data, job.state, job.tags) == ("add", {"a": 1}, "running", ["math"])
    assert job.worker_name == client.worker_name
    client.now = 5
    assert job.heartbeat() == 65
    assert job.complete() == "complete"
    done = client.jobs["add"]
    assert isinstance(done, Job)
    assert (done.state, done.queue_name, done.failure) == ("complete", "", {})
    assert [entry["what"] for entry in done.history] == ["put", "popped", "done"]
    assert client.jobs.complete() == ["add"]
    assert client.jobs.tagged("math") == {"total": 1, "jobs": ["add"]}

    # depends
    queue.put("tasks.First", {}, jid="first")
    queue.put("tasks.Second", {}, jid="second", depends=["first"])
    second = client.jobs["second"]
    assert isinstance(second, Job)
    assert (second.state, second.dependencies) == ("depends", ["first"])
    assert popped(client, "testing") == ["first"]
    first = client.jobs["first"]
    assert isinstance(first, Job)
    assert first.complete() == "complete"
    second = queue.pop()[0]
    assert (second.jid, second.dependencies) == ("second", [])
    assert second.complete() == "complete"

    # retry, until the retries run out
    client.now = 10
    queue.put("tasks.Flaky", {}, jid="flaky", retries=1)
    flaky = queue.pop()[0]
    assert flaky.retry() == 0
    flaky = queue.pop()[0]
    assert (flaky.jid, flaky.retries_left) == ("flaky", 0)
    assert flaky.retry() == -1

    # fail, failed groups (jids, fetched with multiget), unfail
    queue.put("tasks.Broken", {"n": 1}, jid="broken")
    broken = queue.pop()[0]
    assert broken.fail("tasks.Broken-ValueError", "bad n") == "broken"
    assert client.jobs.failed() == {"tasks.Broken-ValueError": 1, "failed-retries-testing": 1}
    failed = client.jobs.failed("tasks.Broken-ValueError")
    assert failed["total"] == 1
    assert [(job.jid, job.state, job.failure["message"]) for job in failed["jobs"]] == [
        ("broken", "failed", "bad n")
    ]
    retried = client.jobs.failed("failed-retries-testing")["jobs"][0]
    assert (retried.jid, retried.failure["worker"]) == ("flaky", "")
    assert queue.unfail("tasks.Broken-ValueError", 10) == 1
    assert client.jobs.failed() == {"failed-retries-testing": 1}
    again = queue.pop()[0]
    assert (again.jid, again.failure["message"]) == ("broken", "bad n")
    assert again.complete() == "complete"
    completed = client.jobs["broken"]
    assert isinstance(completed, Job) and completed.failure == {}

    # recur, with updates
    client.now = 100
    assert queue.recur("tasks.Tick", {"every": 60}, 60, jid="tick", tags=["clock"]) == "tick"
    first_tick = queue.pop()[0]
    assert (first_tick.jid, first_tick.data, first_tick.tags) == (
        "tick-1",
        {"every": 60},
        ["clock"],
    )
    assert first_tick.complete() == "complete"
    tick = client.jobs["tick"]
    assert isinstance(tick, RecurringJob)
    assert (tick.interval, tick.count, tick.tags) == (60, 1, ["clock"])
    assert tick.update("interval", 10) is not None
    assert tick.update("priority", 5) is not None
    client.now = 120
    children = client.queue("testing").pop(10)
    assert [child.jid for child in children] == ["tick-2", "tick-3"]
    assert {child.priority for child in children} == {5}
    assert [child.history[0]["when"] for child in children] == [110, 120]
    assert children[0].spawned_from_jid == "tick"
    # workers
    running = {child.jid for child in children}
    assert client.workers.counts() == [{"name": client.worker_name, "jobs": 2, "stalled": 0}]
    assert set(client.workers[client.worker_name]["jobs"]) == running
    client.now = 181
    assert set(client.workers[client.worker_name]["stalled"]) == running
    assert tick.tag("more") == ["clock", "more"]
    assert tick.cancel() == 1
    client.now = 200
    assert popped(client, "testing") == []

    # events: a tracked job moved away from its worker, then completed elsewhere
    client.now = 2000
    events.collect()
    watching = client.queue("watching")
    watching.put("tasks.Watched", {}, jid="watched")
    watched = watching.pop()[0]
    assert watched.track() == 1
    # Moved by another process: the worker holding it is told (the mover itself would not be).
    thief = Client(redis_client, worker_name="host-2")
    thief.now = client.now
    moved = thief.jobs["watched"]
    assert isinstance(moved, Job)
    assert moved.requeue("elsewhere") == "watched"
    stolen = thief.queue("elsewhere").pop()[0]
    with pytest.raises(redis.ResponseError, match="given out to another worker"):
        watched.heartbeat()
    assert stolen.complete() == "complete"
    lost = {"jid": "watched", "event": "lock_lost", "worker": client.worker_name}
    assert events.collect() == [
        ("ql:log", {"jid": "watched", "event": "put", "queue": "watching"}),
        ("ql:track", "watched"),
        ("ql:log", {"jid": "watched", "event": "put", "queue": "elsewhere"}),
        (f"ql:w:{client.worker_name}", lost),
        ("ql:log", lost),
        ("ql:put", "watched"),
        ("ql:popped", "watched"),
        ("ql:completed", "watched"),
        ("ql:log", {"jid": "watched", "event": "completed", "queue": "elsewhere"}),
    ]
    tracked = client.jobs.tracked()
    assert [job.jid for job in tracked["jobs"]] == ["watched"]
    assert json.loads(client("queues", "elsewhere"))["running"] == 0
