"""fail, failed, unfail; queues, pause, unpause, max-concurrency, length, queue.forget, jobs."""

from __future__ import annotations

import json

import pytest
from lua_support import NOT_JIDS, T0, Lua, submit_steps

from scheduler.engine.errors import JobNotFound, LockLost, WrongState

# -- fail, failed, unfail --------------------------------------------------------------------


def test_fail_a_running_job(lua: Lua) -> None:
    lua.put("a")
    lua.pop_jids()
    assert lua("fail", "a", "w1", "boom", "Traceback...", '{"partial": true}', now=T0 + 3) == "a"
    job = lua.job("a", now=T0 + 3)
    assert job is not None
    assert job["state"] == "failed"
    assert job["failure"] == {
        "group": "boom",
        "message": "Traceback...",
        "when": T0 + 3,
        "worker": "w1",
    }
    assert job["data"] == '{"partial": true}'
    assert job["worker"] == ""
    assert job["history"][-1] == {"what": "failed", "when": T0 + 3, "worker": "w1", "group": "boom"}
    assert lua.zset("q:q-locks") == [] and lua.zset("w:w1:jobs") == []
    assert lua.r.lrange(lua.key("f:boom"), 0, -1) == ["a"]
    stats = lua("stats", "q", T0, now=T0)
    assert (stats["failed"], stats["failures"]) == (1, 1)
    with pytest.raises(WrongState, match="not currently running: failed"):
        lua("heartbeat", "a", "w1", now=T0 + 4)


def test_fail_a_job_in_any_state(lua: Lua) -> None:
    lua.put("waiting")
    lua.put("scheduled", delay=5)
    for jid in ("waiting", "scheduled"):
        lua("fail", jid, "admin", "manual", "stop", now=T0)
    assert lua("failed", now=T0) == {"manual": 2}
    assert lua.waiting("q") == [] and lua.zset("q:q-scheduled") == []


def test_fail_of_a_running_job_by_another_worker(lua: Lua) -> None:
    lua.put("a")
    lua.pop_jids()
    with pytest.raises(LockLost, match=r"Fail\(\): Job a has been handed to another worker: w1"):
        lua("fail", "a", "w2", "g", "m", now=T0)
    with pytest.raises(JobNotFound, match=r"Fail\(\): Job b does not exist"):
        lua("fail", "b", "w2", "g", "m", now=T0)


def test_fail_again_moves_between_groups(lua: Lua) -> None:
    lua.put("a")
    lua("fail", "a", "w", "g1", "m", now=T0)
    lua("fail", "a", "w", "g2", "m", now=T0 + 1)
    assert lua("failed", now=T0) == {"g2": 1}
    stats = lua("stats", "q", T0, now=T0)
    assert (stats["failed"], stats["failures"]) == (1, 2)


def test_failed_lists_newest_first_with_paging(lua: Lua) -> None:
    for n in range(5):
        lua.put(f"j{n}")
        lua("fail", f"j{n}", "w", "g", f"m{n}", now=T0 + n)
    listing = lua("failed", "g", now=T0)
    assert listing["total"] == 5
    assert [j["jid"] for j in listing["jobs"]] == ["j4", "j3", "j2", "j1", "j0"]
    assert listing["jobs"][0]["failure"]["message"] == "m4"
    page = lua("failed", "g", 1, 2, now=T0)
    assert (page["total"], [j["jid"] for j in page["jobs"]]) == (5, ["j3", "j2"])
    assert lua("failed", "g", 10, 5, now=T0) == {"total": 5, "dropped": 0, "jobs": []}
    assert lua("failed", "g", 0, 0, now=T0) == {"total": 5, "dropped": 0, "jobs": []}
    assert lua("failed", "none", now=T0) == {"total": 0, "dropped": 0, "jobs": []}
    assert lua("failed", now=T0) == {"g": 5}


def test_failed_without_failures(lua: Lua) -> None:
    assert lua("failed", now=T0) == {}


def test_unfail_moves_oldest_first(lua: Lua) -> None:
    for n in range(4):
        lua.put(f"j{n}", retries=2)
        lua.pop_jids()
        lua("retry", f"j{n}", "q", "w1", now=T0)  # remaining 1
        lua.pop_jids()
        lua("fail", f"j{n}", "w1", "g", "m", now=T0 + n)
    assert lua("unfail", "q2", "g", 3, now=T0 + 10) == 3
    assert lua.pop_jids("q2", count=10, now=T0 + 10) == ["j0", "j1", "j2"]
    job = lua.job("j0", now=T0 + 10)
    assert job is not None
    assert (job["queue"], job["remaining"], job["failure"]) == ("q2", 2, {})
    assert lua("failed", now=T0) == {"g": 1}
    assert lua("unfail", "q2", "g", now=T0 + 11) == 1
    assert lua("failed", now=T0) == {}
    assert lua.r.sismember(lua.key("failures"), "g") == 0
    assert lua("unfail", "q2", "g", now=T0 + 12) == 0
    assert lua("unfail", "q2", "g", 0, now=T0 + 12) == 0
    stats = lua("stats", "q", T0, now=T0)
    assert stats["failed"] == 0 and stats["failures"] == 4


# -- queues ----------------------------------------------------------------------------------


def queue_counts(**counts: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "q",
        "waiting": 0,
        "stalled": 0,
        "running": 0,
        "scheduled": 0,
        "depends": 0,
        "recurring": 0,
        "paused": False,
        "parked": 0,
        "buried": 0,
    }
    base.update(counts)
    return base


def test_queues_counts(lua: Lua) -> None:
    assert lua("queues", now=T0) == []
    assert lua("queues", "q", now=T0) == queue_counts()
    lua.put("w1")
    lua.put("w2")
    lua.put("r")
    lua.put("s", delay=10)
    lua.put("d", depends=["w1"])
    lua("recur", "q", "rec", "K", "{}", "interval", 60, 1000, now=T0)
    lua("fail", "w2", "x", "g", "m", now=T0)
    lua.pop_jids(count=1)  # w1 running
    lua.put("other", "q2", now=T0 + 1)
    assert lua("queues", "q", now=T0 + 1) == queue_counts(
        waiting=1, running=1, scheduled=1, depends=1, recurring=1
    )
    assert lua("queues", "q", now=T0 + 60) == queue_counts(
        waiting=1, stalled=1, scheduled=1, depends=1, recurring=1
    )
    assert [q["name"] for q in lua("queues", now=T0)] == ["q", "q2"]
    assert lua("length", "q", now=T0) == 3  # running + waiting + scheduled


def test_pause_and_unpause(lua: Lua) -> None:
    lua.put("a")
    assert lua("pause", "q", "q2", now=T0) is None
    assert lua.pop(now=T0) == []
    assert lua("queues", "q", now=T0)["paused"] is True
    assert lua.state("a") == "waiting"
    assert lua("unpause", "q", now=T0) is None
    assert lua("queues", "q", now=T0)["paused"] is False
    assert lua.pop_jids(now=T0) == ["a"]
    assert lua.r.smembers(lua.key("paused_queues")) == {"q2"}


def test_max_concurrency(lua: Lua) -> None:
    lua.config("q-max-concurrency", 2)
    for jid in "abcd":
        lua.put(jid)
    assert lua.pop_jids(count=5) == ["a", "b"]
    assert lua.pop_jids(count=5) == []
    lua.complete("a")
    assert lua.pop_jids(worker="w2", count=5) == ["c"]
    lua("config.unset", "q-max-concurrency", now=T0)
    assert lua.pop_jids(count=5) == ["d"]


def test_max_concurrency_counts_grace_period_jobs(lua: Lua) -> None:
    lua.config("q-max-concurrency", 2)
    for jid in "abc":
        lua.put(jid)
    assert lua.pop_jids(count=2) == ["a", "b"]
    lua("heartbeat", "b", "w1", now=T0 + 59)
    # a expires: the pop warns its worker (grace period) and hands out nothing new.
    assert lua.pop_jids(worker="w2", count=5, now=T0 + 60) == []
    assert lua.pop_jids(worker="w2", count=5, now=T0 + 69) == []
    assert lua.pop_jids(worker="w2", count=5, now=T0 + 70) == ["a"]


def test_queue_forget(lua: Lua) -> None:
    lua.put("a", "q1")
    lua.put("b", "q2")
    assert lua("queue.forget", "q1", "unknown", now=T0) is None
    assert lua.zset("queues") == ["q2"]
    assert lua.state("a") == "waiting"  # jobs are untouched


def test_jobs_by_state(lua: Lua) -> None:
    for jid in ("r1", "r2", "w1", "w2"):
        lua.put(jid)
    lua.put("s1", delay=10)
    lua.put("s2", delay=5)
    lua.put("d1", depends=["w1"])
    lua("recur", "q", "rec", "K", "{}", "interval", 60, 1000, now=T0)
    assert lua.pop_jids(count=2, now=T0) == ["r1", "r2"]
    lua("heartbeat", "r2", "w1", now=T0 + 30)
    assert lua("jobs", "running", "q", now=T0 + 60) == ["r2"]
    assert lua("jobs", "stalled", "q", now=T0 + 60) == ["r1"]
    assert lua("jobs", "waiting", "q", now=T0) == ["w1", "w2"]
    assert lua("jobs", "scheduled", "q", now=T0) == ["s2", "s1"]
    assert lua("jobs", "depends", "q", now=T0) == ["d1"]
    assert lua("jobs", "recurring", "q", now=T0) == ["rec"]
    assert lua("jobs", "waiting", "q", 1, 1, now=T0) == ["w2"]
    assert lua("jobs", "waiting", "q", 5, 1, now=T0) == []
    assert lua("jobs", "waiting", "q", 0, 0, now=T0) == []
    assert lua("jobs", "waiting", "nope", now=T0) == []
    lua.complete("r2", now=T0 + 61)
    lua.pop_jids(worker="w9", now=T0 + 62)  # r1: warned
    assert lua("jobs", "complete", now=T0) == ["r2"]


def test_jobs_complete_newest_first_with_paging(lua: Lua) -> None:
    for n in range(4):
        lua.put(f"j{n}", now=T0 + n)
        lua.pop_jids(now=T0 + n)
        lua.complete(f"j{n}", now=T0 + n)
    assert lua("jobs", "complete", now=T0) == ["j3", "j2", "j1", "j0"]
    assert lua("jobs", "complete", 1, 2, now=T0) == ["j2", "j1"]
    assert lua("jobs", "complete", 0, 0, now=T0) == []


def test_listings_skip_entries_that_are_not_jids(lua: Lua) -> None:
    lua.put("a")
    lua.put("s", delay=100)
    lua.put("b")
    lua.pop_jids(count=1)
    lua.pop()
    lua.complete("a", now=T0 + 1)
    submit_steps(lua, "r1", ("x", []))
    states = ("waiting", "scheduled", "running", "stalled")
    before = {state: lua("jobs", state, "q", now=T0 + 2) for state in states}
    completed = lua("jobs", "complete", now=T0 + 2)
    run_jids = json.loads(lua.raw("run.get", "r1", now=T0 + 2))["jids"]
    for suffix in ("work", "scheduled", "locks"):
        lua.r.zadd(lua.key(f"q:q-{suffix}"), {jid: T0 + n for n, jid in enumerate(NOT_JIDS)})
    lua.r.zadd(lua.key("completed"), dict.fromkeys(NOT_JIDS, T0))
    lua.r.rpush(lua.key("run:r1-jobs"), *NOT_JIDS)
    for state in states:
        jids = lua("jobs", state, "q", now=T0 + 2)
        assert jids == before[state]
        assert len(lua("multiget", *jids, now=T0 + 2) or []) == len(jids)
    assert lua("jobs", "complete", now=T0 + 2) == completed
    assert json.loads(lua.raw("run.get", "r1", now=T0 + 2))["jids"] == run_jids


def test_run_get_pages_the_runs_jids(lua: Lua) -> None:
    """With an offset and a count, run.get reads a page of the run's jids (not the graph nor
    the rest of them), and says where the next page starts: a listing of a big run is bounded."""
    submit_steps(lua, "r1", ("a", []), ("b", ["a"]), ("c", ["b"]))
    whole = json.loads(lua.raw("run.get", "r1", now=T0))
    assert whole["jids"] == ["r1:a", "r1:b", "r1:c"] and "jids_next" not in whole
    first = json.loads(lua.raw("run.get", "r1", 0, 2, now=T0))
    assert (first["jids"], first["jids_next"], first["jobs"]) == (["r1:a", "r1:b"], 2, 3)
    assert "graph" not in first
    last = json.loads(lua.raw("run.get", "r1", 2, 2, now=T0))
    assert (last["jids"], last["jids_next"]) == (["r1:c"], None)
    beyond = json.loads(lua.raw("run.get", "r1", 9, 2, now=T0))
    assert (beyond["jids"] or [], beyond["jids_next"]) == ([], None)
    assert lua.raw("run.get", "nope", 0, 2, now=T0) is None
