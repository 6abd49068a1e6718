"""Engine calls over kept connections (scheduler/engine/direct_calls.py): the same replies and
errors as through redis-py, a connection lost between calls is replaced, and the connections go
back to the pool."""

from __future__ import annotations

import os

import pytest
import redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.engine.errors import InvalidArgument
from scheduler.engine.scripts import Engine


def test_calls_go_over_one_kept_connection(redis_client: redis.Redis) -> None:
    engine = Engine(redis_client)
    assert engine._direct is not None
    client = Client.from_engine(engine)
    queue = client.queues["q"]
    jids = [queue.put("k", {"i": i}) for i in range(20)]
    assert client.queues["q"].jobs.waiting(count=50) == jids
    pool = redis_client.connection_pool
    kept = engine._direct._spare
    assert len(kept) == 1 and kept[0] in pool._in_use_connections  # type: ignore[attr-defined]
    engine.close()
    assert kept == [] and not pool._in_use_connections  # type: ignore[attr-defined]


def test_an_error_reply_raises_as_before_and_keeps_the_connection(
    redis_client: redis.Redis,
) -> None:
    engine = Engine(redis_client)
    engine.call("put", "w", "q", "a", "k", "{}", 0)
    kept = list(engine._direct._spare)  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument, match='Put\\(\\): Arg "data"'):
        engine.call("put", "w", "q", "b", "k", "[not json", 0)
    assert engine._direct._spare == kept  # type: ignore[union-attr]
    assert engine.call("put", "w", "q", "c", "k", "{}", 0) == "c"


def test_a_connection_the_server_dropped_is_replaced(redis_client: redis.Redis) -> None:
    engine = Engine(redis_client)
    engine.call("put", "w", "q", "a", "k", "{}", 0)
    [connection] = engine._direct._spare  # type: ignore[union-attr]
    connection._sock.shutdown(2)  # type: ignore[attr-defined]  # as a server closing it
    assert engine.call("put", "w", "q", "b", "k", "{}", 0) == "b"
    assert redis_client.llen("ql:q:q-fifo") == 2


def test_a_forked_child_opens_its_own_connections(redis_client: redis.Redis) -> None:
    engine = Engine(redis_client)
    engine.call("put", "w", "q", "a", "k", "{}", 0)
    parents = list(engine._direct._spare)  # type: ignore[union-attr]
    pid = os.fork()
    if pid == 0:  # the child: a put on a connection of its own, the parent's left alone
        try:
            ok = engine.call("put", "w", "q", "child", "k", "{}", 0) == "child"
            ok = ok and all(c not in parents for c in engine._direct._spare)  # type: ignore[union-attr]
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert engine._direct._spare == parents  # type: ignore[union-attr]
    assert engine.call("put", "w", "q", "b", "k", "{}", 0) == "b"


def test_a_pipeline_goes_over_a_kept_connection_with_redis_pys_replies(
    redis_client: redis.Redis,
) -> None:
    """One write and one round trip: each slot as redis-py's pipeline fills it (its response
    callbacks for plain reads, a refused call's exception in its slot)."""
    engine = Engine(redis_client)
    redis_client.hset("h", mapping={"a": "1"})
    redis_client.zadd("z", {"m": 2.5})

    def batch(pipe: object) -> None:
        assert hasattr(pipe, "call") and hasattr(pipe, "read")
        pipe.call("put", "w", "q", "a", "k", "{}", 0)
        pipe.call("put", "w", "q", "b", "k", "[not json", 0)
        pipe.read("hgetall", "h")
        pipe.read("zrange", "z", 0, -1, "withscores")
        pipe.read("zcard", "z")

    direct = engine.pipeline()
    batch(direct)
    got = direct.execute()
    assert engine._direct is not None and len(engine._direct._spare) == 1
    assert got[0] == "a" and isinstance(got[1], InvalidArgument)
    plain = redis_client.pipeline(transaction=False)
    plain.hgetall("h")
    plain.execute_command("zrange", "z", 0, -1, "withscores")
    plain.zcard("z")
    assert got[2:] == plain.execute()


def test_a_pipeline_on_a_dropped_connection_goes_again_through_redis_py(
    redis_client: redis.Redis,
) -> None:
    engine = Engine(redis_client)
    engine.call("put", "w", "q", "a", "k", "{}", 0)
    [connection] = engine._direct._spare  # type: ignore[union-attr]
    connection._sock.shutdown(2)  # type: ignore[attr-defined]  # as a server closing it
    pipe = engine.pipeline()
    pipe.call("put", "w", "q", "b", "k", "{}", 0)
    pipe.read("llen", "ql:q:q-fifo")
    assert pipe.execute() == ["b", 2]


def test_meanwhile_runs_after_the_batch_is_sent_and_before_its_replies(
    redis_client: redis.Redis, server: EmbeddedServer
) -> None:
    """A pipeline's ``meanwhile`` runs while the server works on the batch: here the batch's
    blocking pop is already waiting when ``meanwhile`` pushes (on another connection) what it
    pops, and its reply is read after."""
    engine = Engine(redis_client, "mw:")
    other = connect(server.url)
    seen: list[object] = []

    def push() -> None:
        seen.append(other.lpush("mw:list", "pushed meanwhile"))

    pipe = engine.pipeline()
    pipe.read("blpop", "mw:list", 5)
    pipe.meanwhile = push
    assert pipe.execute() == [("mw:list", "pushed meanwhile")]
    assert seen == [1]
    assert pipe.meanwhile is None  # once
    other.close()
