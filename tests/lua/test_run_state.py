"""run.read and the actions of run.retry / run.cancel / run.rerun: one decider
(include/run_state.lua) says what a run, its steps and jobs are and what each allows; every
action it does not allow is refused with the keys unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import assert_unchanged
from lua_support import NOT_JIDS, T0, Lua, as_list, submit_steps

from flows.runs import statuses
from scheduler.engine.errors import InvalidArgument, WrongState
from scheduler.engine.scripts import Engine, qless_bundle

RUN = "r@1"


def submit(lua: Lua, *steps: tuple[str, list[str]], now: float = T0, **extra: Any) -> None:
    submit_steps(lua, RUN, *steps, now=now, **extra)


def read(lua: Lua, *args: Any, now: float = T0 + 100) -> dict[str, Any]:
    reply = lua.raw("run.read", RUN, *args, now=now)
    assert reply is not None
    doc: dict[str, Any] = json.loads(reply)
    return doc


def steps(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["step"]: s for s in doc["steps"]}


def fail(lua: Lua, jid: str, now: float) -> None:
    lua.raw("fail", jid, "w1", "boom", "it broke", "{}", now=now)


def test_one_status_for_the_list_and_the_read(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    doc = read(lua)
    assert doc["status"] == "running"
    assert {k: v["status"] for k, v in steps(doc).items()} == {"a": "waiting", "b": "waiting"}
    assert doc["actions"] == ["cancel"]
    lua.pop(now=T0 + 1)
    fail(lua, f"{RUN}:a", T0 + 2)
    doc = read(lua)
    assert doc["status"] == "failed"
    by = steps(doc)
    assert by["a"]["status"] == "failed" and by["b"]["status"] == "upstream_failed"
    assert by["a"]["actions"] == ["retry", "rerun"] and by["a"]["attempts"] == 1
    assert doc["actions"] == ["retry", "rerun", "cancel"]
    listed = json.loads(lua.raw("runs.statuses", now=T0 + 100))
    assert listed[0]["status"] == doc["status"]


def test_entries_of_a_runs_job_list_that_are_not_jids_are_no_steps(lua: Lua) -> None:
    """An outside writer's entry in a run's job list is no job of the run: the read, the
    listing and the run's actions go by its jobs alone (`flows doctor` removes such an entry)."""
    submit(lua, ("a", []), ("b", ["a"]))
    lua.pop(now=T0 + 1)
    fail(lua, f"{RUN}:a", T0 + 2)
    lua.put("x", now=T0 + 3)
    lua.raw("log", "x", "noted", now=T0 + 3)  # x-history: the key of a list
    doc = read(lua)
    listed = json.loads(lua.raw("runs.statuses", now=T0 + 100))
    lua.r.rpush(lua.key(f"run:{RUN}-jobs"), *NOT_JIDS)
    assert read(lua) == doc
    assert json.loads(lua.raw("runs.statuses", now=T0 + 100)) == listed
    assert lua.raw("run.retry", RUN, now=T0 + 4) == 1
    assert [s["status"] for s in read(lua)["steps"]] == ["waiting", "waiting"]
    assert lua.raw("run.cancel", RUN, now=T0 + 5) == 2


def test_a_cache_hit_passes_by_entries_of_its_runs_job_list_that_are_not_jids(
    lua: Lua,
) -> None:
    """A step completed from the cache looks at its run's other jobs to complete them too: an
    entry there that is no jid, naming another key (a history list), is none of them."""
    lua.put("p")
    lua.pop(now=T0 + 1)
    assert (
        json.loads(lua.raw("cache.use", "p", "w1", "q", "k", 3600, 1, now=T0 + 1))["hit"] is False
    )
    lua.complete("p", now=T0 + 2, result='{"n": 1}')
    submit(lua, ("a", []), ("b", ["a"]), now=T0 + 3)
    assert lua.pop_jids(now=T0 + 4) == [f"{RUN}:a"]
    lua.raw("log", "p", "noted", now=T0 + 4)  # p-history: the key of a list
    lua.r.rpush(lua.key(f"run:{RUN}-jobs"), "p-history")
    used = json.loads(lua.raw("cache.use", f"{RUN}:a", "w1", "q", "k", 3600, 1, now=T0 + 5))
    assert used["hit"] is True
    assert [s["status"] for s in read(lua)["steps"]] == ["cached", "waiting"]


def test_a_buried_job_blocks_the_run_everywhere(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    lua.raw("bury", f"{RUN}:a", "admin", now=T0 + 1)
    doc = read(lua)
    assert doc["status"] == "blocked"
    assert steps(doc)["a"]["actions"] == ["kick"]
    assert json.loads(lua.raw("runs.statuses", now=T0 + 100))[0]["status"] == "blocked"


def test_kick_jobs_of_a_buried_step_makes_the_run_running_again(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    lua.raw("bury", f"{RUN}:a", "admin", now=T0 + 1)
    job = json.loads(lua.raw("run.job", RUN, f"{RUN}:a", now=T0 + 2))
    assert job["actions"] == ["kick"]
    assert lua("kick.jobs", f"{RUN}:a", now=T0 + 2) == [f"{RUN}:a"]
    doc = read(lua)
    assert doc["status"] == "running"
    assert steps(doc)["a"]["status"] == "waiting" and not steps(doc)["a"]["actions"]  # {}: none
    assert steps(doc)["a"]["counts"] == {"waiting": 1}
    assert json.loads(lua.raw("runs.statuses", now=T0 + 100))[0]["status"] == "running"
    assert lua.pop_jids(now=T0 + 3) == [f"{RUN}:a"]


def test_retry_of_a_completed_job_is_refused_and_changes_nothing(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    with assert_unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua.raw("run.retry", RUN, f"{RUN}:a", now=T0 + 3)
    assert "job r@1:a has status success" in str(refused.value)
    assert "allowed: none" in str(refused.value)
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="step a has status success"):
        lua.raw("run.retry", RUN, "a", now=T0 + 3)
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="run r@1 has status running"):
        lua.raw("run.retry", RUN, now=T0 + 3)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="no step or job"):
        lua.raw("run.retry", RUN, "nope", now=T0 + 3)


def test_retry_of_an_awaiting_job_is_refused(lua: Lua) -> None:
    wait = {"signal": "go", "timeout": None, "on_timeout": "fail", "outputs": []}
    submit(lua, ("gate", []), ("after", ["gate"]), gate={"wait": wait})
    doc = read(lua)
    assert steps(doc)["gate"]["status"] == "awaiting"
    assert steps(doc)["gate"]["actions"] == ["signal", "approve"]
    with assert_unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua.raw("run.retry", RUN, f"{RUN}:gate", now=T0 + 3)
    said = str(refused.value)
    assert "has status awaiting" in said and "allowed: signal, approve" in said


def test_cancel_of_a_finished_run_is_refused(lua: Lua) -> None:
    submit(lua, ("a", []))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    doc = read(lua)
    assert doc["status"] == "succeeded" and doc["actions"] == ["rerun"]
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="run r@1 has status succeeded"):
        lua.raw("run.cancel", RUN, now=T0 + 3)


def test_rerun_downstream_counts_attempts_on_and_keeps_earlier_logs(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]), ("c", []))
    for jid in ("a", "c", "b"):
        assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:{jid}"]
        lua.raw("log.append", f"{RUN}:{jid}", 1, 0, 1, T0 + 1, "stdout", "", f"{jid} 1", now=T0 + 1)
        lua.complete(f"{RUN}:{jid}", now=T0 + 2, result=json.dumps({"n": 1}))
    assert read(lua)["status"] == "succeeded"
    assert lua.raw("run.rerun", RUN, "a", 1, now=T0 + 3) == 2
    doc = read(lua, now=T0 + 3)
    assert doc["status"] == "running"
    by = steps(doc)
    assert (by["a"]["status"], by["b"]["status"], by["c"]["status"]) == (
        "waiting",
        "waiting",
        "success",
    )
    assert by["a"]["attempts"] == 1 and as_list(by["c"]["actions"]) == []
    assert lua.pop_jids(now=T0 + 4) == [f"{RUN}:a"]
    # the job's `runs` counted on: its pop named attempt 2, and the worker logs as that
    assert lua.r.hget(lua.key(f"j:{RUN}:a"), "runs") == "2"
    lua.raw("log.append", f"{RUN}:a", 2, 0, 1, T0 + 4, "stdout", "", "a 2", now=T0 + 4)
    lua.complete(f"{RUN}:a", now=T0 + 5)
    assert steps(read(lua, now=T0 + 5))["a"]["attempts"] == 2
    first = json.loads(lua.raw("log.get", f"{RUN}:a", 1, now=T0 + 6))
    second = json.loads(lua.raw("log.get", f"{RUN}:a", 2, now=T0 + 6))
    assert [line["m"] for line in first["lines"]] == ["a 1"]
    assert [line["m"] for line in second["lines"]] == ["a 2"]
    kept = json.loads(lua.r.hget(lua.key(f"j:{RUN}:a"), "attempt:1"))
    assert kept["status"] == "success" and kept["result"] == {"n": 1}


def test_rerun_of_a_running_run_or_unknown_step_is_refused(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]))
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="run r@1 has status running"):
        lua.raw("run.rerun", RUN, "a", now=T0 + 1)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="no step zz"):
        lua.raw("run.rerun", RUN, "zz", now=T0 + 1)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="downstream"):
        lua.raw("run.rerun", RUN, "a", "yes", now=T0 + 1)


def test_items_are_paged(lua: Lua) -> None:
    jobs = [{"jid": f"{RUN}:m[{i}]", "queue": "q", "klass": "K", "data": "{}"} for i in range(25)]
    lua.raw("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(jobs), now=T0)
    doc = read(lua, 10)
    step = steps(doc)["m"]
    assert step["total"] == 25 and len(step["jobs"]) == 10 and step["next"] == 10
    page = steps(read(lua, 10, json.dumps({"m": 20})))["m"]
    assert [j["jid"] for j in page["jobs"]] == [f"{RUN}:m[{i}]" for i in range(20, 25)]
    assert page["next"] is None


def test_the_vocabulary_is_the_engines() -> None:
    """flows.runs.statuses holds the engine's words, in the engine's precedence order."""
    text = (Path(__file__).parents[2] / "lua" / "include" / "run_state.lua").read_text()

    def words(name: str) -> list[str]:
        start = text.index(f"RunState.{name} = {{")
        body = text[text.index("{", start) + 1 : text.index("}", start)]
        return [w.strip().strip("'") for w in body.replace("\n", " ").split(",") if w.strip()]

    assert words("RUN_STATUSES") == list(statuses.RUN_STATUSES)
    assert words("STEP_STATUSES") == list(statuses.STEP_STATUSES)
    assert words("ACTIONS") == list(statuses.ACTIONS)


def test_the_docs_table_is_the_vocabulary() -> None:
    """docs/pages/statuses.md lists each word with its rule as flows.runs.statuses holds them."""
    page = (Path(__file__).parents[2] / "docs" / "pages" / "statuses.md").read_text()
    for rules, order in (
        (statuses.RUN_RULES, statuses.RUN_STATUSES),
        (statuses.STEP_RULES, statuses.STEP_STATUSES),
        (statuses.ACTION_RULES, statuses.ACTIONS),
    ):
        assert list(rules) == sorted(rules, key=list(order).index) or set(rules) == set(order)
        rows = [line for line in page.splitlines() if line.startswith("| `")]
        for word in order:
            assert f"| `{word}` | {rules[word]} |" in rows, word


def test_every_word_has_a_style_a_symbol_and_a_badge_colour() -> None:
    css = (Path(__file__).parents[2] / "flows" / "ui" / "static" / "app.css").read_text()
    for word in {*statuses.RUN_STATUSES, *statuses.STEP_STATUSES}:
        assert word in statuses.STYLES and word in statuses.SYMBOLS, word
        assert f".st-{word}" in css, word


def test_a_canceled_run_is_retried_from_what_its_jobs_kept(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]), ("c", ["b"]))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    assert lua.raw("run.cancel", RUN, now=T0 + 3) == 2
    doc = read(lua, now=T0 + 4)
    assert doc["status"] == "canceled" and doc["actions"] == ["retry", "rerun"]
    assert steps(doc)["b"]["actions"] == ["retry"] and steps(doc)["b"]["status"] == "canceled"
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="run r@1 has status canceled"):
        lua.raw("run.cancel", RUN, now=T0 + 4)
    assert lua.raw("run.retry", RUN, now=T0 + 5) == 2
    doc = read(lua, now=T0 + 6)
    assert doc["status"] == "running"
    by = steps(doc)
    assert (by["a"]["status"], by["b"]["status"], by["c"]["status"]) == (
        "success",
        "waiting",
        "waiting",
    )
    assert lua.r.exists(lua.key(f"run-canceled:{RUN}")) == 0
    assert lua.pop_jids(now=T0 + 7) == [f"{RUN}:b"]
    lua.complete(f"{RUN}:b", now=T0 + 8)
    assert lua.pop_jids(now=T0 + 9) == [f"{RUN}:c"]  # its need on b came back with it
    lua.complete(f"{RUN}:c", now=T0 + 10)
    assert read(lua, now=T0 + 11)["status"] == "succeeded"


@pytest.mark.parametrize("how", ["cancel", "delete"])
def test_a_job_removed_alone_leaves_its_run_canceled_not_succeeded(lua: Lua, how: str) -> None:
    """A run whose job was canceled (or deleted) before it completed cannot say it succeeded:
    it says canceled once nothing else can progress, and a retry puts the job back."""
    submit(lua, ("a", []), ("b", []))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    assert lua.raw(how, f"{RUN}:b", now=T0 + 3) == [f"{RUN}:b"]
    doc = read(lua, now=T0 + 4)
    assert doc["status"] == "canceled" and doc["actions"] == ["retry", "rerun"]
    by = steps(doc)
    assert (by["a"]["status"], by["b"]["status"]) == ("success", "canceled")
    assert by["b"]["actions"] == ["retry"]
    listed = json.loads(lua.raw("runs.statuses", now=T0 + 4))
    assert listed[0]["status"] == "canceled"
    assert lua.raw("run.retry", RUN, now=T0 + 5) == 1
    assert lua.pop_jids(now=T0 + 6) == [f"{RUN}:b"]
    lua.complete(f"{RUN}:b", now=T0 + 7)
    assert read(lua, now=T0 + 8)["status"] == "succeeded"


def test_a_job_canceled_alone_while_others_run_leaves_the_run_running(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", []))
    assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:a"]
    lua.raw("cancel", f"{RUN}:b", now=T0 + 2)
    assert read(lua, now=T0 + 3)["status"] == "running"
    lua.complete(f"{RUN}:a", now=T0 + 4)
    assert read(lua, now=T0 + 5)["status"] == "canceled"


def test_cancel_of_a_completed_job_of_a_run_is_refused_and_changes_nothing(lua: Lua) -> None:
    """A completed job is its run's result (outputs, what a re-run starts from): a cancel stops
    what has not ended, so it leaves that job alone and says what does remove it."""
    submit(lua, ("a", []), ("b", []))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    with assert_unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua.raw("cancel", f"{RUN}:b", f"{RUN}:a", now=T0 + 3)  # b is not canceled either
    assert str(refused.value).endswith(
        "job r@1:a of run r@1 has completed: cancel stops what has not ended (flows rerun runs "
        "it again, flows delete removes it for good)"
    )
    assert steps(read(lua))["a"]["status"] == "success"
    # A completed job of no run too: a cancel stops what has not ended.
    lua.put("plain", queue="other")
    assert lua.pop_jids("other", now=T0 + 4) == ["plain"]
    lua.complete("plain", queue="other", now=T0 + 5)
    with assert_unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua.raw("cancel", "plain", now=T0 + 6)
    assert str(refused.value).endswith(
        "job plain has completed: cancel stops what has not ended (flows delete removes it for "
        "good)"
    )
    assert lua.raw("delete", "plain", now=T0 + 7) is not None
    assert lua.r.exists(lua.key("j:plain")) == 0


def test_the_qless_dialect_cancels_a_completed_job_as_qless_does(redis_client: redis.Redis) -> None:
    """qless's cancel removes a completed job (its clients and tests rely on it)."""
    engine = Engine(redis_client)
    engine.call("put", "w", "q", "plain", "K", "{}", 0, now=T0)
    engine.call("pop", "q", "w", 1, now=T0 + 1)
    engine.call("complete", "plain", "w", "q", "{}", now=T0 + 2)
    sha = redis_client.script_load(qless_bundle())
    assert redis_client.evalsha(sha, 0, "cancel", T0 + 3, "plain") == ["plain"]
    assert redis_client.exists("ql:j:plain") == 0


def test_deleting_a_completed_job_of_a_run_is_history_gone_early(lua: Lua) -> None:
    """As retention removes it: the run keeps what it was."""
    submit(lua, ("a", []))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    lua.raw("delete", f"{RUN}:a", now=T0 + 3)
    doc = read(lua, now=T0 + 4)
    assert doc["status"] == "expired" and steps(doc)["a"]["status"] == "gone"
    assert lua.r.exists(lua.key(f"run-canceled:{RUN}")) == 0


def test_a_retry_runs_a_rearmed_step_before_the_failed_step_that_needs_it(lua: Lua) -> None:
    """pre fails; mid (all_done) runs on the failure; post, which needs mid, fails. A retry puts
    pre and post back and re-arms mid: post runs only after mid has run again."""
    submit(lua, ("pre", []), ("mid", ["pre"]), ("post", ["mid"]), mid={"trigger": "all_done"})
    assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:pre"]
    fail(lua, f"{RUN}:pre", T0 + 2)
    assert lua.pop_jids(now=T0 + 3) == [f"{RUN}:mid"]
    lua.complete(f"{RUN}:mid", now=T0 + 4)
    assert lua.pop_jids(now=T0 + 5) == [f"{RUN}:post"]
    fail(lua, f"{RUN}:post", T0 + 6)
    assert lua.raw("run.retry", RUN, now=T0 + 7) == 2
    by = steps(read(lua, now=T0 + 8))
    assert (by["pre"]["status"], by["mid"]["status"], by["post"]["status"]) == (
        "waiting",
        "waiting",
        "waiting",
    )
    order = []
    for moment in range(9, 12):
        [jid] = lua.pop_jids(count=3, now=T0 + moment)
        order.append(jid.split(":")[1])
        lua.complete(jid, now=T0 + moment)
    assert order == ["pre", "mid", "post"]
    assert read(lua, now=T0 + 12)["status"] == "succeeded"


def test_a_retry_asks_again_for_an_approval_the_failure_let_through(lua: Lua) -> None:
    """A wait step (all_done) approved after pre failed is re-armed with pre: the step after it
    waits for the new approval, never runs on the old one."""
    wait = {"trigger": "all_done", "wait": {"signal": "approve"}}
    submit(lua, ("pre", []), ("approve", ["pre"]), ("ship", ["approve"]), approve=wait)
    lua.pop(now=T0 + 1)
    fail(lua, f"{RUN}:pre", T0 + 2)
    assert lua.raw("wait.signal", f"{RUN}:approve", "{}", "ada", now=T0 + 3) == "complete"
    assert lua.pop_jids(now=T0 + 4) == [f"{RUN}:ship"]
    fail(lua, f"{RUN}:ship", T0 + 5)
    lua.raw("run.retry", RUN, now=T0 + 6)
    assert lua.pop_jids(count=3, now=T0 + 7) == [f"{RUN}:pre"]
    lua.complete(f"{RUN}:pre", now=T0 + 8)
    assert lua.pop_jids(count=3, now=T0 + 9) == []  # ship waits for the approval
    by = steps(read(lua, now=T0 + 9))
    assert (by["approve"]["status"], by["ship"]["status"]) == ("awaiting", "waiting")
    assert lua.raw("wait.signal", f"{RUN}:approve", "{}", "ada", now=T0 + 10) == "complete"
    assert lua.pop_jids(count=3, now=T0 + 11) == [f"{RUN}:ship"]


def test_a_rerun_downstream_of_a_canceled_run_puts_its_canceled_jobs_back(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", ["a"]), ("c", ["b"]))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    lua.raw("run.cancel", RUN, now=T0 + 3)
    assert lua.raw("run.rerun", RUN, "a", 1, now=T0 + 4) == 3
    by = steps(read(lua, now=T0 + 5))
    assert (by["a"]["status"], by["b"]["status"], by["c"]["status"]) == (
        "waiting",
        "waiting",
        "waiting",
    )
    assert lua.r.exists(lua.key(f"run-canceled:{RUN}")) == 0
    for moment, step in ((6, "a"), (7, "b"), (8, "c")):
        assert lua.pop_jids(count=3, now=T0 + moment) == [f"{RUN}:{step}"]
        lua.complete(f"{RUN}:{step}", now=T0 + moment)
    assert read(lua, now=T0 + 9)["status"] == "succeeded"


def test_a_rerun_of_one_step_leaves_a_canceled_run_canceled(lua: Lua) -> None:
    """The jobs canceled with it stay canceled: the run says so, and allows their retry."""
    submit(lua, ("a", []), ("b", ["a"]))
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    lua.raw("run.cancel", RUN, now=T0 + 3)
    assert lua.raw("run.rerun", RUN, "a", now=T0 + 4) == 1
    lua.pop(now=T0 + 5)
    lua.complete(f"{RUN}:a", now=T0 + 6)
    doc = read(lua, now=T0 + 7)
    assert doc["status"] == "canceled" and steps(doc)["b"]["status"] == "canceled"
    assert "retry" in doc["actions"]
    # A rerun of the canceled step itself is refused with what the read allows.
    with assert_unchanged(lua.r), pytest.raises(WrongState, match=r"allowed: retry"):
        lua.raw("run.rerun", RUN, "b", "", f"{RUN}:b", now=T0 + 8)


def test_a_retry_of_one_step_leaves_the_others_canceled(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", []))
    lua.raw("run.cancel", RUN, now=T0 + 1)
    assert lua.raw("run.retry", RUN, "a", now=T0 + 2) == 1
    lua.pop(now=T0 + 3)
    lua.complete(f"{RUN}:a", now=T0 + 4)
    doc = read(lua, now=T0 + 5)
    assert doc["status"] == "canceled" and steps(doc)["b"]["status"] == "canceled"


@pytest.mark.parametrize(
    ("wait", "actions"),
    [
        ({}, ["signal", "approve"]),
        ({"outputs": ["note"]}, ["signal", "approve"]),
        ({"outputs": ["note", "approved_by"]}, ["signal", "approve"]),
        ({"outputs": ["note", "ticket"]}, ["signal"]),
    ],
)
def test_a_wait_declaring_outputs_an_approval_lacks_allows_a_signal_not_an_approval(
    lua: Lua, wait: dict[str, Any], actions: list[str]
) -> None:
    """An approval is a signal with a note and who approved: a wait that declares any other
    output refuses it. Its job, which no job needs, can be canceled alone too."""
    submit(lua, ("gate", []), gate={"wait": {"signal": "go", **wait}})
    for limit in (0, 10):  # listed or not, the step's actions are the same
        step = steps(read(lua, limit))["gate"]
        assert step["status"] == "awaiting" and step["actions"] == actions
    [job] = steps(read(lua, 10))["gate"]["jobs"]
    assert job["actions"] == ["cancel", *actions]


def job_view(lua: Lua, jid: str, now: float = T0 + 100) -> Any:
    """`run.job`'s status and actions; its `step` checked against the run's read (no jobs)."""
    reply = lua.raw("run.job", RUN, jid, now=now)
    if reply is None:
        return None
    view = json.loads(reply)
    name = jid[len(RUN) + 1 :].split("[", 1)[0]
    [step] = [s for s in read(lua, 0, now=now)["steps"] if s["step"] == name]
    assert view.pop("step") == step
    return view


def test_one_job_as_the_decider_sees_it(lua: Lua) -> None:
    """`run.job`: the status and actions the run's read gives the job, without the read."""
    submit(lua, ("a", []), ("b", []), ("gate", ["a"]), gate={"wait": {"signal": "go"}})
    assert job_view(lua, f"{RUN}:a") == {"status": "waiting", "actions": {}}  # gate needs it
    assert job_view(lua, f"{RUN}:b") == {"status": "waiting", "actions": ["cancel"]}
    lua.pop(now=T0 + 1)
    lua.complete(f"{RUN}:a", now=T0 + 2)
    lua.pop(now=T0 + 3)
    fail(lua, f"{RUN}:b", T0 + 4)
    assert job_view(lua, f"{RUN}:gate") == {
        "status": "awaiting",
        "actions": ["cancel", "signal", "approve"],
    }
    assert job_view(lua, f"{RUN}:a") == {"status": "success", "actions": {}}  # still running
    assert job_view(lua, f"{RUN}:b") == {"status": "failed", "actions": ["retry"]}
    lua.raw("run.cancel", RUN, now=T0 + 5)
    assert job_view(lua, f"{RUN}:gate") == {"status": "canceled", "actions": ["retry"]}
    assert job_view(lua, f"{RUN}:a") == {"status": "success", "actions": ["rerun"]}
    assert job_view(lua, f"{RUN}:b") == {"status": "failed", "actions": ["retry", "rerun"]}
    by = steps(read(lua))
    for step in ("a", "b", "gate"):
        [job] = by[step]["jobs"]
        assert job_view(lua, job["jid"]) == {
            "status": job["status"],
            "actions": job["actions"] or {},
        }
    assert lua.raw("run.job", "nope", f"{RUN}:a", now=T0) is None
    assert json.loads(lua.raw("run.job", RUN, f"{RUN}:nope", now=T0 + 6))["step"] is None


def test_a_retry_of_one_step_leaves_the_hooks_of_another_failure_as_they_ran(lua: Lua) -> None:
    """b1 and b2 fail, and the all_done hook after each ran. Retrying b1 alone re-arms its hook
    only: b2 stays failed, so its hook keeps its success instead of waiting for b2 forever."""
    hook = {"trigger": "all_done"}
    submit(lua, ("b1", []), ("b2", []), ("h1", ["b1"]), ("h2", ["b2"]), h1=hook, h2=hook)
    assert lua.pop_jids(count=2, now=T0 + 1) == [f"{RUN}:b1", f"{RUN}:b2"]
    fail(lua, f"{RUN}:b1", T0 + 2)
    fail(lua, f"{RUN}:b2", T0 + 2)
    assert lua.pop_jids(count=2, now=T0 + 3) == [f"{RUN}:h1", f"{RUN}:h2"]
    lua.complete(f"{RUN}:h1", now=T0 + 4)
    lua.complete(f"{RUN}:h2", now=T0 + 4)
    assert lua.raw("run.retry", RUN, "b1", now=T0 + 5) == 1
    by = steps(read(lua, now=T0 + 6))
    assert {name: by[name]["status"] for name in ("b1", "b2", "h1", "h2")} == {
        "b1": "waiting",
        "b2": "failed",
        "h1": "waiting",
        "h2": "success",
    }
    assert lua.state(f"{RUN}:h2") == "complete"


def _run_going_under_a_cancel(lua: Lua) -> None:
    submit(lua, ("a", []), ("b", []))
    assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:a"]
    lua.raw("cancel", f"{RUN}:b", now=T0 + 2)  # marks the run canceled; a still runs


def _run_ended(lua: Lua) -> None:
    submit(lua, ("a", []))
    assert lua.pop_jids(now=T0 + 1) == [f"{RUN}:a"]
    lua.complete(f"{RUN}:a", now=T0 + 2)


def _run_without_counts(lua: Lua) -> None:
    submit(lua, ("a", []))
    lua.r.delete(lua.key(f"run-counts:{RUN}"))  # a run from before counts: scanned


def _run_deleted_under_its_counts(lua: Lua) -> None:
    submit(lua, ("a", []))
    lua.r.delete(lua.key(f"run:{RUN}"))  # an outside writer: the run is missing


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        (lambda lua: submit(lua, ("a", [])), "running"),
        (_run_going_under_a_cancel, "running"),
        (_run_ended, "succeeded"),
        (_run_without_counts, "running"),
        (_run_deleted_under_its_counts, None),
    ],
    ids=["waiting", "canceled-one-going", "ended", "no-counts", "deleted-under-counts"],
)
def test_a_run_is_active_exactly_when_its_status_is_running(
    lua: Lua, setup: Any, status: str | None
) -> None:
    """max_active_runs (and a schedule's overlap) asks only whether a run is running: the same
    answer as the whole decision, however the run's counts stand (an ended run answers from
    three of them, a run they say goes is looked up, one without counts is scanned)."""
    setup(lua)
    reply = lua.raw("run.read", RUN, now=T0 + 3)
    assert (json.loads(reply)["status"] if reply else None) == status
    limited = json.dumps({"flow": "f", "max_active_runs": 1})
    jobs = json.dumps([{"jid": "r@2:a", "queue": "q", "klass": "K", "data": "{}"}])
    if status == "running":
        with pytest.raises(WrongState, match=f"active: {RUN}"):
            lua.raw("flow.submit", "r@2", limited, jobs, now=T0 + 4)
    else:
        assert lua.raw("flow.submit", "r@2", limited, jobs, now=T0 + 4) == "submitted"
