"""The consistency check (scheduler/engine/doctor.py over lua/commands/doctor.lua): a healthy
namespace
after heavy activity reports nothing, and each deliberate corruption (raw Redis writes) is found,
repaired by its own engine call, and found no more.

Time is passed explicitly; each test runs in the four modes of the ``lua`` fixture.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from helpers import diff, digest
from lua_support import NOT_JIDS, T0, Lua, submit_steps

from scheduler.engine import doctor
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.service.housekeeping import Check

Seen = set[tuple[str, str, str, str]]


def client_of(lua: Lua) -> Client:
    return Client.from_engine(lua.engine, worker_name="doctor-test")


def run(
    lua: Lua, *, deep: bool = True, repair: bool = False, now: float = T0, page: int = 500
) -> doctor.Report:
    return doctor.check(client_of(lua), deep=deep, repair=repair, now=now, page=page)


def seen(report: doctor.Report) -> Seen:
    return {(f.kind, f.jid, f.index, f.name) for f in report.findings}


def repaired(lua: Lua, expected: Seen, *, deep: bool = True, now: float = T0) -> doctor.Report:
    """Check with repair: exactly `expected` is found, every repair works, and both depths are
    clean afterwards."""
    report = run(lua, deep=deep, repair=True, now=now)
    assert seen(report) == expected
    assert [r.status for r in report.repairs if r.status not in ("repaired", "gone")] == []
    assert any(r.status == "repaired" for r in report.repairs)
    assert run(lua, deep=True, now=now).clean, run(lua, deep=True, now=now).findings
    assert run(lua, deep=False, now=now).clean
    return report


def register(lua: Lua, worker: str, now: float = T0) -> None:
    info = {"host": f"host-{worker}", "pid": 100, "queues": ["q"]}
    lua("worker.register", worker, json.dumps(info), now=now)


# -- healthy namespaces ----------------------------------------------------------------------


def busy(lua: Lua) -> None:
    """A namespace after a lot of everything: every state, locks in and past their grace period,
    reclaims by pop and by housekeeping, dependencies settled every way, a flow run blocked by a
    failure, bounded failure groups, tags, tracking, recurring jobs, registered workers."""
    register(lua, "w1")
    register(lua, "w2")
    lua.config("grace-period", 5)
    lua.config("max-failed-per-group", 3)
    t = T0
    for n in range(12):
        lua.put(f"j{n}", tags=["t"], priority=n % 3, now=t)
    lua.put("later", delay=500, now=t)
    lua.put("after", depends=["j0", "j1"], now=t)
    lua.put("chain", depends=["after"], now=t)
    lua.put("hook", depends=["j2"], trigger="all_done", now=t)
    lua("track", "track", "j3", now=t)
    lua("recur", "q", "rec", "K", "{}", "interval", 30, 0, now=t)
    jobs = lua.pop_jids(worker="w1", count=6, now=t)
    jobs += lua.pop_jids(worker="w2", count=4, now=t + 1)
    assert len(jobs) == 10
    lua.complete(jobs[0], now=t + 2, result='{"ok": 1}')
    lua.complete(jobs[1], now=t + 2, next="q2")
    lua("fail", jobs[2], "w1", "g", "broke", now=t + 3)
    lua("retry", jobs[3], "q", "w1", 10, now=t + 3)
    lua("heartbeat", jobs[4], "w1", now=t + 4)
    lua("timeout", jobs[6], now=t + 4)
    lua("release", jobs[7], "w2", now=t + 5)
    lua("fail.held", jobs[8], "w2", "g", "x", now=t + 5)
    for n in range(5):
        lua.put(f"doomed{n}", now=t + 6)
        lua("fail", f"doomed{n}", "w1", "g", "over the bound", now=t + 6)
    lua("cancel", "later", now=t + 7)
    # lock expiry: one warned (grace), then reclaimed by pop and by housekeeping
    t += 70
    lua.pop(worker="w2", count=2, now=t)
    t += 10
    lua.pop(worker="w2", count=2, now=t)
    lua("maintain", "q", 100, now=t + 100)
    lua("maintain", "q2", 100, now=t + 100)
    t += 100
    lua("unfail", "q", "g", 1, now=t)
    submitted = [
        {"jid": "r-a", "queue": "f", "klass": "K", "data": "{}"},
        {"jid": "r-b", "queue": "f", "klass": "K", "data": "{}", "depends": ["r-a"]},
        {
            "jid": "r-c",
            "queue": "f",
            "klass": "K",
            "data": "{}",
            "depends": ["r-b"],
            "trigger": "all_done",
        },
    ]
    lua("flow.submit", "run-1", '{"flow": "f"}', json.dumps(submitted), now=t)
    lua.pop(queue="f", worker="w1", now=t)
    lua("fail.held", "r-a", "w1", "boom", "m", now=t + 1)
    lua("run.retry", "run-1", now=t + 2)
    lua.pop(queue="f", worker="w1", now=t + 3)
    lua.pop(worker="w1", count=3, now=t + 3)
    # the Tarantool-queue states: buried, parked for a concurrency key, expired by its ttl
    lua.put("b1", "t", now=t)
    lua("bury", "b1", "w1", "aside", now=t)
    lua.put("k1", "t", concurrency_key="k", now=t)
    lua.put("k2", "t", concurrency_key="k", now=t)
    lua.put("x1", "t", ttl=5, now=t)
    assert lua.pop_jids(queue="t", worker="w1", count=2, now=t) == ["k1", "x1"]
    lua.put("x2", "t", ttl=5, now=t)
    lua("maintain", "t", 100, now=t + 10)
    assert lua.state("k2", now=t + 10) == "waiting" and lua.state("x2", now=t + 10) == "expired"


def test_a_healthy_namespace_after_heavy_activity_reports_nothing(lua: Lua) -> None:
    busy(lua)
    before = lua.namespace_keys()
    for deep in (False, True):
        report = run(lua, deep=deep, now=T0 + 300, page=3)  # small pages: many calls each
        assert report.clean, report.findings
        assert report.checked["entries"] > 0
    deep = run(lua, deep=True, repair=True, now=T0 + 300)
    assert deep.clean and deep.repairs == []
    assert deep.checked["jobs"] >= 20 and deep.checked["keys"] > 0
    assert lua.namespace_keys() == before


def test_an_empty_namespace_is_clean(lua: Lua) -> None:
    assert run(lua, deep=False).clean
    assert run(lua, deep=True).clean


def test_a_runs_drifted_counts_are_counted_again(lua: Lua) -> None:
    specs = [
        {"jid": f"r@1:{step}", "queue": "q", "klass": "K", "data": "{}", "depends": needs}
        for step, needs in (("a", []), ("b", ["r@1:a"]))
    ]
    lua("flow.submit", "r@1", json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
    assert run(lua).clean
    lua.r.hincrby(lua.key("run-counts:r@1"), "a:waiting", 2)
    report = repaired(lua, {("run-counts", "", "run", "r@1")})
    assert report.findings[0].where == "counts of run r@1"
    counts = json.loads(lua("run.counts", "r@1", now=T0))
    assert counts["kept"] == counts["scanned"]


# -- index entries ---------------------------------------------------------------------------


def test_entries_that_are_not_jids_are_reported_and_removed(lua: Lua) -> None:
    """What an outside writer left in an index, a run's job list, a tag's index or the tracked
    set that the engine refuses as a jid (white space, a control character, a suffix of the key
    layout); a failed list may hold one twice."""
    register(lua, "w1")
    lua.put("a", tags=["t"])
    lua.put("b")
    lua.put("s", delay=100)
    lua.pop_jids()
    lua("track", "track", "a", now=T0)
    lua.put("f")
    lua("fail", "f", "w1", "g", "broke", now=T0)
    submit_steps(lua, "r1", ("x", []))
    before = digest(lua.r)
    for suffix in ("work", "scheduled", "locks"):
        lua.r.zadd(lua.key(f"q:q-{suffix}"), dict.fromkeys(NOT_JIDS, T0 + 1000))
    lua.r.rpush(lua.key("run:r1-jobs"), *NOT_JIDS)
    lua.r.zadd(lua.key("t:t"), dict.fromkeys(NOT_JIDS, T0))
    lua.r.zadd(lua.key("t:only-outside"), dict.fromkeys(NOT_JIDS, T0))
    lua.r.zadd(lua.key("tracked"), dict.fromkeys(NOT_JIDS, T0))
    lua.r.rpush(lua.key("f:g"), *NOT_JIDS, *NOT_JIDS)
    assert seen(run(lua, deep=False)) == {("bad-id", jid, "locks", "q") for jid in NOT_JIDS}
    places = [(i, "q") for i in ("work", "scheduled", "locks")] + [("run-jobs", "r1")]
    places += [("tag", "t"), ("tag", "only-outside"), ("tracked", ""), ("failed", "g")]
    expected = {("bad-id", jid, index, name) for jid in NOT_JIDS for index, name in places}
    report = repaired(lua, expected)
    assert {f.where for f in report.findings} >= {
        "jobs of run r1",
        "work of queue q",
        "jobs tagged t",
        "tracked jobs",
        "failed list g",
    }
    assert diff(before, digest(lua.r)) == []


def test_a_job_added_to_a_second_index_is_taken_out_of_it(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-scheduled"), {"a": T0})
    lua.r.zadd(lua.key("q:other-work"), {"a": 1})
    assert run(lua, deep=False).clean  # the light check reads the running set only
    repaired(lua, {("stray-entry", "a", "scheduled", "q"), ("stray-entry", "a", "work", "other")})
    assert lua.state("a") == "waiting"
    assert lua.waiting("q") == ["a"]
    assert lua.pop_jids() == ["a"]


def test_a_deleted_job_hash_leaves_index_entries_that_are_removed(lua: Lua) -> None:
    register(lua, "w1")
    lua.put("tmp")
    lua.pop()
    lua.complete("tmp")
    lua.put("waits")
    lua.put("runs")
    lua.put("gone-failed")
    lua("fail", "gone-failed", "w1", "g", "m", now=T0)
    assert lua.pop_jids(count=2) == ["waits", "runs"]
    lua.put("gone-done")
    for jid in ("waits", "runs", "gone-failed", "tmp"):
        lua.r.delete(lua.key(f"j:{jid}"))
    light = run(lua, deep=False)
    assert seen(light) == {
        ("missing-job", "waits", "locks", "q"),
        ("missing-job", "waits", "worker", "w1"),
        ("missing-job", "runs", "locks", "q"),
        ("missing-job", "runs", "worker", "w1"),
    }
    repaired(
        lua,
        {
            ("missing-job", "waits", "locks", "q"),
            ("missing-job", "waits", "worker", "w1"),
            ("missing-job", "runs", "locks", "q"),
            ("missing-job", "runs", "worker", "w1"),
            ("missing-job", "gone-failed", "failed", "g"),
            ("missing-job", "tmp", "completed", ""),
            ("orphan-key", "waits", "job", ""),
            ("orphan-key", "runs", "job", ""),
            ("orphan-key", "gone-failed", "job", ""),
            ("orphan-key", "tmp", "job", ""),
        },
    )
    assert lua.zset("q:q-locks") == [] and lua.zset("completed") == []
    assert lua("failed", now=T0) == {}
    assert lua.state("gone-done") == "waiting"


def test_waiting_scheduled_and_depends_entries_without_their_jobs_are_removed(lua: Lua) -> None:
    lua.put("first")
    lua.put("waits")
    lua.put("later", delay=10)
    lua.put("needs", depends=["first"])
    for jid in ("waits", "later", "needs"):
        lua.r.delete(lua.key(f"j:{jid}"))
    repaired(
        lua,
        {
            ("missing-job", "waits", "fifo", "q"),
            ("missing-job", "later", "scheduled", "q"),
            ("missing-job", "needs", "depends", "q"),
            ("dangling-dependent", "first", "job", "needs"),
            ("orphan-key", "needs", "job", ""),
        },
    )
    assert lua.waiting("q") == ["first"]
    assert lua.zset("q:q-scheduled") == [] and lua.zset("q:q-depends") == []
    for jid in ("waits", "later", "needs"):
        assert not lua.r.exists(lua.key(f"j:{jid}"))
    assert lua.pop_jids(count=3, now=T0 + 20) == ["first"]


def test_a_wrong_state_written_into_a_hash_moves_the_job_where_its_hash_says(lua: Lua) -> None:
    lua.put("a")
    lua.r.hset(lua.key("j:a"), "state", "scheduled")
    repaired(lua, {("stray-entry", "a", "fifo", "q"), ("unindexed", "a", "job", "")})
    assert lua.waiting("q") == [] and lua.zset("q:q-scheduled") == ["a"]


def test_a_running_job_whose_hash_says_waiting_is_queued_again(lua: Lua) -> None:
    lua.put("a")
    lua.pop()
    lua.r.hset(lua.key("j:a"), "state", "waiting")
    report = repaired(
        lua,
        {("stray-entry", "a", "locks", "q"), ("stray-entry", "a", "worker", "w1")},
        deep=False,
    )
    assert any("queued again as waiting" in r.action for r in report.repairs)
    assert lua.pop_jids(worker="w2") == ["a"]


def test_a_job_in_no_index_is_put_back(lua: Lua) -> None:
    lua.put("w")
    lua.put("s", delay=100)
    lua.put("r")
    lua.put("c")
    lua.put("f")
    lua("fail", "f", "x", "g", "m", now=T0)
    assert lua.pop_jids(count=2) == ["w", "r"]
    lua.complete("w")
    lua.put("again")
    for key, jid in [
        ("q:q-scheduled", "s"),
        ("q:q-locks", "r"),
        ("completed", "w"),
    ]:
        lua.r.zrem(lua.key(key), jid)
    lua.r.lrem(lua.key("q:q-fifo"), 0, "again")
    lua.r.lrem(lua.key("f:g"), 0, "f")
    expected = {("unindexed", jid, "job", "") for jid in ("s", "r", "w", "again", "f")}
    expected |= {("failure-group", "", "failures", "g")}
    repaired(lua, expected)
    assert lua.zset("q:q-scheduled") == ["s"]
    assert lua.r.zscore(lua.key("q:q-scheduled"), "s") == T0 + 100  # its delay is kept
    assert lua.zset("q:q-locks") == ["r"] and lua.zset("w:w1:jobs") == ["r"]
    assert lua.zset("completed") == ["w"]
    assert lua("failed", now=T0) == {"g": 1}
    assert lua.pop_jids(worker="w2", count=5) == ["c", "again"]


def test_a_lock_missing_from_its_workers_jobs_is_given_back_to_it(lua: Lua) -> None:
    lua.put("a")
    lua.pop()
    lua.r.zrem(lua.key("w:w1:jobs"), "a")
    report = repaired(lua, {("orphan-lock", "a", "locks", "q")}, deep=False)
    assert "w1" in report.repairs[0].action
    assert lua("workers", "w1", now=T0) == {"jobs": ["a"], "stalled": []}
    assert lua.complete("a") == "complete"


def test_a_running_job_without_a_worker_has_its_lock_expired(lua: Lua) -> None:
    lua.put("a")
    lua.pop()
    lua.r.hset(lua.key("j:a"), "worker", "")
    repaired(
        lua,
        {("orphan-lock", "a", "locks", "q"), ("stray-entry", "a", "worker", "w1")},
        deep=False,
        now=T0 + 1,
    )
    assert lua.state("a", now=T0 + 1) == "stalled"
    assert lua.pop_jids(worker="w2", now=T0 + 1) == ["a"]


def test_a_repair_leaves_a_finding_alone_once_it_no_longer_holds(lua: Lua) -> None:
    lua.put("a")
    lua.pop()
    lua.r.zrem(lua.key("w:w1:jobs"), "a")
    [finding] = run(lua, deep=False).findings
    lua("heartbeat", "a", "w1", now=T0 + 1)  # the worker lists it again by itself
    reply = json.loads(
        lua.raw("doctor.repair", finding.kind, finding.index, finding.name, finding.jid, now=T0)
    )
    assert reply == {"status": "gone", "action": ""}


# -- jobs whose hash cannot be indexed --------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [("state", None, "no state"), ("queue", None, "no queue"), ("failure", "{}", "no failure")],
)
def test_a_job_without_a_usable_state_is_set_aside_as_failed(
    lua: Lua, field: str, value: str | None, why: str
) -> None:
    lua.put("a", tags=["t"])
    if field == "failure":
        lua("fail", "a", "w1", "g", "m", now=T0)
    if value is None:  # (a hash with a klass and no state is a job put waiting)
        lua.r.hdel(lua.key("j:a"), field, *(["klass"] if field == "state" else []))
    else:
        lua.r.hset(lua.key("j:a"), field, value)
    report = run(lua, repair=True)
    kinds = {f.kind for f in report.findings}
    assert "bad-state" in kinds or "stray-entry" in kinds
    assert all(r.status in ("repaired", "gone") for r in report.repairs)
    job = lua.job("a")
    assert job is not None and job["state"] == "failed"
    assert job["failure"]["group"] == "doctor-bad-state"
    assert why in job["failure"]["message"]
    assert job["tags"] == ["t"]
    assert run(lua).clean


def test_the_edges_of_a_job_without_a_state_are_checked_in_the_same_pass(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.put("c", depends=["a"])
    lua.r.hdel(lua.key("j:a"), "state", "klass")  # (with a klass, it would be waiting)
    lua.r.sadd(lua.key("j:a-dependents"), "ghost")
    lua.r.sadd(lua.key("j:a-dependencies"), "gone")
    repaired(
        lua,
        {
            ("stray-entry", "a", "fifo", "q"),
            ("bad-state", "a", "job", ""),
            ("dangling-dependent", "a", "job", "ghost"),
            ("dangling-dependency", "a", "job", "gone"),
        },
    )
    assert lua.r.smembers(lua.key("j:a-dependents")) == {"b", "c"}


def test_buried_parked_and_expired_jobs_are_checked_too(lua: Lua) -> None:
    lua.put("b")
    lua("bury", "b", "w1", now=T0)
    lua.put("k1", concurrency_key="k")
    lua.put("k2", concurrency_key="k")
    assert lua.pop_jids(count=3) == ["k1"]
    lua.put("x", ttl=1)
    lua("maintain", "q", 100, now=T0 + 5)
    assert lua.state("x", now=T0 + 5) == "expired"
    assert run(lua, now=T0 + 5).clean
    lua.r.zrem(lua.key("q:q-buried"), "b")
    lua.r.zrem(lua.key("expired"), "x")
    lua.r.zrem(lua.key("q:q-parked"), "k2")
    lua.r.zadd(lua.key("q:q-work"), {"b": 1})
    report = run(lua, repair=True, now=T0 + 5)
    assert seen(report) == {
        ("stray-entry", "b", "work", "q"),
        ("unindexed", "b", "job", ""),
        ("unindexed", "x", "job", ""),
        ("unindexed", "k2", "job", ""),
    }
    assert {r.finding.jid: r.status for r in report.repairs} == {
        "b": "gone",  # the stray entry's repair put it back among the buried first
        "x": "repaired",
        "k2": "skipped",  # parked: its concurrency key's set still holds it, the slots decide
    }
    assert lua.zset("q:q-buried") == ["b"] and lua.zset("expired") == ["x"]
    assert lua.waiting("q") == []


def test_a_job_in_a_state_the_check_does_not_know_is_left_alone(lua: Lua) -> None:
    lua.put("a")
    lua.r.hset(lua.key("j:a"), "state", "some-future-state")
    lua.r.zrem(lua.key("q:q-work"), "a")
    report = run(lua, repair=True)
    assert report.clean and report.checked["skipped"] == 1
    assert lua.r.hget(lua.key("j:a"), "state") == "some-future-state"


# -- dependency edges --------------------------------------------------------------------------


def test_a_dependency_whose_job_was_deleted_releases_its_dependent(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.r.delete(lua.key("j:a"))
    report = repaired(
        lua,
        {
            ("missing-job", "a", "fifo", "q"),
            ("orphan-key", "a", "job", ""),
            ("dangling-dependency", "b", "job", "a"),
        },
    )
    assert any("released" in r.action for r in report.repairs)
    assert lua.state("b") == "waiting"
    assert not lua.r.exists(lua.key("j:a-history"), lua.key("j:a-dependents"))


def test_an_edge_known_from_one_side_only_is_completed(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.r.srem(lua.key("j:a-dependents"), "b")
    repaired(lua, {("half-edge", "b", "job", "a")})
    lua.pop()
    lua.complete("a")
    assert lua.state("b") == "waiting"  # the repaired edge released it


def test_a_dependent_that_does_not_wait_is_dropped_from_the_list(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua.r.sadd(lua.key("j:a-dependents"), "ghost", "b")
    repaired(
        lua, {("dangling-dependent", "a", "job", "ghost"), ("dangling-dependent", "a", "job", "b")}
    )
    assert not lua.r.exists(lua.key("j:a-dependents"))


def test_a_job_waiting_for_nothing_is_released(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.r.delete(lua.key("j:b-dependencies"))
    repaired(lua, {("stuck-depends", "b", "job", ""), ("dangling-dependent", "a", "job", "b")})
    assert lua.state("b") == "waiting"


def test_a_flow_step_waiting_for_nothing_waits_again_for_its_open_needs(lua: Lua) -> None:
    jobs = [
        {"jid": "s-a", "queue": "q", "klass": "K", "data": "{}"},
        {"jid": "s-b", "queue": "q", "klass": "K", "data": "{}"},
        {
            "jid": "s-c",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "depends": ["s-a", "s-b"],
            "trigger": "all_success",
        },
    ]
    lua("flow.submit", "run-1", '{"flow": "f"}', json.dumps(jobs), now=T0)
    lua.pop()
    lua.complete("s-a")
    lua.r.delete(lua.key("j:s-c-dependencies"))
    report = repaired(
        lua, {("stuck-depends", "s-c", "job", ""), ("dangling-dependent", "s-b", "job", "s-c")}
    )
    assert any("waits again for s-b" in r.action for r in report.repairs)
    job = lua.job("s-c")
    assert job is not None and job["state"] == "depends" and job["dependencies"] == ["s-b"]


# -- groups, lists, registrations ---------------------------------------------------------------


def test_failure_groups_and_duplicate_entries_are_set_right(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua("fail", "a", "w1", "g", "m", now=T0)
    lua("fail", "b", "w1", "h", "m", now=T0)
    lua.r.srem(lua.key("failures"), "g")
    lua.r.sadd(lua.key("failures"), "empty")
    lua.r.lpush(lua.key("f:h"), "b")
    repaired(
        lua,
        {
            ("failure-group", "", "failures", "g"),
            ("failure-group", "", "failures", "empty"),
            ("duplicate-entry", "b", "failed", "h"),
        },
    )
    assert lua("failed", now=T0) == {"g": 1, "h": 1}
    assert lua.r.lrange(lua.key("f:h"), 0, -1) == ["b"]


def test_a_registration_without_a_worker_is_deleted(lua: Lua) -> None:
    lua.r.set(lua.key("w:ghost:info"), '{"host": "h"}')
    register(lua, "alive")
    repaired(lua, {("orphan-key", "", "worker-info", "ghost")})
    assert lua.r.get(lua.key("w:alive:info"))


def test_keys_whose_names_the_engine_cannot_address_are_counted_and_left_alone(lua: Lua) -> None:
    lua.r.hset(lua.key("j:a b"), "state", "waiting")
    lua.r.rpush(lua.key("j:x-history-history"), "{}")
    report = run(lua)
    assert report.clean and report.checked["unaddressable"] == 2


def test_the_deep_check_reads_its_own_namespace_only(redis_client: redis.Redis) -> None:
    """A prefix with glob characters matches itself, not its neighbours."""
    mine = Client.from_engine(Engine(redis_client, prefix="x[ab]*:"))
    theirs = Client.from_engine(Engine(redis_client, prefix="xa:"))
    mine.queues["q"].put("K", {}, jid="mine", now=T0)
    theirs.queues["q"].put("K", {}, jid="theirs", now=T0)
    redis_client.delete("xa:j:theirs")  # a problem, but not one of this namespace
    report = doctor.check(mine, deep=True, now=T0)
    assert report.clean and report.checked["jobs"] == 1
    assert not doctor.check(theirs, deep=True, now=T0).clean


def test_findings_on_later_pages_are_found(lua: Lua) -> None:
    for n in range(7):
        lua.put(f"j{n}")
    lua.pop(count=7)
    lua.r.zrem(lua.key("w:w1:jobs"), "j6")
    report = run(lua, deep=False, page=2)
    assert seen(report) == {("orphan-lock", "j6", "locks", "q")}
    assert report.checked["entries"] == 7 + 6


def test_the_report_groups_findings_and_says_what_was_done(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-depends"), {"a": T0})
    report = run(lua, repair=True)
    as_dict: dict[str, Any] = report.as_dict()
    assert as_dict["clean"] is False
    assert as_dict["findings"]["stray-entry"][0]["jid"] == "a"
    assert as_dict["repairs"][0]["status"] == "repaired"
    assert "1 stray-entry" in report.summary() and "1 repaired" in report.summary()
    assert report.unrepaired == []


def test_the_service_runs_light_checks_and_every_nth_a_deep_one(lua: Lua) -> None:
    lua.put("a")
    lua.r.zadd(lua.key("q:q-scheduled"), {"a": T0})  # only a deep check sees this one
    checks: list[Check] = [doctor.light_check, doctor.deep_check]
    scheduled = doctor.ScheduledCheck(deep_every=2, repair=False)
    checks.append(scheduled)
    client = client_of(lua)
    assert scheduled(client, T0).clean and not scheduled.last.deep  # type: ignore[union-attr]
    report = scheduled(client, T0)
    assert report.deep and not report.clean and report.repairs == []
    assert checks[0](client, T0) is not None
    assert lua.zset("q:q-scheduled") == ["a"]
    deep = doctor.deep_check(client, T0)  # repairs
    assert deep.repairs[0].status == "repaired" and lua.zset("q:q-scheduled") == []


def test_each_job_is_counted_once_whatever_pages_its_keys_land_in(lua: Lua) -> None:
    """A job's hash and its history key come back from SCAN in different pages: the deep check
    still reads (and counts) each job once."""
    for n in range(300):
        lua.put(f"job-{n:03d}", now=T0)
        lua.put(f"job-{n:03d}", now=T0)  # put over: its history is a list of two (not implied)
    assert sum(1 for _ in lua.r.scan_iter(match=lua.key("j:*-history"))) == 300
    report = run(lua, page=7)
    assert report.clean, report.findings
    assert report.checked["jobs"] == 300
