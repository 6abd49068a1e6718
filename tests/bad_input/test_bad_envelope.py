"""A job's ``_flows`` key (the run options the worker reads: timeout, retry, import path) is
checked where the data enters, by the Python API's put, put_many, requeue and recur: refused
naming the key and what it must be, nothing changed. Before, only the worker checked it, failing
the job in ``broken-payload`` when it was popped (or, for a ``pythonpath`` given as one text,
adding each of its characters to ``sys.path``)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from helpers import assert_unchanged

from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument
from scheduler.engine.queue import NewJob

BAD: list[tuple[Any, str]] = [
    ("fast", 'Put(): Arg "data" has _flows "fast" (str): the worker\'s run options'),
    ({"timeout": "soon"}, 'Put(): Arg "data" has _flows.timeout "soon" (str): seconds'),
    ({"timeout": -1}, 'Put(): Arg "data" has _flows.timeout -1 (int): seconds'),
    ({"retry": []}, 'Put(): Arg "data" has _flows.retry [] (list): an object'),
    ({"retry": {"delay": "5s"}}, 'Put(): Arg "data" has _flows.retry.delay "5s" (str): seconds'),
    ({"pythonpath": "/lib"}, 'Put(): Arg "data" has _flows.pythonpath "/lib" (str): a list'),
    ({"pythonpath": [1]}, 'Put(): Arg "data" has _flows.pythonpath[0] 1 (int): a folder'),
    ({"flow_dir": 3}, 'Put(): Arg "data" has _flows.flow_dir 3 (int): a folder'),
]


@pytest.mark.parametrize(("envelope", "message"), BAD)
def test_put_refuses_a_malformed_flows_key_and_changes_nothing(
    client: Client, redis_client: redis.Redis, envelope: Any, message: str
) -> None:
    client.queues["q"].put("tasks.a", {"n": 1}, jid="there")
    with assert_unchanged(redis_client), pytest.raises(InvalidArgument) as refused:
        client.queues["q"].put("tasks.a", {"n": 1, "_flows": envelope}, jid="new")
    assert str(refused.value).startswith(message), str(refused.value)
    queue = client.queues["q"]
    for call, command in (
        (lambda: queue.requeue("tasks.a", {"_flows": envelope}, jid="there"), "Requeue"),
        (lambda: queue.recur("tasks.a", {"_flows": envelope}, 60), "Recur"),
        (
            lambda: queue.put_many(
                [NewJob("tasks.a", {}), NewJob("tasks.a", {"_flows": envelope})]
            ),
            "PutMany jobs[2]",
        ),
    ):
        with assert_unchanged(redis_client), pytest.raises(InvalidArgument) as refused:
            call()
        assert str(refused.value).startswith(message.replace("Put", command, 1))


def test_put_takes_the_flows_key_the_worker_reads(client: Client) -> None:
    envelope = {
        "timeout": 30,
        "retry": {"backoff": "fixed", "delay": 1.5, "max_delay": None, "jitter": 0},
        "pythonpath": ["/lib"],
        "flow_dir": "/repo",
        "run": "etl@x",  # what flows keeps there for itself is not the worker's to check
    }
    jid = client.queues["q"].put("tasks.a", {"_flows": envelope})
    assert client.jobs[jid].data == {"_flows": envelope}
    assert client.queues["q"].put("tasks.a", {"_flows": None})
