"""flow.submit's jobs as ``{"shared": {...}, "jobs": [...]}`` (include/runs.lua): the fields
every job has alike sent and checked once, each job object giving only what differs; and a
new run's counts written at once (RunCounts.start) instead of settled job by job."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import InvalidArgument

SHARED = {
    "queue": "q",
    "klass": "K",
    "retries": 2,
    "priority": 3,
    "tags": ["t1", "t2"],
    "trigger": "all_done",
    "ttr": 30,
    "notify": "failure",
    "deadline": 60,
}


def own(run_id: str) -> list[dict[str, Any]]:
    """What differs between the jobs of a run: a chain, a fan-in, an item and a wait."""
    return [
        {"jid": f"{run_id}:a", "data": '{"n": 1}'},
        {"jid": f"{run_id}:b", "data": '{"n": 2}', "depends": [f"{run_id}:a"]},
        {"jid": f"{run_id}:c[0]", "data": "{}", "depends": [f"{run_id}:a", f"{run_id}:b"]},
        {"jid": f"{run_id}:c[1]", "data": "{}", "delay": 5},
        {"jid": f"{run_id}:w", "data": "{}", "wait": {"signal": "go"}},
    ]


def written(lua: Lua, run_id: str) -> dict[str, Any]:
    """Every key of the run, named without the run's id."""
    found: dict[str, Any] = {}
    for key in sorted(lua.r.scan_iter(match=lua.prefix + "*", count=1000)):
        if run_id not in key or key.endswith(":" + "log"):
            continue
        kind = lua.r.type(key)
        value: Any
        if kind == "hash":
            value = lua.r.hgetall(key)
        elif kind == "set":
            value = sorted(lua.r.smembers(key))
        elif kind == "zset":
            value = lua.r.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = lua.r.lrange(key, 0, -1)
        else:
            value = lua.r.get(key)
        found[key.replace(run_id, "RUN")] = json.loads(json.dumps(value).replace(run_id, "RUN"))
    return found


def test_shared_fields_write_what_each_job_giving_them_writes(lua: Lua) -> None:
    jobs = [{**SHARED, **job} for job in own("r1")]
    lua("flow.submit", "r1", '{"flow": "f"}', json.dumps(jobs), now=T0)
    shared = {"shared": SHARED, "jobs": own("r2")}
    assert lua("flow.submit", "r2", '{"flow": "f"}', json.dumps(shared), now=T0) == "submitted"
    one, two = written(lua, "r1"), written(lua, "r2")
    assert one == two
    # the run's counts as a recount from its jobs writes them, places and all
    assert lua.r.hgetall(lua.key("run-counts:r2")) == two[lua.key("run-counts:RUN")]
    lua("run.recount", "r2", now=T0)
    assert written(lua, "r2") == two


def test_a_job_giving_a_shared_field_keeps_its_own(lua: Lua) -> None:
    jobs = [
        {"jid": "r:a", "data": "{}"},
        {"jid": "r:b", "data": "{}", "queue": "other", "retries": 0, "tags": []},
        {"jid": "r:c", "data": "{}", "priority": None, "concurrency_key": "k2"},
    ]
    shared = {**SHARED, "concurrency_key": "k", "concurrency_limit": 2}
    lua("flow.submit", "r", '{"flow": "f"}', json.dumps({"shared": shared, "jobs": jobs}), now=T0)
    a, b, c = (lua.r.hgetall(lua.key(f"j:r:{step}")) for step in "abc")
    assert (a["queue"], a["retries"], a["tags"], a["ckey"], a["climit"]) == (
        "q",
        "2",
        '["t1","t2"]',
        "k",
        "2",
    )
    # (The hash leaves out a field at its default: no tags, priority 0.)
    assert (b["queue"], b["retries"], b.get("tags", "{}"), b["klass"]) == ("other", "0", "{}", "K")
    # concurrency_key and _limit go together: a job giving one takes neither from the shared
    assert (c.get("priority", "0"), c["ckey"], c["climit"]) == ("0", "k2", "1")


@pytest.mark.parametrize(
    ("shared", "message"),
    [
        ({"queue": "q", "klass": "K", "retries": "x"}, 'FlowSubmit shared(): Arg "retries"'),
        ({"queue": "q", "klass": "K", "data": "{}"}, 'FlowSubmit shared(): field "data"'),
        ({"queue": "q", "klass": "K", "deadline": -1}, 'FlowSubmit shared(): Arg "deadline"'),
    ],
)
def test_a_bad_shared_field_is_refused_naming_it_and_changes_nothing(
    lua: Lua, shared: dict[str, Any], message: str
) -> None:
    text = json.dumps({"shared": shared, "jobs": own("r")[:2]})
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument) as raised:
        lua.raw("flow.submit", "r", '{"flow": "f"}', text, now=T0)
    assert str(raised.value).startswith(message), raised.value


def test_a_job_left_without_a_field_nobody_gives_is_refused_by_its_place(lua: Lua) -> None:
    text = json.dumps({"shared": {"klass": "K"}, "jobs": [{"jid": "r:a", "data": "{}"}]})
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match=r"jobs\[1\].*queue"):
        lua.raw("flow.submit", "r", '{"flow": "f"}', text, now=T0)


def test_a_run_whose_counts_exist_already_is_counted_job_by_job(lua: Lua) -> None:
    """Counts left by another writer are added to, not written over (RunCounts.fresh)."""
    lua.r.hset(lua.key("run-counts:r"), "!outside", 1)
    text = json.dumps({"shared": SHARED, "jobs": own("r")})
    lua("flow.submit", "r", '{"flow": "f"}', text, now=T0)
    counts = lua.r.hgetall(lua.key("run-counts:r"))
    assert counts["!outside"] == "1"
    assert (counts["pending"], counts["waiting"], counts["#"]) == ("2", "2", "4")
