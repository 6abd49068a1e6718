"""Trigger rules (all_success, all_done, one_failed, none_failed), skips, and run retry/cancel."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import InvalidArgument, JobNotFound, WrongState


def run_job(lua: Lua, jid: str, outcome: str, now: float = T0 + 1) -> None:
    """Pop `jid` (alone in its queue at that moment) and complete or fail it."""
    assert lua.pop_jids("q", "w1", count=1, now=now) == [jid]
    if outcome == "complete":
        lua.complete(jid, now=now)
    else:
        lua("fail.held", jid, "w1", "boom", "it broke", now=now)


def states(lua: Lua, *jids: str) -> dict[str, str | None]:
    return {jid: lua.state(jid, now=T0 + 5) for jid in jids}


def test_all_success_is_the_default_and_blocks_on_failure(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    run_job(lua, "a", "fail")
    assert states(lua, "a", "b") == {"a": "failed", "b": "depends"}
    job = lua.job("b")
    assert job is not None and job["dependencies"] == ["a"]  # kept, so a retry can release it


def test_all_done_runs_after_a_failure(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua.put("done", depends=["a", "b"], trigger="all_done")
    run_job(lua, "a", "fail")
    assert lua.state("done") == "depends"  # b has not ended yet
    run_job(lua, "b", "complete", now=T0 + 2)
    assert lua.state("done", now=T0 + 3) == "waiting"


def test_one_failed_runs_at_the_first_failure(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua.put("alarm", depends=["a", "b"], trigger="one_failed")
    run_job(lua, "a", "fail")
    assert states(lua, "alarm", "b") == {"alarm": "waiting", "b": "waiting"}
    job = lua.job("alarm")
    assert job is not None and job["dependencies"] == []


def test_one_failed_is_skipped_when_everything_succeeds(lua: Lua) -> None:
    lua.put("a")
    lua.put("alarm", depends=["a"], trigger="one_failed")
    lua.put("after", depends=["alarm"])
    lua.put("tolerant", depends=["alarm"], trigger="none_failed")
    run_job(lua, "a", "complete")
    assert states(lua, "alarm", "after", "tolerant") == {
        "alarm": "complete",
        "after": "complete",
        "tolerant": "waiting",
    }
    assert lua.history("alarm")[-1] == "skipped"
    assert lua.history("after")[-1] == "skipped"  # all_success downstream of a skip is skipped
    assert sorted(lua.zset("completed")) == ["a", "after", "alarm"]
    # Each says which rule and what met it (`flows explain` quotes it).
    whys = {
        jid: (lua.job(jid, now=T0 + 5) or {})["history"][-1].get("why")
        for jid in states(lua, "alarm", "after")
    }
    assert whys == {
        "alarm": "trigger rule one_failed: no dependency failed",
        "after": "trigger rule all_success: alarm was skipped",
    }


def test_a_blocked_job_counts_as_failed_downstream(lua: Lua) -> None:
    """A `finally` hook after a chain whose first link failed still runs."""
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.put("c", depends=["b"])
    lua.put("finally", depends=["a", "b", "c"], trigger="all_done")
    lua.put("on_failure", depends=["a", "b", "c"], trigger="one_failed")
    lua.put("on_success", depends=["a", "b", "c"])
    run_job(lua, "a", "fail")
    assert states(lua, "b", "c", "finally", "on_failure", "on_success") == {
        "b": "depends",
        "c": "depends",
        "finally": "waiting",
        "on_failure": "waiting",
        "on_success": "depends",
    }


def test_lock_expiry_exhaustion_settles_dependents_too(lua: Lua) -> None:
    lua.config("grace-period", 0)
    lua.put("a", retries=0)
    lua.put("cleanup", depends=["a"], trigger="all_done")
    assert lua.pop_jids(now=T0) == ["a"]
    # The lock expired with no retry left: `a` fails, which releases `cleanup` in the same pop.
    assert lua.pop_jids(now=T0 + 61) == ["cleanup"]
    assert lua.state("a", now=T0 + 61) == "failed"


def test_trigger_is_stored_with_the_needs(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"], trigger="all_done")
    assert lua.r.hmget(lua.key("j:b"), "trigger", "needs") == ["all_done", '["a"]']
    lua.put("c", depends=["a"], trigger="all_success")
    assert lua.r.hmget(lua.key("j:c"), "trigger", "needs") == [None, '["a"]']
    lua.put("d", depends=["a"])
    assert lua.r.hmget(lua.key("j:d"), "trigger", "needs") == [None, None]


def submit(lua: Lua, run_id: str, jobs: list[dict[str, object]]) -> None:
    specs = [{"queue": "q", "klass": "K", "data": "{}", **job} for job in jobs]
    assert (
        lua("flow.submit", run_id, json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
        == "submitted"
    )


RUN = [
    {"jid": "r:a"},
    {"jid": "r:b", "depends": ["r:a"]},
    {"jid": "r:notify", "depends": ["r:b"], "trigger": "all_done"},
    {"jid": "r:finally", "depends": ["r:a", "r:b", "r:notify"], "trigger": "all_done"},
]


def test_run_retry_resumes_without_rerunning_what_completed(lua: Lua) -> None:
    submit(lua, "r", RUN)
    run_job(lua, "r:a", "complete", now=T0 + 1)
    run_job(lua, "r:b", "fail", now=T0 + 2)
    run_job(lua, "r:notify", "complete", now=T0 + 3)
    run_job(lua, "r:finally", "complete", now=T0 + 4)
    assert lua("run.retry", "r", now=T0 + 10) == 1
    assert states(lua, "r:a", "r:b", "r:notify", "r:finally") == {
        "r:a": "complete",
        "r:b": "waiting",
        "r:notify": "depends",
        "r:finally": "depends",
    }
    job = lua.job("r:b", now=T0 + 10)
    assert job is not None and job["remaining"] == job["retries"]
    run_job(lua, "r:b", "complete", now=T0 + 11)
    run_job(lua, "r:notify", "complete", now=T0 + 12)
    run_job(lua, "r:finally", "complete", now=T0 + 13)
    # nothing failed: nothing to retry, refused with nothing changed
    with unchanged(lua.r), pytest.raises(WrongState, match="run r has status succeeded"):
        lua("run.retry", "r", now=T0 + 14)


def test_run_cancel_stops_what_has_not_ended(lua: Lua) -> None:
    submit(lua, "r", RUN)
    run_job(lua, "r:a", "complete", now=T0 + 1)
    assert lua.pop_jids(now=T0 + 2) == ["r:b"]
    assert lua("run.cancel", "r", now=T0 + 3) == 3
    assert states(lua, "r:a", "r:b", "r:notify", "r:finally") == {
        "r:a": "complete",
        "r:b": None,
        "r:notify": None,
        "r:finally": None,
    }
    assert lua.r.hget(lua.key("run:r"), "canceled") is not None


@pytest.mark.parametrize("command", ["run.retry", "run.cancel"])
def test_run_commands_refuse_unknown_runs(lua: Lua, command: str) -> None:
    with unchanged(lua.r), pytest.raises(JobNotFound, match="no run nope"):
        lua(command, "nope", now=T0)


def test_a_job_can_complete_as_skipped_and_its_dependents_follow_the_rules(lua: Lua) -> None:
    """A flow step whose `if:` is false: skipped in the call that completes it."""
    lua.put("cond")
    lua.put("after", depends=["cond"])
    lua.put("tolerant", depends=["cond"], trigger="none_failed")
    lua.put("always", depends=["cond"], trigger="all_done")
    assert lua.pop_jids("q", "w1", count=1, now=T0 + 1) == ["cond"]
    assert lua.complete("cond", now=T0 + 2, skipped="its if: condition is false") == "complete"
    assert states(lua, "cond", "after", "tolerant", "always") == {
        "cond": "complete",
        "after": "complete",
        "tolerant": "waiting",
        "always": "waiting",
    }
    job = lua.job("cond", now=T0 + 3)
    assert job is not None
    assert job["history"][-1]["what"] == "skipped"
    assert job["history"][-1]["why"] == "its if: condition is false"
    assert lua.history("after")[-1] == "skipped"


def test_skipped_and_next_exclude_each_other(lua: Lua) -> None:
    lua.put("cond")
    assert lua.pop_jids("q", "w1", count=1, now=T0 + 1) == ["cond"]
    with unchanged(lua.r), pytest.raises(InvalidArgument, match='"skipped" and "next"'):
        lua.complete("cond", now=T0 + 2, skipped="no", next="other")
