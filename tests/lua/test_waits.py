"""Waits: jobs no worker runs, completed by `wait.signal`, timed out by `wait.sweep`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine import doctor
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument, JobNotFound, WrongState

RUN = "flow@run"


def job(
    jid: str,
    *,
    depends: list[str] | None = None,
    wait: dict[str, Any] | None = None,
    trigger: str = "all_success",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "jid": jid,
        "queue": "q",
        "klass": "K",
        "data": "{}",
        "priority": 0,
        "tags": [],
        "retries": 0,
        "depends": depends or [],
        "delay": 0,
        "trigger": trigger,
    }
    if wait is not None:
        spec["wait"] = wait
    return spec


def submit(lua: Lua, *jobs: dict[str, Any], now: float = T0) -> None:
    assert (
        lua("flow.submit", RUN, json.dumps({"flow": "flow"}), json.dumps(list(jobs)), now=now)
        == "submitted"
    )


def approval_run(lua: Lua, **wait: Any) -> None:
    """child -> approve (a wait) -> ship, and a tolerant `report` after approve."""
    submit(
        lua,
        job("child"),
        job("approve", depends=["child"], wait={"signal": "approve", **wait}),
        job("ship", depends=["approve"]),
        job("report", depends=["approve"], trigger="all_done"),
    )


def finish_child(lua: Lua, now: float = T0 + 1) -> None:
    assert lua.pop_jids("q", "w1", count=5, now=now) == ["child"]
    lua.complete("child", now=now)


def get_wait(lua: Lua, jid: str, now: float = T0) -> Any:
    reply = lua("wait.get", jid, now=now)
    return None if reply is None else json.loads(reply)


def test_a_wait_depends_like_any_job_then_awaits_and_is_never_popped(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    assert lua.state("approve") == "depends"
    finish_child(lua)
    assert lua.state("approve", now=T0 + 2) == "awaiting"
    assert lua.pop_jids("q", "w2", count=10, now=T0 + 3) == []
    assert lua.zset("awaiting") == ["approve"]
    assert lua.r.zscore(lua.key("awaiting"), "approve") == T0 + 1 + 60
    assert get_wait(lua, "approve") == {
        "jid": "approve",
        "state": "awaiting",
        "queue": "q",
        "signal": "approve",
        "timeout": 60,
        "on_timeout": "fail",
        "since": T0 + 1,
        "deadline": T0 + 61,
    }
    assert (
        lua("runs.statuses", now=T0 + 3)
        and json.loads(lua("runs.statuses", now=T0 + 3))[0]["status"] == "running"
    )


def test_a_wait_without_needs_awaits_from_the_submit(lua: Lua) -> None:
    submit(lua, job("gate", wait={"signal": "go"}))
    assert lua.state("gate") == "awaiting"
    assert lua.r.zscore(lua.key("awaiting"), "gate") == float("inf")
    assert json.loads(lua("wait.sweep", now=T0 + 10 * 365 * 86400)) == {"failed": 0, "skipped": 0}


def test_a_signal_completes_the_wait_and_promotes_its_dependents_in_one_call(lua: Lua) -> None:
    approval_run(lua)
    finish_child(lua)
    data = json.dumps({"note": "ok", "approved_by": "ada"})
    assert lua("wait.signal", "approve", data, "ada", now=T0 + 5) == "complete"
    approve = lua.job("approve", now=T0 + 5)
    assert approve is not None and approve["state"] == "complete"
    assert json.loads(lua.r.hget(lua.key("j:approve"), "result")) == {
        "note": "ok",
        "approved_by": "ada",
    }
    assert approve["history"][-1]["what"] == "signaled"
    assert approve["history"][-1]["by"] == "ada"
    assert lua.state("ship", now=T0 + 5) == "waiting"
    assert lua.state("report", now=T0 + 5) == "waiting"
    assert lua.zset("awaiting") == []
    assert "approve" in lua.zset("completed")


def test_declared_outputs_must_be_in_the_signal(lua: Lua) -> None:
    approval_run(lua, outputs=["note"])
    finish_child(lua)
    with unchanged(lua.r), pytest.raises(InvalidArgument, match='lacks "note"'):
        lua("wait.signal", "approve", json.dumps({"approved_by": "ada"}), now=T0 + 5)
    assert lua("wait.signal", "approve", json.dumps({"note": "", "x": 1}), now=T0 + 5) == "complete"


def test_a_signal_lacking_declared_outputs_names_every_one(lua: Lua) -> None:
    approval_run(lua, outputs=["note", "ticket", "owner"])
    finish_child(lua)
    with unchanged(lua.r), pytest.raises(InvalidArgument) as refused:
        lua("wait.signal", "approve", json.dumps({"ticket": "T-1"}), now=T0 + 5)
    assert str(refused.value) == (
        'WaitSignal(): Arg "data" lacks "note", "owner": the wait of job approve declares the '
        "outputs note, ticket, owner"
    )


@pytest.mark.parametrize(
    ("jid", "error", "words"),
    [
        ("approve", WrongState, "needs are not done yet"),
        ("child", WrongState, "is not a wait"),
        ("nope", JobNotFound, "no job nope"),
    ],
)
def test_a_signal_to_a_job_not_awaiting_is_refused_and_changes_nothing(
    lua: Lua, jid: str, error: type[Exception], words: str
) -> None:
    approval_run(lua)
    with unchanged(lua.r), pytest.raises(error, match=words):
        lua("wait.signal", jid, "{}", "ada", now=T0 + 5)


def test_a_second_signal_is_refused_and_changes_nothing(lua: Lua) -> None:
    approval_run(lua)
    finish_child(lua)
    lua("wait.signal", "approve", "{}", now=T0 + 5)
    with unchanged(lua.r), pytest.raises(WrongState, match="already done"):
        lua("wait.signal", "approve", "{}", now=T0 + 6)


@pytest.mark.parametrize(
    "data", ["[]", "not json", "", '"text"'], ids=["array", "garbage", "empty", "string"]
)
def test_signal_data_must_be_an_object(lua: Lua, data: str) -> None:
    approval_run(lua)
    finish_child(lua)
    with unchanged(lua.r), pytest.raises(InvalidArgument, match="data"):
        lua("wait.signal", "approve", data, now=T0 + 5)


def test_the_sweep_fails_a_wait_past_its_timeout(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    finish_child(lua)
    assert json.loads(lua("wait.sweep", now=T0 + 60)) == {"failed": 0, "skipped": 0}
    assert json.loads(lua("wait.sweep", 10, now=T0 + 61)) == {"failed": 1, "skipped": 0}
    approve = lua.job("approve", now=T0 + 61)
    assert approve is not None and approve["state"] == "failed"
    assert approve["failure"]["group"] == "wait-timeout"
    assert "within 60 seconds" in approve["failure"]["message"]
    assert lua.state("ship", now=T0 + 61) == "depends"  # blocked: a retry can release it
    assert lua.state("report", now=T0 + 61) == "waiting"  # all_done runs past the failure
    assert lua.zset("awaiting") == []


def test_a_retry_after_a_timeout_awaits_the_signal_again(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    finish_child(lua)
    lua("wait.sweep", now=T0 + 100)
    assert lua("run.retry", RUN, now=T0 + 200) == 1
    assert lua.state("approve", now=T0 + 200) == "awaiting"
    assert lua.r.zscore(lua.key("awaiting"), "approve") == T0 + 260  # counted from the retry
    lua("wait.signal", "approve", json.dumps({"note": "late"}), now=T0 + 210)
    assert lua.state("ship", now=T0 + 210) == "waiting"


def test_the_sweep_skips_a_wait_with_on_timeout_skip(lua: Lua) -> None:
    approval_run(lua, timeout=60, on_timeout="skip")
    finish_child(lua)
    assert json.loads(lua("wait.sweep", now=T0 + 61)) == {"failed": 0, "skipped": 1}
    approve = lua.job("approve", now=T0 + 61)
    assert approve is not None and approve["state"] == "complete"
    assert approve["history"][-1]["what"] == "skipped"
    assert lua.r.hget(lua.key("j:approve"), "skipped") == "1"
    assert lua.state("ship", now=T0 + 61) == "complete"  # all_success: skipped too
    assert lua.history("ship", now=T0 + 61)[-1] == "skipped"
    assert lua.state("report", now=T0 + 61) == "waiting"


def test_the_sweep_is_bounded_oldest_deadline_first(lua: Lua) -> None:
    submit(lua, *(job(f"w{i}", wait={"signal": "go", "timeout": 10 + i}) for i in range(5)))
    assert json.loads(lua("wait.sweep", 2, now=T0 + 100)) == {"failed": 2, "skipped": 0}
    assert lua.state("w0") == "failed" and lua.state("w1") == "failed"
    assert lua.zset("awaiting") == ["w2", "w3", "w4"]


def test_cancel_of_a_run_takes_its_waits_out_of_the_index(lua: Lua) -> None:
    approval_run(lua)
    finish_child(lua)
    assert lua("run.cancel", RUN, now=T0 + 5) == 3  # child completed
    assert lua.zset("awaiting") == []
    assert lua.state("approve") is None


@pytest.mark.parametrize(
    ("wait", "words"),
    [
        ({}, "signal"),
        ({"signal": "a b"}, "white space"),
        ({"signal": "go", "timeout": 0}, "timeout"),
        ({"signal": "go", "timeout": "1d"}, "timeout"),
        ({"signal": "go", "on_timeout": "explode"}, "on_timeout"),
        ({"signal": "go", "outputs": "note"}, "outputs"),
        ({"signal": "go", "colour": "red"}, "colour"),
        ("go", "object"),
    ],
)
def test_a_malformed_wait_is_refused_by_the_submit(lua: Lua, wait: Any, words: str) -> None:
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=words):
        lua(
            "flow.submit",
            RUN,
            json.dumps({"flow": "flow"}),
            json.dumps([job("child"), job("gate", wait=wait)]),
            now=T0,
        )


def test_a_wait_with_a_delay_is_refused(lua: Lua) -> None:
    spec = job("gate", wait={"signal": "go"})
    spec["delay"] = 5
    with unchanged(lua.r), pytest.raises(InvalidArgument, match="no delay"):
        lua("flow.submit", RUN, json.dumps({"flow": "flow"}), json.dumps([spec]), now=T0)


# -- the consistency check knows where an awaiting job belongs ---------------------------------


def check(lua: Lua, *, repair: bool = False, now: float = T0 + 5) -> doctor.Report:
    client = Client.from_engine(lua.engine, worker_name="doctor-test")
    return doctor.check(client, deep=True, repair=repair, now=now)


def test_the_consistency_check_finds_nothing_wrong_with_awaiting_waits(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    finish_child(lua)
    gate = job("gate", wait={"signal": "go"})
    lua("flow.submit", "other", json.dumps({"flow": "flow"}), json.dumps([gate]), now=T0)
    assert check(lua).clean


def test_an_awaiting_wait_missing_from_its_index_is_put_back_with_its_deadline(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    finish_child(lua)
    lua.r.zrem(lua.key("awaiting"), "approve")
    report = check(lua, repair=True)
    assert {(f.kind, f.jid) for f in report.findings} == {("unindexed", "approve")}
    assert lua.r.zscore(lua.key("awaiting"), "approve") == T0 + 61
    assert check(lua).clean
    assert json.loads(lua("wait.sweep", now=T0 + 61)) == {"failed": 1, "skipped": 0}


def test_a_done_job_left_in_the_awaiting_index_is_taken_out_of_it(lua: Lua) -> None:
    approval_run(lua, timeout=60)
    finish_child(lua)
    lua("wait.signal", "approve", "{}", now=T0 + 2)
    lua.r.zadd(lua.key("awaiting"), {"approve": T0 + 61})
    report = check(lua, repair=True)
    assert {(f.kind, f.jid, f.index) for f in report.findings} == {
        ("stray-entry", "approve", "awaiting")
    }
    assert lua.zset("awaiting") == []
    assert lua.state("approve") == "complete"
