"""flow.submit's checks of a run's jids and dependencies (include/runs.lua): a run whose jobs
are all new and depend on earlier jobs of the run alone needs no look-up per job; every other
run is still refused or counted as each job requires, with nothing written by a refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import InvalidArgument

RECORD = json.dumps({"flow": "f"})


def submit(lua: Lua, run_id: str, jobs: list[dict[str, Any]]) -> Any:
    shared = {"queue": "q", "klass": "K"}
    return lua("flow.submit", run_id, RECORD, json.dumps({"shared": shared, "jobs": jobs}), now=T0)


def job(jid: str, *depends: str) -> dict[str, Any]:
    return {"jid": jid, "data": "{}", "depends": list(depends)}


def test_a_run_of_earlier_dependencies_alone_is_written_without_outside_ones(lua: Lua) -> None:
    assert submit(lua, "r", [job("r:a"), job("r:b", "r:a"), job("r:c", "r:a", "r:b")]) == (
        "submitted"
    )
    assert lua.state("r:c") == "depends"
    assert sorted(lua.r.smembers(lua.key("j:r:c-dependencies"))) == ["r:a", "r:b"]
    assert "!outside" not in lua.r.hgetall(lua.key("run-counts:r"))


def test_a_dependency_on_an_existing_job_outside_the_run_is_counted_as_one(lua: Lua) -> None:
    lua.put("x")
    assert submit(lua, "r", [job("r:a"), job("r:b", "r:a", "x")]) == "submitted"
    assert sorted(lua.r.smembers(lua.key("j:r:b-dependencies"))) == ["r:a", "x"]
    assert lua.r.hget(lua.key("run-counts:r"), "!outside") is not None


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        # a later job of the run is no dependency: jobs come in dependency order
        ([job("r:a", "r:b"), job("r:b")], "depends on r:b, which is neither earlier"),
        ([job("r:a"), job("r:b", "r:a"), job("r:a")], "job r:a appears twice in the run"),
        ([job("r:a"), job("r:b", "r:nowhere")], "depends on r:nowhere, which is neither"),
    ],
    ids=["later", "twice", "unknown"],
)
def test_a_run_needing_a_look_up_is_refused_whole(
    lua: Lua, jobs: list[dict[str, Any]], message: str
) -> None:
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match=message):
        submit(lua, "r", jobs)


def test_a_run_one_of_whose_jids_exists_is_refused_whole(lua: Lua) -> None:
    lua.put("r:b")
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="r:b already exists"):
        submit(lua, "r", [job("r:a"), job("r:b", "r:a")])
