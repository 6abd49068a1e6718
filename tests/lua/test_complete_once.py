"""Redis Work Queue's promise: complete returns true exactly once for a job, even when several
workers were handed it (a lock expired and another worker took the job over)."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Channels, Lua

from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, LockLost

HEARTBEAT = 10


def completes(lua: Lua, worker: str, now: float) -> bool:
    """Whether `worker`'s complete was accepted (a refusal is an engine error)."""
    try:
        lua.complete("j", worker=worker, now=now)
    except EngineError:
        return False
    return True


@pytest.mark.parametrize("first", ["stale", "current"])
@pytest.mark.parametrize("grace", [0, 5])
def test_two_workers_raced_on_one_job_and_exactly_one_complete_succeeds(
    lua: Lua, channels: Channels, first: str, grace: int
) -> None:
    lua.config("heartbeat", HEARTBEAT)
    lua.config("grace-period", grace)
    lua.put("j")
    assert lua.pop_jids(worker="w1") == ["j"]
    # w1's lock expires; w2 takes the job over (after the grace period, if there is one)
    taken = T0 + HEARTBEAT
    if grace:
        assert lua.pop_jids(worker="w2", now=taken) == []  # w1 is warned first
        taken += grace
    assert lua.pop_jids(worker="w2", now=taken) == ["j"]
    order = ["w1", "w2"] if first == "stale" else ["w2", "w1"]
    outcomes = {worker: completes(lua, worker, taken + 1) for worker in order}
    assert outcomes == {"w1": False, "w2": True}
    job = lua.job("j", now=taken + 1)
    assert job is not None and job["state"] == "complete"
    assert [e["worker"] for e in job["history"] if e["what"] == "done"] == ["w2"]
    events = [json.loads(data) for channel, data in channels.collect() if channel.endswith("log")]
    assert [e["jid"] for e in events if e.get("event") == "completed"] == ["j"]


def test_a_lock_that_expired_refuses_its_worker_even_when_nobody_took_the_job(lua: Lua) -> None:
    lua.config("heartbeat", HEARTBEAT)
    lua.config("grace-period", 0)
    lua.put("j")
    lua.pop_jids(worker="w1")
    with pytest.raises(LockLost):
        lua.complete("j", worker="w1", now=T0 + HEARTBEAT)
    assert lua.pop_jids(worker="w2", now=T0 + HEARTBEAT + 1) == ["j"]
    assert completes(lua, "w2", T0 + HEARTBEAT + 2)
    assert not completes(lua, "w1", T0 + HEARTBEAT + 2)


def test_try_complete_is_true_for_exactly_one_of_the_racing_workers(lua: Lua) -> None:
    lua.config("heartbeat", HEARTBEAT)
    lua.config("grace-period", 0)
    lua.put("j")
    first = Client.from_engine(lua.engine, worker_name="w1")
    second = Client.from_engine(lua.engine, worker_name="w2")
    [stale] = first.queues["q"].pop(now=T0)
    [current] = second.queues["q"].pop(now=T0 + HEARTBEAT)
    results = [
        current.try_complete(result="second", now=T0 + 11),
        stale.try_complete(result="first", now=T0 + 11),
        current.try_complete(now=T0 + 12),  # again: already complete
    ]
    assert results == [True, False, False]
    assert first.jobs["j"].result == "second"
