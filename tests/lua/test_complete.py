"""complete: finishing, advancing to another queue, results, retention of completed jobs."""

from __future__ import annotations

import json

import pytest
from lua_support import DAY, T0, Lua

from scheduler.engine.errors import InvalidArgument, JobNotFound, LockLost, WrongState


def running(
    lua: Lua,
    jid: str = "a",
    worker: str = "w1",
    queue: str = "q",
    now: float = T0,
    **options: object,
) -> None:
    lua.put(jid, queue, now=now, **options)
    assert lua.pop_jids(queue, worker, now=now) == [jid]


def test_complete(lua: Lua) -> None:
    running(lua)
    assert lua.complete("a", data='{"out": 1}', now=T0 + 7) == "complete"
    job = lua.job("a", now=T0 + 7)
    assert job is not None
    assert job["state"] == "complete"
    assert job["data"] == '{"out": 1}'
    assert job["worker"] == ""
    assert job["expires"] == 0
    assert job["updated"] == T0 + 7
    assert [h["what"] for h in job["history"]] == ["put", "popped", "done"]
    assert lua.zset("completed") == ["a"]
    assert lua.zset("q:q-locks") == []
    assert lua.zset("w:w1:jobs") == []
    assert lua.r.zscore(lua.key("workers"), "w1") == T0 + 7
    assert lua("jobs", "complete", now=T0) == ["a"]
    stats = lua("stats", "q", T0, now=T0)
    assert stats["run"]["count"] == 1 and stats["run"]["mean"] == 7


def test_complete_twice_is_refused(lua: Lua) -> None:
    running(lua)
    lua.complete("a")
    with pytest.raises(WrongState, match=r"Complete\(\): Job a is not currently running: complete"):
        lua.complete("a", now=T0 + 1)


def test_complete_checks_worker_queue_and_existence(lua: Lua) -> None:
    running(lua)
    with pytest.raises(LockLost, match="another worker: w1"):
        lua.complete("a", "w2")
    with pytest.raises(WrongState, match="running in another queue: q"):
        lua.complete("a", "w1", "other")
    with pytest.raises(JobNotFound, match=r"Complete\(\): Job b does not exist"):
        lua.complete("b")
    lua.put("w")
    with pytest.raises(WrongState, match="not currently running: waiting"):
        lua.complete("w")


def test_complete_with_result(lua: Lua) -> None:
    running(lua)
    lua.complete("a", result='{"rows": [1, 2]}')
    job = lua.job("a")
    assert job is not None and job["result"] == '{"rows": [1, 2]}'
    running(lua, "b")
    lua.complete("b", "w1", result="42")
    job = lua.job("b")
    assert job is not None and job["result"] == "42"


def test_put_again_clears_the_result(lua: Lua) -> None:
    running(lua)
    lua.complete("a", result='"x"')
    lua.put("a", now=T0 + 1)
    job = lua.job("a")
    assert job is not None and job["result"] is None


def test_complete_with_next_advances(lua: Lua) -> None:
    running(lua, retries=2)
    lua("retry", "a", "q", "w1", now=T0 + 1)  # uses one retry
    lua.pop(now=T0 + 2)
    assert lua.complete("a", now=T0 + 3, next="q2") == "waiting"
    job = lua.job("a", now=T0 + 3)
    assert job is not None
    assert (job["state"], job["queue"], job["remaining"], job["worker"]) == ("waiting", "q2", 2, "")
    assert job["history"][-2:] == [
        {"what": "done", "when": T0 + 3, "worker": "w1"},
        {"what": "put", "when": T0 + 3, "q": "q2"},
    ]
    assert lua.waiting("q2") == ["a"]
    assert lua.zset("completed") == []
    assert "q2" in lua.zset("queues")


def test_complete_with_next_and_delay(lua: Lua) -> None:
    running(lua)
    assert lua.complete("a", now=T0 + 1, next="q2", delay=10) == "scheduled"
    assert lua.r.zscore(lua.key("q:q2-scheduled"), "a") == T0 + 11
    assert lua.pop_jids("q2", now=T0 + 10) == []
    assert lua.pop_jids("q2", now=T0 + 11) == ["a"]


def test_complete_with_next_and_depends(lua: Lua) -> None:
    running(lua, "done")
    lua.complete("done")
    running(lua, "b")
    lua.put("a")
    assert lua.complete("b", next="q2", depends=["a", "done", "gone"]) == "depends"
    job = lua.job("b")
    assert job is not None
    assert job["dependencies"] == ["a"]  # complete and non-existent dependencies are satisfied
    assert lua.zset("q:q2-depends") == ["b"]
    lua.pop_jids()  # "a"
    assert lua.complete("a", now=T0 + 1) == "complete"
    assert lua.state("b") == "waiting"
    assert lua.waiting("q2") == ["b"]


def test_complete_with_next_depends_and_delay(lua: Lua) -> None:
    running(lua, "x")
    lua.put("y")
    lua.complete("x", next="q2", depends=["y"], delay=5)
    lua.pop_jids(now=T0 + 100)
    lua.complete("y", now=T0 + 100)
    assert lua.state("x", now=T0 + 100) == "scheduled"
    assert lua.r.zscore(lua.key("q:q2-scheduled"), "x") == T0 + 105


def test_complete_depending_on_itself_is_refused(lua: Lua) -> None:
    running(lua)
    with pytest.raises(InvalidArgument, match="cannot depend on itself"):
        lua.complete("a", next="q2", depends=["a"])


@pytest.mark.parametrize("option", ["delay", "depends"])
def test_delay_and_depends_need_next(lua: Lua, option: str) -> None:
    running(lua)
    value = 5 if option == "delay" else ["b"]
    with pytest.raises(InvalidArgument, match='need "next"'):
        lua.complete("a", **{option: value})


def test_completed_jobs_are_dropped_after_jobs_history(lua: Lua) -> None:
    lua.config("jobs-history", 100)
    for n, jid in enumerate("abc"):
        running(lua, jid, now=T0 + n * 30)
        lua.complete(jid, now=T0 + n * 30)
    assert lua.zset("completed") == ["a", "b", "c"]
    running(lua, "d", now=T0 + 150)
    lua.complete("d", now=T0 + 150)  # a (T0) and b (T0 + 30) are older than 100 s
    assert lua.zset("completed") == ["c", "d"]
    assert lua.job("a") is None
    assert not any("j:a" in key for key in lua.namespace_keys())


def test_completed_jobs_are_capped_by_jobs_history_count(lua: Lua) -> None:
    lua.config("jobs-history-count", 2)
    for n, jid in enumerate("abcd"):
        running(lua, jid, tags=["t"])
        lua("track", "track", jid, now=T0)
        lua.complete(jid, now=T0 + n)
    assert lua.zset("completed") == ["c", "d"]
    assert lua.job("a") is None and lua.job("b") is None
    assert lua("tag", "get", "t", now=T0) == {"total": 2, "jobs": ["c", "d"]}
    tracked = lua("track", now=T0)
    assert [j["jid"] for j in tracked["jobs"]] == ["c", "d"]
    assert tracked["expired"] == ["a", "b"]  # dropped by retention: reported as expired


def test_retention_of_zero_count_drops_at_once(lua: Lua) -> None:
    lua.config("jobs-history-count", 0)
    running(lua)
    assert lua.complete("a") == "complete"
    assert lua.job("a") is None
    assert lua.zset("completed") == []


def test_default_retention_is_a_week(lua: Lua) -> None:
    running(lua)
    lua.complete("a")
    running(lua, "b", now=T0 + 7 * DAY - 1)
    lua.complete("b", now=T0 + 7 * DAY - 1)
    assert lua.job("a") is not None
    running(lua, "c", now=T0 + 7 * DAY + 1)
    lua.complete("c", now=T0 + 7 * DAY + 1)
    assert lua.job("a") is None


def test_complete_many_completes_a_batch_and_reports_each_refusal_in_place(lua: Lua) -> None:
    for jid in ("a", "b", "c"):
        lua.put(jid, data='{"keep": 1}')
    lua.pop(worker="w1", count=3, now=T0 + 1)
    reply = json.loads(
        lua.raw(
            "complete.many",
            "w1",
            "a",
            "q",
            "",
            "b",
            "q",
            '{"rows": 2}',
            "nope",
            "q",
            "",
            "c",
            "other",
            "",
            now=T0 + 2,
        )
    )
    assert reply[:2] == ["complete", "complete"]
    assert reply[2].startswith("NOTFOUND ") and "nope" in reply[2]
    assert reply[3].startswith("WRONGSTATE ") and "c" in reply[3]
    a, b, c = (lua.job(jid, T0 + 2) for jid in ("a", "b", "c"))
    assert a is not None and b is not None and c is not None
    assert (a["state"], a["data"], a["result"]) == ("complete", '{"keep": 1}', None)
    assert (b["state"], b["result"]) == ("complete", '{"rows": 2}')  # stored as given
    assert (c["state"], c["worker"]) == ("running", "w1")  # refused: nothing of it changed
    assert lua.r.zscore(lua.key("workers"), "w1") == T0 + 2
