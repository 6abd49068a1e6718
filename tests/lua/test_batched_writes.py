"""pop and complete.many write what their jobs share once per call (the locks, the worker's jobs,
the statistics, the completed set): each job must end exactly as if it had been handled alone."""

from __future__ import annotations

import json
from typing import Any, cast

from lua_support import T0, Channels, Lua
from test_events import events


def put_spread(lua: Lua, queue: str, count: int) -> list[str]:
    """`count` jobs put at uneven times, so that each waits (and later runs) a different time."""
    jids = [f"{queue}-{n}" for n in range(count)]
    for n, jid in enumerate(jids):
        lua.put(jid, queue, now=T0 + 0.37 * n * n)
    return jids


def stats_of(lua: Lua, queue: str) -> dict[str, Any]:
    stats: dict[str, Any] = lua("stats", queue, T0, now=T0)
    return {kind: stats[kind] for kind in ("wait", "run")}


def scored(lua: Lua, name: str) -> list[tuple[str, float]]:
    """The members of a sorted set with their scores, in order."""
    return cast(list[tuple[str, float]], lua.r.zrange(lua.key(name), 0, -1, withscores=True))


def register(lua: Lua, worker: str, host: str) -> None:
    lua("worker.register", worker, json.dumps({"host": host, "pid": 7}), now=T0)


def test_a_pop_of_many_locks_and_samples_each_job_as_pops_of_one(lua: Lua) -> None:
    put_spread(lua, "one", 20)
    put_spread(lua, "many", 20)
    now = T0 + 500
    for _ in range(20):
        lua.pop("one", "w1", 1, now=now)
    assert len(lua.pop("many", "w2", 20, now=now)) == 20
    assert stats_of(lua, "one")["wait"] == stats_of(lua, "many")["wait"]
    assert stats_of(lua, "many")["wait"]["count"] == 20
    for queue, worker in (("one", "w1"), ("many", "w2")):
        locks = dict(scored(lua, f"q:{queue}-locks"))
        assert locks == {f"{queue}-{n}": now + 60 for n in range(20)}
        assert sorted(lua.zset(f"w:{worker}:jobs")) == sorted(locks)


def test_complete_many_unlocks_and_samples_each_job_as_completes_of_one(lua: Lua) -> None:
    ones, manies = put_spread(lua, "one", 12), put_spread(lua, "many", 12)
    others = put_spread(lua, "other", 3)
    lua.config("heartbeat", 3600)
    for queue, jids in (("one", ones), ("many", manies), ("other", others)):
        for n, _ in enumerate(jids):
            lua.pop(queue, "w1", 1, now=T0 + 60 + 1.3 * n)
    done = T0 + 300
    for jid in ones:
        assert lua.complete(jid, "w1", "one", now=done) == "complete"
    batch = [arg for jid in manies for arg in (jid, "many", "")]
    batch += [arg for jid in others for arg in (jid, "other", "")]  # a second queue, same call
    assert json.loads(lua.raw("complete.many", "w1", *batch, now=done)) == ["complete"] * 15
    assert stats_of(lua, "many")["run"] == stats_of(lua, "one")["run"]
    assert stats_of(lua, "other")["run"]["count"] == 3
    for queue in ("one", "many", "other"):
        assert lua.zset(f"q:{queue}-locks") == []
    assert lua.zset("w:w1:jobs") == []
    assert sorted(scored(lua, "completed")) == sorted((jid, done) for jid in ones + manies + others)


def test_complete_many_names_the_same_job_twice_and_completes_it_once(lua: Lua) -> None:
    lua.put("a")
    lua.pop_jids(now=T0 + 1)
    reply = json.loads(lua.raw("complete.many", "w1", "a", "q", "", "a", "q", "", now=T0 + 2))
    assert reply[0] == "complete" and reply[1].startswith("WRONGSTATE ")
    assert lua.zset("completed") == ["a"]
    assert lua("stats", "q", T0, now=T0)["run"]["count"] == 1
    assert lua.history("a") == ["put", "popped", "done"]


def test_complete_many_publishes_for_tracked_jobs_and_releases_dependents(
    lua: Lua, channels: Channels
) -> None:
    for jid in ("a", "b", "c"):
        lua.put(jid)
    lua.put("d", depends=["c"])
    lua("track", "track", "b", now=T0)
    lua.pop(count=3, now=T0 + 1)
    channels.collect()
    reply = lua.raw("complete.many", "w1", "a", "q", "", "b", "q", "", "c", "q", "", now=T0 + 2)
    assert json.loads(reply) == ["complete"] * 3
    published = events(lua, channels)
    assert [data for name, data in published if name == "completed"] == ["b"]
    assert [data["jid"] for name, data in published if name == "log"] == ["a", "b", "c"]
    assert lua.state("d") == "waiting"


def test_a_pop_tracks_a_tracked_job_among_untracked_ones(lua: Lua, channels: Channels) -> None:
    for jid in ("a", "b", "c"):
        lua.put(jid)
    lua("track", "track", "b", now=T0)
    channels.collect()
    popped = lua.pop(count=3, now=T0 + 1)
    assert [job["tracked"] for job in popped] == [False, True, False]
    assert [data for name, data in events(lua, channels) if name == "popped"] == ["b"]


def test_a_pop_leaves_the_jobs_it_did_not_look_at_in_their_places(lua: Lua) -> None:
    # The first batch (2 jobs) hands out k1 and parks k2; the second, of 16, parks k3, hands out
    # p0 and stops: the 14 jobs it read but did not look at stay waiting in their places.
    for n in (1, 2, 3):
        lua.put(f"k{n}", concurrency_key="k")
    for n in range(20):
        lua.put(f"p{n}")
    assert lua.pop_jids(count=2, now=T0 + 1) == ["k1", "p0"]
    assert lua.waiting("q") == [f"p{n}" for n in range(1, 20)]
    assert lua.zset("q:q-parked") == ["k2", "k3"]


def test_entries_follow_a_worker_that_registers_again(lua: Lua) -> None:
    register(lua, "w1", "first")
    lua.put("a")
    lua.put("b")
    lua.pop(count=2, now=T0 + 1)
    register(lua, "w1", "second")
    assert lua.complete("a", data="", now=T0 + 2) == "complete"
    register(lua, "w1", "third")
    assert json.loads(lua.raw("complete.many", "w1", "b", "q", "", now=T0 + 3)) == ["complete"]
    hosts = {
        jid: [entry.get("host") for entry in lua.job(jid)["history"]]  # type: ignore[index]
        for jid in ("a", "b")
    }
    assert hosts == {"a": [None, "first", "second"], "b": [None, "first", "third"]}


def test_a_lean_reply_says_of_each_job_what_get_says(lua: Lua) -> None:
    # Spliced together per job (pop.lua): escapes, integers, our options, two expiries in a call.
    lua.put('a"1', klass='K"x\\y', data='{"s": "é \\"q\\" /"}', priority=-3, tags=["x/y", "z"])
    lua.put("b", ttr=7, throttle="t/1", concurrency_key='k"1')
    lua.put("c", retries=0)
    popped = lua("pop.lean", "q", "w1", 3, now=T0 + 1)
    assert [job["jid"] for job in popped] == ['a"1', "b", "c"]
    for job in popped:
        described = lua.job(job["jid"], now=T0 + 1)
        assert described is not None and job["popped"] == T0 + 1
        assert {name: described[name] for name in job if name != "popped"} == {
            name: value for name, value in job.items() if name != "popped"
        }
    assert [job["expires"] for job in popped] == [T0 + 61, T0 + 8, T0 + 61]
