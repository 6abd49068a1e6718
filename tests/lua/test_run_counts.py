"""A run's counts (include/run_counts.lua): kept per run and per step as its jobs change state,
read by the decider instead of every job; run.counts compares them with a scan, run.recount
repairs them. (Every test of this tier also checks, on teardown, that each run's kept counts
equal a scan's and that the listed status equals run.read's: lua_support.assert_counts_kept.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from helpers import assert_unchanged
from lua_support import T0, Lua, calls, submit_steps

from scheduler.engine.errors import InvalidArgument
from scheduler.engine.scripts import Engine, qless_bundle

RUN = "r@1"


def submit(lua: Lua, *steps: tuple[str, list[str]], **extra: Any) -> None:
    submit_steps(lua, RUN, *steps, **extra)


def kept(lua: Lua) -> dict[str, int]:
    reply = json.loads(lua.raw("run.counts", RUN, now=T0))
    assert reply["kept"] == reply["scanned"]
    counts: dict[str, int] = reply["kept"]
    return counts


def listed_status(lua: Lua) -> str:
    status: str = json.loads(lua.raw("runs.statuses", now=T0 + 100))[0]["status"]
    return status


def test_counts_follow_each_job_through_put_pop_fail_retry_and_complete(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}
    lua.pop(now=T0 + 1)
    assert kept(lua) == {"running": 1, "a:running": 1, "pending": 1, "b:pending": 1}
    lua.raw("fail", f"{RUN}:a", "w1", "boom", "it broke", "{}", now=T0 + 2)
    assert kept(lua) == {"failed": 1, "a:failed": 1, "pending": 1, "b:pending": 1}
    # nothing of the run can progress: the job waiting for `a` is upstream_failed
    assert listed_status(lua) == "failed"
    lua.raw("run.retry", RUN, now=T0 + 3)
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}
    assert listed_status(lua) == "running"
    lua.pop(now=T0 + 4)
    lua.complete(f"{RUN}:a", now=T0 + 5)
    lua.pop(now=T0 + 6)
    lua.complete(f"{RUN}:b", now=T0 + 7)
    assert kept(lua) == {"success": 2, "a:success": 1, "b:success": 1}
    assert listed_status(lua) == "succeeded"
    lua.raw("run.rerun", RUN, "a", 1, now=T0 + 8)
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}


def test_a_jobs_move_writes_its_run_counts_once(lua: Lua) -> None:
    """Each write of a script is its own entry in the append-only file and the replicas' stream:
    a pop and a complete write the job with what it is counted as, the queue's statistics and
    the run's counts (a count back to 0 deleted), one HSET each, and no HINCRBY. The job is read
    once: its counts settle from what the command read and wrote, not from a second read (the
    pop reads the settings, the job, the statistics and the counts; the complete the same)."""
    submit(lua, ("a", []), ("b", ["a"]))

    lua.r.config_resetstat()
    lua.raw("pop.lean", "q", "w1", 1, now=T0 + 1)  # a worker's pop: no reply read of the job
    assert calls(lua, "hset", "hincrby", "hdel", "hmget") == {"hset": 3, "hdel": 1, "hmget": 4}
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "counted") == f"running {RUN}"
    assert kept(lua) == {"running": 1, "a:running": 1, "pending": 1, "b:pending": 1}
    lua.r.config_resetstat()
    lua.complete(f"{RUN}:a", now=T0 + 2)
    # and the dependent released: written waiting, counted so
    assert calls(lua, "hset", "hincrby", "hdel") == {"hset": 5, "hdel": 1}
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "counted") == f"success {RUN}"
    assert kept(lua) == {"success": 1, "a:success": 1, "waiting": 1, "b:waiting": 1}


def test_a_job_written_again_after_its_move_is_read_back(lua: Lua) -> None:
    """A job a pop hands out and a complete ends in the same call (complete.pop's pop after its
    completes, a skipped job's dependents released and popped by an idle worker's hand-off)
    settles from what it is at the end of the call: its counts and times are those a scan
    finds (checked on teardown)."""
    submit(lua, ("a", []), ("b", ["a"]), ("c", ["b"]))
    lua.pop(now=T0 + 1)
    assert lua.raw("await", "w2", 5, 1, "q", now=T0 + 2) == "[]"
    lua.complete(f"{RUN}:a", now=T0 + 3)  # b released, handed to w2 in the same call
    assert lua.r.hget(lua.key(f"j:{RUN}:b"), "counted") == f"running {RUN}"
    reply = lua.raw("complete.pop", "w2", "q", 1, f"{RUN}:b", "q", "", now=T0 + 4)
    assert json.loads(reply[1])[0]["jid"] == f"{RUN}:c"
    assert kept(lua) == {"success": 2, "a:success": 1, "b:success": 1, "running": 1, "c:running": 1}


def test_a_submit_writes_each_job_once_with_what_it_is_counted_as(lua: Lua) -> None:
    """A job's put writes what its run counts it as in the job's one HSET: the counts are
    written without reading the jobs back or writing them again, and a new run has no counts
    to read. Three jobs, the run record and the run's counts: five HSETs, no read."""
    lua.r.config_resetstat()
    submit(lua, ("a", []), ("b", ["a"]), ("c", ["a"]))
    assert calls(lua, "hset", "hmget") == {"hset": 5}
    assert lua.r.hget(lua.key(f"j:{RUN}:b"), "counted") == f"pending {RUN}"
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 2, "b:pending": 1, "c:pending": 1}


def test_a_job_moved_in_its_submit_is_counted_as_it_ends_the_call(lua: Lua) -> None:
    """A submitted job that an idle worker's hand-off pops in the same call is counted running,
    not as its put wrote it."""
    assert lua.raw("await", "w1", 5, 1, "q", now=T0) == "[]"
    submit(lua, ("a", []), ("b", ["a"]))
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "state") == "running"
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "counted") == f"running {RUN}"
    assert kept(lua) == {"running": 1, "a:running": 1, "pending": 1, "b:pending": 1}


def test_a_canceled_run_counts_its_deleted_jobs_gone_and_a_retry_puts_them_back(
    lua: Lua,
) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    lua.raw("run.cancel", RUN, now=T0 + 1)
    assert kept(lua) == {"gone": 2, "a:gone": 1, "b:gone": 1}
    assert listed_status(lua) == "canceled"
    lua.raw("run.retry", RUN, now=T0 + 2)
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}
    assert listed_status(lua) == "running"


def test_a_fanout_counts_its_items_in_the_template_step(lua: Lua) -> None:
    template = {"fanout": {"from": f"{RUN}:list", "output": "files"}}
    submit(lua, ("list", []), ("each", ["list"]), ("join", ["each"]), each=template)
    assert lua.pop_jids("q", "w1", count=1, now=T0 + 1) == [f"{RUN}:list"]
    lua.complete(f"{RUN}:list", now=T0 + 1, result=json.dumps({"files": ["x", "y", "z"]}))
    assert kept(lua) == {
        "success": 1,
        "list:success": 1,
        "waiting": 3,
        "each:waiting": 3,
        "pending": 1,
        "join:pending": 1,
    }


def test_recount_repairs_drifted_counts_and_gives_an_older_run_its_counts(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    key = lua.key(f"run-counts:{RUN}")
    lua.r.hset(key, mapping={"a:waiting": 5, "a:failed": 1})
    drifted = json.loads(lua.raw("run.counts", RUN, now=T0))
    assert drifted["kept"] != drifted["scanned"]
    repaired = json.loads(lua.raw("run.recount", RUN, now=T0))
    assert repaired == {"differed": ["a:failed", "a:waiting"], "jobs": 0}
    assert kept(lua) == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}
    # A run without counts (submitted before they were kept) is scanned, then recounted.
    lua.pop(now=T0 + 1)
    lua.raw("fail", f"{RUN}:a", "w1", "boom", "it broke", "{}", now=T0 + 2)
    lua.r.delete(key)
    assert json.loads(lua.raw("run.counts", RUN, now=T0))["kept"] is None
    assert listed_status(lua) == "failed"
    lua.raw("run.recount", RUN, now=T0)
    assert kept(lua) == {"failed": 1, "a:failed": 1, "pending": 1, "b:pending": 1}
    assert listed_status(lua) == "failed"


def test_counts_of_a_missing_run_are_nil_and_bad_input_changes_nothing(lua: Lua) -> None:
    submit(lua, ("a", []))
    assert lua.raw("run.counts", "nope", now=T0) is None
    assert lua.raw("run.recount", "nope", now=T0) is None
    for command in ("run.counts", "run.recount"):
        with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="too many arguments"):
            lua.raw(command, RUN, "extra", now=T0)
        with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="run_id"):
            lua.raw(command, "", now=T0)


def test_the_qless_dialect_moves_a_runs_counts_too(redis_client: redis.Redis) -> None:
    """A qless client working a run's jobs (pop, fail, a re-put, complete) keeps its counts."""
    engine = Engine(redis_client)
    specs = [
        {"jid": f"{RUN}:{step}", "queue": "q", "klass": "K", "data": "{}", "depends": needs}
        for step, needs in (("a", []), ("b", [f"{RUN}:a"]))
    ]
    engine.call("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
    sha = redis_client.script_load(qless_bundle())

    def qless(command: str, now: float, *args: Any) -> None:
        redis_client.evalsha(
            sha, 0, command, now, *(a if isinstance(a, str | int) else json.dumps(a) for a in args)
        )

    def counts() -> dict[str, int]:
        reply = json.loads(engine.call("run.counts", RUN, now=T0))
        assert reply["kept"] == reply["scanned"]
        kept: dict[str, int] = reply["kept"]
        return kept

    qless("pop", T0 + 1, "q", "w1", 1)
    qless("fail", T0 + 2, f"{RUN}:a", "w1", "boom", "it broke", {})
    assert counts() == {"failed": 1, "a:failed": 1, "pending": 1, "b:pending": 1}
    qless("put", T0 + 3, "w1", "q", f"{RUN}:a", "K", {}, 0)
    assert counts() == {"waiting": 1, "a:waiting": 1, "pending": 1, "b:pending": 1}
    qless("pop", T0 + 4, "q", "w1", 1)
    qless("complete", T0 + 5, f"{RUN}:a", "w1", "q", {})
    assert counts() == {"success": 1, "a:success": 1, "waiting": 1, "b:waiting": 1}


def test_retention_drops_a_big_runs_jobs_without_reading_the_rest_of_the_run(lua: Lua) -> None:
    """Jobs dropped by retention (here jobs-history-count) are counted gone and their steps
    show no times (as a scan of the run finds them), and dropping them reads only the dropped
    jobs: each complete that drops a few of a big run's jobs must not read all the others."""
    submit(lua, *[(f"s{i}", []) for i in range(100)])
    for i in range(100):
        assert lua.pop_jids("q", now=T0 + 1 + i) == [f"{RUN}:s{i}"]
        lua.complete(f"{RUN}:s{i}", now=T0 + 2 + i)
    lua.raw("config.set", "jobs-history-count", 95, now=T0 + 200)
    lua.put("plain", queue="other", now=T0 + 200)
    assert lua.pop_jids("other", now=T0 + 200) == ["plain"]
    lua.r.config_resetstat()
    lua.complete("plain", queue="other", now=T0 + 201)
    # a few reads for each dropped job; a scan of the run would add one for each of its jobs
    assert calls(lua, "hmget")["hmget"] <= 5 * 6 + 5
    dropped = [i for i in range(100) if not lua.r.exists(lua.key(f"j:{RUN}:s{i}"))]
    assert dropped == [0, 1, 2, 3, 4, 5]  # the oldest, 101 completed jobs kept down to 95
    assert kept(lua) == {
        "gone": 6,
        "success": 94,
        **{f"s{i}:{'gone' if i in dropped else 'success'}": 1 for i in range(100)},
    }
    steps = {s["step"]: s for s in json.loads(lua.raw("run.read", RUN, now=T0 + 300))["steps"]}
    assert (steps["s0"]["status"], steps["s0"].get("started"), steps["s0"]["attempts"]) == (
        "gone",
        None,
        0,
    )
    assert (steps["s6"]["status"], steps["s6"]["started"]) == ("success", T0 + 7)


def test_retention_reads_a_dropped_job_once_and_deletes_it_in_one_del(lua: Lua) -> None:
    """Once jobs-history-count is reached each complete drops the oldest job, and a scheduled
    flow's every run does so: the job is read once (its index, tags, run counts' fields and
    step logs' attempts together), its step logs and keys go (its dependencies' set with its
    own keys, in one DEL), its step shows no times, and its counts say gone."""
    submit(lua, ("a", []), ("b", []))
    lua.raw("config.set", "jobs-history-count", 1, now=T0)
    assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:a"]
    lua.raw("log.append", f"{RUN}:a", 1, 0, 1, T0 + 1, "stdout", "", "hello", now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    assert lua.pop_jids(now=T0 + 3) == [f"{RUN}:b"]
    keys = [lua.key(f"j:{RUN}:a"), lua.key(f"j:{RUN}:a-history"), lua.key(f"log:1:{RUN}:a")]
    assert lua.r.exists(*keys) == 3
    lua.r.config_resetstat()
    lua.complete(f"{RUN}:b", now=T0 + 4)  # drops a
    assert lua.r.exists(*keys) == 0
    assert calls(lua, "hget", "del") == {"del": 2}  # the log list, then the job's keys
    assert kept(lua) == {"gone": 1, "a:gone": 1, "success": 1, "b:success": 1}
    steps = {s["step"]: s for s in json.loads(lua.raw("run.read", RUN, now=T0 + 5))["steps"]}
    assert (steps["a"]["status"], steps["a"].get("started")) == ("gone", None)
