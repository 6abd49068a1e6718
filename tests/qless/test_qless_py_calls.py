"""qless-py's calls where the bundle must answer as qless does: its dict-like configuration, a
job moved by `job.move()` (a put naming no worker), a tracked job whose retries run out by
`retry`, and the error a qless client gets for a command or an argument the bundle does not take.
Each scenario is one a qless-py user writes (the client in qless_client.py makes its calls)."""

from __future__ import annotations

import json

import pytest
import redis
from helpers import assert_unchanged, snapshot
from qless_client import Client, Job
from qless_support import Events, Qless

from scheduler.engine.errors import InvalidArgument
from scheduler.engine.scripts import Engine

QLESS_DEFAULTS = {
    "application": "qless",
    "grace-period": 10,
    "heartbeat": 60,
    "histogram-history": 7,
    "jobs-history": 604800,
    "jobs-history-count": 50000,
    "stats-history": 30,
}


@pytest.fixture
def client(redis_client: redis.Redis) -> Client:
    return Client(redis_client)


class TestConfig:
    def test_a_setting_reads_back_as_set(self, client: Client) -> None:
        assert client.config["foo"] is None
        client.config["foo"] = 5
        assert client.config["foo"] == 5
        del client.config["foo"]
        assert client.config["foo"] is None
        assert client.config["heartbeat"] == 60

    def test_all_lists_qless_settings(self, client: Client) -> None:
        assert client.config.all() == QLESS_DEFAULTS
        assert len(client.config.all()) == 7

    def test_every_setting_set_reads_back_as_its_text_then_clears(self, client: Client) -> None:
        original = client.config.all()
        for option in original:
            client.config[option] = 1
        assert set(client.config.all().values()) == {"1"}
        client.config.clear()
        assert client.config.all() == original

    def test_update_with_text_values(self, client: Client) -> None:
        updated = {option: "1" for option in client.config.all()}
        assert client.config.all() != updated
        client.config.update(updated)
        assert client.config.all() == updated

    def test_pop_and_contains(self, client: Client) -> None:
        client.config["foo"] = 5
        assert "foo" in client.config.all()
        assert client.config.pop("foo") == 5
        assert "foo" not in client.config.all()

    def test_the_native_dialect_keeps_its_numbers_and_settings(self, engine: Engine) -> None:
        engine.call("config.set", "heartbeat", "30", now=1)
        settings = json.loads(engine.call("config.get", now=1))
        assert settings["heartbeat"] == 30
        assert settings["max-worker-age"] == 86400
        assert "application" not in settings
        assert engine.call("config.get", "grace-period", now=1) == "10"


class TestMove:
    def test_a_waiting_job_moves_with_a_put_naming_no_worker(self, client: Client) -> None:
        client.queue("foo").put("Foo", {"a": 1}, jid="jid", tags=["t"], priority=3)
        job = client.jobs["jid"]
        assert isinstance(job, Job) and job.worker_name == ""
        assert job.move("bar") == "jid"
        moved = client.jobs["jid"]
        assert isinstance(moved, Job)
        assert (moved.queue_name, moved.state, moved.data) == ("bar", "waiting", {"a": 1})
        assert (moved.tags, moved.priority) == (["t"], 3)
        assert len(client.queue("foo")) == 0
        assert [job.jid for job in client.queue("bar").pop()] == ["jid"]

    def test_moving_a_running_job_by_its_own_worker_tells_no_one(
        self, client: Client, events: Events
    ) -> None:
        client.queue("foo").put("Foo", {}, jid="jid")
        running = client.queue("foo").pop()[0]
        events.collect()
        assert running.move("bar", depends=[]) == "jid"
        # qless tells the holder lock_lost only when another worker moved its job.
        assert events.collect() == [("ql:log", {"jid": "jid", "event": "put", "queue": "bar"})]
        assert client.queue("bar").peek()[0].state == "waiting"

    def test_a_put_without_a_worker_is_refused_in_the_native_dialect(
        self, engine: Engine, redis_client: redis.Redis
    ) -> None:
        before = snapshot(redis_client)
        with pytest.raises(InvalidArgument, match='Put\\(\\): Arg "worker" missing'):
            engine.call("put", "", "q", "jid", "klass", "{}", 0, now=1)
        assert_unchanged(redis_client, before)


def test_a_tracked_job_whose_retries_run_out_by_retry_is_heard_failing(
    client: Client, events: Events
) -> None:
    client("config.set", "grace-period", 0)
    client.queue("queue").put("Foo", {}, jid="jid", retries=0)
    client("track", "track", "jid")
    job = client.queue("queue").pop()[0]
    events.collect()
    assert job.retry(0, "group", "message") == -1
    failed = client.jobs["jid"]
    assert isinstance(failed, Job) and failed.state == "failed"
    assert failed.failure["group"] == "group"
    assert events.collect() == [("ql:failed", "jid")]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("frobnicate", 0), ['unknown command "frobnicate"']),
        (("put", 0, "w", "q", "jid", "k", "{}", 0, "colour", "red"), ["Put()", '"colour"']),
        (
            ("recur", 0, "q", "r", "k", "{}", "interval", 60, 0, "colour", 1),
            ["Recur()", '"colour"'],
        ),
        (("recur.update", 0, "r", "colour", 1), ["RecurUpdate()", '"colour"']),
        (("complete", 0, "jid", "w", "q", "{}", "colour", "x"), ["Complete()", '"colour"']),
        (("pop", 0, "q", "", 1), ["Pop()", '"worker"']),
        (("put", 0, "w", "q", "jid", "k", "nope", 0), ["Put()", '"data"']),
    ],
)
def test_what_the_bundle_does_not_take_is_named_with_its_command(
    qless: Qless, redis_client: redis.Redis, args: tuple[object, ...], words: list[str]
) -> None:
    before = snapshot(redis_client)
    with pytest.raises(redis.ResponseError) as refused:
        qless.raw(*args)
    for word in words:
        assert word in str(refused.value)
    assert_unchanged(redis_client, before)
