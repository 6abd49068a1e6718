"""subflow.wait: a sub-flow step submits its child run and waits for it without a worker; the
child's end releases it, cancels cross both ways, and a retry of the parent retries the child."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import NOT_JIDS, T0, Lua

from scheduler.engine.errors import InvalidArgument, JobNotFound, LockLost, WrongState

PARENT = "p@1"
STEP = f"{PARENT}:child"
CHILD = f"{PARENT}.child"


def child_jobs(*steps: str, chain: bool = True) -> str:
    """The child run's jobs, each needing the one before it (with ``chain``)."""
    jobs: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        job: dict[str, Any] = {
            "jid": f"{CHILD}:{step}",
            "queue": "c",
            "klass": "K",
            "data": "{}",
            "trigger": "all_success",  # as a flow's jobs are put: their needs are kept
        }
        if chain and i:
            job["depends"] = [f"{CHILD}:{steps[i - 1]}"]
        jobs.append(job)
    return json.dumps(jobs)


def parent_run(lua: Lua, now: float = T0) -> None:
    """A parent run of one step (the sub-flow step) and a later step needing it."""
    jobs = [
        {"jid": STEP, "queue": "q", "klass": "flows.runtime.subflow.run", "data": "{}"},
        {"jid": f"{PARENT}:after", "queue": "q", "klass": "K", "data": "{}", "depends": [STEP]},
    ]
    lua.raw("flow.submit", PARENT, json.dumps({"flow": "p"}), json.dumps(jobs), now=now)


def wait(lua: Lua, *, now: float, worker: str = "w1", jobs: str | None = None) -> Any:
    args: list[Any] = [STEP, worker, "q", CHILD]
    if jobs is not None:
        args += [json.dumps({"flow": "c", "parent_run": PARENT, "parent_step": "child"}), jobs]
    return lua.raw("subflow.wait", *args, now=now)


def status(lua: Lua, run_id: str, now: float) -> str:
    runs = json.loads(lua.raw("runs.statuses", now=now))
    return next(r["status"] for r in runs if r["id"] == run_id)


def started(lua: Lua, *steps: str, now: float = T0 + 1) -> None:
    """The parent run submitted, its sub-flow step popped and waiting for a child of ``steps``."""
    parent_run(lua)
    assert lua.pop_jids(now=now) == [STEP]
    assert wait(lua, now=now, jobs=child_jobs(*steps)) == "waiting"


def test_the_step_submits_its_child_and_waits_for_it_without_a_worker(lua: Lua) -> None:
    started(lua, "a", "b")
    job = lua.job(STEP, now=T0 + 1)
    assert job is not None
    assert job["state"] == "depends" and job["worker"] == ""
    assert sorted(job["dependencies"]) == [f"{CHILD}:a", f"{CHILD}:b"]
    assert lua.history(STEP, now=T0 + 1)[-1] == "waiting"
    assert lua.r.zrange(lua.key("w:w1:jobs"), 0, -1) == []  # the worker holds nothing
    record = json.loads(lua.raw("run.get", CHILD, now=T0 + 1))
    assert record["parent_jid"] == STEP and record["parent_run"] == PARENT
    # The parent run is running while its child runs: the waiting step counts as active.
    assert status(lua, PARENT, T0 + 1) == "running"
    assert status(lua, CHILD, T0 + 1) == "running"

    # The child's last job done releases the step (in the same call), which reports success.
    assert lua.pop_jids("c", now=T0 + 2) == [f"{CHILD}:a"]
    lua.complete(f"{CHILD}:a", queue="c", now=T0 + 3)
    assert lua.state(STEP, now=T0 + 3) == "depends"
    assert lua.pop_jids("c", now=T0 + 4) == [f"{CHILD}:b"]
    lua.complete(f"{CHILD}:b", queue="c", now=T0 + 5)
    assert lua.state(STEP, now=T0 + 5) == "waiting"
    assert lua.pop_jids(worker="w2", now=T0 + 6) == [STEP]
    assert wait(lua, worker="w2", now=T0 + 6) == "succeeded"
    lua.complete(STEP, worker="w2", now=T0 + 7, result=json.dumps({"total": 3}))
    assert lua.state(f"{PARENT}:after", now=T0 + 7) == "waiting"


def test_entries_of_the_childs_job_list_that_are_not_jids_are_none_of_its_jobs(
    lua: Lua,
) -> None:
    """What an outside writer left in the child run's job list that is no jid (one naming
    another key: a history list) is no job the step waits for: it reports the child's end."""
    started(lua, "a")
    assert lua.pop_jids("c", now=T0 + 2) == [f"{CHILD}:a"]
    lua.complete(f"{CHILD}:a", queue="c", now=T0 + 3)
    lua.put("x", "elsewhere", now=T0 + 3)
    lua.raw("log", "x", "noted", now=T0 + 3)  # x-history: the key of a list
    lua.r.rpush(lua.key(f"run:{CHILD}-jobs"), *NOT_JIDS)
    assert lua.pop_jids(worker="w2", now=T0 + 4) == [STEP]
    assert wait(lua, worker="w2", now=T0 + 4) == "succeeded"


def test_a_failed_child_releases_the_step_which_then_reports_it(lua: Lua) -> None:
    started(lua, "a", "b")
    lua.pop("c", now=T0 + 2)
    lua("fail", f"{CHILD}:a", "w1", "boom", "it broke", now=T0 + 3)
    # b is held back by a for good: nothing of the child can run, the step is released.
    assert lua.state(f"{CHILD}:b", now=T0 + 3) == "depends"
    assert lua.state(STEP, now=T0 + 3) == "waiting"
    assert lua.pop_jids(now=T0 + 4) == [STEP]
    # The step was released by its child: it reports the failure, retrying nothing.
    with assert_unchanged(lua.r):
        assert wait(lua, now=T0 + 4) == "failed"
    assert lua.state(f"{CHILD}:a", now=T0 + 4) == "failed"


def test_retrying_the_parent_retries_the_child_and_waits_again(lua: Lua) -> None:
    started(lua, "a", "b")
    lua.pop("c", now=T0 + 2)
    lua("fail", f"{CHILD}:a", "w1", "boom", "it broke", now=T0 + 3)
    lua.pop(now=T0 + 4)
    assert wait(lua, now=T0 + 4) == "failed"
    lua("fail", STEP, "w1", "subflow-failed", "child failed", now=T0 + 5)
    assert status(lua, PARENT, T0 + 5) == "failed"

    assert lua("run.retry", PARENT, now=T0 + 6) == 1
    assert lua.pop_jids(now=T0 + 7) == [STEP]
    # Put again: the child's failed job goes back too, and the step waits for it again.
    assert wait(lua, now=T0 + 7) == "waiting"
    assert lua.state(f"{CHILD}:a", now=T0 + 7) == "waiting"
    assert sorted(lua.job(STEP, now=T0 + 7)["dependencies"]) == [f"{CHILD}:a", f"{CHILD}:b"]
    for step in ("a", "b"):
        lua.pop("c", now=T0 + 8)
        lua.complete(f"{CHILD}:{step}", queue="c", now=T0 + 9)
    assert lua.pop_jids(now=T0 + 10) == [STEP]
    assert wait(lua, now=T0 + 10) == "succeeded"


def test_a_step_whose_child_has_ended_reports_at_once(lua: Lua) -> None:
    started(lua, "a")
    lua.pop("c", now=T0 + 2)
    lua.complete(f"{CHILD}:a", queue="c", now=T0 + 3)
    # A worker died after the release: another one runs the step, which reports.
    assert lua.pop_jids(worker="w2", now=T0 + 4) == [STEP]
    assert wait(lua, worker="w2", now=T0 + 4) == "succeeded"
    assert lua.state(STEP, now=T0 + 4) == "running"


def test_canceling_the_parent_cancels_the_child(lua: Lua) -> None:
    started(lua, "a", "b")
    lua.pop("c", now=T0 + 2)  # a runs
    # The step and the job after it, and the child run's two: the one reply counts them all.
    assert lua("run.cancel", PARENT, now=T0 + 3) == 4
    assert lua.job(f"{CHILD}:a", now=T0 + 3) is None
    assert lua.job(f"{CHILD}:b", now=T0 + 3) is None
    assert status(lua, CHILD, T0 + 3) == "canceled"
    assert status(lua, PARENT, T0 + 3) == "canceled"
    # Nothing is left waiting or indexed.
    assert lua.zset("q:q-depends") == [] and lua.zset("q:c-locks") == []
    # The step still names its child run (its job, which held `child`, went with the cancel).
    steps = json.loads(lua.raw("run.read", PARENT, now=T0 + 3))["steps"]
    assert [(step["step"], step["child"]) for step in steps] == [("child", CHILD), ("after", None)]


def test_a_canceled_child_releases_its_step(lua: Lua) -> None:
    started(lua, "a", "b")
    assert lua("run.cancel", CHILD, now=T0 + 2) == 2
    assert lua.state(STEP, now=T0 + 2) == "waiting"
    lua.pop(now=T0 + 3)
    assert wait(lua, now=T0 + 3) == "canceled"


def test_a_schedule_style_cancel_of_the_parent_cancels_the_child_too(lua: Lua) -> None:
    # Runs.cancel (a schedule's cancel_running) is reached through schedule.fire; here through
    # the same helper run.cancel shares: the child is canceled, the step is gone.
    started(lua, "a")
    lua("run.cancel", PARENT, now=T0 + 2)
    assert json.loads(lua.raw("run.get", CHILD, now=T0 + 2))["canceled"]


def test_the_step_must_hold_its_job_and_a_run_must_be_its_child(lua: Lua) -> None:
    parent_run(lua)
    jobs = child_jobs("a")
    with assert_unchanged(lua.r), pytest.raises(WrongState):
        wait(lua, now=T0 + 1, jobs=jobs)  # not popped
    lua.pop(now=T0 + 1)
    with assert_unchanged(lua.r), pytest.raises(LockLost):
        wait(lua, worker="w2", now=T0 + 1, jobs=jobs)
    with assert_unchanged(lua.r), pytest.raises(JobNotFound, match="no run"):
        wait(lua, now=T0 + 1)  # no run to submit
    other = json.dumps({"flow": "c"})
    lua.raw("flow.submit", CHILD, other, child_jobs("a"), now=T0 + 1)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="not the child run"):
        wait(lua, now=T0 + 1, jobs=jobs)


@pytest.mark.parametrize(
    "args",
    [
        (STEP, "w1", "q"),
        (STEP, "w1", "q", f"{CHILD}-jobs"),
        (STEP, "w1", "q", CHILD, "{}"),
        (STEP, "w1", "q", CHILD, "{}", "[]"),
        (STEP, "w1", "q", CHILD, "[]", child_jobs("a")),
        (STEP, "w1", "q", CHILD, json.dumps({"flow": "c"}), json.dumps([{"jid": "x"}])),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(lua: Lua, args: tuple[Any, ...]) -> None:
    parent_run(lua)
    lua.pop(now=T0 + 1)
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="SubflowWait"):
        lua.raw("subflow.wait", *args, now=T0 + 1)


def test_a_worker_that_lost_the_step_cannot_submit_or_park_it(lua: Lua) -> None:
    parent_run(lua)
    lua.pop(now=T0 + 1)  # w1 dies: its lock runs out (60 s), w2 takes the step over
    assert lua.pop_jids(worker="w2", now=T0 + 100) == []  # w1 is told; the grace period
    assert lua.pop_jids(worker="w2", now=T0 + 111) == [STEP]
    with assert_unchanged(lua.r), pytest.raises(LockLost):
        wait(lua, now=T0 + 112, jobs=child_jobs("a"))
    assert wait(lua, worker="w2", now=T0 + 113, jobs=child_jobs("a")) == "waiting"
    assert json.loads(lua.raw("run.get", CHILD, now=T0 + 113))["jids"] == [f"{CHILD}:a"]


def test_a_waiting_step_is_where_its_state_says(lua: Lua) -> None:
    started(lua, "a", "b")
    report = json.loads(lua.raw("doctor.jobs", STEP, f"{CHILD}:a", now=T0 + 2))
    assert report["failed"] == [] and report["findings"] in ([], {}), report
    assert STEP in lua.zset("q:q-depends")


def test_rerunning_the_step_runs_its_child_again(lua: Lua) -> None:
    started(lua, "a", "b")
    for i, step in enumerate(("a", "b")):
        lua.pop("c", now=T0 + 2 + i)
        lua.complete(f"{CHILD}:{step}", queue="c", now=T0 + 2 + i)
    lua.pop(now=T0 + 4)
    assert wait(lua, now=T0 + 4) == "succeeded"
    lua.complete(STEP, now=T0 + 5, result=json.dumps({"total": 3}))
    lua.pop(now=T0 + 6)
    lua.complete(f"{PARENT}:after", now=T0 + 6)
    assert status(lua, PARENT, T0 + 6) == "succeeded"

    assert lua("run.rerun", PARENT, "child", now=T0 + 7) == 1
    assert lua.pop_jids(now=T0 + 8) == [STEP]
    # Re-run, the step runs its child again (every job of it) and waits for it, as a new
    # step would: it does not complete at once with what the child gave the first time.
    assert wait(lua, now=T0 + 8) == "waiting"
    assert lua.state(f"{CHILD}:a", now=T0 + 8) == "waiting"
    assert lua.state(f"{CHILD}:b", now=T0 + 8) == "depends"
    assert status(lua, CHILD, T0 + 8) == "running"
    job = lua.job(STEP, now=T0 + 8)
    assert job is not None
    assert sorted(job["dependencies"]) == [f"{CHILD}:a", f"{CHILD}:b"]
    for i, step in enumerate(("a", "b")):
        assert lua.pop_jids("c", now=T0 + 9 + i) == [f"{CHILD}:{step}"]
        lua.complete(f"{CHILD}:{step}", queue="c", now=T0 + 9 + i)
    assert lua.pop_jids(now=T0 + 11) == [STEP]
    # Released by its child, the step reports; it re-runs nothing a second time.
    with assert_unchanged(lua.r):
        assert wait(lua, now=T0 + 11) == "succeeded"


def test_a_retry_after_a_rerun_does_not_run_the_child_again(lua: Lua) -> None:
    started(lua, "a")
    lua.pop("c", now=T0 + 2)
    lua.complete(f"{CHILD}:a", queue="c", now=T0 + 2)
    lua.pop(now=T0 + 3)
    assert wait(lua, now=T0 + 3) == "succeeded"
    lua("fail", STEP, "w1", "boom", "the outputs did not fit", now=T0 + 4)
    assert lua("run.rerun", PARENT, "child", now=T0 + 5) == 1
    lua.pop(now=T0 + 6)
    lua("fail", STEP, "w1", "boom", "lost before it asked", now=T0 + 6)  # flag still set
    assert lua("run.retry", PARENT, now=T0 + 7) == 1
    lua.pop(now=T0 + 8)
    # The retry's put cleared the re-run: the child, which succeeded, is only reported.
    assert wait(lua, now=T0 + 8) == "succeeded"
    assert lua.state(f"{CHILD}:a", now=T0 + 8) == "complete"
