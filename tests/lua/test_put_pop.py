"""put, requeue, pop, peek, priority: the normal paths, ordering and delays."""

from __future__ import annotations

import pytest
from lua_support import T0, Lua

from scheduler.engine import limits
from scheduler.engine.errors import InvalidArgument, JobNotFound, LockLost, WrongState

# The engine on Redis 7.0 as well (tests/conftest.py, pytest_generate_tests).
pytestmark = pytest.mark.system_server


def test_put_creates_a_waiting_job(lua: Lua) -> None:
    assert lua.put("a", data='{"x": 1}', tags=["t1", "t2"], retries=3, priority=2) == "a"
    job = lua.job("a")
    assert job is not None
    assert job["state"] == "waiting"
    assert job["queue"] == "q"
    assert job["klass"] == "K"
    assert job["data"] == '{"x": 1}'  # stored as given
    assert job["tags"] == ["t1", "t2"]
    assert job["retries"] == job["remaining"] == 3
    assert job["priority"] == 2
    assert job["worker"] == ""
    assert job["created"] == job["updated"] == T0
    assert job["result"] is None
    assert job["spawned_from_jid"] is False
    assert job["tracked"] is False
    assert job["failure"] == {}
    assert job["history"] == [{"what": "put", "when": T0, "q": "q"}]
    assert lua.waiting("q") == ["a"]
    assert lua.zset("queues") == ["q"]


def test_put_defaults(lua: Lua) -> None:
    lua.put("a")
    job = lua.job("a")
    assert job is not None
    assert (job["priority"], job["retries"], job["remaining"], job["tags"]) == (0, 5, 5, [])


def test_pop_hands_out_with_a_lock(lua: Lua) -> None:
    lua.put("a")
    [job] = lua.pop(worker="w1", now=T0 + 5)
    assert job["jid"] == "a"
    assert job["state"] == "running"
    assert job["worker"] == "w1"
    assert job["expires"] == T0 + 5 + 60
    assert [h["what"] for h in job["history"]] == ["put", "popped"]
    assert job["history"][1] == {"what": "popped", "when": T0 + 5, "worker": "w1"}
    assert lua.waiting("q") == []
    assert lua.r.zscore(lua.key("q:q-locks"), "a") == T0 + 65
    assert lua.r.zscore(lua.key("w:w1:jobs"), "a") == T0 + 65
    assert lua.r.zscore(lua.key("workers"), "w1") == T0 + 5
    assert lua.pop(now=T0 + 6) == []


def test_pop_count_and_empty_queue(lua: Lua) -> None:
    assert lua.pop("nothing", count=5) == []
    for jid in "abc":
        lua.put(jid)
    assert lua.pop_jids(count=2) == ["a", "b"]
    assert lua.pop_jids(count=0) == []
    assert lua.pop_jids(count=10) == ["c"]


def test_lower_priority_number_pops_first_fifo_among_equals(lua: Lua) -> None:
    # Same timestamp for every put: FIFO comes from the insertion counter, not the clock.
    order = [("p5a", 5), ("n1", -1), ("z0a", 0), ("p5b", 5), ("z0b", 0), ("n1b", -1), ("z0c", 0)]
    for jid, priority in order:
        lua.put(jid, priority=priority)
    assert lua.pop_jids(count=10) == ["n1", "n1b", "z0a", "z0b", "z0c", "p5a", "p5b"]


def test_fifo_is_exact_within_a_priority_not_by_name(lua: Lua) -> None:
    jids = [f"j{n}" for n in range(30, 0, -1)]  # names in reverse order
    for jid in jids:
        lua.put(jid, now=T0)
    assert lua.pop_jids(count=30) == jids


def test_priority_reorders_a_waiting_job(lua: Lua) -> None:
    for jid in "abcd":
        lua.put(jid)
    assert lua("priority", "c", -3, now=T0 + 1) == -3
    assert lua("priority", "a", 1, now=T0 + 1) == 1
    job = lua.job("a")
    assert job is not None and job["priority"] == 1 and job["updated"] == T0 + 1
    # b and d keep their order; c first; a last.
    assert lua.pop_jids(count=4, now=T0 + 2) == ["c", "b", "d", "a"]


def test_priority_keeps_the_place_among_equals(lua: Lua) -> None:
    for jid in "abc":
        lua.put(jid, priority=1)
    lua("priority", "b", 0, now=T0)
    lua("priority", "b", 1, now=T0)  # back to 1: behind a, ahead of c as when put
    assert lua.pop_jids(count=3) == ["a", "b", "c"]


def test_priority_of_a_scheduled_job_applies_when_it_becomes_waiting(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", delay=10)
    lua("priority", "b", -1, now=T0)
    assert lua.pop_jids(count=2, now=T0 + 10) == ["b", "a"]


def test_priority_of_unknown_job(lua: Lua) -> None:
    with pytest.raises(JobNotFound, match=r"Priority\(\): Job nope does not exist"):
        lua("priority", "nope", 1, now=T0)


def test_delay_schedules_then_pop_promotes(lua: Lua) -> None:
    lua.put("a", delay=30)
    assert lua.state("a") == "scheduled"
    assert lua.zset("q:q-scheduled") == ["a"]
    assert lua.r.zscore(lua.key("q:q-scheduled"), "a") == T0 + 30
    assert lua.pop_jids(now=T0 + 29.999) == []
    assert lua.state("a") == "scheduled"
    assert lua.pop_jids(now=T0 + 30) == ["a"]
    assert lua.zset("q:q-scheduled") == []


def test_promoted_jobs_keep_priority_order(lua: Lua) -> None:
    lua.put("late-high", delay=5, priority=-1)
    lua.put("now-low", priority=1)
    lua.put("late-low", delay=5, priority=1)
    assert lua.pop_jids(count=3, now=T0 + 5) == ["late-high", "now-low", "late-low"]


def test_fractional_delay_and_time(lua: Lua) -> None:
    lua.put("a", delay=0.25, now=T0 + 0.5)
    assert lua.pop_jids(now=T0 + 0.74) == []
    assert lua.pop_jids(now=T0 + 0.75) == ["a"]


def test_peek_shows_without_handing_out(lua: Lua) -> None:
    lua.put("a", priority=1)
    lua.put("b")
    lua.put("c", delay=10)
    assert [j["jid"] for j in lua("peek", "q", 5, now=T0)] == ["b", "a"]
    assert lua.state("a") == "waiting"
    assert [j["jid"] for j in lua("peek", "q", 1, now=T0)] == ["b"]
    assert lua("peek", "q", 0, now=T0) == []
    assert lua("peek", "empty", 3, now=T0) == []
    # peek makes due scheduled jobs visible too
    assert [j["jid"] for j in lua("peek", "q", 5, now=T0 + 10)] == ["b", "c", "a"]
    assert lua("workers", now=T0) == []


def test_peek_lists_stalled_jobs_first(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua.pop(now=T0)
    peeked = lua("peek", "q", 5, now=T0 + 61)
    assert [(j["jid"], j["state"]) for j in peeked] == [("a", "stalled"), ("b", "waiting")]


def test_put_again_moves_the_job_and_resets_it(lua: Lua) -> None:
    lua.put("a", tags=["x"], retries=2, priority=3)
    lua.put("a", "other", now=T0 + 1, data='{"v": 2}')
    job = lua.job("a")
    assert job is not None
    assert (job["queue"], job["state"], job["data"]) == ("other", "waiting", '{"v": 2}')
    # left-out options keep the job's values
    assert (job["tags"], job["retries"], job["priority"]) == (["x"], 2, 3)
    assert job["created"] == T0 and job["updated"] == T0 + 1
    assert lua.waiting("q") == []
    assert lua.waiting("other") == ["a"]
    assert lua.zset("queues") == ["q", "other"]
    assert [h["what"] for h in job["history"]] == ["put", "put"]


def test_put_moving_a_running_job_revokes_the_lock(lua: Lua) -> None:
    lua.put("a", retries=2)
    lua.pop(worker="w1")
    lua.put("a", "q2", now=T0 + 1)
    assert lua.state("a") == "waiting"
    assert lua.zset("q:q-locks") == []
    assert lua.zset("w:w1:jobs") == []
    with pytest.raises(WrongState, match="not currently running: waiting"):
        lua.complete("a", "w1", "q", now=T0 + 2)
    with pytest.raises(WrongState):
        lua("heartbeat", "a", "w1", now=T0 + 2)
    assert lua.pop_jids("q2", "w2", now=T0 + 3) == ["a"]
    with pytest.raises(LockLost, match="handed to another worker: w2"):
        lua("heartbeat", "a", "w1", now=T0 + 4)
    job = lua.job("a")
    assert job is not None and job["remaining"] == 2


def test_put_of_a_failed_or_complete_job_takes_it_out_of_that_index(lua: Lua) -> None:
    lua.put("f")
    lua("fail", "f", "w", "boom", "message", now=T0)
    lua.put("c")
    lua.pop_jids()
    lua.complete("c")
    lua.put("f", now=T0 + 1)
    lua.put("c", now=T0 + 1)
    assert lua("failed", now=T0) == {}
    assert lua.r.exists(lua.key("f:boom")) == 0
    assert lua.zset("completed") == []
    assert lua.state("f") == lua.state("c") == "waiting"
    job = lua.job("c")
    assert job is not None and job["result"] is None


def test_requeue_needs_an_existing_job(lua: Lua) -> None:
    with pytest.raises(JobNotFound, match=r"Requeue\(\): Job a does not exist"):
        lua.put("a", command="requeue")
    lua.put("a")
    assert lua.put("a", "q2", command="requeue", now=T0 + 1) == "a"
    assert lua.state("a") == "waiting"
    assert lua.waiting("q2") == ["a"]


def test_put_replaces_tags(lua: Lua) -> None:
    lua.put("a", tags=["x", "y"])
    lua.put("b", tags=["y"])
    lua.put("a", tags=["z"], now=T0 + 1)
    assert lua("tag", "get", "x", now=T0) == {"total": 0, "jobs": []}
    assert lua("tag", "get", "y", now=T0) == {"total": 1, "jobs": ["b"]}
    assert lua("tag", "get", "z", now=T0) == {"total": 1, "jobs": ["a"]}
    assert lua.r.zscore(lua.key("tags"), "x") is None


def test_put_with_empty_tags_and_duplicate_tags(lua: Lua) -> None:
    lua.put("a", tags=[])
    lua.put("b", tags=["t", "t"])
    job_a, job_b = lua.job("a"), lua.job("b")
    assert job_a is not None and job_a["tags"] == []
    assert job_b is not None and job_b["tags"] == ["t"]
    assert lua.r.zscore(lua.key("tags"), "t") == 1


def test_wait_time_uses_the_time_the_job_became_waiting(lua: Lua) -> None:
    lua.put("a", delay=100)
    lua.pop(now=T0 + 130)
    stats = lua("stats", "q", T0, now=T0)
    assert stats["wait"]["count"] == 1
    assert stats["wait"]["mean"] == 30


def test_server_clock_when_now_is_empty(lua: Lua) -> None:
    server_now = float(lua.r.time()[0])
    lua.put("a", now="")
    job = lua.job("a", now=server_now)
    assert job is not None
    assert abs(job["created"] - server_now) < 60


@pytest.mark.parametrize(
    "jid",
    [
        "caf\u00e9",
        "en\u2013dash",  # the same first two bytes as U+200E..U+202E in UTF-8
        "euro\u20ac",
        "shin\u0634",  # the same first byte as U+061C
        "alm\u061c",
        "rlm\u200f",
        "rlo\u202e",
        "pdi\u2069",
    ],
)
def test_the_engine_refuses_exactly_the_ids_the_client_refuses(lua: Lua, jid: str) -> None:
    """A bidirectional control makes an id display as another, so no id holds one; other
    text is taken. The engine and the client's own check (scheduler.engine.limits) agree."""
    fault = limits.id_fault(jid, "jid")
    if fault is None:
        lua.put(jid)
        assert lua.state(jid) == "waiting"
    else:
        with pytest.raises(InvalidArgument, match="white space or a control character"):
            lua.put(jid)
