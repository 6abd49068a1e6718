"""await, await.cancel and the idle hand-off: jobs pushed to idle workers (include/handoff.lua)."""

from __future__ import annotations

import json
from typing import Any

from lua_support import T0, Lua


def await_jobs(
    lua: Lua, worker: str = "w1", *queues: str, count: int = 1, seconds: float = 5, now: float = T0
) -> list[dict[str, Any]]:
    reply = lua.raw("await", worker, seconds, count, *(queues or ("q",)), now=now)
    return list(json.loads(reply))


def inbox(lua: Lua, worker: str = "w1") -> list[list[dict[str, Any]]]:
    return [json.loads(item) for item in lua.r.lrange(lua.key(f"w:{worker}:inbox"), 0, -1)]


def test_await_pops_like_pop_when_there_is_work(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    jobs = await_jobs(lua, count=5)
    assert [job["jid"] for job in jobs] == ["a", "b"]
    assert all(job["state"] == "running" and job["worker"] == "w1" for job in jobs)
    assert not lua.r.exists(lua.key("q:q-idle"))


def test_an_idle_worker_is_handed_the_next_put_already_popped(lua: Lua) -> None:
    assert await_jobs(lua, now=T0) == []
    assert lua.r.zscore(lua.key("q:q-idle"), "w1") == T0 + 5
    lua.put("a", now=T0 + 1)
    [[job]] = inbox(lua)
    assert (job["jid"], job["state"], job["worker"]) == ("a", "running", "w1")
    assert lua.state("a") == "running"
    assert lua.r.zscore(lua.key("q:q-locks"), "a") == T0 + 1 + 60
    # Handed one job, the worker is no longer idle: the next put waits for a pop.
    assert not lua.r.exists(lua.key("q:q-idle"), lua.key("w:w1:waiting"))
    lua.put("b", now=T0 + 2)
    assert lua.state("b") == "waiting"
    # The next await returns what was handed over (and empties the inbox) before popping.
    assert [job["jid"] for job in await_jobs(lua, now=T0 + 3)] == ["a"]
    assert inbox(lua) == []
    assert [job["jid"] for job in await_jobs(lua, now=T0 + 3)] == ["b"]


def test_idle_workers_are_served_in_the_order_they_started_waiting(lua: Lua) -> None:
    await_jobs(lua, "w1", now=T0)
    await_jobs(lua, "w2", now=T0 + 1)
    lua.put("a", now=T0 + 2)
    lua.put("b", now=T0 + 2)
    lua.put("c", now=T0 + 2)
    assert [[job["jid"] for job in jobs] for jobs in inbox(lua, "w1")] == [["a"]]
    assert [[job["jid"] for job in jobs] for jobs in inbox(lua, "w2")] == [["b"]]
    assert lua.state("c") == "waiting"


def test_an_idle_registration_ends_at_its_deadline(lua: Lua) -> None:
    await_jobs(lua, seconds=5, now=T0)
    lua.put("a", now=T0 + 6)
    assert lua.state("a") == "waiting"
    assert inbox(lua) == []
    assert not lua.r.exists(lua.key("q:q-idle"))


def test_a_worker_idle_on_several_queues_gets_one_job_and_leaves_every_queue(lua: Lua) -> None:
    await_jobs(lua, "w1", "q", "other")
    lua.put("a", "other", now=T0 + 1)
    [[job]] = inbox(lua)
    assert (job["jid"], job["queue"]) == ("a", "other")
    assert not lua.r.exists(lua.key("q:q-idle"), lua.key("q:other-idle"), lua.key("w:w1:waiting"))


def test_the_hand_off_pops_by_the_queue_s_rules(lua: Lua) -> None:
    lua("pause", "q", now=T0)
    await_jobs(lua)
    lua.put("a", now=T0 + 1)
    assert lua.state("a") == "waiting" and inbox(lua) == []
    # Unpausing makes the job waiting again for the engine: the idle worker gets it.
    lua("unpause", "q", now=T0 + 2)
    [[job]] = inbox(lua)
    assert job["jid"] == "a"


def test_jobs_made_ready_by_a_completion_are_handed_over(lua: Lua) -> None:
    lua.put("first")
    lua.put("second", depends=["first"])
    lua.pop(worker="w1")
    await_jobs(lua, "w2", now=T0 + 1)
    lua.complete("first", "w1", now=T0 + 2)
    [[job]] = inbox(lua, "w2")
    assert (job["jid"], job["worker"]) == ("second", "w2")


def test_await_cancel_gives_back_what_was_handed_over_without_using_a_retry(lua: Lua) -> None:
    await_jobs(lua)
    lua.put("a", now=T0 + 1)
    assert lua.raw("await.cancel", "w1", now=T0 + 2) == 1
    job = lua.job("a")
    assert job is not None
    assert (job["state"], job["worker"], job["remaining"]) == ("waiting", "", 5)
    assert not lua.r.exists(lua.key("w:w1:inbox"), lua.key("w:w1:waiting"), lua.key("q:q-idle"))
    # A job taken from the worker meanwhile (here: timed out and popped by w2) stays with w2.
    await_jobs(lua, "w1", "other", now=T0 + 3)
    lua.put("b", "other", now=T0 + 4)
    lua("timeout", "b", now=T0 + 5)
    lua.pop("other", worker="w2", now=T0 + 6)
    assert lua.raw("await.cancel", "w1", now=T0 + 7) == 0
    assert lua.job("b", T0 + 7)["worker"] == "w2"  # type: ignore[index]


def test_deregistering_a_worker_gives_back_what_was_handed_to_it(lua: Lua) -> None:
    await_jobs(lua)
    lua.put("a", now=T0 + 1)
    lua("worker.deregister", "w1", now=T0 + 2)
    assert lua.state("a") == "waiting"
    assert not lua.r.exists(lua.key("w:w1:inbox"), lua.key("q:q-idle"))


def test_a_wake_marker_in_the_inbox_is_not_a_job(lua: Lua) -> None:
    await_jobs(lua)
    lua.r.lpush(lua.key("w:w1:inbox"), "[]")
    assert await_jobs(lua, now=T0 + 1) == []
    lua.put("a", now=T0 + 2)
    lua.r.rpush(lua.key("w:w1:inbox"), "[]")
    assert [job["jid"] for job in await_jobs(lua, now=T0 + 3)] == ["a"]


def test_await_never_returns_a_handed_job_whose_lock_ran_out_before_it_was_read(
    lua: Lua,
) -> None:
    """A worker paused (or busy) between two waits reads its inbox late: a job whose lock ran
    out meanwhile is not started on a lock it no longer has, beside whoever reclaims it. Its
    await pops next, so it gets the job back at once, timed out, under a new lock; a job taken
    by another worker meanwhile is not returned at all; one read in time is, as handed."""
    lua("config.set", "heartbeat", 2, now=T0)
    lua("config.set", "grace-period", 0, now=T0)  # an expired lock is reclaimed at once
    await_jobs(lua, "w1", count=3, now=T0)
    lua.put("late", now=T0 + 1)  # handed to w1, locked until T0 + 3, read only at T0 + 5
    [job] = await_jobs(lua, "w1", count=3, now=T0 + 5)
    assert (job["jid"], job["expires"]) == ("late", T0 + 5 + 2)  # reclaimed, a new lock
    whats = [entry["what"] for entry in lua("get", "late", now=T0 + 5)["history"]]
    assert whats == ["put", "popped", "popped"]  # handed, then taken again by its reclaim
    # Handed to w1, then timed out and taken by w2 while w1 did not look: not w1's any more.
    await_jobs(lua, "w1", count=3, now=T0 + 5)
    lua.put("gone", now=T0 + 6)
    # (w2 also reclaims `late`, whose new lock with w1 ran out at T0 + 7)
    assert [job["jid"] for job in await_jobs(lua, "w2", count=3, now=T0 + 12)] == ["late", "gone"]
    assert await_jobs(lua, "w1", count=3, now=T0 + 12) == []
    assert lua.state("gone") == "running"
    [entry] = [e for e in lua("get", "gone", now=T0 + 12)["history"][-1:]]
    assert entry["worker"] == "w2"
    # One read in time is returned as it was handed.
    lua.put("fresh", now=T0 + 13)
    [[handed]] = inbox(lua)
    assert await_jobs(lua, "w1", count=3, now=T0 + 14) == [handed]
