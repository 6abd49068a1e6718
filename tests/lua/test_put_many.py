"""put.many: many puts into one queue in one call, each exactly what its own put would write.

The main check writes the same jobs twice, once with put.many and once with one put each, over a
namespace that already holds jobs in several states, and compares every key. Bad input is in
test_bad_input.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import diff, digest
from lua_support import T0, Channels, Lua

Job = tuple[str, str, str, float]  # jid, klass, data, delay

JOBS: list[Job] = [
    ("a", "K", '{"x": 1}', 0),
    ("b", "K2", "{}", 0),
    ("later", "K", "{}", 30),
    ("running", "K", '{"moved": true}', 0),  # held by w2: moved, its worker told lock_lost
    ("done", "K", "{}", 0),  # complete: put again
    ("tagged", "K", "{}", 0),  # tags of its own, replaced by the shared ones (or kept)
    ("watched", "K", "{}", 0),  # tracked
]

OPTIONS: list[dict[str, Any]] = [
    {},
    {"priority": 3, "retries": 2, "tags": ["t1", "t2"]},
    {"ttl": 60, "ttr": 5, "concurrency_key": "k", "concurrency_limit": 2, "throttle": "th"},
    {"priority": "-2", "retries": "0", "tags": [], "ttl": None},  # text numbers, empty, null
]


def before(lua: Lua) -> None:
    """Jobs in several states, some of them put again by the test."""
    lua.put("running", "other")
    lua.pop_jids("other", "w2")
    lua.put("done")
    lua.pop_jids()
    lua.complete("done")
    lua.put("tagged", tags=["old"], priority=7)
    lua.put("watched")
    lua("track", "track", "watched", now=T0)
    lua.put("stays", "q")


def as_puts(lua: Lua, options: dict[str, Any], now: float) -> None:
    for jid, klass, data, delay in JOBS:
        args: list[Any] = ["client", "q", jid, klass, data, delay]
        for name, value in options.items():
            if value is not None:
                args += [name, json.dumps(value) if isinstance(value, list) else value]
        lua("put", *args, now=now)


def as_many(lua: Lua, options: dict[str, Any], now: float) -> Any:
    flat = [value for job in JOBS for value in job]
    return lua("put.many", "client", "q", json.dumps(options) if options else "", *flat, now=now)


@pytest.mark.parametrize("options", OPTIONS, ids=["none", "common", "ours", "text"])
def test_put_many_writes_what_one_put_per_job_writes(lua: Lua, options: dict[str, Any]) -> None:
    before(lua)
    as_puts(lua, options, now=T0 + 1)
    expected = digest(lua.r)
    lua.r.flushall()
    before(lua)
    assert json.loads(as_many(lua, options, now=T0 + 1)) == [job[0] for job in JOBS]
    assert not diff(expected, digest(lua.r))


def test_put_many_publishes_what_the_puts_publish(lua: Lua, channels: Channels) -> None:
    before(lua)
    channels.collect()
    as_puts(lua, {}, now=T0 + 1)
    one_by_one = channels.collect()
    lua.r.flushall()
    before(lua)
    channels.collect()
    as_many(lua, {}, now=T0 + 1)
    bulk = channels.collect()
    # The same messages; ready:q once per call, so once instead of once per put.
    ready = (lua.key("ready:q"), "q")
    assert one_by_one.count(ready) == len([job for job in JOBS if job[3] == 0])
    assert bulk.count(ready) == 1
    assert [m for m in bulk if m != ready] == [m for m in one_by_one if m != ready]


def test_put_many_keeps_the_order_given_within_a_priority(lua: Lua) -> None:
    lua.put("first")
    jobs = [(f"j{i}", "K", "{}", 0) for i in range(1200)]
    flat = [value for job in jobs[:1000] for value in job]
    lua("put.many", "client", "q", "", *flat, now=T0)
    lua.put("middle")
    flat = [value for job in jobs[1000:] for value in job]
    lua("put.many", "client", "q", '{"priority": -1}', *flat, now=T0)
    order = lua.waiting("q")
    assert order == [f"j{i}" for i in range(1000, 1200)] + ["first"] + [
        f"j{i}" for i in range(1000)
    ] + ["middle"]
    assert lua.r.hget(lua.key(f"s:stats:{int(T0 - T0 % 86400)}:q"), "put") == "1202"


def test_an_idle_worker_is_handed_one_job_of_a_bulk_put(lua: Lua) -> None:
    assert lua.raw("await", "w1", 5, 1, "q", now=T0) == "[]"
    lua("put.many", "client", "q", "", "a", "K", "{}", 0, "b", "K", "{}", 0, now=T0 + 1)
    [item] = lua.r.lrange(lua.key("w:w1:inbox"), 0, -1)
    assert [job["jid"] for job in json.loads(item)] == ["a"]
    assert (lua.state("a"), lua.state("b")) == ("running", "waiting")


def test_a_bad_job_anywhere_writes_no_job(lua: Lua) -> None:
    flat = [value for i in range(999) for value in (f"j{i}", "K", "{}", 0)]
    with pytest.raises(Exception, match=r"PutMany jobs\[1000\]\(\): Arg \"data\""):
        lua.raw("put.many", "client", "q", "", *flat, "last", "K", "[1]", 0, now=T0)
    assert not lua.namespace_keys()
