"""The bounded failed history (hworker's failed queue): max-failed-per-group keeps each group's
newest failed jobs, drops the oldest for good (as cancel deletes them) and counts them."""

from __future__ import annotations

import json

from lua_support import T0, Channels, Lua

from scheduler.engine import doctor
from scheduler.engine.client import Client


def fail(lua: Lua, jid: str, group: str = "g", now: float = T0, **put: object) -> None:
    lua.put(jid, now=now, **put)
    lua("fail", jid, "w1", group, f"{jid} broke", now=now)


def listed(lua: Lua, group: str = "g") -> list[str]:
    return [job["jid"] for job in lua("failed", group, 0, 100, now=T0)["jobs"]]


def test_without_a_bound_every_failed_job_is_kept(lua: Lua) -> None:
    for n in range(12):
        fail(lua, f"j{n}")
    assert lua("failed", now=T0) == {"g": 12}
    assert lua("failed", "g", now=T0)["dropped"] == 0
    assert lua("failed.dropped", now=T0) == "{}"


def test_the_oldest_failed_jobs_are_dropped_for_good_and_counted(
    lua: Lua, channels: Channels
) -> None:
    lua.config("max-failed-per-group", 3)
    lua.put("upstream")
    for n in range(5):
        fail(lua, f"j{n}", tags=["t", f"only-{n}"], now=T0 + n)
        lua("track", "track", f"j{n}", now=T0 + n)
    fail(lua, "other", group="h")
    assert listed(lua) == ["j4", "j3", "j2"]
    assert lua("failed", "g", now=T0)["dropped"] == 2
    assert json.loads(lua.raw("failed.dropped", now=T0)) == {"g": 2}
    assert json.loads(lua.raw("failed.dropped", "g", "h", "x", now=T0)) == {"g": 2, "h": 0, "x": 0}
    for jid in ("j0", "j1"):  # deleted as cancel deletes: hash, history, tags, tracking
        assert lua.job(jid) is None
        assert not lua.r.exists(lua.key(f"j:{jid}-history"))
    assert lua.zset("t:t") == ["j2", "j3", "j4"]
    assert not lua.r.exists(lua.key("t:only-0"))
    assert lua.r.zscore(lua.key("tags"), "only-0") is None
    assert lua.zset("tracked") == ["j2", "j3", "j4"]
    assert listed(lua, "h") == ["other"]
    assert lua("stats", "q", T0, now=T0)["failed"] == 4  # j2..j4 and other are failed now
    dropped = [json.loads(data) for channel, data in channels.collect() if channel.endswith("log")]
    assert [e["jid"] for e in dropped if e.get("event") == "failed_dropped"] == ["j0", "j1"]
    assert doctor.check(Client.from_engine(lua.engine), deep=True, now=T0).clean


def test_a_failed_job_that_others_wait_for_is_kept(lua: Lua) -> None:
    lua.config("max-failed-per-group", 1)
    lua.put("a")
    lua.put("b", depends=["a"])
    lua("fail", "a", "w1", "g", "m", now=T0)
    fail(lua, "c", now=T0 + 1)
    fail(lua, "d", now=T0 + 2)
    assert listed(lua) == ["d", "a"]  # c dropped; a kept: b still waits for it
    assert lua("failed", "g", now=T0)["dropped"] == 1
    lua("unfail", "q", "g", 1, now=T0 + 3)  # the blocked flow resumes: a runs again
    assert lua.pop_jids() == ["a"]
    lua.complete("a")
    assert lua.state("b") == "waiting"


def test_lowering_the_bound_drops_the_backlog_at_the_next_failure(lua: Lua) -> None:
    for n in range(10):
        fail(lua, f"j{n}", now=T0 + n)
    lua.config("max-failed-per-group", 2)
    assert listed(lua) == [f"j{n}" for n in range(9, -1, -1)]  # nothing drops until a failure
    fail(lua, "j10", now=T0 + 10)
    assert listed(lua) == ["j10", "j9"]
    assert lua("failed", "g", now=T0)["dropped"] == 9


def test_every_way_to_fail_is_bounded(lua: Lua) -> None:
    lua.config("max-failed-per-group", 1)
    lua.config("grace-period", 0)
    lua.put("retried", retries=0)
    lua.put("expired", retries=0)
    lua.put("held")
    assert lua.pop_jids(count=3) == ["retried", "expired", "held"]
    lua("retry", "retried", "q", "w1", now=T0)
    lua("fail.held", "held", "w1", "failed-retries-q", "m", now=T0 + 1)
    lua.pop(worker="w2", now=T0 + 61)  # the expired lock has no retry left: it fails
    assert listed(lua, "failed-retries-q") == ["expired"]
    assert lua("failed", "failed-retries-q", now=T0)["dropped"] == 2


def test_groups_are_bounded_independently_and_counts_survive_the_group(lua: Lua) -> None:
    lua.config("max-failed-per-group", 1)
    for n in range(3):
        fail(lua, f"g{n}", group="g")
        fail(lua, f"h{n}", group="h")
    assert lua("failed", now=T0) == {"g": 1, "h": 1}
    lua("cancel", "g2", now=T0)
    assert lua("failed", now=T0) == {"h": 1}
    assert json.loads(lua.raw("failed.dropped", now=T0)) == {"g": 2, "h": 2}
