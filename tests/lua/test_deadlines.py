"""Deadlines of runs and steps: missed once when unfinished at their time, told to the outbox,
counted; time is passed in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import InvalidArgument

RUN = "flow@run"


def job(jid: str, **more: Any) -> dict[str, Any]:
    return {"jid": jid, "queue": "q", "klass": "K", "data": "{}", "priority": 0, "tags": [],
            "retries": 0, "depends": [], "delay": 0, **more}  # fmt: skip


def submit(lua: Lua, run: dict[str, Any], *jobs: dict[str, Any]) -> None:
    reply = lua("flow.submit", RUN, json.dumps({"flow": "flow", **run}), json.dumps(list(jobs)),
                now=T0)  # fmt: skip
    assert reply == "submitted"


def sweep(lua: Lua, now: float) -> dict[str, int]:
    return json.loads(lua("deadline.sweep", now=now))


def outbox(lua: Lua) -> list[dict[str, str]]:
    return [fields for _, fields in lua.r.xrange(lua.key("notify:outbox"))]


def test_a_run_past_its_deadline_is_missed_once_and_told(lua: Lua) -> None:
    submit(lua, {"deadline": 60, "notify": [{"on": ["deadline"]}]}, job("a"))
    assert sweep(lua, T0 + 59) == {"missed": 0, "looked": 0}
    assert sweep(lua, T0 + 60) == {"missed": 1, "looked": 1}
    assert sweep(lua, T0 + 600) == {"missed": 0, "looked": 0}  # once
    assert lua.r.hget(lua.key("run:" + RUN), "deadline_missed") == str(int(T0 + 60))
    assert [(e["kind"], e["run"], e["jid"]) for e in outbox(lua)] == [("deadline", RUN, "")]
    assert lua("deadline.count", now=T0) == 1


def test_a_scheduled_run_counts_from_its_tick_and_a_finished_one_is_not_missed(lua: Lua) -> None:
    submit(lua, {"deadline": 60, "tick": T0 - 50}, job("a"))
    lua.pop_jids("q", "w1", now=T0 + 1)
    lua.complete("a", now=T0 + 5)
    assert sweep(lua, T0 + 10) == {"missed": 0, "looked": 1}
    assert lua("deadline.count", now=T0) == 0
    assert lua.r.zcard(lua.key("deadlines")) == 0


def test_a_step_counts_from_its_start(lua: Lua) -> None:
    submit(lua, {}, job("a", deadline=30), job("b", deadline=30, depends=["a"]))
    assert sweep(lua, T0 + 100) == {"missed": 0, "looked": 2}  # neither started: later
    lua.pop_jids("q", "w1", now=T0 + 200)
    assert sweep(lua, T0 + 229) == {"missed": 0, "looked": 2}  # a: due at +230, b: +259
    assert sweep(lua, T0 + 230) == {"missed": 1, "looked": 1}  # a: started at +200
    assert lua.r.hget(lua.key("j:a"), "deadline_missed") == str(int(T0 + 230))
    lua.complete("a", now=T0 + 231)
    lua.pop_jids("q", "w1", now=T0 + 232)
    lua.complete("b", now=T0 + 240)  # in time
    assert sweep(lua, T0 + 10_000) == {"missed": 0, "looked": 1}
    assert lua("deadline.count", now=T0) == 1 and lua.r.zcard(lua.key("deadlines")) == 0


def test_a_steps_deadline_is_told_when_its_rules_ask_for_nothing_else(lua: Lua) -> None:
    """The run's jobs carry notify_run only when they write other kinds: a step whose only rule
    is `on: [deadline]` is told through the run it is counted in."""
    rules = [{"on": ["deadline"], "step": "slow"}]
    submit(lua, {"notify": rules}, job(f"{RUN}:slow", deadline=3))
    lua.pop_jids("q", "w1", now=T0 + 1)
    assert sweep(lua, T0 + 4) == {"missed": 1, "looked": 1}
    assert [(e["kind"], e["run"], e["jid"]) for e in outbox(lua)] == [
        ("deadline", RUN, f"{RUN}:slow")
    ]


@pytest.mark.parametrize("value", [0, -5, "soon"])
def test_a_bad_deadline_is_refused_and_changes_nothing(lua: Lua, value: Any) -> None:
    with unchanged(lua.r), pytest.raises(InvalidArgument, match="deadline"):
        lua("flow.submit", RUN, json.dumps({"flow": "flow"}),
            json.dumps([job("a", deadline=value)]), now=T0)  # fmt: skip
    with unchanged(lua.r), pytest.raises(InvalidArgument, match="deadline"):
        lua("flow.submit", RUN, json.dumps({"flow": "flow", "deadline": value}),
            json.dumps([job("a")]), now=T0)  # fmt: skip


def test_a_steps_missed_deadline_is_in_the_runs_read(lua: Lua) -> None:
    """The step's and its job's `deadline_missed` are read from the run's counts, and a scan of
    a run without counts (submitted before they were kept) finds the same."""
    submit(lua, {}, job(f"{RUN}:slow", deadline=3), job(f"{RUN}:quick"))
    lua.pop_jids("q", "w1", now=T0 + 1)
    lua.pop_jids("q", "w1", now=T0 + 1)
    assert sweep(lua, T0 + 4) == {"missed": 1, "looked": 1}

    def steps() -> dict[str, Any]:
        read = json.loads(lua("run.read", RUN, now=T0 + 5))
        return {
            s["step"]: (s["deadline_missed"], s["jobs"][0]["deadline_missed"])
            for s in read["steps"]
        }

    assert steps() == {"slow": (T0 + 4, T0 + 4), "quick": (None, None)}
    assert json.loads(lua("run.counts", RUN, now=T0 + 5))["drifted"] is False
    lua.r.delete(lua.key("run-counts:" + RUN))
    assert steps() == {"slow": (T0 + 4, T0 + 4), "quick": (None, None)}


def test_a_retried_step_s_deadline_counts_again_from_its_next_start(lua: Lua) -> None:
    """The sweep let go of the step when it failed; `run.retry` puts it back, and with it its
    deadline, counted from when it starts again."""
    slow = f"{RUN}:slow"
    submit(lua, {"notify": [{"on": ["deadline"], "step": "slow"}]}, job(slow, deadline=30))
    lua.pop_jids("q", "w1", now=T0 + 1)
    lua("fail", slow, "w1", "boom", "it broke", now=T0 + 2)
    assert sweep(lua, T0 + 40) == {"missed": 0, "looked": 1}  # failed: let go
    assert lua.r.zcard(lua.key("deadlines")) == 0
    assert lua("run.retry", RUN, now=T0 + 100) == 1
    lua.pop_jids("q", "w1", now=T0 + 110)
    assert sweep(lua, T0 + 139) == {"missed": 0, "looked": 1}  # due again at +140
    assert sweep(lua, T0 + 140) == {"missed": 1, "looked": 1}
    assert lua.r.hget(lua.key("j:" + slow), "deadline_missed") == str(int(T0 + 140))
    assert [(e["kind"], e["jid"]) for e in outbox(lua)] == [("deadline", slow)]


def test_a_rerun_step_s_deadline_counts_again_and_a_miss_is_told_once(lua: Lua) -> None:
    submit(lua, {}, job(f"{RUN}:a", deadline=30), job(f"{RUN}:b", deadline=30))
    lua.pop_jids("q", "w1", count=2, now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)  # in time
    assert sweep(lua, T0 + 31) == {"missed": 1, "looked": 2}  # b: late, still running
    lua.complete(f"{RUN}:b", now=T0 + 40)
    assert lua("run.rerun", RUN, "b", now=T0 + 50) == 1
    lua.pop_jids("q", "w1", now=T0 + 60)
    assert sweep(lua, T0 + 100) == {"missed": 0, "looked": 0}  # b: missed once, told once
    lua.complete(f"{RUN}:b", now=T0 + 101)
    assert lua("run.rerun", RUN, "a", now=T0 + 110) == 1
    lua.pop_jids("q", "w1", now=T0 + 120)
    assert sweep(lua, T0 + 149) == {"missed": 0, "looked": 1}  # looked at: due at +150
    assert sweep(lua, T0 + 150) == {"missed": 1, "looked": 1}  # a: late this time
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "deadline_missed") == str(int(T0 + 150))
    assert lua.r.hget(lua.key(f"j:{RUN}:b"), "deadline_missed") == str(int(T0 + 31))
    assert lua("deadline.count", now=T0) == 2


def test_a_step_canceled_with_its_run_keeps_its_deadline_and_its_miss(lua: Lua) -> None:
    submit(lua, {}, job(f"{RUN}:a", deadline=30), job(f"{RUN}:b", deadline=30))
    lua.pop_jids("q", "w1", count=2, now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    assert lua("run.cancel", RUN, now=T0 + 5) == 1  # b, before its deadline
    assert sweep(lua, T0 + 100) == {"missed": 0, "looked": 2}  # a done, b gone: let go
    assert lua("run.retry", RUN, now=T0 + 200) == 1
    lua.pop_jids("q", "w1", now=T0 + 210)
    assert sweep(lua, T0 + 240) == {"missed": 1, "looked": 1}
    assert lua("run.cancel", RUN, now=T0 + 250) == 1  # late: its mark goes with it
    assert lua("run.retry", RUN, now=T0 + 260) == 1
    lua.pop_jids("q", "w1", now=T0 + 270)
    assert sweep(lua, T0 + 10_000) == {"missed": 0, "looked": 0}
    assert lua.r.hget(lua.key(f"j:{RUN}:b"), "deadline_missed") == str(int(T0 + 240))
    assert lua("deadline.count", now=T0) == 1


def test_a_wait_retried_after_its_timeout_has_its_deadline_again(lua: Lua) -> None:
    gate = f"{RUN}:gate"
    wait = {"signal": "go", "timeout": 60}
    submit(lua, {}, job(gate, deadline=100, wait=wait))
    assert json.loads(lua("wait.sweep", now=T0 + 60)) == {"failed": 1, "skipped": 0}
    assert sweep(lua, T0 + 70) == {"missed": 0, "looked": 0}  # due at +100
    assert sweep(lua, T0 + 100) == {"missed": 0, "looked": 1}  # failed: let go
    assert lua("run.retry", RUN, now=T0 + 200) == 1
    assert sweep(lua, T0 + 300) == {"missed": 1, "looked": 1}  # awaiting since the retry
