"""Worker liveness leases: the jobs of a worker whose lease expired (running, prefetched or
handed to it while idle) come back within seconds, whatever their own lock time; a worker
without a lease keeps qless's per-job locks. See lua/include/lease.lua."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from lua_support import T0, Lua

from scheduler.engine.errors import LockLost

LEASE = 5


def lease(lua: Lua, worker: str, now: float, seconds: float = LEASE) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(lua.raw("worker.lease", worker, seconds, now=now))
    return reply


def survivor(lua: Lua, worker: str, start: float, end: float) -> dict[str, Any]:
    """``worker`` renews its lease every second from ``start`` to ``end``: the last reply."""
    reply = lease(lua, worker, start)
    while start < end:
        start = min(start + 1, end)
        reply = lease(lua, worker, start)
    return reply


def lean_pop(lua: Lua, worker: str, count: int, now: float) -> list[str]:
    return [job["jid"] for job in lua("pop.lean", "q", worker, count, now=now)]


def test_a_lease_is_held_from_its_first_renewal_until_reaped(lua: Lua) -> None:
    assert lease(lua, "w1", T0)["held"] is False
    assert lua.r.zscore(lua.key("leases"), "w1") == T0 + LEASE
    assert lease(lua, "w1", T0 + 1)["held"] is True
    assert lua.r.zscore(lua.key("leases"), "w1") == T0 + 1 + LEASE
    # Lapsed while no worker renewed at all (the server stalled): every lease is pushed back by
    # the stall, so nobody is reaped.
    assert lease(lua, "w1", T0 + 1 + LEASE + 3)["held"] is True


def test_a_worker_renewing_too_late_reaps_itself(lua: Lua) -> None:
    lease(lua, "w1", T0)
    survivor(lua, "w2", T0, T0 + LEASE + 1)
    assert lease(lua, "w1", T0 + LEASE + 1.5)["held"] is False


def test_the_jobs_of_a_worker_whose_lease_expired_wait_again_at_once(lua: Lua) -> None:
    for jid in "abc":
        lua.put(jid)
    lease(lua, "w1", T0)
    assert lean_pop(lua, "w1", 2, T0) == ["a", "b"]  # running, prefetched: 60 s locks
    lua.put("d", now=T0 + 1)
    # Not yet: the lease runs until T0 + 5 (at that instant it has expired, as a lock).
    assert survivor(lua, "w2", T0, T0 + LEASE - 0.5)["reaped"] == 0
    assert lua.state("a", now=T0 + LEASE - 0.5) == "running"
    reply = lease(lua, "w2", T0 + LEASE)
    assert reply == {"held": True, "reaped": 1, "reclaimed": 2, "failed": 0, "returned": 0}
    for jid in "ab":
        job = lua.job(jid, now=T0 + 6)
        assert job is not None
        assert (job["state"], job["worker"], job["remaining"]) == ("waiting", "", 5)
        assert job["history"][-1]["what"] == "reclaimed"
    assert lua.r.hget(lua.key("j:a"), "lost") == "1"
    assert not lua.r.exists(lua.key("q:q-locks"), lua.key("w:w1:jobs"))
    assert lua.r.zscore(lua.key("leases"), "w1") is None
    # Taken once already: ahead of the jobs put since, in their order.
    assert lean_pop(lua, "w2", 4, T0 + 6) == ["a", "b", "c", "d"]
    # The lost worker's late calls are refused: exactly one worker completes each job.
    with pytest.raises(LockLost, match="handed to another worker: w2"):
        lua("complete", "a", "w1", "q", "{}", now=T0 + 6)
    assert lease(lua, "w1", T0 + 7)["held"] is False  # it woke up: it must drop what it holds


def test_a_job_handed_to_an_idle_worker_that_died_comes_back(lua: Lua) -> None:
    lease(lua, "w1", T0)
    assert lua.raw("await", "w1", 30, 1, "q", now=T0) == "[]"
    lua.put("a", now=T0 + 1)
    assert lua.state("a", now=T0 + 1) == "running"  # in w1's inbox
    survivor(lua, "w2", T0, T0 + LEASE + 1)
    assert lua.state("a", now=T0 + 7) == "waiting"
    assert not lua.r.exists(lua.key("w:w1:inbox"), lua.key("w:w1:waiting"), lua.key("q:q-idle"))
    # It no longer waits idle: the next put is not handed to it.
    lua.put("b", now=T0 + 8)
    assert lua.state("b", now=T0 + 8) == "waiting"


def test_a_reclaimed_job_goes_to_an_idle_survivor(lua: Lua) -> None:
    lua.put("a")
    lease(lua, "w1", T0)
    lean_pop(lua, "w1", 1, T0)
    lease(lua, "w2", T0)
    assert lua.raw("await", "w2", 30, 1, "q", now=T0) == "[]"
    survivor(lua, "w2", T0, T0 + LEASE + 1)
    [[job]] = [json.loads(item) for item in lua.r.lrange(lua.key("w:w2:inbox"), 0, -1)]
    assert (job["jid"], job["worker"]) == ("a", "w2")


def test_past_lost_worker_retries_the_job_fails_naming_the_lease(lua: Lua) -> None:
    lua.config("lost-worker-retries", 0)
    lua.put("a")
    lua("worker.register", "w1", json.dumps({"host": "box-7", "pid": 4242}), now=T0)
    lease(lua, "w1", T0)
    lean_pop(lua, "w1", 1, T0)
    assert survivor(lua, "w2", T0, T0 + LEASE)["failed"] == 1
    job = lua.job("a", now=T0 + LEASE)
    assert job is not None and job["state"] == "failed"
    when = datetime.fromtimestamp(T0 + LEASE, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert job["failure"]["group"] == "worker-lost"
    assert job["failure"]["message"].startswith(
        f'Worker "w1" (host box-7, pid 4242) was lost: its lease expired at {when}'
    )


def test_a_job_another_worker_took_is_left_alone(lua: Lua) -> None:
    lua.config("heartbeat", 10)
    lua.config("grace-period", 0)
    lua.put("a")
    lease(lua, "w1", T0)
    lean_pop(lua, "w1", 1, T0)
    assert lean_pop(lua, "w2", 1, T0 + 10) == ["a"]  # reclaimed by its lock first
    # No renewal since T0: the leases get 10 s more (a stall), then w1's is reaped.
    reply = survivor(lua, "w3", T0 + 10, T0 + 15)
    assert (reply["reaped"], reply["reclaimed"]) == (1, 0)
    job = lua.job("a", now=T0 + 15)
    assert job is not None and (job["state"], job["worker"]) == ("running", "w2")


def test_without_a_lease_a_worker_keeps_its_jobs_for_their_lock_time(lua: Lua) -> None:
    lua.put("a")
    lean_pop(lua, "w1", 1, T0)  # a qless client: no lease
    assert survivor(lua, "w2", T0, T0 + 50)["reaped"] == 0
    assert lua.state("a", now=T0 + 50) == "running"


def test_deregistering_drops_the_lease(lua: Lua) -> None:
    lease(lua, "w1", T0)
    lua("worker.deregister", "w1", now=T0 + 1)
    assert lua.r.zscore(lua.key("leases"), "w1") is None


def test_after_a_stall_of_the_server_nobody_is_reaped(lua: Lua) -> None:
    lua.put("a")
    lease(lua, "w1", T0)
    lean_pop(lua, "w1", 1, T0)
    survivor(lua, "w2", T0, T0 + 2)
    # No renewal for 10 s (the server was paused): the leases run 10 s longer.
    assert lease(lua, "w2", T0 + 12)["reaped"] == 0
    assert lua.r.zscore(lua.key("leases"), "w1") == T0 + LEASE + 10
    assert lease(lua, "w1", T0 + 12.5)["held"] is True
    assert lua.state("a", now=T0 + 13) == "running"


def held_lease(
    lua: Lua, worker: str, held: list[str], now: float, numbers: tuple[int, int] | None = None
) -> dict[str, Any]:
    """A renewal naming the jobs the worker holds; ``numbers``: the renewal's own number and
    ``settled``, the number every pop in flight was sent after (as the worker sends them)."""
    reply: dict[str, Any] = json.loads(
        lua.raw("worker.lease", worker, LEASE, json.dumps(held), *(numbers or ()), now=now)
    )
    return reply


def test_a_job_a_live_worker_does_not_hold_is_given_back_within_two_renewals(lua: Lua) -> None:
    for jid in "abc":
        lua.put(jid)
    held_lease(lua, "w1", [], T0)
    assert lean_pop(lua, "w1", 3, T0) == ["a", "b", "c"]
    # The reply of the pop reached the worker with "a" and "b" only ("c" was lost on the way),
    # and the worker renews every second naming what it holds.
    assert held_lease(lua, "w1", ["a", "b"], T0 + 0.2)["returned"] == 0  # maybe still on its way
    assert lua.state("c", now=T0 + 0.5) == "running"
    assert held_lease(lua, "w1", ["a", "b"], T0 + 1.2)["returned"] == 1
    job = lua.job("c", now=T0 + 1.2)
    assert job is not None
    assert (job["state"], job["worker"], job["remaining"]) == ("waiting", "", 5)
    assert job["history"][-1]["what"] == "returned"
    assert lua.r.hget(lua.key("j:c"), "lost") is None  # neither a retry nor a lost worker's run
    assert lua.r.zscore(lua.key("q:q-locks"), "c") is None
    assert lua.r.zrange(lua.key("w:w1:jobs"), 0, -1) == ["a", "b"]
    assert not lua.r.exists(lua.key("w:w1:unheld"))
    # The jobs it holds are left alone; "c" goes to the next pop, at the front.
    assert [lua.state(jid, now=T0 + 1.2) for jid in "ab"] == ["running", "running"]
    lua.put("d", now=T0 + 1.3)
    assert lean_pop(lua, "w2", 2, T0 + 1.4) == ["c", "d"]


def test_a_job_named_again_before_the_settle_time_stays(lua: Lua) -> None:
    lua.put("a")
    held_lease(lua, "w1", [], T0)
    lean_pop(lua, "w1", 1, T0)
    # Renewed while the pop's reply was on its way, then named once it arrived.
    assert held_lease(lua, "w1", [], T0 + 0.1)["returned"] == 0
    assert held_lease(lua, "w1", ["a"], T0 + 1.1)["returned"] == 0
    assert held_lease(lua, "w1", ["a"], T0 + 5)["returned"] == 0
    assert lua.state("a", now=T0 + 5) == "running"


def test_a_job_waiting_in_the_worker_inbox_counts_as_held(lua: Lua) -> None:
    held_lease(lua, "w1", [], T0)
    assert lua.raw("await", "w1", 30, 1, "q", now=T0) == "[]"
    lua.put("a", now=T0 + 0.5)
    assert lua.state("a", now=T0 + 0.5) == "running"  # handed over: in w1's inbox
    assert held_lease(lua, "w1", [], T0 + 1)["returned"] == 0
    assert held_lease(lua, "w1", [], T0 + 3)["returned"] == 0
    # The worker read its inbox, but the reply was lost: the job is no longer anywhere.
    lua.r.delete(lua.key("w:w1:inbox"))
    held_lease(lua, "w1", [], T0 + 3.5)
    assert held_lease(lua, "w1", [], T0 + 4.6)["returned"] == 1
    assert lua.state("a", now=T0 + 4.6) == "waiting"


def test_without_a_list_of_held_jobs_nothing_is_reconciled(lua: Lua) -> None:
    lua.put("a")
    lease(lua, "w1", T0)
    lean_pop(lua, "w1", 1, T0)
    assert lease(lua, "w1", T0 + 1)["returned"] == 0
    assert lease(lua, "w1", T0 + 3)["returned"] == 0
    assert lua.state("a", now=T0 + 3) == "running"


def test_a_pop_still_on_its_way_to_a_starved_worker_is_not_given_back(lua: Lua) -> None:
    """The worker sent a pop after renewal 1's reply came back; starved of CPU, it has not made
    the popped job a held one when it renews at T0 + 1.2 and T0 + 2.5 (so those renewals do
    not name it, and say the pop sent after renewal 1 is still in flight): the job stays its."""
    lua.put("a")
    held_lease(lua, "w1", [], T0, (1, 0))
    assert lean_pop(lua, "w1", 1, T0 + 0.1) == ["a"]
    assert held_lease(lua, "w1", [], T0 + 1.2, (2, 1))["returned"] == 0
    assert held_lease(lua, "w1", [], T0 + 2.5, (3, 1))["returned"] == 0
    assert lua.state("a", now=T0 + 2.5) == "running"
    # Its reply processed at last, the worker names the job: nothing is left to suspect.
    assert held_lease(lua, "w1", ["a"], T0 + 3.6, (4, 3))["returned"] == 0
    assert not lua.r.exists(lua.key("w:w1:unheld"))
    job = lua.job("a", now=T0 + 3.6)
    assert job is not None and (job["state"], job["worker"]) == ("running", "w1")
    assert "returned" not in [entry["what"] for entry in job["history"]]
    lua("complete", "a", "w1", "q", "{}", now=T0 + 4)
    assert lua.state("a", now=T0 + 4) == "complete"


def test_a_job_the_worker_lost_is_given_back_while_a_later_pop_is_in_flight(lua: Lua) -> None:
    """A job whose pop was answered (its reply lost on the way) goes back within two renewals,
    even while the worker starves over the reply of a pop sent later."""
    for jid in "lo":
        lua.put(jid)
    held_lease(lua, "w1", [], T0, (1, 0))
    assert lean_pop(lua, "w1", 1, T0 + 0.1) == ["l"]  # its reply lost: the pop is over
    assert held_lease(lua, "w1", [], T0 + 1, (2, 1))["returned"] == 0  # "l" found unnamed
    assert lean_pop(lua, "w1", 1, T0 + 1.1) == ["o"]  # sent after renewal 2's reply: on its way
    assert held_lease(lua, "w1", [], T0 + 2.2, (3, 2))["returned"] == 1
    assert held_lease(lua, "w1", [], T0 + 3.5, (4, 2))["returned"] == 0
    lost = lua.job("l", now=T0 + 3.5)
    assert lost is not None and (lost["state"], lost["worker"]) == ("waiting", "")
    assert lost["history"][-1]["what"] == "returned"
    assert lua.state("o", now=T0 + 3.5) == "running"
    # Once the pop of "o" is answered and "o" is let go of unreported (a complete whose reply
    # was lost and that never happened), it goes back too.
    assert held_lease(lua, "w1", [], T0 + 4.6, (5, 4))["returned"] == 1
    assert lua.state("o", now=T0 + 4.6) == "waiting"


def test_a_worker_restarted_under_its_name_counts_its_renewals_afresh(lua: Lua) -> None:
    """What renewals numbered above this one found unnamed is counted from this one."""
    lua.put("a")
    held_lease(lua, "w1", [], T0, (40, 39))
    lean_pop(lua, "w1", 1, T0 + 0.1)
    held_lease(lua, "w1", [], T0 + 1, (41, 40))  # found unnamed by renewal 41
    assert held_lease(lua, "w1", [], T0 + 2, (1, 0))["returned"] == 0
    assert held_lease(lua, "w1", [], T0 + 3, (2, 1))["returned"] == 1
    assert lua.state("a", now=T0 + 3) == "waiting"
