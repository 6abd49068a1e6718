"""The service's housekeeping at script level: maintain (promote, spawn, reap) and
maintain.retention, with no worker popping; and flow.submit after its move to include/runs.lua."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import DAY, T0, Lua

from scheduler.engine.errors import InvalidArgument


def maintain(lua: Lua, queue: str = "q", limit: int = 100, *, now: float) -> dict[str, int]:
    counts: dict[str, int] = json.loads(lua.raw("maintain", queue, limit, now=now))
    return counts


def retention(lua: Lua, limit: int = 100, offset: int = 0, *, now: float) -> dict[str, int]:
    counts: dict[str, int] = json.loads(lua.raw("maintain.retention", limit, offset, now=now))
    return counts


def test_promotes_due_scheduled_jobs(lua: Lua) -> None:
    lua.put("later", delay=30)
    lua.put("much-later", delay=90)
    assert maintain(lua, now=T0 + 29)["promoted"] == 0
    assert lua.state("later") == "scheduled"
    assert maintain(lua, now=T0 + 30) == {"promoted": 1, "spawned": 0, "reclaimed": 0, "failed": 0}
    assert lua.state("later") == "waiting" and lua.state("much-later") == "scheduled"
    assert lua.waiting("q") == ["later"]


def test_promotes_in_bounded_batches(lua: Lua) -> None:
    for i in range(5):
        lua.put(f"j{i}", delay=10)
    assert maintain(lua, limit=2, now=T0 + 10)["promoted"] == 2
    assert maintain(lua, limit=2, now=T0 + 10)["promoted"] == 2
    assert maintain(lua, limit=2, now=T0 + 10)["promoted"] == 1
    assert len(lua.waiting("q")) == 5


def test_spawns_recurring_jobs_on_time(lua: Lua) -> None:
    lua("recur", "q", "r", "K", "{}", "interval", 60, 0, now=T0)
    assert maintain(lua, now=T0)["spawned"] == 1
    assert maintain(lua, now=T0 + 59)["spawned"] == 0
    assert maintain(lua, now=T0 + 60)["spawned"] == 1
    assert lua.waiting("q") == ["r-1", "r-2"]


def test_reaps_expired_locks_without_a_pop(lua: Lua) -> None:
    lua.config("heartbeat", 60)
    lua.config("grace-period", 10)
    lua.config("lost-worker-retries", 1)
    lua.put("a", retries=1)
    lua.put("b", retries=0)
    lua.r.hset(lua.key("j:b"), "lost", 1)  # b lost a worker before
    lua.pop(count=2, now=T0)
    assert maintain(lua, now=T0 + 59)["reclaimed"] == 0
    # First expiry: the worker is warned (grace period), the job is not handed out yet.
    assert maintain(lua, now=T0 + 60) == {"promoted": 0, "spawned": 0, "reclaimed": 0, "failed": 0}
    assert lua.history("a")[-1] == "timed-out"
    # After the grace period: the lost worker counts against lost-worker-retries, not the
    # job's retries; with that allowance spent the job fails.
    assert maintain(lua, now=T0 + 70) == {"promoted": 0, "spawned": 0, "reclaimed": 1, "failed": 1}
    a = lua.job("a")
    assert a is not None
    assert (a["state"], a["worker"], a["remaining"]) == ("waiting", "", 1)
    assert a["history"][-1]["what"] == "reclaimed" and a["history"][-1]["worker"] == "w1"
    assert lua.waiting("q") == ["a"] and lua.zset("q:q-locks") == []
    assert lua.zset("w:w1:jobs") == []
    b = lua.job("b")
    assert b is not None and b["state"] == "failed"
    assert b["failure"]["group"] == "worker-lost"
    # The reclaimed job is popped normally afterwards.
    assert lua.pop_jids(worker="w2", now=T0 + 71) == ["a"]


def test_retention_drops_old_completed_jobs_and_finished_runs(lua: Lua) -> None:
    lua.config("jobs-history", DAY)
    specs = [{"jid": "r1:a", "queue": "q", "klass": "K", "data": "{}"}]
    lua.raw("flow.submit", "r1", json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
    specs2 = [{"jid": "r2:a", "queue": "q", "klass": "K", "data": "{}"}]
    lua.raw("flow.submit", "r2", json.dumps({"flow": "f"}), json.dumps(specs2), now=T0 + 1)
    [job] = lua.pop(now=T0 + 2)
    assert job["jid"] == "r1:a"
    lua.complete("r1:a", now=T0 + 3)
    assert retention(lua, now=T0 + DAY - 1) == {"jobs": 0, "runs": 0, "kept": 0}
    # r1 finished and is old: dropped with its completed job; r2 still waits: kept.
    assert retention(lua, now=T0 + DAY + 5) == {"jobs": 1, "runs": 1, "kept": 1}
    assert lua.raw("run.get", "r1", now=T0) is None
    assert lua.r.exists(lua.key("run:r1-jobs")) == 0
    assert lua.job("r1:a") is None
    assert json.loads(lua.raw("runs", "f", now=T0))[0]["id"] == "r2"
    assert retention(lua, 100, 1, now=T0 + DAY + 5) == {"jobs": 0, "runs": 0, "kept": 0}


@pytest.mark.parametrize(
    "args",
    [
        ("",),
        ("a b",),
        ("q", "0"),
        ("q", "-1"),
        ("q", "1.5"),
        ("q", "nan"),
        ("q", "10001"),
        ("q", "5", "extra"),
    ],
)
def test_maintain_bad_input_changes_nothing(lua: Lua, args: tuple[str, ...]) -> None:
    lua.put("later", delay=1)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="Maintain"):
        lua.raw("maintain", *args, now=T0 + 5)


@pytest.mark.parametrize("args", [("0",), ("x",), ("5", "-1"), ("5", "1.5"), ("5", "0", "x")])
def test_retention_bad_input_changes_nothing(lua: Lua, args: tuple[str, ...]) -> None:
    lua.put("a")
    lua.pop(now=T0)
    lua.complete("a", now=T0)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="MaintainRetention"):
        lua.raw("maintain.retention", *args, now=T0 + 10 * DAY)


# -- flow.submit, now a thin wrapper over include/runs.lua ----------------------------------------


def submit(lua: Lua, run_id: str, specs: Any, run: Any = None, now: float = T0) -> Any:
    return lua.raw(
        "flow.submit",
        run_id,
        json.dumps(run or {"flow": "f", "trigger": "manual"}),
        json.dumps(specs),
        now=now,
    )


def test_flow_submit_still_writes_a_whole_run_once(lua: Lua) -> None:
    specs = [
        {"jid": "r:a", "queue": "q", "klass": "K", "data": "{}"},
        {"jid": "r:b", "queue": "q", "klass": "K", "data": "{}", "depends": ["r:a"], "delay": 5},
    ]
    assert submit(lua, "r", specs) == "submitted"
    assert lua.state("r:a") == "waiting" and lua.state("r:b") == "depends"
    record = json.loads(lua.raw("run.get", "r", now=T0))
    assert (record["jids"], record["jobs"], record["trigger"]) == (["r:a", "r:b"], 2, "manual")
    with assert_unchanged(lua.r):
        assert submit(lua, "r", specs) == "exists"


@pytest.mark.parametrize(
    ("run_id", "specs", "message"),
    [
        ("r-jobs", [{"jid": "x", "queue": "q", "klass": "K", "data": "{}"}], "-jobs"),
        ("r", [], "at least one job"),
        ("r", [{"jid": "x", "queue": "q", "klass": "K", "data": "[]"}], "JSON object"),
        (
            "r",
            [{"jid": "x", "queue": "q", "klass": "K", "data": "{}", "depends": ["nope"]}],
            "neither earlier",
        ),
        ("r", [{"jid": "x", "queue": "q", "klass": "K", "data": "{}"}] * 2, "twice"),
        ("r", [{"jid": "taken", "queue": "q", "klass": "K", "data": "{}"}], "already exists"),
    ],
)
def test_flow_submit_refuses_bad_runs_whole(
    lua: Lua, run_id: str, specs: Any, message: str
) -> None:
    lua.put("taken")
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match=message):
        submit(lua, run_id, specs)


def test_flow_submit_finds_an_existing_job_anywhere_in_a_large_run(lua: Lua) -> None:
    # The jids are looked up 1000 at a time: the existing one is in the third batch.
    lua.put("r:j2100")
    specs = [{"jid": f"r:j{i}", "queue": "q", "klass": "K", "data": "{}"} for i in range(2500)]
    with (
        assert_unchanged(lua.r),
        pytest.raises(InvalidArgument, match="job r:j2100 already exists"),
    ):
        submit(lua, "r", specs)
