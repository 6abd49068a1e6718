"""A lost worker (its lock expired) costs a job none of its own retries under our rule (pop.lean,
await, maintain), at most lost-worker-retries runs; qless's `pop` and the qless dialect keep
qless's rule (one retry per expiry). See lua/include/reclaim.lua."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from lua_support import T0, Lua

HEARTBEAT = 10


def lean_pop(lua: Lua, worker: str, now: float) -> list[dict[str, Any]]:
    reply: list[dict[str, Any]] = lua("pop.lean", "q", worker, 1, now=now)
    return reply


def lose_workers(lua: Lua, times: int, start: float = T0) -> float:
    """Pop the job `times` times, each time by a new worker after the last one's lock expired
    (grace period 0). Returns the time of the last pop."""
    now = start
    for n in range(times):
        [job] = lean_pop(lua, f"w{n}", now)
        assert job["jid"] == "a"
        assert job.get("lost") == (n or None)  # the worker's attempt counts these runs too
        now += HEARTBEAT
    return now - HEARTBEAT


def setup(lua: Lua, retries: int = 0) -> None:
    lua.config("heartbeat", HEARTBEAT)
    lua.config("grace-period", 0)
    lua.put("a", retries=retries)


def test_a_job_runs_again_after_lost_workers_without_using_its_retries(lua: Lua) -> None:
    setup(lua, retries=0)
    last = lose_workers(lua, 3)  # the first run, then two more after lost workers
    job = lua.job("a", now=last)
    assert job is not None
    assert (job["state"], job["worker"], job["remaining"]) == ("running", "w2", 0)
    assert lua.r.hget(lua.key("j:a"), "lost") == "2"


def test_the_next_loss_past_the_allowance_fails_naming_the_worker_and_its_lock(lua: Lua) -> None:
    setup(lua, retries=3)
    last = lose_workers(lua, 3)
    lua("worker.register", "w2", json.dumps({"host": "box-7", "pid": 4242}), now=last)
    expired = last + HEARTBEAT
    assert lean_pop(lua, "w3", expired + 5) == []
    job = lua.job("a", now=expired + 5)
    assert job is not None and job["state"] == "failed"
    assert job["remaining"] == 3  # its own retries are untouched
    failure = job["failure"]
    assert (failure["group"], failure["worker"]) == ("worker-lost", "w2")
    when = datetime.fromtimestamp(expired, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert failure["message"] == (
        f'Worker "w2" (host box-7, pid 4242) was lost: its lock expired at {when} and the job '
        "had already run again 2 times after lost workers (lost-worker-retries 2); its own "
        "retries are untouched"
    )
    assert lua("failed", now=expired + 5) == {"worker-lost": 1}


def test_the_allowance_is_configurable(lua: Lua) -> None:
    setup(lua, retries=5)
    lua.config("lost-worker-retries", 0)
    lose_workers(lua, 1)
    assert lean_pop(lua, "w9", T0 + HEARTBEAT) == []
    job = lua.job("a", now=T0 + HEARTBEAT)
    assert job is not None
    assert (job["state"], job["failure"]["group"]) == ("failed", "worker-lost")
    assert "run again 0 times" in job["failure"]["message"]


def test_housekeeping_applies_the_same_rule(lua: Lua) -> None:
    setup(lua, retries=0)
    lean_pop(lua, "w1", T0)
    reply = json.loads(lua.raw("maintain", "q", now=T0 + HEARTBEAT))
    assert (reply["reclaimed"], reply["failed"]) == (1, 0)
    job = lua.job("a", now=T0 + HEARTBEAT)
    assert job is not None and (job["state"], job["remaining"]) == ("waiting", 0)


def test_qless_pop_keeps_qless_rule_a_lost_lock_uses_a_retry(lua: Lua) -> None:
    setup(lua, retries=1)
    lua.pop(worker="w1", now=T0)
    [job] = lua.pop(worker="w2", now=T0 + HEARTBEAT)
    assert (job["jid"], job["remaining"]) == ("a", 0)
    assert lua.pop(worker="w3", now=T0 + 2 * HEARTBEAT) == []
    failed = lua.job("a", now=T0 + 2 * HEARTBEAT)
    assert failed is not None
    assert failed["failure"]["group"] == "failed-retries-q"
    assert failed["failure"]["message"] == 'Job exhausted retries in queue "q"'
    assert lua.r.hget(lua.key("j:a"), "lost") is None


def test_put_back_after_failing_the_allowance_starts_again(lua: Lua) -> None:
    setup(lua, retries=0)
    lua.config("lost-worker-retries", 0)
    lose_workers(lua, 1)
    assert lean_pop(lua, "w9", T0 + HEARTBEAT) == []
    assert lua("unfail", "q", "worker-lost", 10, now=T0 + 20) == 1
    assert lua.r.hget(lua.key("j:a"), "lost") is None
    lua.config("lost-worker-retries", 1)
    lose_workers(lua, 2, start=T0 + 30)  # one loss allowed again
    assert lua.state("a", now=T0 + 40) == "running"
    lua.put("a", retries=0, now=T0 + 41)  # a put over the job: a new life
    assert lua.r.hget(lua.key("j:a"), "lost") is None
