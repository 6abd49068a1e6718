"""Dependencies: chains, diamonds, failed and canceled dependencies, the depends command, cancel."""

from __future__ import annotations

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import HasDependents, InvalidArgument, JobNotFound, WrongState


def finish(lua: Lua, jid: str, now: float = T0, queue: str = "q") -> None:
    """Pop every job of the queue until `jid` comes out, complete it, put the others back."""
    popped = lua.pop_jids(queue, "w1", count=100, now=now)
    assert jid in popped, (jid, popped)
    assert lua.complete(jid, "w1", queue, now=now) == "complete"
    for other in popped:
        if other != jid:
            lua("retry", other, queue, "w1", now=now)


def test_chain_runs_in_order(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.put("c", depends=["b"])
    assert [lua.state(j) for j in "abc"] == ["waiting", "depends", "depends"]
    assert lua.zset("q:q-depends") == ["b", "c"]
    job_b = lua.job("b")
    assert job_b is not None and job_b["dependencies"] == ["a"]
    job_a = lua.job("a")
    assert job_a is not None and job_a["dependents"] == ["b"]
    assert lua.pop_jids(count=5) == ["a"]
    lua.complete("a", now=T0 + 1)
    assert lua.state("b") == "waiting" and lua.state("c") == "depends"
    assert lua.r.exists(lua.key("j:a-dependents"), lua.key("j:b-dependencies")) == 0
    assert lua.pop_jids(count=5, now=T0 + 2) == ["b"]
    lua.complete("b", now=T0 + 3)
    assert lua.pop_jids(count=5, now=T0 + 4) == ["c"]


def test_diamond_waits_for_both(lua: Lua) -> None:
    lua.put("top")
    lua.put("left", depends=["top"])
    lua.put("right", depends=["top"])
    lua.put("bottom", depends=["left", "right"])
    finish(lua, "top")
    assert sorted(lua.pop_jids(count=5)) == ["left", "right"]
    lua.complete("left")
    assert lua.state("bottom") == "depends"
    job = lua.job("bottom")
    assert job is not None and job["dependencies"] == ["right"]
    lua.complete("right")
    assert lua.state("bottom") == "waiting"


def test_released_dependents_keep_priority_order(lua: Lua) -> None:
    lua.put("a")
    lua.put("low", depends=["a"], priority=5)
    lua.put("high", depends=["a"], priority=-5)
    lua.put("plain")
    finish(lua, "a")
    assert lua.pop_jids(count=5) == ["high", "plain", "low"]


def test_satisfied_dependencies_do_not_block(lua: Lua) -> None:
    lua.put("a")
    finish(lua, "a")
    lua.put("b", depends=["a", "never-existed"])
    assert lua.state("b") == "waiting"
    job = lua.job("b")
    assert job is not None and job["dependencies"] == []


def test_delay_with_depends_starts_when_the_last_dependency_completes(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"], delay=30)
    assert lua.state("b") == "depends"
    lua.pop_jids(now=T0 + 100)
    lua.complete("a", now=T0 + 100)
    assert lua.state("b", now=T0 + 100) == "scheduled"
    assert lua.pop_jids(now=T0 + 129) == []
    assert lua.pop_jids(now=T0 + 130) == ["b"]


def test_a_failed_dependency_keeps_dependents_blocked_until_it_completes(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.pop_jids()
    lua("fail", "a", "w1", "boom", "it broke", now=T0 + 1)
    assert lua.state("b") == "depends"
    job = lua.job("a")
    assert job is not None and job["dependents"] == ["b"]
    assert lua("unfail", "q", "boom", now=T0 + 2) == 1
    finish(lua, "a", now=T0 + 3)
    assert lua.state("b") == "waiting"


def test_a_failed_dependent_leaves_its_dependencies(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua("fail", "b", "admin", "manual", "stop it", now=T0)
    job = lua.job("a")
    assert job is not None and job["dependents"] == []
    assert lua.zset("q:q-depends") == []


def test_cancel_of_a_dependency_is_refused_while_a_dependent_is_not_canceled(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.put("c", depends=["b"])
    with (
        unchanged(lua.r),
        pytest.raises(
            HasDependents, match=r"Cancel\(\): b is a dependent of a but is not mentioned"
        ),
    ):
        lua("cancel", "a", now=T0)
    with unchanged(lua.r), pytest.raises(HasDependents, match="c is a dependent of b"):
        lua("cancel", "a", "b", now=T0)
    assert lua("cancel", "a", "b", "c", now=T0) == ["a", "b", "c"]
    left = {key for key in lua.namespace_keys() if not key.startswith(lua.key("s:"))}  # statistics
    assert left <= {lua.key("queues"), lua.key("seq")}


def test_cancel_a_dependent_alone_releases_nothing_and_unlinks_it(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    assert lua("cancel", "b", now=T0) == ["b"]
    job = lua.job("a")
    assert job is not None and job["dependents"] == []
    finish(lua, "a")


def test_cancel_one_of_two_dependencies_keeps_the_dependent_waiting_for_the_other(lua: Lua) -> None:
    lua.put("a")
    lua.put("x")
    lua.put("b", depends=["a", "x"])
    lua("depends", "b", "off", "x", now=T0)
    lua("cancel", "x", now=T0)
    assert lua.state("b") == "depends"
    finish(lua, "a")
    assert lua.state("b") == "waiting"


def test_depends_on_adds_and_off_removes(lua: Lua) -> None:
    lua.put("a")
    lua.put("x")
    lua.put("b", depends=["a"])
    assert lua("depends", "b", "on", "x", "missing", now=T0) == 1
    job = lua.job("b")
    assert job is not None and sorted(job["dependencies"]) == ["a", "x"]
    job_x = lua.job("x")
    assert job_x is not None and job_x["dependents"] == ["b"]
    assert lua("depends", "b", "off", "a", now=T0) == 1
    assert lua.state("b") == "depends"
    assert lua("depends", "b", "off", "x", now=T0) == 1
    assert lua.state("b") == "waiting"
    job_x = lua.job("x")
    assert job_x is not None and job_x["dependents"] == []


def test_depends_off_all_releases(lua: Lua) -> None:
    lua.put("a")
    lua.put("x")
    lua.put("b", depends=["a", "x"], delay=5)
    assert lua("depends", "b", "off", "all", now=T0) == 1
    assert lua.state("b") == "scheduled"
    for jid in "ax":
        job = lua.job(jid)
        assert job is not None and job["dependents"] == []


def test_depends_refusals(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    with pytest.raises(WrongState, match=r"Depends\(\): Job a is not in the depends state"):
        lua("depends", "a", "on", "b", now=T0)
    with pytest.raises(JobNotFound, match=r"Depends\(\): Job z does not exist"):
        lua("depends", "z", "on", "a", now=T0)
    with pytest.raises(InvalidArgument, match="cannot depend on itself"):
        lua("depends", "b", "on", "b", now=T0)


def test_put_with_depends_replaces_dependencies(lua: Lua) -> None:
    lua.put("a")
    lua.put("x")
    lua.put("b", depends=["a"])
    lua.put("b", depends=["x"], now=T0 + 1)
    job = lua.job("b")
    assert job is not None and job["dependencies"] == ["x"]
    job_a = lua.job("a")
    assert job_a is not None and job_a["dependents"] == []
    lua.put("b", now=T0 + 2)  # no depends: none
    assert lua.state("b") == "waiting"


def test_put_again_keeps_the_jobs_dependents(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", depends=["a"])
    lua.put("a", "q2", now=T0 + 1)
    finish(lua, "a", queue="q2")
    assert lua.state("b") == "waiting"


def test_cancel_a_running_job(lua: Lua) -> None:
    lua.put("a", tags=["t"])
    lua("track", "track", "a", now=T0)
    lua.pop_jids()
    assert lua("cancel", "a", "a", "nope", now=T0 + 1) == ["a"]
    assert lua.job("a") is None
    assert lua.zset("q:q-locks") == [] and lua.zset("w:w1:jobs") == []
    assert lua.zset("tracked") == [] and lua.r.exists(lua.key("t:t")) == 0
    with pytest.raises(JobNotFound):
        lua.complete("a", now=T0 + 2)


def test_cancel_each_state(lua: Lua) -> None:
    lua.put("waiting")
    lua.put("scheduled", delay=10)
    lua.put("running")
    lua.put("failed")
    lua.put("complete")
    lua.put("dep")
    lua.put("depends", depends=["dep"])
    popped = lua.pop_jids(count=10)
    lua.complete("complete")
    lua("fail", "failed", "w1", "g", "m", now=T0)
    for jid in popped:
        if jid not in ("running", "complete", "failed"):
            lua("retry", jid, "q", "w1", now=T0)
    with pytest.raises(WrongState, match="job complete has completed"):
        lua("cancel", "complete", now=T0)  # a cancel stops what has not ended
    assert lua("delete", "complete", now=T0) is not None
    jids = ["waiting", "scheduled", "running", "failed", "depends", "dep"]
    assert lua("cancel", *jids, now=T0) == jids
    day = int(T0 - T0 % 86400)
    left = {"queues", "seq", "workers", f"s:wait:{day}:q", f"s:run:{day}:q", f"s:stats:{day}:q"}
    assert lua.namespace_keys() <= {lua.key(k) for k in left}  # statistics stay
    assert lua("failed", now=T0) == {}
