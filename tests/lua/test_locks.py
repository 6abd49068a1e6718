"""Locks: heartbeat, expiry and the grace period, timeout, retry and running out of retries.

A lock is valid while ``expires > now``. Once it expired (or was timed out) its worker's
heartbeat, complete, retry and fail are refused with LockLost, before anyone else pops the job.
"""

from __future__ import annotations

import pytest
from lua_support import T0, Lua

from scheduler.engine.errors import JobNotFound, LockLost, WrongState

HB = 60  # default heartbeat
GRACE = 10  # default grace-period


def running(
    lua: Lua, jid: str = "a", worker: str = "w1", now: float = T0, **options: object
) -> None:
    lua.put(jid, now=now, **options)
    assert lua.pop_jids(worker=worker, now=now) == [jid]


# -- heartbeat -------------------------------------------------------------------------------


def test_heartbeat_renews_the_lock(lua: Lua) -> None:
    running(lua)
    expires = lua("heartbeat", "a", "w1", now=T0 + 30)
    assert float(expires) == T0 + 30 + HB
    job = lua.job("a", now=T0 + 30)
    assert job is not None
    assert job["expires"] == T0 + 90 and job["updated"] == T0 + 30 and job["data"] == "{}"
    assert lua.r.zscore(lua.key("q:q-locks"), "a") == T0 + 90
    assert lua.r.zscore(lua.key("w:w1:jobs"), "a") == T0 + 90
    assert lua.r.zscore(lua.key("workers"), "w1") == T0 + 30
    # still valid until T0 + 90 thanks to the heartbeat
    assert lua.complete("a", now=T0 + 89) == "complete"


def test_heartbeat_keeps_fractional_seconds(lua: Lua) -> None:
    running(lua)
    assert float(lua("heartbeat", "a", "w1", now=T0 + 0.25)) == T0 + 60.25
    now = T0 + 0.123456  # more digits than Lua's tostring keeps
    expires = float(lua("heartbeat", "a", "w1", now=now))
    assert expires == now + 60 == lua.r.zscore(lua.key("q:q-locks"), "a")


def test_heartbeat_updates_data(lua: Lua) -> None:
    running(lua)
    lua("heartbeat", "a", "w1", '{"progress": 50}', now=T0 + 1)
    job = lua.job("a")
    assert job is not None and job["data"] == '{"progress": 50}'


def test_heartbeat_uses_the_queue_heartbeat(lua: Lua) -> None:
    lua.config("q-heartbeat", 5)
    lua.config("heartbeat", 100)
    running(lua)
    job = lua.job("a")
    assert job is not None and job["expires"] == T0 + 5
    assert float(lua("heartbeat", "a", "w1", now=T0 + 1)) == T0 + 6
    lua.put("b", "other")
    [other] = lua.pop("other", now=T0)
    assert other["expires"] == T0 + 100


def test_heartbeat_owner_only(lua: Lua) -> None:
    running(lua)
    with pytest.raises(LockLost, match=r"Heartbeat\(\): Job a has been handed to another worker"):
        lua("heartbeat", "a", "w2", now=T0 + 1)
    with pytest.raises(JobNotFound):
        lua("heartbeat", "nope", "w1", now=T0 + 1)
    lua.put("b")
    with pytest.raises(WrongState, match="not currently running: waiting"):
        lua("heartbeat", "b", "w1", now=T0 + 1)


@pytest.mark.parametrize("command", ["heartbeat", "complete", "retry", "fail"])
@pytest.mark.parametrize("late", [0, 0.001, 5])
def test_expired_lock_refuses_its_worker_before_anyone_pops(
    lua: Lua, command: str, late: float
) -> None:
    running(lua)
    now = T0 + HB + late  # expires == T0 + 60: at that instant the lock is gone
    with pytest.raises(LockLost, match="lock expired"):
        call(lua, command, "a", "w1", now)
    job = lua.job("a", now=now)
    assert job is not None and job["state"] == "stalled"


def call(lua: Lua, command: str, jid: str, worker: str, now: float) -> object:
    if command == "heartbeat":
        return lua("heartbeat", jid, worker, now=now)
    if command == "complete":
        return lua.complete(jid, worker, now=now)
    if command == "retry":
        return lua("retry", jid, "q", worker, now=now)
    return lua("fail", jid, worker, "group", "message", now=now)


@pytest.mark.parametrize("command", ["heartbeat", "complete", "retry", "fail"])
def test_timed_out_worker_is_refused_even_at_the_same_instant(lua: Lua, command: str) -> None:
    running(lua)
    assert lua("timeout", "a", now=T0 + 5) is None
    for now in (T0 + 5, T0 + 4):  # even a caller whose clock is behind
        with pytest.raises(LockLost):
            call(lua, command, "a", "w1", now)


# -- expiry and grace ------------------------------------------------------------------------


def test_expired_lock_gets_a_grace_period_then_a_retry(lua: Lua) -> None:
    running(lua, retries=2)
    assert lua("queues", "q", now=T0 + HB)["stalled"] == 1
    # First pop after expiry: the worker is warned, nothing is handed out yet.
    assert lua.pop_jids(worker="w2", now=T0 + HB + 1) == []
    job = lua.job("a", now=T0 + HB + 1)
    assert job is not None
    assert job["state"] == "stalled" and job["worker"] == "w1" and job["remaining"] == 2
    assert job["history"][-1] == {"what": "timed-out", "when": T0 + HB + 1, "worker": "w1"}
    assert lua.zset("w:w1:jobs") == []
    assert lua.r.zscore(lua.key("q:q-locks"), "a") == T0 + HB + 1 + GRACE
    assert lua("stats", "q", T0, now=T0)["retries"] == 1
    # Within the grace period nobody takes it; after it, the next pop does, using a retry.
    assert lua.pop_jids(worker="w2", now=T0 + HB + GRACE) == []
    [job] = lua.pop(worker="w2", now=T0 + HB + 1 + GRACE)
    assert (job["jid"], job["worker"], job["remaining"], job["state"]) == ("a", "w2", 1, "running")
    assert job["expires"] == T0 + HB + 1 + GRACE + HB
    assert lua.zset("w:w2:jobs") == ["a"]
    with pytest.raises(LockLost):
        lua.complete("a", "w1", now=T0 + HB + 12)
    assert lua.complete("a", "w2", now=T0 + HB + 12) == "complete"


def test_reclaimed_jobs_go_before_waiting_ones(lua: Lua) -> None:
    lua.config("grace-period", 0)
    running(lua, "old", priority=5)
    lua.put("new", priority=-5)
    assert lua.pop_jids(worker="w2", count=2, now=T0 + HB) == ["old", "new"]


def test_zero_grace_period_retries_at_once(lua: Lua) -> None:
    lua.config("grace-period", 0)
    running(lua, retries=1)
    [job] = lua.pop(worker="w2", now=T0 + HB)
    assert (job["jid"], job["remaining"]) == ("a", 0)
    assert lua("stats", "q", T0, now=T0)["retries"] == 1


def test_expiry_without_retries_left_fails_the_job(lua: Lua) -> None:
    running(lua, retries=0)
    lua.pop(worker="w2", now=T0 + HB)  # warning
    assert lua.pop(worker="w2", now=T0 + HB + GRACE) == []
    job = lua.job("a", now=T0 + HB + GRACE)
    assert job is not None
    assert job["state"] == "failed"
    assert job["failure"]["group"] == "failed-retries-q"
    assert job["failure"]["message"] == 'Job exhausted retries in queue "q"'
    assert job["failure"]["worker"] == "w1"
    assert job["worker"] == ""
    assert lua("failed", now=T0) == {"failed-retries-q": 1}
    assert lua.zset("q:q-locks") == []
    stats = lua("stats", "q", T0, now=T0)
    assert (stats["failed"], stats["failures"]) == (1, 1)


def test_timeout_expires_the_lock_now(lua: Lua) -> None:
    running(lua, retries=1)
    lua("timeout", "a", now=T0 + 5)
    job = lua.job("a", now=T0 + 5)
    assert job is not None
    assert job["state"] == "stalled" and job["expires"] == T0 + 5
    assert job["history"][-1]["what"] == "timed-out"
    assert lua.zset("w:w1:jobs") == []
    assert lua("workers", "w1", now=T0 + 5) == {"jobs": [], "stalled": []}
    assert lua("stats", "q", T0, now=T0)["retries"] == 1  # as when a lock expires
    # No second grace period: the next pop takes it, using a retry.
    [job] = lua.pop(worker="w2", now=T0 + 5)
    assert (job["jid"], job["remaining"]) == ("a", 0)
    assert lua("stats", "q", T0, now=T0)["retries"] == 1


def test_timeout_of_the_same_job_twice_in_one_call(lua: Lua) -> None:
    running(lua)
    lua("timeout", "a", "a", now=T0 + 1)
    assert lua.history("a", now=T0 + 1) == ["put", "popped", "timed-out"]


def test_timeout_refusals(lua: Lua) -> None:
    lua.put("a")
    with pytest.raises(WrongState, match=r"Timeout\(\): Job a is not running: waiting"):
        lua("timeout", "a", now=T0)
    with pytest.raises(JobNotFound, match=r"Timeout\(\): Job b does not exist"):
        lua("timeout", "b", now=T0)


def test_max_concurrency_does_not_strand_expired_jobs(lua: Lua) -> None:
    lua.config("q-max-concurrency", 1)
    running(lua)  # its worker dies
    lua.put("b")
    assert lua.pop_jids(worker="w2", now=T0 + 30) == []  # one is running
    assert lua.pop_jids(worker="w2", now=T0 + HB) == []  # a: warned, still counts (grace)
    assert lua.pop_jids(worker="w2", now=T0 + HB + GRACE) == ["a"]  # a: handed to w2
    assert lua.pop_jids(worker="w3", now=T0 + HB + GRACE) == []
    lua.complete("a", "w2", now=T0 + HB + GRACE + 1)
    assert lua.pop_jids(worker="w3", now=T0 + HB + GRACE + 1) == ["b"]


# -- retry -----------------------------------------------------------------------------------


def test_retry_puts_the_job_back(lua: Lua) -> None:
    running(lua, retries=2)
    assert lua("retry", "a", "q", "w1", now=T0 + 1) == 1
    job = lua.job("a", now=T0 + 1)
    assert job is not None
    assert (job["state"], job["worker"], job["remaining"], job["expires"]) == ("waiting", "", 1, 0)
    assert job["history"][-1] == {"what": "retried", "when": T0 + 1, "worker": "w1", "delay": 0}
    assert lua.zset("w:w1:jobs") == [] and lua.zset("q:q-locks") == []
    assert lua("stats", "q", T0, now=T0)["retries"] == 1
    assert lua.pop_jids(worker="w2", now=T0 + 2) == ["a"]


def test_retry_with_delay_group_and_message(lua: Lua) -> None:
    running(lua, retries=1)
    assert lua("retry", "a", "q", "w1", 30, "net", "connection reset", now=T0 + 1) == 0
    assert lua.state("a", now=T0 + 1) == "scheduled"
    assert lua.r.zscore(lua.key("q:q-scheduled"), "a") == T0 + 31
    assert lua.job("a")["history"][-1] == {  # type: ignore[index]
        "what": "retried",
        "when": T0 + 1,
        "worker": "w1",
        "delay": 30,
        "group": "net",
        "message": "connection reset",
    }
    assert lua.pop_jids(now=T0 + 30) == []
    assert lua.pop_jids(now=T0 + 31) == ["a"]
    # Out of retries: failed in the given group with the given message, negative reply.
    assert lua("retry", "a", "q", "w1", 0, "net", "reset again", now=T0 + 32) == -1
    job = lua.job("a", now=T0 + 32)
    assert job is not None
    assert job["state"] == "failed"
    assert job["failure"] == {
        "group": "net",
        "message": "reset again",
        "when": T0 + 32,
        "worker": "w1",
    }
    assert lua("failed", now=T0) == {"net": 1}


def test_retry_exhaustion_default_group(lua: Lua) -> None:
    running(lua, retries=0)
    assert lua("retry", "a", "q", "w1", now=T0 + 1) == -1
    job = lua.job("a")
    assert job is not None
    assert job["failure"]["group"] == "failed-retries-q"
    assert job["failure"]["message"] == 'Job exhausted retries in queue "q"'
    assert lua.zset("w:w1:jobs") == [] and lua.zset("q:q-locks") == []


def test_retry_refusals(lua: Lua) -> None:
    running(lua)
    with pytest.raises(LockLost):
        lua("retry", "a", "q", "w2", now=T0)
    with pytest.raises(WrongState, match="another queue"):
        lua("retry", "a", "other", "w1", now=T0)
    lua.put("b")
    with pytest.raises(WrongState):
        lua("retry", "b", "q", "w1", now=T0)


def test_put_by_the_holding_worker_moves_its_own_job(lua: Lua) -> None:
    running(lua)
    lua.put("a", "q2", worker="w1", now=T0 + 1)
    assert lua.zset("w:w1:jobs") == [] and lua.zset("q:q-locks") == []
    assert lua.state("a") == "waiting"


# -- release and fail.held (ours) ------------------------------------------------------------


def test_release_gives_the_job_back_without_using_a_retry(lua: Lua) -> None:
    running(lua, retries=1)
    assert lua("release", "a", "w1", now=T0 + 1) == "waiting"
    job = lua.job("a", now=T0 + 1)
    assert job is not None
    assert (job["state"], job["worker"], job["remaining"]) == ("waiting", "", 1)
    assert job["history"][-1] == {"what": "released", "when": T0 + 1, "worker": "w1", "delay": 0}
    assert lua.zset("q:q-locks") == [] and lua.zset("w:w1:jobs") == []
    lua.pop_jids(now=T0 + 2)
    assert lua("release", "a", "w1", 30, now=T0 + 3) == "scheduled"
    assert lua.r.zscore(lua.key("q:q-scheduled"), "a") == T0 + 33


def test_release_refused_once_the_lock_is_gone(lua: Lua) -> None:
    running(lua)
    with pytest.raises(LockLost):
        lua("release", "a", "w1", now=T0 + HB)
    lua("timeout", "a", now=T0 + 1)
    with pytest.raises(LockLost):
        lua("release", "a", "w1", now=T0 + 1)


def test_fail_held_fails_only_a_job_the_worker_holds(lua: Lua) -> None:
    running(lua)
    lua.put("b")
    with pytest.raises(WrongState):
        lua("fail.held", "b", "w1", "g", "m", now=T0)
    with pytest.raises(LockLost):
        lua("fail.held", "a", "w2", "g", "m", now=T0)
    assert lua("fail.held", "a", "w1", "g", "m", now=T0 + 1) == "a"
    job = lua.job("a")
    assert job is not None and job["state"] == "failed" and job["failure"]["group"] == "g"
    assert lua.zset("q:q-locks") == [] and lua.zset("w:w1:jobs") == []
    lua("cancel", "b", now=T0)
    running(lua, "c")
    lua("timeout", "c", now=T0 + 2)
    with pytest.raises(LockLost):
        lua("fail.held", "c", "w1", "g", "m", now=T0 + 2)
