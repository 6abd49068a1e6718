"""Fan-out from a step's output (include/fanout.lua): the template job becomes one job per item
in the call that completes its producer, or fails in ``fanout-invalid``; run.retry resumes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from lua_support import T0, Lua, calls, unchanged

from scheduler.engine import limits
from scheduler.engine.errors import InvalidArgument, LockLost, WrongState

RUN = "f@r"
LIST, STEP, JOIN, FINALLY = f"{RUN}:list", f"{RUN}:process", f"{RUN}:join", f"{RUN}:finally"


def items(n: int) -> list[str]:
    return [f"{STEP}[{i}]" for i in range(n)]


def submit(lua: Lua, *, extra: list[dict[str, Any]] | None = None, **template: Any) -> None:
    """list -> process (fan-out of list's `files`, max 2 at once) -> join, and a finally hook."""
    specs: list[dict[str, Any]] = [
        {"jid": LIST},
        *(extra or []),
        {
            "jid": STEP,
            "depends": [LIST, *(job["jid"] for job in extra or [])],
            "data": json.dumps({"name": "${{ f }}", "_flows": {"run": RUN, "step": "process"}}),
            "tags": ["nightly"],
            "concurrency_key": f"{RUN}:process",
            "concurrency_limit": 2,
            "fanout": {"from": LIST, "output": "files"},
            **template,
        },
        {"jid": JOIN, "depends": [STEP]},
        {"jid": FINALLY, "depends": [LIST, STEP, JOIN], "trigger": "all_done"},
    ]
    specs = [
        {"queue": "q", "klass": "K", "data": "{}", "trigger": "all_success", **spec}
        for spec in specs
    ]
    reply = lua("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
    assert reply == "submitted"


def produce(lua: Lua, result: Any, now: float = T0 + 1, jid: str = LIST) -> Any:
    assert jid in lua.pop_jids("q", "w1", count=1, now=now)
    return lua.complete(jid, now=now, result=json.dumps(result))


def run_jobs(lua: Lua) -> list[str]:
    run = json.loads(lua("run.get", RUN, now=T0))
    return list(run["jids"])


def test_the_template_becomes_one_job_per_item_and_dependents_wait_for_all(lua: Lua) -> None:
    submit(lua)
    assert lua.state(STEP) == "depends"
    assert produce(lua, {"files": ["a.csv", "b.csv", "c.csv"]}) == "complete"
    assert lua.state(LIST) == "complete"
    assert lua.job(STEP) is None
    assert run_jobs(lua) == [LIST, *items(3), JOIN, FINALLY]
    assert json.loads(lua("run.get", RUN, now=T0))["jobs"] == 6
    for jid in items(3):
        job = lua.job(jid)
        assert job is not None and job["state"] == "waiting"
        assert json.loads(job["data"]) == {
            "name": "${{ f }}",
            "_flows": {"run": RUN, "step": "process"},
        }
        assert job["tags"] == ["nightly"]
        assert lua.r.hmget(lua.key(f"j:{jid}"), "ckey", "climit", "needs") == [
            f"{RUN}:process",
            "2",
            json.dumps([LIST]),
        ]
    for dependent in (JOIN, FINALLY):
        job = lua.job(dependent)
        assert job is not None
        assert set(job["dependencies"]) == set(items(3)) | (
            {JOIN} if dependent == FINALLY else set()
        )
    assert json.loads(lua.r.hget(lua.key(f"j:{FINALLY}"), "needs")) == [LIST, *items(3), JOIN]
    # max_parallel holds for the items: two of three start.
    assert sorted(lua.pop_jids("q", "w1", count=3, now=T0 + 2)) == items(2)
    for jid in items(2):
        lua.complete(jid, now=T0 + 3)
    assert lua.pop_jids("q", "w1", count=3, now=T0 + 4) == [f"{STEP}[2]"]
    assert lua.state(JOIN) == "depends"
    lua.complete(f"{STEP}[2]", now=T0 + 5)
    assert lua.state(JOIN) == "waiting"
    assert lua.state(FINALLY) == "depends"


def test_a_shell_step_gives_its_list_as_json_text(lua: Lua) -> None:
    submit(lua)
    produce(lua, {"files": '["a", "b"]'})
    assert run_jobs(lua) == [LIST, *items(2), JOIN, FINALLY]


def test_no_items_complete_the_step_with_an_empty_list(lua: Lua) -> None:
    submit(lua)
    produce(lua, {"files": []})
    job = lua.job(STEP)
    assert job is not None and job["state"] == "complete" and job["result"] in ("[]", [])
    assert "fanout" in lua.history(STEP)
    assert lua.state(JOIN) == "waiting"
    assert run_jobs(lua) == [LIST, STEP, JOIN, FINALLY]


def test_items_wait_for_the_templates_other_open_needs(lua: Lua) -> None:
    submit(lua, extra=[{"jid": f"{RUN}:other", "queue": "slow"}])
    produce(lua, {"files": ["x", "y"]})
    for jid in items(2):
        job = lua.job(jid)
        assert job is not None and job["state"] == "depends"
        assert job["dependencies"] == [f"{RUN}:other"]
    assert lua.pop_jids("slow", "w1", now=T0 + 2) == [f"{RUN}:other"]
    lua.complete(f"{RUN}:other", "w1", "slow", now=T0 + 2)
    assert {lua.state(jid) for jid in items(2)} == {"waiting"}


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ({"files": {"a": 1}}, 'output "files" is an object, not a list'),
        ({"files": 3}, 'output "files" is a number, not a list'),
        ({"files": "a.csv"}, 'output "files" is text that is not a JSON array'),
        ({"other": []}, 'the producer has no output "files"'),
        ([1, 2], 'the producer has no output "files"'),
        (
            {"files": list(range(limits.MAX_FANOUT_ITEMS + 1))},
            "10001 items, more than the limit of 10000",
        ),
    ],
    ids=["object", "number", "text", "missing", "not-an-object", "too-many"],
)
def test_an_output_that_is_not_a_list_fails_the_step_and_the_producer_completes(
    lua: Lua, result: Any, message: str
) -> None:
    submit(lua)
    assert produce(lua, result) == "complete"
    assert lua.state(LIST) == "complete"
    job = lua.job(STEP)
    assert job is not None and job["state"] == "failed"
    assert job["failure"]["group"] == "fanout-invalid"
    assert message in job["failure"]["message"]
    assert lua.state(JOIN) == "depends"  # blocked: upstream_failed
    assert lua.state(FINALLY) == "waiting"  # all_done runs after the failure
    assert run_jobs(lua) == [LIST, STEP, JOIN, FINALLY]
    # run.retry would expand it again from the same output, which is still refused: it puts
    # nothing back, says why, and changes nothing (it never runs as a job).
    with unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua("run.retry", RUN, now=T0 + 5)
    assert f"nothing put back: job {STEP} would fail again: foreach.items from {LIST}: " in str(
        refused.value
    )
    assert message in str(refused.value)
    job = lua.job(STEP, now=T0 + 5)
    assert job is not None and job["state"] == "failed"
    assert lua.waiting("q").count(STEP) == 0


def test_the_limit_is_the_same_number_in_python_and_lua(lua: Lua) -> None:
    submit(lua)
    produce(lua, {"files": list(range(limits.MAX_FANOUT_ITEMS))})
    assert len(run_jobs(lua)) == 3 + limits.MAX_FANOUT_ITEMS


@pytest.mark.parametrize("files", [["a"], {"a": 1}], ids=["list", "not-a-list"])
def test_a_refused_complete_expands_and_fails_nothing(lua: Lua, files: Any) -> None:
    submit(lua)
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    with unchanged(lua.r), pytest.raises(LockLost):
        lua.complete(LIST, "w2", now=T0 + 1, result=json.dumps({"files": files}))


def test_complete_many_expands_too(lua: Lua) -> None:
    submit(lua)
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    reply = lua("complete.many", "w1", LIST, "q", json.dumps({"files": [1, 2]}), now=T0 + 1)
    assert json.loads(reply) == ["complete"]
    assert run_jobs(lua) == [LIST, *items(2), JOIN, FINALLY]


def test_a_skipped_producer_skips_the_step(lua: Lua) -> None:
    submit(lua)
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    lua.complete(LIST, now=T0 + 1, skipped="if: false")
    job = lua.job(STEP)
    assert job is not None and job["state"] == "complete" and "skipped" in lua.history(STEP)
    assert lua.state(JOIN) == "complete"


def test_run_retry_runs_only_the_failed_items_again(lua: Lua) -> None:
    submit(lua)
    produce(lua, {"files": ["a", "b", "c"]})
    assert sorted(lua.pop_jids("q", "w1", count=2, now=T0 + 2)) == items(2)
    lua.complete(f"{STEP}[0]", now=T0 + 3)
    lua("fail.held", f"{STEP}[1]", "w1", "boom", "broke", now=T0 + 3)
    assert lua.pop_jids("q", "w1", now=T0 + 4) == [f"{STEP}[2]"]
    lua.complete(f"{STEP}[2]", now=T0 + 4)
    assert lua.pop_jids("q", "w1", now=T0 + 5) == [FINALLY]  # all_done: after the failure
    lua.complete(FINALLY, now=T0 + 5)
    assert lua("run.retry", RUN, now=T0 + 10) == 1
    assert [lua.state(jid, now=T0 + 10) for jid in items(3)] == ["complete", "waiting", "complete"]
    assert lua.state(FINALLY, now=T0 + 10) == "depends"  # re-armed: it needs the items again
    assert lua.pop_jids("q", "w1", now=T0 + 11) == [f"{STEP}[1]"]
    lua.complete(f"{STEP}[1]", now=T0 + 11)
    assert lua.state(JOIN, now=T0 + 11) == "waiting"
    assert run_jobs(lua) == [LIST, *items(3), JOIN, FINALLY]


@pytest.mark.parametrize(
    ("fanout", "message"),
    [
        ({"from": "f@r:elsewhere", "output": "files"}, "must be an earlier job of the run"),
        ({"from": LIST}, 'Arg "fanout.output" missing'),
        ("list", "fanout must be an object"),
    ],
    ids=["not-a-need", "no-output", "not-an-object"],
)
def test_submit_refuses_a_bad_fanout_spec(lua: Lua, fanout: Any, message: str) -> None:
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=message):
        submit(lua, fanout=fanout)


def test_a_reader_never_sees_a_step_half_expanded(lua: Lua) -> None:
    """Other connections read the run's jobs before the complete that expands the step, while
    it is in flight (sent, its reply not read yet) and after: they see the template or every
    item, never part of them. Before, a reader thread raced the complete and, on a loaded
    machine, could get no turn at all before it returned."""
    n = limits.MAX_FANOUT_ITEMS
    submit(lua)
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    reader = redis.Redis(connection_pool=lua.r.connection_pool)
    item_keys = [lua.key(f"j:{jid}") for jid in items(n)]
    seen: list[tuple[int, int]] = []

    def look() -> None:
        run = json.loads(lua.engine.call("run.get", RUN, now=T0 + 1))
        # One EXISTS over every item key is one atomic read.
        seen.append((len(run["jids"]), int(reader.exists(*item_keys))))

    def in_flight() -> None:
        for _ in range(3):
            look()

    look()
    pipeline = lua.engine.pipeline()
    result = json.dumps({"files": list(range(n))})
    pipeline.call("complete", LIST, "w1", "q", "{}", "result", result, now=T0 + 1)
    # The engine's own gap between a batch's send and its replies: these looks are sent while
    # the complete is in flight, on connections of their own.
    pipeline.meanwhile = in_flight
    assert pipeline.execute() == ["complete"]
    look()
    assert len(seen) == 5, "the looks in flight were not made"
    assert seen[0] == (4, 0)
    assert seen[-1] == (3 + n, n)
    # A look's two reads may fall on either side of the complete, each whole: (4, n).
    assert {length for length, _ in seen} <= {4, 3 + n}
    assert {count for _, count in seen} <= {0, n}


def test_a_signal_to_a_wait_that_feeds_a_fanout_expands_it_in_that_call(lua: Lua) -> None:
    gate = f"{RUN}:gate"
    specs = [
        {"jid": gate, "wait": {"signal": "files", "on_timeout": "fail"}},
        {"jid": STEP, "depends": [gate], "fanout": {"from": gate, "output": "files"}},
        {"jid": JOIN, "depends": [STEP]},
    ]
    specs = [
        {"queue": "q", "klass": "K", "data": "{}", "trigger": "all_success", **spec}
        for spec in specs
    ]
    assert lua("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(specs), now=T0) == (
        "submitted"
    )
    signal = json.dumps({"files": ["a", "b"]})
    assert lua("wait.signal", gate, signal, "ada", now=T0 + 1) == "complete"
    assert lua.job(STEP) is None
    assert run_jobs(lua) == [gate, *items(2), JOIN]
    assert [lua.state(jid) for jid in items(2)] == ["waiting", "waiting"]
    assert lua.state(JOIN) == "depends"


def test_each_item_is_written_once_needs_and_count_included(lua: Lua) -> None:
    """An item's put writes its needs and what its run counts it as in its one HSET: each item
    more costs the call one HSET and no read of the item back (HMGET)."""
    writes = []
    for count in (1, 4):
        for key in list(lua.r.scan_iter(match=lua.key("*"))):
            lua.r.delete(key)
        submit(lua)
        assert lua.pop_jids("q", "w1", count=1, now=T0 + 1) == [LIST]
        lua.r.config_resetstat()
        lua.complete(LIST, now=T0 + 1, result=json.dumps({"files": [str(i) for i in range(count)]}))
        writes.append(calls(lua, "hset", "hmget"))
        item = lua.r.hgetall(lua.key(f"j:{items(count)[-1]}"))
        assert item["needs"] == json.dumps([LIST]).replace(" ", "")
        assert item["counted"] == f"waiting {RUN}"
    assert writes[1]["hset"] - writes[0]["hset"] == 3
    assert writes[1].get("hmget", 0) == writes[0].get("hmget", 0)


def finish_all(lua: Lua, now: float) -> None:
    """Pop and complete every job the queue hands out, until none is left."""
    while jids := lua.pop_jids("q", "w1", count=10, now=now):
        for jid in jids:
            lua.complete(jid, now=now)


def rerun_list_with(lua: Lua, files: list[str]) -> None:
    """A finished run whose list gave three files, re-run from list with `files` this time."""
    submit(lua)
    produce(lua, {"files": ["a", "b", "c"]})
    finish_all(lua, T0 + 2)
    assert lua.state(JOIN, now=T0 + 2) == "complete"
    assert lua("run.rerun", RUN, "list", "1", now=T0 + 3) == 6
    produce(lua, {"files": files}, now=T0 + 4)


def test_a_rerun_whose_list_has_as_many_items_runs_the_same_items(lua: Lua) -> None:
    rerun_list_with(lua, ["x", "y", "z"])
    assert [lua.state(jid, now=T0 + 4) for jid in items(3)] == ["waiting"] * 3
    finish_all(lua, T0 + 5)
    assert lua.state(JOIN, now=T0 + 5) == "complete"
    assert run_jobs(lua) == [LIST, *items(3), JOIN, FINALLY]


@pytest.mark.parametrize(
    ("files", "told"),
    [
        (["x"], 'output "files" has 1 items now, but the step was expanded into 3'),
        (["w", "x", "y", "z"], 'output "files" has 4 items now, but the step was expanded into 3'),
        ("not a list", 'output "files" is text that is not a JSON array'),
    ],
    ids=["fewer", "more", "not-a-list"],
)
def test_a_rerun_whose_list_changed_length_fails_the_items_saying_so(
    lua: Lua, files: Any, told: str
) -> None:
    # Before: item i ran with item i of the new list, so a longer list lost its new items
    # without a word and a shorter one failed items past its end in a lookup error.
    rerun_list_with(lua, files)
    assert lua.state(LIST, now=T0 + 4) == "complete"
    for jid in items(3):
        job = lua.job(jid, now=T0 + 4)
        assert job is not None and job["state"] == "failed"
        assert job["failure"]["group"] == "fanout-invalid"
        assert told in job["failure"]["message"]
        assert f"foreach.items from {LIST}" in job["failure"]["message"]
    assert lua.pop_jids("q", "w1", count=10, now=T0 + 5) == [FINALLY]  # all_done: it runs
    assert lua.state(JOIN, now=T0 + 5) == "depends"
    assert run_jobs(lua) == [LIST, *items(3), JOIN, FINALLY]


def test_a_rerun_of_the_producer_alone_leaves_its_items_as_they_ran(lua: Lua) -> None:
    submit(lua)
    produce(lua, {"files": ["a", "b", "c"]})
    finish_all(lua, T0 + 2)
    assert lua("run.rerun", RUN, "list", now=T0 + 3) == 1
    produce(lua, {"files": ["x"]}, now=T0 + 4)
    assert [lua.state(jid, now=T0 + 4) for jid in items(3)] == ["complete"] * 3


def test_a_retry_of_items_whose_list_changed_length_puts_nothing_back_and_says_why(
    lua: Lua,
) -> None:
    rerun_list_with(lua, ["w", "x", "y", "z"])
    finish_all(lua, T0 + 5)  # the finally hook
    # Put back, items 0-2 would run with w, x, y and leave z out without a word: they stay
    # failed, and the retry says so rather than counting them as put back.
    with unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua("run.retry", RUN, now=T0 + 6)
    told = str(refused.value)
    assert f"nothing put back: job {STEP}[0] would fail again: foreach.items from {LIST}: " in told
    assert "has 4 items now" in told and "(and 2 more job(s) so)" in told
    for jid in items(3):
        job = lua.job(jid, now=T0 + 6)
        assert job is not None and job["state"] == "failed"
        assert "has 4 items now" in job["failure"]["message"]
    assert lua.pop_jids("q", "w1", count=10, now=T0 + 7) == []


def test_a_retry_counts_only_what_it_put_back_not_items_failing_again(lua: Lua) -> None:
    rerun_list_with(lua, ["w", "x", "y", "z"])
    finish_all(lua, T0 + 5)
    # Another failure of the run that a retry can put back: the finally hook's.
    lua("run.rerun", RUN, "finally", now=T0 + 6)
    assert lua.pop_jids("q", "w1", count=10, now=T0 + 7) == [FINALLY]
    lua("fail.held", FINALLY, "w1", "boom", "broke", now=T0 + 7)
    assert lua("run.retry", RUN, now=T0 + 8) == 1  # the hook; the items fail again
    assert lua.state(FINALLY, now=T0 + 8) == "waiting"
    for jid in items(3):
        job = lua.job(jid, now=T0 + 8)
        assert job is not None and job["state"] == "failed"
        assert "has 4 items now" in job["failure"]["message"]


def test_a_retry_of_items_whose_list_fits_again_puts_them_back(lua: Lua) -> None:
    rerun_list_with(lua, ["x"])
    assert lua.state(f"{STEP}[0]", now=T0 + 4) == "failed"
    lua.r.hset(lua.key(f"j:{LIST}"), "result", json.dumps({"files": ["x", "y", "z"]}))
    assert lua("run.retry", RUN, "process", now=T0 + 5) == 3
    assert [lua.state(jid, now=T0 + 5) for jid in items(3)] == ["waiting"] * 3


EMPTY = f"{RUN}:none"


def submit_empty(lua: Lua, **extra: Any) -> None:
    """list -> none (a foreach step with no items: `empty`) -> join, and a finally hook."""
    specs: list[dict[str, Any]] = [
        {"jid": LIST},
        {"jid": EMPTY, "depends": [LIST], "empty": True, **extra},
        {"jid": JOIN, "depends": [EMPTY]},
        {"jid": FINALLY, "depends": [LIST, EMPTY, JOIN], "trigger": "all_done"},
    ]
    specs = [
        {"queue": "q", "klass": "K", "data": "{}", "trigger": "all_success", **spec}
        for spec in specs
    ]
    reply = lua("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(specs), now=T0)
    assert reply == "submitted"


def test_an_empty_step_completes_as_a_fan_out_with_no_items_once_released(lua: Lua) -> None:
    submit_empty(lua)
    assert lua.state(EMPTY) == "depends"
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    lua.complete(LIST, now=T0 + 1)
    job = lua.job(EMPTY, now=T0 + 1)
    assert job is not None and job["state"] == "complete" and job["result"] in ("[]", [])
    assert lua.history(EMPTY, now=T0 + 1)[-1] == "fanout"
    assert lua.state(JOIN, now=T0 + 1) == "waiting"  # released in the same call
    assert lua.waiting("q").count(EMPTY) == 0


def test_an_empty_step_that_nothing_holds_back_completes_at_submit(lua: Lua) -> None:
    specs = [
        {"jid": EMPTY, "queue": "q", "klass": "K", "data": "{}", "empty": True},
        {"jid": JOIN, "queue": "q", "klass": "K", "data": "{}", "depends": [EMPTY]},
        {
            "jid": FINALLY,
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "depends": [EMPTY],
            "trigger": "one_failed",
        },
    ]
    assert lua("flow.submit", RUN, json.dumps({"flow": "f"}), json.dumps(specs), now=T0) == (
        "submitted"
    )
    assert lua.state(EMPTY) == "complete"
    assert lua.state(JOIN) == "waiting"
    # Settled by its completion, as after any complete: no need failed, so one_failed skips.
    assert lua.state(FINALLY) == "complete" and lua.history(FINALLY)[-1] == "skipped"


def test_an_empty_step_after_a_failure_is_held_back_and_a_retry_completes_it(lua: Lua) -> None:
    submit_empty(lua)
    assert lua.pop_jids("q", "w1", now=T0 + 1) == [LIST]
    lua("fail.held", LIST, "w1", "boom", "broke", now=T0 + 1)
    assert lua.state(EMPTY, now=T0 + 1) == "depends"  # upstream_failed, as a step of items
    assert lua.pop_jids("q", "w1", count=5, now=T0 + 2) == [FINALLY]
    lua.complete(FINALLY, now=T0 + 2)
    assert lua("run.retry", RUN, now=T0 + 3) == 1  # list (the hook waits again, uncounted)
    assert lua.pop_jids("q", "w1", now=T0 + 4) == [LIST]
    lua.complete(LIST, now=T0 + 4)
    assert lua.state(EMPTY, now=T0 + 4) == "complete"
    assert lua.state(JOIN, now=T0 + 4) == "waiting"


def _read_step(lua: Lua, step: str, now: float) -> tuple[str, int, dict[str, int], list[str]]:
    """A step as run.read says it: status, total, counts, the jids of its page."""
    read = json.loads(lua("run.read", RUN, now=now))
    [found] = [s for s in read["steps"] if s["step"] == step]
    return found["status"], found["total"], found["counts"], [j["jid"] for j in found["jobs"]]


@pytest.mark.parametrize("outcome", ["waiting", "upstream_failed", "skipped", "canceled"])
def test_an_empty_step_reads_0_items_before_it_completes_as_after(lua: Lua, outcome: str) -> None:
    """A foreach step with no items whose job has not completed (it waits for its need, which
    failed, was skipped, or its run was canceled) reads as 0 items in its status, as once it
    completed: no count of 1 job with none done. Its job still decides the run's status and
    actions (a run canceled keeps it for a retry). Before, only a completed one read so."""
    submit_empty(lua)
    now = T0 + 1
    assert lua.pop_jids("q", "w1", now=now) == [LIST]
    if outcome == "upstream_failed":
        lua("fail.held", LIST, "w1", "boom", "broke", now=now)
    elif outcome == "skipped":
        lua("complete", LIST, "w1", "q", "", "skipped", "if: false", now=now)
    elif outcome == "canceled":
        lua("run.cancel", RUN, now=now)
    assert _read_step(lua, "none", now) == (outcome, 0, {}, [])
    read = json.loads(lua("run.read", RUN, now=now))
    assert sum(read["counts"].values()) == 3  # list, join, finally: no job counted for none
    if outcome == "canceled":
        assert "retry" in read["actions"]  # the empty step's job is put back too
        lua("run.retry", RUN, now=now + 1)
        assert _read_step(lua, "none", now + 1) == ("waiting", 0, {}, [])
        assert lua.pop_jids("q", "w1", now=now + 1) == [LIST]
    if outcome in ("waiting", "canceled"):
        lua.complete(LIST, now=now + 2)
        assert _read_step(lua, "none", now + 2) == ("success", 0, {}, [])


def test_a_fan_out_with_no_items_waiting_for_another_need_reads_0_items(lua: Lua) -> None:
    """The producer output no items while the step's other need still runs: 0 items, waiting
    (before, 1 job, none done), then 0 items, success."""
    other = f"{RUN}:other"
    submit(lua, extra=[{"jid": other}])
    assert _read_step(lua, "process", T0) == ("waiting", 1, {"waiting": 1}, [STEP])  # not known
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == [LIST, other]
    lua.complete(LIST, now=T0 + 1, result=json.dumps({"files": []}))
    assert _read_step(lua, "process", T0 + 1) == ("waiting", 0, {}, [])
    lua.complete(other, now=T0 + 2)
    assert _read_step(lua, "process", T0 + 2) == ("success", 0, {}, [])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"empty": "yes"}, 'Arg "empty" must be true or false'),
        ({"fanout": {"from": LIST, "output": "files"}}, "a fan-out template's items"),
        ({"wait": {"signal": "go"}}, "a wait has items of no kind"),
    ],
    ids=["not-a-flag", "fanout", "wait"],
)
def test_a_bad_empty_step_is_refused_and_changes_nothing(
    lua: Lua, extra: dict[str, Any], message: str
) -> None:
    with unchanged(lua.r), pytest.raises(InvalidArgument) as refused:
        submit_empty(lua, **extra)
    assert message in str(refused.value)


def test_no_items_wait_for_the_steps_other_needs_as_the_items_would(lua: Lua) -> None:
    """Before, the template completed with the producer although another need still ran, and
    a failure of that need left the step a success."""
    other = f"{RUN}:other"
    submit(lua, extra=[{"jid": other}])
    assert lua.pop_jids("q", "w1", count=2, now=T0 + 1) == [LIST, other]
    lua.complete(LIST, now=T0 + 1, result=json.dumps({"files": []}))
    assert lua.state(STEP, now=T0 + 1) == "depends"  # other still runs
    lua("fail.held", other, "w1", "boom", "broke", now=T0 + 2)
    assert lua.state(STEP, now=T0 + 2) == "depends"  # upstream_failed, as items would be
    assert lua.state(JOIN, now=T0 + 2) == "depends"
    assert lua("run.retry", RUN, now=T0 + 3) == 1
    assert other in lua.pop_jids("q", "w1", count=5, now=T0 + 4)
    lua.complete(other, now=T0 + 4)
    job = lua.job(STEP, now=T0 + 4)
    assert job is not None and job["state"] == "complete" and job["result"] in ("[]", [])
    assert lua.history(STEP, now=T0 + 4)[-1] == "fanout"
    assert lua.state(JOIN, now=T0 + 4) == "waiting"
