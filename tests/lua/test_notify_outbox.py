"""The notification outbox: an entry written by the same call as the state change it tells of."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lua_support import NOT_JIDS, T0, Lua, unchanged

from scheduler.engine.errors import InvalidArgument

RUN = "flow@run"


def job(jid: str, *, notify: str | None = None, retries: int = 0, **more: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "jid": jid,
        "queue": "q",
        "klass": "K",
        "data": "{}",
        "priority": 0,
        "tags": [],
        "retries": retries,
        "depends": [],
        "delay": 0,
        "trigger": "all_success",
        **more,
    }
    if notify is not None:
        spec["notify"] = notify
    return spec


def submit(lua: Lua, *jobs: dict[str, Any]) -> None:
    reply = lua("flow.submit", RUN, json.dumps({"flow": "flow"}), json.dumps(list(jobs)), now=T0)
    assert reply == "submitted"


def outbox(lua: Lua) -> list[dict[str, str]]:
    return [fields for _, fields in lua.r.xrange(lua.key("notify:outbox"))]


def test_a_failure_and_the_runs_end_are_written_with_the_fail(lua: Lua) -> None:
    submit(lua, job("a", notify="failure run"), job("b", notify="run", depends=["a"]))
    assert lua.pop_jids("q", "w1", now=T0 + 1) == ["a"]
    lua("fail", "a", "w1", "boom", "it broke", now=T0 + 2)
    entries = outbox(lua)
    assert [e["kind"] for e in entries] == ["failure", "run_failure"]
    assert entries[0] == {"kind": "failure", "run": RUN, "jid": "a", "at": str(int(T0 + 2))}
    assert lua.r.hget(lua.key("run:" + RUN), "notified") == "failed"


def test_success_is_told_per_job_and_the_run_once(lua: Lua) -> None:
    submit(lua, job("a", notify="success run"), job("b", notify="success run"))
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == ["a", "b"]
    lua.complete("a", now=T0 + 2)
    assert [e["kind"] for e in outbox(lua)] == ["success"]
    lua.complete("b", now=T0 + 3)
    assert [e["kind"] for e in outbox(lua)] == ["success", "success", "run_success"]


def test_the_runs_end_is_told_past_entries_of_its_job_list_that_are_not_jids(lua: Lua) -> None:
    """Whether a run whose counts are not kept (jids not under its id) still goes is read
    from its job list: an entry there that is no jid, naming another key (a history list),
    is none of its jobs."""
    submit(lua, job("a", notify="run"), job("b", notify="run"))
    lua.put("x", "elsewhere")
    lua("log", "x", "noted", now=T0)  # x-history: the key of a list
    lua.r.rpush(lua.key(f"run:{RUN}-jobs"), *NOT_JIDS)
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == ["a", "b"]
    lua.complete("a", now=T0 + 2)
    assert outbox(lua) == []
    lua.complete("b", now=T0 + 3)
    assert [e["kind"] for e in outbox(lua)] == ["run_success"]


def test_exhausted_retries_say_how(lua: Lua) -> None:
    submit(lua, job("a", notify="failure", retries=1))
    lua.pop_jids("q", "w1", now=T0 + 1)
    lua("retry", "a", "q", "w1", 0, "flaky", "once", now=T0 + 2)
    assert outbox(lua) == []
    lua.pop_jids("q", "w1", now=T0 + 3)
    lua("retry", "a", "q", "w1", 0, "flaky", "twice", now=T0 + 4)
    [entry] = outbox(lua)
    assert entry["kind"] == "failure" and entry["exhausted"] == "retry"


def test_a_wait_tells_when_it_starts_awaiting(lua: Lua) -> None:
    submit(lua, job("approve", notify="awaiting", wait={"signal": "approve"}))
    [entry] = outbox(lua)
    assert entry["kind"] == "awaiting" and entry["jid"] == "approve"


def test_jobs_without_the_flag_write_nothing(lua: Lua) -> None:
    submit(lua, job("a"))
    lua.pop_jids("q", "w1", now=T0 + 1)
    lua("fail", "a", "w1", "boom", "it broke", now=T0 + 2)
    assert outbox(lua) == []
    assert lua.r.exists(lua.key("notify:outbox")) == 0


@pytest.mark.parametrize("flag", ["failure bogus", "x" * 65, 5])
def test_a_bad_flag_is_refused_and_changes_nothing(lua: Lua, flag: Any) -> None:
    with unchanged(lua.r), pytest.raises(InvalidArgument, match="notify"):
        lua(
            "flow.submit",
            RUN,
            json.dumps({"flow": "flow"}),
            json.dumps([job("a", notify=flag)]),
            now=T0,
        )


def test_a_run_ended_by_a_ttl_expiry_tells_its_end(lua: Lua) -> None:
    """A job that expires (never started within its ttl) is no step failure, but when it ends
    its run, the run's end is told in the call that expired it, as every ending is."""
    submit(
        lua,
        job("a", notify="failure run", ttl=10),
        job("b", notify="failure run", depends=["a"]),
    )
    lua("maintain", "q", now=T0 + 5)
    assert outbox(lua) == []  # not expired yet
    lua("maintain", "q", now=T0 + 11)
    assert lua.r.hget(lua.key("j:a"), "state") == "expired"
    [entry] = outbox(lua)
    assert entry == {"kind": "run_failure", "run": RUN, "jid": "a", "at": str(int(T0 + 11))}
    assert lua.r.hget(lua.key("run:" + RUN), "notified") == "failed"
    # told once
    lua("maintain", "q", now=T0 + 20)
    assert len(outbox(lua)) == 1


def test_jobs_ending_in_one_call_tell_the_runs_end_once_from_its_counts(lua: Lua) -> None:
    # Jids under the run's id: its counts are kept, and they say whether a job is still going.
    a, b, c = (f"{RUN}:{step}" for step in "abc")
    submit(lua, job(a, notify="run"), job(b, notify="run"), job(c, notify="run", depends=[a]))
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == [a, b]
    lua("complete.many", "w1", a, "q", "", b, "q", "", now=T0 + 2)
    assert outbox(lua) == []  # c was released by a's complete: waiting, so the run goes on
    assert lua.pop_jids("q", "w1", now=T0 + 3) == [c]
    lua.r.config_resetstat()
    lua.complete(c, now=T0 + 4)
    [entry] = outbox(lua)
    assert (entry["kind"], entry["jid"]) == ("run_success", c)
    # Asked of the counts: the run's list of jobs was not read (the scan reads it first).
    assert "cmdstat_lrange" not in lua.r.info("commandstats")


def test_two_ends_of_a_run_in_one_call_make_one_entry_naming_the_last(lua: Lua) -> None:
    a, b = f"{RUN}:a", f"{RUN}:b"
    submit(lua, job(a, notify="run"), job(b, notify="run"))
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == [a, b]
    lua("complete.many", "w1", a, "q", "", b, "q", "", now=T0 + 2)
    [entry] = outbox(lua)
    assert (entry["kind"], entry["jid"]) == ("run_success", b)
