"""A put handed straight to an idle worker (Handoff.direct, include/handoff.lua) leaves exactly
what the put followed by the hand-off's ordinary pop leaves: the same job, history, locks and
inbox, the same statistics as the engine reports them (it counts the put and the wait of 0
seconds in one field), and the worker's activity as its ``await`` left it (it made no call).

Queue ``fast`` takes the direct path; queue ``slow`` has a max-concurrency far above its load, which
changes nothing a pop does here but sends its puts through the ordinary path (push, then pop).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lua_support import T0, Lua

WORKER = "w1"
INFO = json.dumps({"host": "box", "pid": 42, "queues": ["fast", "slow"], "threads": 1})


def idle(lua: Lua, queue: str, now: float) -> None:
    assert lua.raw("await", WORKER, 30, 1, queue, now=now) == "[]"


def left(lua: Lua, jid: str, queue: str) -> dict[str, Any]:
    """Everything the put and the pop wrote about ``jid`` in ``queue``, with the names of the
    job and its queue made alike."""
    r = lua.r

    def alike(text: str) -> str:
        return text.replace(jid, "JID").replace(f'"{queue}"', '"QUEUE"')

    job = r.hgetall(lua.key(f"j:{jid}"))
    job.pop("jid", None)
    job.pop("queue")
    stats = json.loads(lua.raw("stats", queue, T0, now=T0 + 2))
    return {
        "job": job,
        "history": [alike(entry) for entry in r.lrange(lua.key(f"j:{jid}-history"), 0, -1)],
        "inbox": [alike(item) for item in r.lrange(lua.key(f"w:{WORKER}:inbox"), 0, -1)],
        "lock": r.zscore(lua.key(f"q:{queue}-locks"), jid),
        "held": r.zscore(lua.key(f"w:{WORKER}:jobs"), jid),
        "work": r.exists(lua.key(f"q:{queue}-work")),
        "idle": r.exists(lua.key(f"q:{queue}-idle"), lua.key(f"w:{WORKER}:waiting")),
        "stats": stats,
        "queue.stats": json.loads(lua.raw("queue.stats", queue, T0, now=T0 + 2))["calls"],
        "known": r.zscore(lua.key("queues"), queue) is not None,
    }


def put_to_idle(lua: Lua, jid: str, queue: str, now: float, **options: Any) -> dict[str, Any]:
    idle(lua, queue, now)
    assert lua.put(jid, queue, now=now + 0.25, data='{"i":1}', **options) == jid
    seen = left(lua, jid, queue)
    lua.r.delete(lua.key(f"w:{WORKER}:inbox"))
    return seen


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"priority": -3, "retries": 2, "tags": ["a", "b"]},
        {"ttr": 7.5},
    ],
    ids=["plain", "options", "ttr"],
)
def test_a_put_to_an_idle_worker_leaves_what_put_then_pop_leave(
    lua: Lua, options: dict[str, Any]
) -> None:
    lua.r.set(lua.key(f"w:{WORKER}:info"), INFO)
    lua.config("slow-max-concurrency", 1000)
    ordinary = put_to_idle(lua, "ordinary", "slow", T0 + 1, **options)
    direct = put_to_idle(lua, "direct", "fast", T0 + 1, **options)
    assert direct == ordinary
    assert direct["job"]["state"] == "running" and direct["work"] == 0
    assert direct["stats"]["wait"]["count"] == 1 and direct["queue.stats"]["put"] == 1
    # The worker was last seen at its await (T0 + 1), not at the put a quarter second later.
    assert lua.r.zscore(lua.key("workers"), WORKER) == T0 + 1
    assert [json.loads(entry)["what"] for entry in direct["history"]] == ["put", "popped"]


def test_handed_jobs_join_the_wait_statistics_as_waits_of_0_seconds(lua: Lua) -> None:
    """Waits of 2 s and 4 s popped, one of 0 s handed over: count 3, mean 2, std 2."""
    for jid, waited in (("two", 2), ("four", 4)):
        lua.put(jid, "fast", now=T0)
        assert lua.pop_jids("fast", "w2", now=T0 + waited) == [jid]
    idle(lua, "fast", T0 + 10)
    lua.put("zero", "fast", now=T0 + 11)
    assert lua.state("zero") == "running"
    stats = json.loads(lua.raw("stats", "fast", T0, now=T0 + 12))
    assert stats["wait"]["count"] == 3
    assert stats["wait"]["mean"] == pytest.approx(2.0)
    assert stats["wait"]["std"] == pytest.approx(2.0)
    assert stats["wait"]["histogram"][:5] == [1, 0, 1, 0, 1]
    assert stats["calls"]["put"] == 3 and stats["calls"]["take"] == 3


@pytest.mark.parametrize("history", [100, 3, 1])
def test_a_put_over_an_existing_job_goes_straight_over_too(lua: Lua, history: int) -> None:
    lua.config("slow-max-concurrency", 1000)
    lua.config("max-job-history", history)
    for jid, queue in (("ordinary", "slow"), ("direct", "fast")):
        lua.put(jid, queue, now=T0, tags=["old"], ttr=5)
        assert lua.pop_jids(queue, "w2", now=T0) == [jid]
    ordinary = put_to_idle(lua, "ordinary", "slow", T0 + 1)
    direct = put_to_idle(lua, "direct", "fast", T0 + 1)
    assert direct == ordinary
    assert direct["job"]["state"] == "running" and "ttr" not in direct["job"]


@pytest.mark.parametrize("setup", ["paused", "scheduled", "tracked", "expired-lock", "ttl", "key"])
def test_whatever_a_pop_would_look_at_first_sends_the_put_the_ordinary_way(
    lua: Lua, setup: str
) -> None:
    """The job still reaches the idle worker exactly when the ordinary pop hands it over."""
    options: dict[str, Any] = {}
    if setup == "paused":
        lua("pause", "q", now=T0)
    elif setup == "scheduled":
        lua.put("later", "q", now=T0, delay=1000)
    elif setup == "tracked":
        lua.put("other", "elsewhere", now=T0)
        lua("track", "track", "other", now=T0)
    elif setup == "expired-lock":
        lua.config("grace-period", 0)
        lua.put("held", "q", now=T0)
        assert lua.pop_jids("q", "w2", now=T0) == ["held"]  # its lock expires at T0 + 60
    elif setup == "ttl":
        options = {"ttl": 100}
    elif setup == "key":
        options = {"concurrency_key": "k"}
    idle(lua, "q", T0 + 50)
    lua.put("a", "q", now=T0 + 61, **options)
    inbox = [json.loads(item) for item in lua.r.lrange(lua.key(f"w:{WORKER}:inbox"), 0, -1)]
    handed = [job["jid"] for jobs in inbox for job in jobs]
    if setup == "paused":
        assert handed == [] and lua.state("a") == "waiting"
    elif setup == "expired-lock":
        # The pop reclaims the expired lock first and hands that job over.
        assert handed == ["held"] and lua.state("a") == "waiting"
    else:
        assert handed == ["a"] and lua.state("a") == "running"


def test_no_ready_message_for_a_job_that_never_waited(lua: Lua) -> None:
    pubsub = lua.r.pubsub()
    pubsub.subscribe(lua.key("ready:q"), lua.key("log"))
    pubsub.get_message(timeout=1)
    pubsub.get_message(timeout=1)
    idle(lua, "q", T0)
    lua.put("a", "q", now=T0 + 1)
    lua.put("b", "q", now=T0 + 1)  # no idle worker any more: waits, and says so
    channels = []
    while (message := pubsub.get_message(timeout=0.2)) is not None:
        channels.append((message["channel"].removeprefix(lua.key("")), message["data"]))
    pubsub.close()
    assert [channel for channel, _ in channels] == ["log", "ready:q", "log"]
    assert [json.loads(data)["jid"] for channel, data in channels if channel == "log"] == ["a", "b"]
