"""complete.pop: a worker's completes and its next pop in one call. The pop is the ordinary
one, so a job the completes release is handed out exactly as a pop right after them would."""

from __future__ import annotations

import json
from typing import Any

from lua_support import T0, Lua


def complete_pop(lua: Lua, worker: str, queue: str, count: int, *jids: str, now: float) -> Any:
    """(the completes' replies, the jobs popped), decoded."""
    args = [arg for jid in jids for arg in (jid, queue, "")]
    done, popped = lua.raw("complete.pop", worker, queue, count, *args, now=now)
    return json.loads(done), json.loads(popped)


def chain(lua: Lua, length: int, queue: str = "q") -> list[str]:
    jids = [f"link-{n}" for n in range(length)]
    for n, jid in enumerate(jids):
        if n:
            lua.put(jid, queue, depends=[jids[n - 1]])
        else:
            lua.put(jid, queue)
    return jids


def test_a_chain_runs_in_order_each_link_popped_by_the_complete_of_the_one_before(
    lua: Lua,
) -> None:
    jids = chain(lua, 5)
    assert lua.pop_jids() == [jids[0]]
    for n, jid in enumerate(jids[:-1]):
        now = T0 + n + 1
        done, popped = complete_pop(lua, "w1", "q", 1, jid, now=now)
        assert done == ["complete"]
        assert [job["jid"] for job in popped] == [jids[n + 1]]
        assert popped[0]["worker"] == "w1" and popped[0]["state"] == "running"
        assert lua.history(jids[n + 1], now=now)[-1] == "popped"
    done, popped = complete_pop(lua, "w1", "q", 1, jids[-1], now=T0 + 10)
    assert (done, popped) == (["complete"], [])
    assert all(lua.job(jid)["state"] == "complete" for jid in jids)  # type: ignore[index]


def test_it_writes_what_complete_many_then_pop_lean_write(lua: Lua) -> None:
    """The same calls twice from an empty namespace: joined, then as two calls."""
    dumps = []
    for joined in (True, False):
        keys = lua.namespace_keys()
        if keys:
            lua.r.delete(*keys)
        chain(lua, 3)
        lua.put("other", "q")
        assert sorted(lua.pop_jids(count=2, now=T0 + 1)) == ["link-0", "other"]
        batch = ["link-0", "q", "", "other", "q", ""]
        if joined:
            _, popped = lua.raw("complete.pop", "w1", "q", 2, *batch, now=T0 + 2)
            assert [job["jid"] for job in json.loads(popped)] == ["link-1"]
        else:
            lua.raw("complete.many", "w1", *batch, now=T0 + 2)
            lua.raw("pop.lean", "q", "w1", 2, now=T0 + 2)
        dumps.append(dump(lua))
    assert dumps[0] == dumps[1]


def dump(lua: Lua) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in lua.namespace_keys():
        name = key[len(lua.prefix) :]
        out[name] = _value(lua, key)
    return out


def _value(lua: Lua, key: str) -> Any:
    kind = lua.r.type(key)
    if kind == "hash":
        return lua.r.hgetall(key)
    if kind == "zset":
        return lua.r.zrange(key, 0, -1, withscores=True)
    if kind == "list":
        return lua.r.lrange(key, 0, -1)
    if kind == "set":
        return sorted(lua.r.smembers(key))
    return lua.r.get(key)


def test_a_refused_complete_still_pops(lua: Lua) -> None:
    lua.put("a", "q")
    lua.put("b", "q")
    assert lua.pop_jids() == ["a"]
    done, popped = complete_pop(lua, "w2", "q", 1, "a", now=T0 + 1)  # w1 holds a
    assert done[0].startswith("LOCKLOST")
    assert [job["jid"] for job in popped] == ["b"]
    assert lua.job("a")["worker"] == "w1"  # type: ignore[index]


def test_a_throttled_dependent_is_parked_as_by_a_pop(lua: Lua) -> None:
    lua("throttle.set", "th", 1, now=T0)
    lua.put("a", "q", throttle="th")
    lua.put("x", "q", throttle="th")
    lua.put("b", "q", throttle="th", depends=["a"])
    assert lua.pop_jids(count=2) == ["a"]  # x waits for the throttle's one slot
    done, popped = complete_pop(lua, "w1", "q", 1, "a", now=T0 + 1)
    assert done == ["complete"]
    # a's slot goes to x, first in line; b waits its turn behind it.
    assert [job["jid"] for job in popped] == ["x"]
    assert lua.job("b")["state"] in ("waiting", "parked")  # type: ignore[index]
    done, popped = complete_pop(lua, "w1", "q", 1, "x", now=T0 + 2)
    assert [job["jid"] for job in popped] == ["b"]


def test_a_paused_queue_gives_nothing(lua: Lua) -> None:
    chain(lua, 2)
    assert lua.pop_jids() == ["link-0"]
    lua("pause", "q", now=T0)
    done, popped = complete_pop(lua, "w1", "q", 1, "link-0", now=T0 + 1)
    assert (done, popped) == (["complete"], [])
    assert lua.job("link-1")["state"] == "waiting"  # type: ignore[index]
