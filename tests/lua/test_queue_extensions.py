"""The Tarantool-queue extensions and Redis Work Queue's unique adds, at the script level.

ttl / ttr / touch, release with delay, bury and kick, concurrency keys and throttles (parking and
every path that gives a slot back), delete / truncate / drop, statistics by state and by call,
and ``unique`` puts. Time is always passed explicitly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import HasDependents, JobNotFound, LockLost, WrongState


def jids(jobs: list[dict[str, Any]]) -> list[str]:
    return [job["jid"] for job in jobs]


def stats(lua: Lua, queue: str = "q", now: float = T0) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(lua.raw("queue.stats", queue, now=now))
    return reply


def throttle(lua: Lua, name: str, now: float = T0) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(lua.raw("throttle.get", name, now=now))[name]
    return reply


def running_keys(lua: Lua, queue: str = "q") -> dict[str, str]:
    return dict(lua.r.hgetall(lua.key(f"q:{queue}-ck")))


# -- ttr and touch ---------------------------------------------------------------------------


def test_ttr_is_the_jobs_lock_time_at_pop_and_heartbeat(lua: Lua) -> None:
    lua.config("heartbeat", 60)
    lua.put("a", ttr=5)
    lua.put("b")
    by_jid = {job["jid"]: job for job in lua.pop(count=2)}
    assert by_jid["a"]["expires"] == T0 + 5 and by_jid["a"]["ttr"] == 5
    assert by_jid["b"]["expires"] == T0 + 60 and "ttr" not in by_jid["b"]
    assert float(lua("heartbeat", "a", "w1", now=T0 + 3)) == T0 + 8
    # Past its ttr without a heartbeat, the job is stalled although the queue's heartbeat is long.
    assert lua.state("a", now=T0 + 8) == "stalled"


def test_touch_extends_the_lock_and_the_ttr_by_the_increment(lua: Lua) -> None:
    lua.put("a", ttr=10)
    lua.pop()
    assert float(lua("touch", "a", "w1", 30, now=T0 + 5)) == T0 + 40
    job = lua.job("a", now=T0 + 5)
    assert job is not None and job["ttr"] == 40 and job["expires"] == T0 + 40
    assert lua.zset("q:q-locks") == ["a"] and lua.r.zscore(lua.key("q:q-locks"), "a") == T0 + 40
    # later heartbeats renew for the longer time
    assert float(lua("heartbeat", "a", "w1", now=T0 + 20)) == T0 + 60
    assert lua.history("a")[-1] == "touched"
    assert stats(lua)["calls"]["touch"] == 1


def test_touch_of_zero_changes_nothing_and_touch_needs_the_lock(lua: Lua) -> None:
    lua.put("a")
    lua.pop()
    with unchanged(lua.r):
        assert float(lua("touch", "a", "w1", 0, now=T0 + 1)) == T0 + 60
    with unchanged(lua.r), pytest.raises(LockLost):
        lua("touch", "a", "w2", 5, now=T0 + 1)
    with unchanged(lua.r), pytest.raises(LockLost):
        lua("touch", "a", "w1", 5, now=T0 + 60)


def test_touch_moves_the_ttl_deadline_too(lua: Lua) -> None:
    lua.put("a", ttl=10)
    lua.pop()
    lua("touch", "a", "w1", 100, now=T0 + 5)
    job = lua.job("a", now=T0 + 5)
    assert job is not None and job["deadline"] == T0 + 110
    lua("release", "a", "w1", 0, now=T0 + 50)
    assert lua.pop_jids(now=T0 + 60) == ["a"]  # not expired: the deadline moved


# -- ttl ----------------------------------------------------------------------------------------


def test_a_waiting_job_expires_at_its_deadline(lua: Lua, channels: Any) -> None:
    lua.put("a", ttl=10)
    lua.put("b")
    lua("track", "track", "a", now=T0)
    assert lua.job("a")["deadline"] == T0 + 10  # type: ignore[index]
    assert jids(lua("peek", "q", 5, now=T0 + 9.5)) == ["a", "b"]
    assert lua.pop_jids(now=T0 + 10) == ["b"]
    job = lua.job("a", now=T0 + 10)
    assert job is not None and job["state"] == "expired" and job["history"][-1]["what"] == "expired"
    assert lua.waiting("q") == [] and lua.zset("q:q-ttl") == []
    assert lua.zset("expired") == ["a"]
    assert stats(lua, now=T0 + 10)["calls"]["expire"] == 1
    events = channels.collect()
    assert (lua.key("expired"), "a") in events
    logged = [json.loads(data) for channel, data in events if channel == lua.key("log")]
    assert {"jid": "a", "event": "expired", "queue": "q"} in logged


def test_ttl_counts_from_when_a_delayed_job_becomes_ready(lua: Lua) -> None:
    lua.put("a", delay=100, ttl=10)
    assert lua.job("a")["deadline"] == T0 + 110  # type: ignore[index]
    assert lua.pop_jids(now=T0 + 105) == ["a"]
    lua.put("b", delay=100, ttl=10)
    assert lua.pop_jids(now=T0 + 110) == []
    assert lua.state("b", now=T0 + 110) == "expired"


def test_a_job_handed_back_after_its_deadline_expires_while_delayed(lua: Lua) -> None:
    lua.put("a", ttl=10)
    lua.pop(now=T0 + 1)
    assert lua("release", "a", "w1", 60, now=T0 + 2) == "scheduled"
    # maintain (the service's housekeeping) expires it while it is still scheduled
    assert lua("maintain", "q", now=T0 + 9)  # nothing due yet
    assert lua.state("a", now=T0 + 9) == "scheduled"
    lua("maintain", "q", now=T0 + 10)
    assert lua.state("a", now=T0 + 10) == "expired"
    assert lua.zset("q:q-scheduled") == []


def test_a_running_job_is_not_stopped_by_its_ttl(lua: Lua) -> None:
    lua.put("a", ttl=10)
    lua.pop()
    lua("maintain", "q", now=T0 + 30)
    assert lua.state("a", now=T0 + 30) == "running"
    assert lua.complete("a", now=T0 + 40) == "complete"
    lua("maintain", "q", now=T0 + 100)
    assert lua.zset("q:q-ttl") == []  # the stale entry was dropped


def test_a_reclaimed_job_past_its_deadline_expires_in_maintain(lua: Lua) -> None:
    lua.config("grace-period", 0)
    lua.put("a", ttl=10, ttr=5)
    lua.pop()
    lua("maintain", "q", now=T0 + 20)
    assert lua.state("a", now=T0 + 20) == "expired"


def test_a_buried_job_expires_too(lua: Lua) -> None:
    lua.put("a", ttl=10)
    lua("bury", "a", "admin", now=T0 + 1)
    lua("peek", "q", 1, now=T0 + 10)
    assert lua.state("a", now=T0 + 10) == "expired"
    assert lua.zset("q:q-buried") == []


def test_a_dependents_ttl_starts_when_it_is_released(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"], ttl=10, delay=5)
    job = lua.job("b")
    assert job is not None and "deadline" not in job and job["ttl"] == 10
    lua.pop(now=T0 + 100)
    lua.complete("a", now=T0 + 100)
    assert lua.job("b", now=T0 + 100)["deadline"] == T0 + 115  # type: ignore[index]
    assert lua.pop_jids(now=T0 + 104) == []  # still delayed
    assert lua.pop_jids(now=T0 + 115) == []
    assert lua.state("b", now=T0 + 115) == "expired"


def test_an_expired_job_settles_its_dependents_as_a_failure(lua: Lua) -> None:
    lua.put("a", ttl=1)
    lua.put("blocked", depends=["a"])
    lua.put("hook", depends=["a"], trigger="one_failed")
    lua("peek", "q", 1, now=T0 + 1)
    assert lua.state("a", now=T0 + 1) == "expired"
    assert lua.state("blocked", now=T0 + 1) == "depends"
    assert lua.state("hook", now=T0 + 1) == "waiting"


def test_pop_never_hands_out_an_expired_job_however_far_behind_the_index_is(lua: Lua) -> None:
    for n in range(150):
        lua.put(f"old-{n:03d}", ttl=5)
    lua.put("fresh")
    # One pop looks at 100 index entries, then meets the other 50 as candidates: all expire.
    assert lua.pop_jids(count=1, now=T0 + 10) == ["fresh"]
    assert lua.waiting("q") == []
    assert len(lua.zset("expired")) == 150


def test_expired_jobs_are_kept_by_jobs_history(lua: Lua) -> None:
    lua.config("jobs-history", 100)
    lua.put("a", ttl=1)
    lua("peek", "q", 1, now=T0 + 1)
    assert lua.state("a", now=T0 + 1) == "expired"
    lua.put("b", ttl=1, now=T0 + 200)
    lua("peek", "q", 1, now=T0 + 201)
    assert lua.job("a", now=T0 + 201) is None
    assert lua.zset("expired") == ["b"]


def test_a_put_without_ttl_clears_it(lua: Lua) -> None:
    lua.put("a", ttl=1, ttr=5, concurrency_key="k", throttle="t")
    lua.put("a")
    job = lua.job("a")
    assert job is not None
    assert not {"ttl", "deadline", "ttr", "concurrency_key", "throttle"} & set(job)
    assert lua.pop_jids(now=T0 + 10) == ["a"]


def test_a_plain_job_reads_as_qless_has_it(lua: Lua) -> None:
    lua.put("a")
    job = lua.job("a")
    assert job is not None
    assert not {
        "ttl",
        "deadline",
        "ttr",
        "concurrency_key",
        "concurrency_limit",
        "throttle",
        "parked",
    } & set(job)


# -- release with a delay -----------------------------------------------------------------------


def test_release_with_a_delay_keeps_the_retries_and_counts(lua: Lua) -> None:
    lua.put("a", retries=2)
    lua.pop()
    assert lua("release", "a", "w1", 30, now=T0 + 1) == "scheduled"
    assert lua.pop_jids(now=T0 + 30) == []
    [job] = lua.pop(now=T0 + 31)
    assert job["remaining"] == 2
    assert stats(lua, now=T0 + 31)["calls"]["release"] == 1


# -- bury and kick ------------------------------------------------------------------------------


def test_bury_takes_waiting_scheduled_and_held_jobs_out_and_kick_brings_them_back(
    lua: Lua,
) -> None:
    lua.put("w")
    lua.put("s", delay=60)
    lua.put("r")
    lua.put("dependent", depends=["w"])
    lua.pop_jids(count=1)  # w
    lua("bury", "w", "w1", "cannot run now", now=T0 + 1)  # held by w1
    lua("bury", "s", "admin", now=T0 + 2)
    lua("bury", "r", "admin", now=T0 + 3)
    for jid in ("w", "s", "r"):
        assert lua.state(jid, now=T0 + 3) == "buried"
    assert lua.zset("q:q-buried") == ["w", "s", "r"]
    assert lua("jobs", "buried", "q", now=T0) == ["w", "s", "r"]
    assert lua.waiting("q") == [] and lua.zset("q:q-scheduled") == []
    assert lua.zset("q:q-locks") == []
    assert lua.state("dependent") == "depends"  # buried is not failed
    job = lua.job("w", now=T0 + 3)
    assert job is not None and job["history"][-1] == {
        "what": "buried",
        "when": T0 + 1,
        "worker": "w1",
        "message": "cannot run now",
    }
    assert lua.pop_jids(now=T0 + 100) == []

    assert lua("kick", "q", 2, now=T0 + 10) == 2
    assert lua.zset("q:q-buried") == ["r"]
    assert lua.pop_jids(count=5, now=T0 + 10) == ["w", "s"]
    assert lua("kick", "q", now=T0 + 11) == 1
    assert lua("kick", "q", 5, now=T0 + 11) == 0
    calls = stats(lua, now=T0 + 11)["calls"]
    assert (calls["bury"], calls["kick"]) == (3, 3)


def test_bury_refusals_change_nothing(lua: Lua) -> None:
    lua.put("a")
    lua.put("d", depends=["a"])
    lua.pop()
    with unchanged(lua.r), pytest.raises(LockLost):
        lua("bury", "a", "w2", now=T0)
    with unchanged(lua.r), pytest.raises(WrongState):
        lua("bury", "d", "w1", now=T0)
    with unchanged(lua.r), pytest.raises(JobNotFound):
        lua("bury", "nope", "w1", now=T0)


def test_kick_jobs_brings_back_the_named_buried_jobs_as_kick_does(lua: Lua, channels: Any) -> None:
    lua.put("a", priority=3)
    lua.put("b")
    lua.put("c", "q2")
    lua.put("d")
    for n, jid in enumerate("abcd"):
        lua("bury", jid, "admin", now=T0 + 1 + n)
    channels.collect()

    assert lua("kick.jobs", "c", "a", "a", now=T0 + 10) == ["c", "a"]
    assert lua.zset("q:q-buried") == ["b", "d"] and lua.zset("q:q2-buried") == []
    assert lua.state("a") == "waiting" and lua.state("c") == "waiting"
    assert lua.state("b") == "buried"
    # at its priority, as a put of it would have been scored
    score = lua.r.zscore(lua.key("q:q-work"), "a")
    assert score is not None and int(score) // 2**32 == 3
    job = lua.job("a", now=T0 + 10)
    assert job is not None and job["history"][-1] == {"what": "kicked", "when": T0 + 10, "q": "q"}
    assert job["updated"] == T0 + 10
    assert stats(lua, now=T0 + 10)["calls"]["kick"] == 1
    assert stats(lua, "q2", now=T0 + 10)["calls"]["kick"] == 1
    logged = [json.loads(data) for channel, data in channels.collect() if channel.endswith("log")]
    assert logged == [
        {"jid": "c", "event": "kicked", "queue": "q2"},
        {"jid": "a", "event": "kicked", "queue": "q"},
    ]
    assert lua.pop_jids("q2", now=T0 + 11) == ["c"]
    # the queue's kick takes the rest, the longest buried first
    assert lua("kick", "q", 5, now=T0 + 12) == 2
    assert stats(lua, now=T0 + 12)["calls"]["kick"] == 3


def test_kick_jobs_refusals_name_the_job_and_kick_none(lua: Lua) -> None:
    lua.put("a")
    lua.put("w")
    lua("bury", "a", "admin", now=T0)
    with (
        unchanged(lua.r),
        pytest.raises(WrongState, match="KickJobs\\(\\): Job w is not buried: waiting"),
    ):
        lua("kick.jobs", "a", "w", now=T0 + 1)
    with unchanged(lua.r), pytest.raises(JobNotFound, match="Job nope does not exist"):
        lua("kick.jobs", "a", "nope", now=T0 + 1)
    assert lua("kick.jobs", "a", now=T0 + 1) == ["a"]
    with unchanged(lua.r), pytest.raises(WrongState, match="not buried: waiting"):
        lua("kick.jobs", "a", now=T0 + 2)


# -- concurrency keys (utube) and throttles ------------------------------------------------------


def test_a_concurrency_key_runs_one_at_a_time_in_put_order_keys_in_parallel(lua: Lua) -> None:
    for n in range(3):
        lua.put(f"a{n}", concurrency_key="a.example")
        lua.put(f"b{n}", concurrency_key="b.example")
    lua.put("plain")
    assert lua.pop_jids(count=10) == ["a0", "b0", "plain"]
    assert running_keys(lua) == {"a.example": "1", "b.example": "1"}
    assert lua.zset("q:q-parked") == ["a1", "b1", "a2", "b2"]
    job = lua.job("a1")
    assert job is not None and job["state"] == "waiting" and job["parked"] == "concurrency_key"
    assert lua("queues", "q", now=T0)["parked"] == 4
    assert lua("length", "q", now=T0) == 7
    assert lua.pop_jids(count=10) == []  # nothing to look at: parked jobs are not in the way

    assert lua.complete("a0", now=T0 + 1) == "complete"
    assert lua.waiting("q") == ["a1"]  # the key's next job, with its old place
    assert lua.pop_jids(count=10, now=T0 + 1) == ["a1"]
    assert lua.complete("b0", now=T0 + 2) == "complete"
    assert lua.complete("a1", now=T0 + 2) == "complete"
    assert lua.pop_jids(count=10, now=T0 + 2) == ["b1", "a2"]
    assert lua.zset("q:q-parked") == ["b2"]


def test_a_concurrency_limit_lets_that_many_run(lua: Lua) -> None:
    for n in range(5):
        lua.put(f"j{n}", concurrency_key="k", concurrency_limit=2)
    assert lua.pop_jids(count=5) == ["j0", "j1"]
    lua("fail", "j1", "w1", "boom", "broke", now=T0 + 1)
    assert lua.pop_jids(count=5, now=T0 + 1) == ["j2"]
    assert running_keys(lua) == {"k": "2"}


def test_a_new_job_of_a_full_key_waits_behind_the_parked_ones(lua: Lua) -> None:
    lua.put("a0", concurrency_key="k")
    lua.put("a1", concurrency_key="k")
    assert lua.pop_jids(count=2) == ["a0"]
    lua.put("a2", concurrency_key="k", now=T0 + 1)
    lua.complete("a0", now=T0 + 2)
    assert lua.pop_jids(count=3, now=T0 + 2) == ["a1"]
    lua.complete("a1", now=T0 + 3)
    assert lua.pop_jids(count=3, now=T0 + 3) == ["a2"]


def _reclaimed_by_another_worker(lua: Lua, now: float) -> None:
    """pop reclaims the job for the popping worker: the slot passes on with it."""
    lua("timeout", "r:0", now=now)
    assert lua.pop_jids(worker="w2", count=3, now=now) == ["r:0"]
    assert running_keys(lua) == {"k": "1"}
    lua.complete("r:0", worker="w2", now=now)


def _reclaimed_by_maintain(lua: Lua, now: float) -> None:
    lua("timeout", "r:0", now=now)
    lua("maintain", "q", now=now)
    assert lua.state("r:0", now=now) in ("waiting", "failed")


STOPS: dict[str, Any] = {
    "complete": lambda lua, now: lua.complete("r:0", now=now),
    "fail": lambda lua, now: lua("fail", "r:0", "w1", "g", "m", now=now),
    "fail.held": lambda lua, now: lua("fail.held", "r:0", "w1", "g", "m", now=now),
    "retry": lambda lua, now: lua("retry", "r:0", "q", "w1", 30, now=now),
    "release": lambda lua, now: lua("release", "r:0", "w1", 30, now=now),
    "bury": lambda lua, now: lua("bury", "r:0", "w1", now=now),
    "cancel": lambda lua, now: lua("cancel", "r:0", now=now),
    "put-over": lambda lua, now: lua.put("r:0", "q", delay=30, now=now),
    "requeue-elsewhere": lambda lua, now: lua.put("r:0", "other", command="requeue", now=now),
    "timeout+pop": _reclaimed_by_another_worker,
    "timeout+maintain": _reclaimed_by_maintain,
    "retries-exhausted": _reclaimed_by_maintain,
}


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_every_way_a_job_stops_running_gives_its_slot_back(lua: Lua, stop: str) -> None:
    lua.config("grace-period", 0)
    retries = 0 if stop == "retries-exhausted" else 5
    specs = [
        {
            "jid": f"r:{n}",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "concurrency_key": "k",
            "throttle": "t",
            "retries": retries,
        }
        for n in range(3)
    ]
    assert lua("flow.submit", "r", '{"flow": "f"}', json.dumps(specs), now=T0) == "submitted"
    lua("throttle.set", "t", 5, now=T0)
    assert lua.pop_jids(count=3) == ["r:0"]
    assert throttle(lua, "t") == {"limit": 5, "running": 1, "parked": 0}
    STOPS[stop](lua, T0 + 1)
    assert running_keys(lua) == {}
    assert throttle(lua, "t", now=T0 + 1)["running"] == 0
    # the key's next job is back in line and runs next
    assert lua.pop_jids(count=3, now=T0 + 1) == ["r:1"]


def test_run_cancel_gives_the_slots_back_and_empties_the_parked_sets(lua: Lua) -> None:
    specs = [
        {"jid": f"r:{n}", "queue": "q", "klass": "K", "data": "{}", "concurrency_key": "k"}
        for n in range(3)
    ]
    lua("flow.submit", "r", '{"flow": "f"}', json.dumps(specs), now=T0)
    assert lua.pop_jids(count=3) == ["r:0"]
    assert lua("run.cancel", "r", now=T0 + 1) == 3
    assert running_keys(lua) == {}
    assert lua.zset("q:q-parked") == [] and lua.waiting("q") == []
    assert lua.r.exists(lua.key("ck:1:q:k")) == 0


def test_a_parked_job_that_leaves_lets_the_next_one_in(lua: Lua) -> None:
    for n in range(3):
        lua.put(f"j{n}", concurrency_key="k")
    assert lua.pop_jids(count=3) == ["j0"]
    lua.complete("j0", now=T0 + 1)  # j1 back in the work queue, j2 parked
    assert lua.waiting("q") == ["j1"] and lua.zset("q:q-parked") == ["j2"]
    lua("cancel", "j1", now=T0 + 2)  # j1 leaves without starting: j2 takes its place
    assert lua.pop_jids(count=3, now=T0 + 2) == ["j2"]


def test_priority_of_a_parked_job_keeps_it_parked_and_reorders_it(lua: Lua) -> None:
    for n in range(3):
        lua.put(f"j{n}", concurrency_key="k")
    lua.pop_jids(count=3)
    assert lua("priority", "j2", -5, now=T0) == -5
    assert lua.zset("q:q-parked") == ["j2", "j1"]
    lua.complete("j0", now=T0 + 1)
    assert lua.pop_jids(count=3, now=T0 + 1) == ["j2"]


def test_pop_looks_ahead_a_bounded_number_of_jobs_and_parks_them(lua: Lua) -> None:
    lua.put("busy", concurrency_key="hot")
    lua.pop()
    for n in range(250):
        lua.put(f"hot-{n:03d}", concurrency_key="hot")
    lua.put("cold", concurrency_key="cold")
    # Each pop looks at 1 + 100 jobs: the hot ones it meets are parked, so the third pop gets to
    # the cold job without looking at a hot job twice.
    assert lua.pop_jids(count=1, now=T0 + 1) == []
    assert len(lua.zset("q:q-parked")) == 101
    assert lua.pop_jids(count=1, now=T0 + 1) == []
    assert lua.pop_jids(count=1, now=T0 + 1) == ["cold"]
    assert len(lua.zset("q:q-parked")) == 250 and lua.waiting("q") == []


def test_a_throttle_bounds_running_jobs_across_queues(lua: Lua) -> None:
    lua("throttle.set", "api", 2, now=T0)
    for queue in ("q1", "q2"):
        for n in range(2):
            lua.put(f"{queue}-{n}", queue, throttle="api")
    assert lua.pop_jids("q1", count=5) == ["q1-0", "q1-1"]
    assert lua.pop_jids("q2", count=5) == []
    assert throttle(lua, "api") == {"limit": 2, "running": 2, "parked": 2}
    lua.complete("q1-0", queue="q1", now=T0 + 1)
    assert lua.pop_jids("q2", count=5, now=T0 + 1) == ["q2-0"]
    # raising the limit lets the rest in at once
    assert lua("throttle.set", "api", 3, now=T0 + 2) == 3
    assert lua.pop_jids("q2", count=5, now=T0 + 2) == ["q2-1"]
    assert throttle(lua, "api", now=T0 + 2) == {"limit": 3, "running": 3, "parked": 0}


def test_a_throttle_without_a_limit_bounds_nothing_and_unset_frees_parked_jobs(lua: Lua) -> None:
    for n in range(3):
        lua.put(f"j{n}", throttle="free")
    assert lua.pop_jids(count=5) == ["j0", "j1", "j2"]
    lua("throttle.set", "t", 0, now=T0)
    lua.put("x", throttle="t")
    assert lua.pop_jids(count=5) == []
    assert lua("throttle.unset", "t", now=T0) == 1
    assert lua("throttle.unset", "t", now=T0) == 0
    assert lua.pop_jids(count=5) == ["x"]
    assert json.loads(lua.raw("throttle.get", now=T0)) == {
        "free": {"limit": None, "running": 3, "parked": 0},
        "t": {"limit": None, "running": 1, "parked": 0},
    }


def test_a_queue_nobody_pops_does_not_hold_a_throttle_back(lua: Lua) -> None:
    lua("throttle.set", "t", 1, now=T0)
    lua.put("run", "live", throttle="t")
    lua.put("dead-0", "dead", throttle="t")
    lua.put("live-0", "live", throttle="t")
    assert lua.pop_jids("live", count=1) == ["run"]
    assert lua.pop_jids("dead", count=1) == []  # parked once, then nobody pops "dead" again
    assert lua.pop_jids("live", count=1) == []
    lua.complete("run", queue="live", now=T0 + 1)
    assert lua.pop_jids("live", count=1, now=T0 + 1) == ["live-0"]


# -- delete, truncate, drop --------------------------------------------------------------------


def test_delete_removes_jobs_but_refuses_running_ones(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", delay=10)
    lua.put("c")
    lua.pop_jids(count=1)  # a
    with unchanged(lua.r), pytest.raises(WrongState, match=r"running.*orphan"):
        lua("delete", "b", "a", now=T0)
    assert lua("delete", "b", "c", "nope", now=T0) == ["b", "c"]
    assert lua.job("b") is None and lua.zset("q:q-scheduled") == []
    assert stats(lua)["calls"]["delete"] == 2


def test_truncate_removes_every_resting_job_and_refuses_while_one_runs(lua: Lua) -> None:
    lua.put("running")
    lua.pop()
    lua("throttle.set", "closed", 0, now=T0)
    for n in range(3):
        lua.put(f"p{n}", throttle="closed")
    lua.pop_jids(count=3)  # all three parked
    lua.put("w")
    lua.put("s", delay=10)
    lua.put("d", depends=["s"])
    lua.put("b")
    lua("bury", "b", "admin", now=T0)
    assert len(lua.zset("q:q-parked")) == 3
    with unchanged(lua.r), pytest.raises(WrongState, match="1 running"):
        lua("queue.truncate", "q", now=T0)
    lua.complete("running", now=T0 + 1)
    assert lua("queue.truncate", "q", 4, now=T0 + 1) == 4
    assert lua("queue.truncate", "q", now=T0 + 1) == 3
    assert lua("queue.truncate", "q", now=T0 + 1) == 0
    for key in ("work", "scheduled", "depends", "buried", "parked"):
        assert lua.zset(f"q:q-{key}") == []
    assert throttle(lua, "closed", now=T0 + 1)["parked"] == 0
    assert lua.job("running", now=T0 + 1) is not None  # complete jobs stay (retention)
    assert stats(lua, now=T0 + 1)["calls"]["delete"] == 7


def test_truncate_refuses_to_strand_a_dependent_in_another_queue(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", "other", depends=["a"])
    with unchanged(lua.r), pytest.raises(HasDependents, match=r"b \(queue other\) depends on a"):
        lua("queue.truncate", "q", now=T0)


def test_drop_forgets_an_empty_queue_only(lua: Lua) -> None:
    lua.put("a")
    lua.config("q-heartbeat", 5)
    lua("pause", "q", now=T0)
    with unchanged(lua.r), pytest.raises(WrongState, match=r"1 waiting.*truncate it first"):
        lua("queue.drop", "q", now=T0)
    lua("queue.truncate", "q", now=T0)
    assert lua("queue.drop", "q", now=T0) == "dropped"
    assert lua.zset("queues") == []
    assert lua("config.get", "q-heartbeat", now=T0) is None
    assert lua.r.sismember(lua.key("paused_queues"), "q") == 0
    with pytest.raises(JobNotFound):
        lua("queue.drop", "q", now=T0)


# -- statistics --------------------------------------------------------------------------------


def test_statistics_by_state_and_by_call(lua: Lua) -> None:
    for jid in ("a", "b", "c", "d"):
        lua.put(jid)
    lua.put("later", delay=60)
    lua.put("dep", depends=["a"])
    lua.pop_jids(count=3)  # a, b, c
    lua.complete("a")  # dep waits now
    lua("release", "b", "w1", now=T0)
    lua("bury", "c", "w1", now=T0)
    lua("kick", "q", now=T0)
    lua("bury", "c", "admin", now=T0)
    lua("delete", "d", now=T0)
    reply = stats(lua)
    assert reply["name"] == "q"
    assert reply["tasks"] == {
        "ready": 2,
        "taken": 0,
        "buried": 1,
        "delayed": 1,
        "depends": 0,
        "done": 1,
        "total": 4,
    }
    assert reply["calls"] == {
        "put": 6,
        "take": 3,
        "ack": 1,
        "release": 1,
        "bury": 2,
        "kick": 1,
        "delete": 1,
        "touch": 0,
        "expire": 0,
    }
    assert lua("stats", "q", T0, now=T0)["calls"] == reply["calls"]


# -- unique puts -------------------------------------------------------------------------------


def test_a_unique_put_of_an_unfinished_job_changes_nothing(lua: Lua) -> None:
    lua.put("a", priority=1)
    lua.put("s", delay=60)
    lua.put("f")
    lua("fail", "f", "w1", "g", "m", now=T0)
    lua.pop_jids(count=1)  # a runs
    for jid in ("a", "s", "f"):
        with unchanged(lua.r):
            assert lua.put(jid, "other", unique=1, now=T0 + 1) == "exists"
    # finished jobs are put again; without `unique` a put moves the job (qless)
    lua.complete("a", now=T0 + 2)
    assert lua.put("a", "other", unique=1, now=T0 + 3) == "a"
    assert lua.state("a", now=T0 + 3) == "waiting"
    assert lua.put("s", "other", now=T0 + 3) == "s"
    assert lua.job("s", now=T0 + 3)["queue"] == "other"  # type: ignore[index]
    assert lua.put("new", unique=1, now=T0 + 3) == "new"


def test_a_unique_put_after_expiry_puts_again(lua: Lua) -> None:
    lua.put("a", ttl=1)
    lua("peek", "q", 1, now=T0 + 1)
    assert lua.put("a", unique=1, now=T0 + 2) == "a"
    assert lua.state("a", now=T0 + 2) == "waiting"
    assert lua.zset("expired") == []


# -- flow submission -----------------------------------------------------------------------------


def test_flow_submit_passes_the_options_to_each_job(lua: Lua) -> None:
    specs = [
        {
            "jid": "r:a",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "ttr": 5,
            "ttl": 100,
            "concurrency_key": "r:a",
            "concurrency_limit": 2,
            "throttle": "t",
        },
        {"jid": "r:b", "queue": "q", "klass": "K", "data": "{}", "ttr": None},
    ]
    assert lua("flow.submit", "r", '{"flow": "f"}', json.dumps(specs), now=T0) == "submitted"
    job = lua.job("r:a")
    assert job is not None
    assert (
        job["ttr"],
        job["ttl"],
        job["deadline"],
        job["concurrency_key"],
        job["concurrency_limit"],
        job["throttle"],
    ) == (5, 100, T0 + 100, "r:a", 2, "t")
    assert "ttr" not in lua.job("r:b")  # type: ignore[operator]
    assert stats(lua)["calls"]["put"] == 2


def test_run_retry_keeps_the_options_and_puts_expired_jobs_back(lua: Lua) -> None:
    specs = [
        {
            "jid": "r:a",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "ttl": 1,
            "ttr": 5,
            "concurrency_key": "k",
        }
    ]
    lua("flow.submit", "r", '{"flow": "f"}', json.dumps(specs), now=T0)
    lua("peek", "q", 1, now=T0 + 1)
    assert lua.state("r:a", now=T0 + 1) == "expired"
    assert json.loads(lua.raw("run.get", "r", now=T0 + 1))["id"] == "r"
    assert lua("run.retry", "r", now=T0 + 2) == 1
    job = lua.job("r:a", now=T0 + 2)
    assert job is not None and job["state"] == "waiting"
    assert (job["ttr"], job["ttl"], job["deadline"], job["concurrency_key"]) == (5, 1, T0 + 3, "k")


def test_a_pop_of_thousands_of_jobs_takes_them_all(lua: Lua) -> None:
    """More jobs than Lua's unpack() takes at once (about 8000): pop removes them in slices."""
    if lua.prefix != "ql:" or lua.engine._use_functions is False:
        pytest.skip("slow, and the same in every mode")
    specs = [{"jid": f"r:{n:05d}", "queue": "q", "klass": "K", "data": "{}"} for n in range(8500)]
    lua("flow.submit", "r", '{"flow": "f"}', json.dumps(specs), now=T0)
    assert len(lua.pop(count=9000)) == 8500
    assert lua.waiting("q") == []


def test_a_key_job_held_back_by_its_throttle_keeps_its_place_in_the_key(lua: Lua) -> None:
    lua("throttle.set", "t", 1, now=T0)
    lua.put("other", throttle="t")
    assert lua.pop_jids() == ["other"]  # the throttle is full now
    lua.put("first", concurrency_key="k", throttle="t")
    lua.put("second", concurrency_key="k")
    # "first" waits for the throttle on a reservation of its key: "second" may not overtake it
    assert lua.pop_jids(count=2) == []
    assert running_keys(lua) == {"k": "1"}
    assert lua.job("first")["parked"] == "throttle"  # type: ignore[index]
    assert lua.job("second")["parked"] == "concurrency_key"  # type: ignore[index]
    lua.complete("other", now=T0 + 1)
    assert lua.pop_jids(count=2, now=T0 + 1) == ["first"]
    assert running_keys(lua) == {"k": "1"}
    lua.complete("first", now=T0 + 2)
    assert lua.pop_jids(count=2, now=T0 + 2) == ["second"]


def test_a_reservation_is_given_back_when_its_job_leaves(lua: Lua) -> None:
    lua("throttle.set", "t", 0, now=T0)
    lua.put("first", concurrency_key="k", throttle="t")
    lua.put("second", concurrency_key="k")
    assert lua.pop_jids(count=2) == []
    assert running_keys(lua) == {"k": "1"}
    lua("cancel", "first", now=T0 + 1)
    assert running_keys(lua) == {}
    assert lua.pop_jids(count=2, now=T0 + 1) == ["second"]


def test_a_job_unparked_while_pop_passes_it_stays_in_the_queue(lua: Lua) -> None:
    # "second" is parked behind "first"'s reservation of key k, and in the same pop "first"
    # expires: giving the reservation back unparks "second", which must stay poppable.
    lua("throttle.set", "t", 0, now=T0)
    lua.put("first", concurrency_key="k", throttle="t", ttl=1)
    assert lua.pop_jids(count=1) == []
    lua.put("second", concurrency_key="k", priority=-1, now=T0 + 0.5)
    lua("throttle.set", "t", 1, now=T0 + 0.5)
    assert lua.waiting("q")[:2] == ["second", "first"]
    # Out of the ttl index, as when more than Ttl.BATCH jobs are due: pop's own sweep passes it
    # and pop finds it expired as it reaches it.
    lua.r.zrem(lua.key("q:q-ttl"), "first")
    popped = lua.pop_jids(count=2, now=T0 + 3)
    assert lua.state("first", now=T0 + 3) == "expired"
    assert popped + lua.pop_jids(count=1, now=T0 + 3) == ["second"]
