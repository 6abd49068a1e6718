"""A job's hash leaves out the fields at their default (priority 0, no tags, no worker, expiry 0,
5 retries, as many remaining, and the state of a new job put waiting): most of a waiting job's
memory is its hash. Every reader sees
them as if stored, and a hash written with every field (as before) reads and works the same."""

from __future__ import annotations

from typing import Any

import pytest
from lua_support import T0, Lua

from scheduler.engine.errors import HasDependents

# What a put of a new job with no options stores (its state, waiting, left out too).
PLAIN = {"klass", "data", "queue", "created"}
# The fields at their default, as a hash written with every field held them.
FULL_LAYOUT = {
    "priority": "0",
    "tags": "{}",
    "worker": "",
    "expires": "0",
    "retries": "5",
    "remaining": "5",
}
DEFAULTS = {"priority": 0, "tags": [], "worker": "", "expires": 0, "retries": 5, "remaining": 5}


def stored(lua: Lua, jid: str) -> set[str]:
    return set(lua.r.hkeys(lua.key(f"j:{jid}")))


def described(lua: Lua, jid: str) -> dict[str, Any]:
    job = lua.job(jid)
    assert job is not None
    return {name: job[name] for name in DEFAULTS}


def test_a_put_stores_no_field_at_its_default(lua: Lua) -> None:
    lua.put("a", now=T0)
    assert stored(lua, "a") == PLAIN
    lua.put("b", now=T0, priority=2, tags=["t"], retries=3)
    assert stored(lua, "b") == PLAIN | {"priority", "tags", "retries"}
    # put.many writes its jobs the same way.
    lua("put.many", "client", "q", "", "c", "K", "{}", 0, now=T0)
    assert stored(lua, "c") == PLAIN


def test_a_put_over_a_job_drops_the_fields_back_at_their_default(lua: Lua) -> None:
    lua.put("a", now=T0, priority=2, tags=["t"], retries=3)
    lua.put("a", now=T0 + 1, priority=0, tags=[], retries=5)
    assert not stored(lua, "a") & set(FULL_LAYOUT)
    assert described(lua, "a") == DEFAULTS


def test_every_reader_sees_the_defaults(lua: Lua) -> None:
    lua.put("a", now=T0)
    assert described(lua, "a") == DEFAULTS
    [job] = lua("multiget", "a", now=T0)
    assert {name: job[name] for name in DEFAULTS} == DEFAULTS
    [peeked] = lua("peek", "q", 1, now=T0)
    assert {name: peeked[name] for name in DEFAULTS} == DEFAULTS
    [lean] = lua("pop.lean", "q", "w1", 1, now=T0)
    assert (lean["priority"], lean["tags"], lean["retries"], lean["remaining"]) == (0, [], 5, 5)


def test_a_job_put_waiting_without_a_stored_state_is_waiting_to_every_reader(lua: Lua) -> None:
    lua.put("a", now=T0)
    assert "state" not in stored(lua, "a")
    assert lua.state("a") == "waiting"
    assert [job["state"] for job in lua("multiget", "a", now=T0)] == ["waiting"]
    assert [job["jid"] for job in lua("peek", "q", 1, now=T0)] == ["a"]
    assert lua("jobs", "waiting", "q", now=T0) == ["a"]
    assert lua.put("a", now=T0, unique=1) == "exists"  # it exists: a put over it sees it
    lua.put("b", now=T0, depends=["a"])  # a dependency that has not completed
    assert lua.state("b") == "depends"
    with pytest.raises(HasDependents):  # a cancel sees it has a dependent
        lua("cancel", "a", now=T0 + 1)
    assert lua.pop_jids(now=T0 + 1) == ["a"]
    assert lua.r.hget(lua.key("j:a"), "state") == "running"  # any later state is stored


def test_a_retry_spends_one_of_the_default_retries(lua: Lua) -> None:
    lua.put("a", now=T0)
    lua.pop(now=T0)
    assert lua.raw("retry", "a", "q", "w1", 0, now=T0 + 1) == 4
    assert lua.job("a")["remaining"] == 4  # type: ignore[index]


def test_a_lost_lock_under_qless_rule_spends_one_of_the_default_retries(lua: Lua) -> None:
    lua.config("heartbeat", 60)
    lua.config("grace-period", 0)
    lua.put("a", now=T0)
    lua.pop(worker="w1", now=T0)
    [job] = lua.pop(worker="w2", now=T0 + 60)
    assert (job["jid"], job["retries"], job["remaining"]) == ("a", 5, 4)


def test_priorities_left_out_pop_in_order(lua: Lua) -> None:
    lua.put("plain", now=T0)
    lua.put("before", now=T0, priority=-1)
    lua.put("after", now=T0, priority=1)
    lua.put("also", now=T0)
    assert lua.pop_jids(count=4, now=T0) == ["before", "plain", "also", "after"]


def test_tags_left_out_read_as_none_and_take_new_ones(lua: Lua) -> None:
    lua.put("a", now=T0)
    assert lua("tag", "add", "a", "x", now=T0 + 1) == ["x"]
    assert lua("tag", "get", "x", 0, 10, now=T0 + 1)["jobs"] == ["a"]
    assert lua("tag", "remove", "a", "x", now=T0 + 2) == []
    assert lua("tag", "get", "x", 0, 10, now=T0 + 2)["total"] == 0


def test_a_hash_holding_every_field_reads_and_works_the_same(lua: Lua) -> None:
    """A job written before the hash left defaults out."""
    lua.put("old", now=T0)
    lua.put("new", now=T0)
    lua.r.hset(lua.key("j:old"), mapping=FULL_LAYOUT)
    assert described(lua, "old") == described(lua, "new") == DEFAULTS
    assert lua.pop_jids(count=2, now=T0 + 1) == ["old", "new"]
    for jid in ("old", "new"):
        assert lua.raw("retry", jid, "q", "w1", 0, now=T0 + 2) == 4
    lua.pop(count=2, now=T0 + 3)
    for jid in ("old", "new"):
        lua.complete(jid, now=T0 + 4)
        assert lua.state(jid) == "complete"
