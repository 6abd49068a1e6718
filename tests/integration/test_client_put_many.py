"""Queue.put_many: many jobs in few engine calls (``put.many``, at most 1,000 a call), checked by
the client before the first call. Time is passed explicitly."""

from __future__ import annotations

import pytest
import redis
from helpers import assert_unchanged

from scheduler.engine import limits
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument, TooLarge
from scheduler.engine.queue import NewJob
from scheduler.engine.scripts import Engine

T0 = 1_699_923_600.0


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="w1")


def test_put_many_puts_every_job_in_order_and_returns_the_jids(client: Client) -> None:
    queue = client.queues["q"]
    jobs = [NewJob("tasks.add", {"n": i}, jid=f"j{i}") for i in range(2500)]
    jobs.append(NewJob("tasks.later", delay=60))
    jids = queue.put_many(jobs, priority=-1, tags=["bulk"], retries=2, ttr=30, now=T0)
    assert jids[:2500] == [f"j{i}" for i in range(2500)]
    assert len(jids) == 2501 and len(jids[-1]) == 32  # a new uuid4 hex
    assert queue.jobs.waiting(0, 3, now=T0) == ["j0", "j1", "j2"]
    job = client.jobs["j7"]
    assert job is not None
    assert (job.klass, job.data, job.priority, job.tags, job.retries, job.ttr) == (
        "tasks.add",
        {"n": 7},
        -1,
        ["bulk"],
        2,
        30,
    )
    later = client.jobs[jids[-1]]
    assert later is not None and later.state == "scheduled"
    assert queue.put_many([], now=T0) == []


def test_put_many_moves_an_existing_job_as_put_does(client: Client) -> None:
    client.queues["other"].put("K", {"v": 1}, jid="a", now=T0)
    assert client.queues["q"].put_many([NewJob("K", {"v": 2}, jid="a")], now=T0 + 1) == ["a"]
    job = client.jobs["a"]
    assert job is not None and (job.queue, job.data) == ("q", {"v": 2})


@pytest.mark.parametrize(
    ("jobs", "options", "error", "names"),
    [
        ([NewJob("K", jid="a b")], {}, InvalidArgument, 'jobs[1](): Arg "jid"'),
        ([NewJob("K"), NewJob("a b")], {}, InvalidArgument, 'jobs[2](): Arg "klass"'),
        ([NewJob("K", {"x": float("nan")})], {}, InvalidArgument, 'jobs[1](): Arg "data"'),
        ([NewJob("K", delay=-1)], {}, InvalidArgument, 'jobs[1](): Arg "delay"'),
        ([NewJob("K", {"x": "x" * limits.MAX_PAYLOAD_BYTES})], {}, TooLarge, '"data"'),
        ([NewJob("K", jid="a"), NewJob("K", jid="a")], {}, InvalidArgument, "a appears twice"),
        ([NewJob("K")], {"priority": 1.5}, InvalidArgument, "priority"),
        ([NewJob("K")], {"retries": -1}, InvalidArgument, "retries"),
        ([NewJob("K")], {"tags": ["a b"]}, InvalidArgument, "tags"),
        ([NewJob("K")], {"ttl": 0}, InvalidArgument, "ttl"),  # the engine's check
    ],
)
def test_bad_jobs_are_refused_before_anything_is_written(
    client: Client,
    redis_client: redis.Redis,
    jobs: list[NewJob],
    options: dict[str, object],
    error: type[Exception],
    names: str,
) -> None:
    good = [NewJob("K", jid=f"g{i}") for i in range(1500)]  # two calls' worth before the bad one
    with assert_unchanged(redis_client), pytest.raises(error) as raised:
        client.queues["q"].put_many(good + jobs, now=T0, **options)  # type: ignore[arg-type]
    message = str(raised.value).replace("jobs[1501]", "jobs[1]").replace("jobs[1502]", "jobs[2]")
    assert message.startswith("PutMany") and names in message, message
