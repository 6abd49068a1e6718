"""The worker's lean calls: pop.lean (pop with a small reply) and complete keeping the data ('').

pop.lean must change exactly what pop changes; its reply carries, per job, what a worker needs.
Also checked here: pop's own reply (its history spliced in as stored) is the object ``get``
describes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from helpers import digest
from lua_support import T0, Lua

from scheduler.engine.scripts import Engine

LEAN_FIELDS = {
    "jid",
    "klass",
    "queue",
    "worker",
    "state",
    "data",
    "priority",
    "tags",
    "retries",
    "remaining",
    "expires",
    "popped",
    "runs",
}


def lean_pop(
    lua: Lua, queue: str = "q", worker: str = "w1", count: int = 1, *, now: float = T0
) -> list[dict[str, Any]]:
    reply: list[dict[str, Any]] = lua("pop.lean", queue, worker, count, now=now)
    return reply


def test_pop_lean_replies_what_a_worker_needs(lua: Lua) -> None:
    lua.put("a", data='{"x": 1}', tags=["t1", "t2"], retries=3, priority=2, now=T0)
    [job] = lean_pop(lua, now=T0 + 5)
    assert set(job) == LEAN_FIELDS
    assert job == {
        "jid": "a",
        "klass": "K",
        "queue": "q",
        "worker": "w1",
        "state": "running",
        "data": '{"x": 1}',
        "priority": 2,
        "tags": ["t1", "t2"],
        "retries": 3,
        "remaining": 3,
        "expires": T0 + 65,
        "popped": T0 + 5,
        "runs": 1,
    }
    # the job itself is as after pop
    full = lua.job("a", now=T0 + 5)
    assert full is not None and full["state"] == "running" and full["worker"] == "w1"
    assert [h["what"] for h in full["history"]] == ["put", "popped"]


def test_pop_lean_names_our_options_when_the_job_has_them(lua: Lua) -> None:
    lua.put("a", ttr=5, throttle="api", concurrency_key="k")
    [job] = lean_pop(lua)
    assert set(job) == LEAN_FIELDS | {"ttr", "throttle", "concurrency_key"}
    assert (job["ttr"], job["throttle"], job["concurrency_key"]) == (5, "api", "k")
    assert job["expires"] == T0 + 5


def test_pop_lean_without_jobs_replies_an_empty_list(lua: Lua) -> None:
    assert lua.raw("pop.lean", "q", "w1", 1, now=T0) == "[]"
    lua.put("a")
    lua("pause", "q", now=T0)
    assert lua.raw("pop.lean", "q", "w1", 1, now=T0) == "[]"
    assert lua.raw("pop.lean", "q", "w1", 0, now=T0) == "[]"


def test_pop_lean_reclaims_a_job_of_a_lost_worker_without_using_a_retry(lua: Lua) -> None:
    lua.config("heartbeat", 10)
    lua.config("grace-period", 0)
    lua.put("a", retries=2)
    lean_pop(lua, worker="w1")
    [job] = lean_pop(lua, worker="w2", now=T0 + 10)
    assert (job["jid"], job["worker"], job["remaining"]) == ("a", "w2", 2)
    assert lua.r.hget(lua.key("j:a"), "lost") == "1"


# -- pop.lean changes exactly what pop changes -------------------------------------------------


def scenario(call: Any) -> None:
    """Puts, pops and completes touching every path of pop: priorities, a delay, a ttl that
    passes, a concurrency key and a throttle that park jobs, a lock that expires and is
    reclaimed, a recurring job; `call(command, *args, now=...)` runs one engine call."""
    call("config.set", "heartbeat", 30, now=T0)
    call("config.set", "grace-period", 0, now=T0)
    call("throttle.set", "api", 1, now=T0)
    put = ["client", "q"]
    call("put", *put, "plain", "K", '{"n": 1}', 0, "tags", '["t"]', now=T0)
    call("put", *put, "urgent", "K", "{}", 0, "priority", -5, now=T0)
    call("put", *put, "later", "K", "{}", 20, now=T0)
    call("put", *put, "short", "K", "{}", 0, "ttl", 1, "priority", 5, now=T0)
    for i in range(3):
        call("put", *put, f"k{i}", "K", "{}", 0, "concurrency_key", "ck", now=T0 + 0.1 * i)
        call("put", *put, f"t{i}", "K", "{}", 0, "throttle", "api", now=T0 + 0.1 * i)
    call("recur", "q", "every", "K", "{}", "interval", 25, 0, "retries", 3, now=T0)
    for step, (worker, count) in enumerate([("w1", 2), ("w2", 3), ("w1", 4), ("w3", 10)]):
        call("pop", "q", worker, count, now=T0 + 2 + step)
    call("complete", "urgent", "w1", "q", "{}", now=T0 + 10)
    call("pop", "q", "w2", 5, now=T0 + 40)  # locks of w1..w3 expired: reclaimed
    call("pop", "q", "w4", 5, now=T0 + 41)


def test_pop_lean_changes_exactly_what_pop_changes(redis_client: redis.Redis) -> None:
    """...but for the rule of a reclaimed lock: pop (qless's) uses one of the job's retries,
    pop.lean (ours) counts the lost worker in `lost` instead (include/reclaim.lua)."""
    replies: dict[str, list[Any]] = {"full": [], "lean": []}
    reclaimed: set[str] = set()

    def run(name: str, pop: str) -> dict[str, str]:
        prefix = "{" + name + "}:"
        engine = Engine(redis_client, prefix=prefix, use_functions=True)

        def call(command: str, *args: Any, now: float) -> Any:
            reply = engine.call(pop if command == "pop" else command, *args, now=now)
            if command == "pop":
                replies[name].append(json.loads(reply))
            return reply

        scenario(call)
        for key in redis_client.scan_iter(prefix + "j:*", _type="hash"):
            lost = redis_client.hget(key, "lost")
            if name == "full" or lost is None:
                assert lost is None
                continue
            # Ours, written as qless's rule would have it, for the comparison.
            assert lost == "1"
            # `remaining` is left out while it equals `retries` (itself left out at 5).
            assert redis_client.hget(key, "remaining") is None
            retries = int(redis_client.hget(key, "retries") or 5)
            redis_client.hset(key, "remaining", retries - 1)
            redis_client.hdel(key, "lost")
            reclaimed.add(key[len(prefix) + 2 :])
        state = digest(redis_client, prefix + "*")
        return {key[len(prefix) :]: value for key, value in state.items()}

    assert run("full", "pop") == run("lean", "pop.lean")
    assert reclaimed, "the scenario reclaimed jobs"
    assert any(replies["full"]), "the scenario handed out jobs"
    for full, lean in zip(replies["full"], replies["lean"], strict=True):
        assert [job["jid"] for job in lean] == [job["jid"] for job in full]
        for f, lean_job in zip(full, lean, strict=True):
            expected = {name: f[name] for name in LEAN_FIELDS - {"popped"}}
            if f["jid"] in reclaimed and f["remaining"] < f["retries"]:
                expected["remaining"] = f["remaining"] + 1  # no retry used
                expected["lost"] = 1
            for ours in ("ttr", "throttle", "concurrency_key"):
                if ours in f:
                    expected[ours] = f[ours]
            assert {k: v for k, v in lean_job.items() if k != "popped"} == expected


# -- pop's reply is get's description ---------------------------------------------------------


def test_pop_reply_is_the_job_as_get_describes_it(lua: Lua) -> None:
    lua.put("up", now=T0)
    lua.put("a", data='{"x": [1, "/"]}', tags=["t"], now=T0)
    lua.put("down", depends=["a"], now=T0)
    lua("track", "track", "a", now=T0)
    lua("log", "a", "noted", '{"detail": {"deep": [1, 2]}}', now=T0)
    popped = lua.pop(count=2, now=T0 + 1)
    assert [job["jid"] for job in popped] == ["up", "a"]
    for job in popped:
        assert job == lua.job(job["jid"], now=T0 + 1)
    a = popped[1]
    assert a["tracked"] is True and a["dependents"] == ["down"]
    assert [h["what"] for h in a["history"]] == ["put", "noted", "popped"]
    assert lua("peek", "q", 1, now=T0 + 1) == []


def test_peek_reply_is_the_jobs_as_get_describes_them(lua: Lua) -> None:
    lua.put("a", tags=["t"], now=T0)
    lua.put("b", ttl=30, now=T0)
    for job in lua("peek", "q", 5, now=T0 + 1):
        assert job == lua.job(job["jid"], now=T0 + 1)


# -- complete keeping the data -----------------------------------------------------------------


def test_complete_with_empty_data_keeps_the_jobs_data(lua: Lua) -> None:
    lua.put("a", data='{"big": "payload"}')
    lua.pop()
    assert lua.complete("a", data="", now=T0 + 3) == "complete"
    job = lua.job("a", now=T0 + 3)
    assert job is not None and job["state"] == "complete" and job["data"] == '{"big": "payload"}'


def test_complete_with_empty_data_and_next_keeps_the_data_too(lua: Lua) -> None:
    lua.put("a", data='{"step": 1}')
    lua.pop()
    assert lua.complete("a", data="", next="q2", now=T0 + 3) == "waiting"
    [job] = lua.pop("q2", now=T0 + 4)
    assert job["data"] == '{"step": 1}'


@pytest.mark.parametrize("data", ['{"out": 1}', ""])
def test_complete_data_replaces_or_keeps(lua: Lua, data: str) -> None:
    lua.put("a", data='{"in": 1}')
    lua.pop()
    lua.complete("a", data=data, result='{"r": 1}')
    job = lua.job("a")
    assert job is not None and job["data"] == (data or '{"in": 1}') and job["result"] == '{"r": 1}'
