"""Index entries whose job hash is gone (an outside writer, a partial restore), or that name
another key (no jid does: `x-history`): pop, peek, await, the hand-off and housekeeping drop
them and go on to the next job, creating no key for them."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Lua, submit_steps


def ghost(lua: Lua, jid: str) -> None:
    """The job's hash deleted behind the engine's back, its index entries left."""
    lua.r.delete(lua.key(f"j:{jid}"))


def assert_gone(lua: Lua, jid: str, *indexes: str) -> None:
    assert not lua.r.exists(lua.key(f"j:{jid}"))
    for name in indexes:
        assert lua.r.zscore(lua.key(name), jid) is None, f"{jid} still in {name}"
        if name.endswith("-work"):  # a waiting job of priority 0 is in the list beside it
            fifo = lua.key(name.removesuffix("-work") + "-fifo")
            assert lua.r.lpos(fifo, jid) is None, f"{jid} still in {fifo}"


def test_pop_drops_a_waiting_entry_without_its_job(lua: Lua) -> None:
    for jid in ("a", "b", "c"):
        lua.put(jid)
    ghost(lua, "b")
    assert lua.pop_jids(count=3) == ["a", "c"]
    assert_gone(lua, "b", "q:q-work", "q:q-locks", "w:w1:jobs")


def test_a_lean_pop_drops_a_waiting_entry_without_its_job(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    ghost(lua, "a")
    assert [job["jid"] for job in lua("pop.lean", "q", "w1", 1, now=T0)] == ["b"]
    assert_gone(lua, "a", "q:q-work", "q:q-locks")


def test_peek_drops_a_waiting_entry_without_its_job(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    ghost(lua, "a")
    assert [job["jid"] for job in lua("peek", "q", 2, now=T0)] == ["b"]
    assert_gone(lua, "a", "q:q-work")
    assert lua.pop_jids(count=2) == ["b"]


def test_a_due_scheduled_entry_without_its_job_is_dropped(lua: Lua) -> None:
    lua.put("a", delay=10)
    lua.put("b", delay=10)
    ghost(lua, "a")
    assert [job["jid"] for job in lua("peek", "q", 2, now=T0 + 20)] == ["b"]
    assert lua.pop_jids(count=2, now=T0 + 20) == ["b"]
    assert_gone(lua, "a", "q:q-scheduled", "q:q-work")


def test_an_expired_lock_without_its_job_is_dropped(lua: Lua) -> None:
    lua.config("grace-period", 0)
    lua.put("a")
    lua.put("b")
    assert lua.pop_jids(count=2) == ["a", "b"]
    ghost(lua, "a")
    later = T0 + 3600
    assert [job["jid"] for job in lua("peek", "q", 2, now=later)] == ["b"]
    assert lua.pop_jids("q", "w2", count=2, now=later) == ["b"]
    assert_gone(lua, "a", "q:q-locks", "q:q-work", "w:w2:jobs")


def test_await_drops_an_entry_without_its_job(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    ghost(lua, "a")
    reply = json.loads(lua.raw("await", "w1", 5, 1, "q", now=T0))
    assert [job["jid"] for job in reply] == ["b"]
    assert_gone(lua, "a", "q:q-work")


def test_the_hand_off_drops_an_entry_without_its_job(lua: Lua) -> None:
    assert lua.raw("await", "w1", 5, 1, "q", now=T0) == "[]"
    lua.r.zadd(lua.key("q:q-work"), {"ghost": 0})  # an entry some other writer left
    lua.put("a", now=T0 + 1)
    [[job]] = [json.loads(item) for item in lua.r.lrange(lua.key("w:w1:inbox"), 0, -1)]
    assert job["jid"] == "a"
    assert_gone(lua, "ghost", "q:q-work", "q:q-locks")


def test_a_run_whose_job_was_a_ghost_can_still_be_canceled(lua: Lua) -> None:
    submit_steps(lua, "r1", ("a", []), ("b", []))
    ghost(lua, "r1:a")
    assert lua.pop_jids(count=2) == ["r1:b"]
    assert_gone(lua, "r1:a", "q:q-work")
    assert lua("run.cancel", "r1", now=T0 + 1) == 1
    assert lua.state("r1:b") is None
    # The outside delete left the run's kept counts behind (doctor's counts check repairs
    # them): the run is read from its jobs instead.
    lua.r.delete(lua.key("run-counts:r1"))


def other_key(lua: Lua) -> str:
    """An entry an outside writer left that is no jid: it names another key (a history list)."""
    lua.put("x", "elsewhere", now=T0 - 1)
    lua("log", "x", "noted", now=T0 - 1)
    return "x-history"


def test_pop_drops_a_waiting_entry_that_names_another_key(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-work"), {other_key(lua): 0})
    lua.put("b")
    assert lua.pop_jids(count=3) == ["a", "b"]
    assert lua.r.zscore(lua.key("q:q-work"), "x-history") is None


def test_a_lean_pop_drops_a_waiting_entry_that_names_another_key(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-work"), {other_key(lua): 0})
    lua.put("b")
    assert [job["jid"] for job in lua("pop.lean", "q", "w1", 3, now=T0)] == ["a", "b"]
    assert lua.r.zscore(lua.key("q:q-work"), "x-history") is None


def test_peek_drops_a_waiting_entry_that_names_another_key(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-work"), {other_key(lua): 0})
    lua.put("b")
    assert [job["jid"] for job in lua("peek", "q", 3, now=T0)] == ["a", "b"]
    assert lua.r.zscore(lua.key("q:q-work"), "x-history") is None


def test_await_drops_an_entry_that_names_another_key(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-work"), {other_key(lua): 0})
    lua.put("b")
    reply = json.loads(lua.raw("await", "w1", 5, 3, "q", now=T0))
    assert [job["jid"] for job in reply] == ["a", "b"]


def test_a_due_scheduled_entry_that_names_another_key_is_dropped(lua: Lua) -> None:
    lua.put("a", delay=10)
    lua.r.zadd(lua.key("q:q-scheduled"), {other_key(lua): T0 + 5})
    lua.put("b", delay=10)
    assert lua.pop_jids(count=3, now=T0 + 20) == ["a", "b"]
    assert lua.r.zscore(lua.key("q:q-scheduled"), "x-history") is None


@pytest.mark.parametrize("grace", [0, 10])
def test_an_expired_lock_that_names_another_key_is_dropped(lua: Lua, grace: int) -> None:
    lua.config("grace-period", grace)
    lua.put("a")
    assert lua.pop_jids() == ["a"]
    lua.r.zadd(lua.key("q:q-locks"), {other_key(lua): T0})
    later = T0 + 3600
    assert json.loads(lua.raw("maintain", "q", now=later))["failed"] == 0
    assert lua.r.zscore(lua.key("q:q-locks"), "x-history") is None
