"""Namespaces: the qless layout (`ql:`) and a prefix passed as KEYS[1] share one database
without touching each other; the prefix itself is checked. Both the Functions library and the
EVALSHA bundle are used."""

from __future__ import annotations

import json

import pytest
import redis
from lua_support import NAMESPACE, T0, Channels

from scheduler.engine.errors import InvalidArgument
from scheduler.engine.scripts import Engine


def test_two_namespaces_in_one_database(
    engine: Engine, engine_ns: Engine, channels: Channels, redis_client: redis.Redis
) -> None:
    plain, spaced = engine, engine_ns
    plain.call("put", "w", "q", "a", "K", '{"ns": "ql"}', 0, now=T0)
    spaced.call("put", "w", "q", "a", "K", '{"ns": "test"}', 0, now=T0)
    spaced.call("put", "w", "q", "b", "K", "{}", 0, now=T0)
    assert json.loads(spaced.call("get", "a", now=T0))["data"] == '{"ns": "test"}'
    assert json.loads(plain.call("get", "a", now=T0))["data"] == '{"ns": "ql"}'
    assert plain.call("get", "b", now=T0) is None
    assert plain.call("length", "q", now=T0) == 1
    assert spaced.call("length", "q", now=T0) == 2
    plain.call("pop", "q", "w1", 5, now=T0)
    assert spaced.call("length", "q", now=T0) == 2
    keys = set(redis_client.scan_iter(count=500))
    assert all(key.startswith(("ql:", NAMESPACE)) for key in keys), keys
    assert {key for key in keys if key.startswith(NAMESPACE)} >= {
        NAMESPACE + "j:a",
        NAMESPACE + "j:b",
        NAMESPACE + "q:q-fifo",
    }
    published = {channel for channel, _ in channels.collect()}
    assert published == {"ql:log", "ql:ready:q", NAMESPACE + "log", NAMESPACE + "ready:q"}


@pytest.mark.parametrize("use_functions", [True, False], ids=["fcall", "evalsha"])
@pytest.mark.parametrize("prefix", ["", "p" * 257])
def test_the_prefix_is_checked(redis_client: redis.Redis, use_functions: bool, prefix: str) -> None:
    engine = Engine(redis_client, prefix=prefix, use_functions=use_functions)
    with pytest.raises(InvalidArgument, match="key prefix"):
        engine.call("put", "w", "q", "a", "K", "{}", 0, now=T0)
    assert list(redis_client.scan_iter()) == []


@pytest.mark.parametrize("use_functions", [True, False], ids=["fcall", "evalsha"])
def test_at_most_one_key(redis_client: redis.Redis, use_functions: bool) -> None:
    engine = Engine(redis_client, prefix=NAMESPACE, use_functions=use_functions)
    engine._keys = [NAMESPACE, "other:"]  # below the client, which never sends two
    with pytest.raises(InvalidArgument, match="at most one key"):
        engine.call("put", "w", "q", "a", "K", "{}", 0, now=T0)
    assert list(redis_client.scan_iter()) == []
