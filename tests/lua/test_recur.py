"""Recurring jobs: recur, unrecur, recur.get, recur.update, recur.tag / untag, backlog, spawning."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Lua

from scheduler.engine.errors import InvalidArgument, JobNotFound, TooLarge


def recur(
    lua: Lua,
    jid: str = "r",
    queue: str = "q",
    interval: float = 60,
    offset: float = 0,
    now: float = T0,
    data: str = '{"n": 1}',
    **options: object,
) -> object:
    args: list[object] = [queue, jid, "K", data, "interval", interval, offset]
    for name, value in options.items():
        args += [name, json.dumps(value) if isinstance(value, list) else value]
    return lua("recur", *args, now=now)


def test_recur_and_get(lua: Lua) -> None:
    assert recur(lua, offset=30, priority=2, tags=["t"], retries=3, backlog=4) == "r"
    assert lua("recur.get", "r", now=T0) == {
        "jid": "r",
        "klass": "K",
        "state": "recur",
        "queue": "q",
        "priority": 2,
        "interval": 60,
        "retries": 3,
        "count": 0,
        "data": '{"n": 1}',
        "tags": ["t"],
        "backlog": 4,
    }
    assert lua.r.zscore(lua.key("q:q-recur"), "r") == T0 + 30
    assert lua("queues", "q", now=T0)["recurring"] == 1
    assert lua("recur.get", "nope", now=T0) is None
    assert lua("tag", "get", "t", now=T0)["jobs"] == ["r"]


def test_pop_spawns_due_children(lua: Lua) -> None:
    recur(lua, offset=10, priority=-1, tags=["t"], retries=2)
    lua.put("plain")
    assert lua.pop_jids(count=5, now=T0 + 9) == ["plain"]
    [child] = lua.pop(count=5, now=T0 + 10)
    assert child["jid"] == "r-1"
    assert child["spawned_from_jid"] == "r"
    assert (child["klass"], child["data"], child["priority"]) == ("K", '{"n": 1}', -1)
    assert (child["tags"], child["retries"], child["remaining"]) == (["t"], 2, 2)
    assert child["history"][0] == {"what": "put", "when": T0 + 10, "q": "q"}
    assert lua.r.zscore(lua.key("q:q-recur"), "r") == T0 + 70
    assert lua.pop_jids(count=5, now=T0 + 69) == []
    assert lua.pop_jids(count=5, now=T0 + 70) == ["r-2"]
    assert lua("recur.get", "r", now=T0)["count"] == 2


def test_missed_intervals_spawn_one_child_each(lua: Lua) -> None:
    recur(lua)
    assert lua.pop_jids(count=10, now=T0 + 185) == ["r-1", "r-2", "r-3", "r-4"]
    assert lua.r.zscore(lua.key("q:q-recur"), "r") == T0 + 240


def test_spawning_is_bounded_by_the_pop_count(lua: Lua) -> None:
    recur(lua)
    assert lua.pop_jids(count=2, now=T0 + 185) == ["r-1", "r-2"]
    assert lua.pop_jids(count=10, now=T0 + 185) == ["r-3", "r-4"]


def test_backlog_bounds_the_catch_up(lua: Lua) -> None:
    recur(lua, backlog=2)
    assert lua.pop_jids(count=10, now=T0 + 600) == ["r-1", "r-2"]
    # skipped ahead: the next is due one interval after the last spawned
    assert lua.r.zscore(lua.key("q:q-recur"), "r") == T0 + 660


def test_peek_spawns_too(lua: Lua) -> None:
    recur(lua)
    assert [j["jid"] for j in lua("peek", "q", 5, now=T0)] == ["r-1"]
    assert lua.state("r-1") == "waiting"


def test_unrecur(lua: Lua) -> None:
    recur(lua, tags=["t"])
    assert lua("unrecur", "r", now=T0) == 1
    assert lua("recur.get", "r", now=T0) is None
    assert lua.pop_jids(now=T0 + 100) == []
    assert lua("unrecur", "r", now=T0) == 1
    assert lua.namespace_keys() <= {lua.key("queues"), lua.key("workers")}


def test_recur_again_redefines(lua: Lua) -> None:
    recur(lua, tags=["old"])
    recur(lua, queue="q2", interval=30, tags=["new"], offset=5)
    assert lua.zset("q:q-recur") == []
    assert lua.r.zscore(lua.key("q:q2-recur"), "r") == T0 + 5
    assert lua("tag", "get", "old", now=T0)["total"] == 0
    got = lua("recur.get", "r", now=T0)
    assert (got["queue"], got["interval"], got["tags"]) == ("q2", 30, ["new"])


def test_recur_again_does_not_respawn_existing_children(lua: Lua) -> None:
    recur(lua)
    assert lua.pop_jids(now=T0) == ["r-1"]  # r-1 running
    lua.put("r-2", "elsewhere", data='{"mine": true}')  # an unrelated job that has the next jid
    lua("unrecur", "r", now=T0 + 1)
    recur(lua, now=T0 + 2)  # the count starts again
    assert lua.pop_jids(count=5, worker="w2", now=T0 + 2) == ["r-3"]
    job = lua.job("r-1", now=T0 + 2)
    assert job is not None and job["state"] == "running" and job["worker"] == "w1"
    assert lua.complete("r-1", now=T0 + 3) == "complete"
    other = lua.job("r-2")
    assert other is not None and other["queue"] == "elsewhere" and other["data"] == '{"mine": true}'
    assert lua("recur.get", "r", now=T0)["count"] == 3
    recur(lua, now=T0 + 100)  # redefined: keeps its count
    assert lua.pop_jids(count=5, worker="w2", now=T0 + 100) == ["r-4"]


def test_recurring_jid_leaves_room_for_child_numbers(lua: Lua) -> None:
    with pytest.raises(TooLarge, match=r'Recur\(\): Arg "jid"'):
        recur(lua, jid="r" * 250)
    recur(lua, jid="r" * 240)
    [child] = lua.pop(now=T0)
    assert lua.complete(child["jid"], now=T0) == "complete"


def test_recur_update(lua: Lua) -> None:
    recur(lua, offset=100)
    assert (
        lua(
            "recur.update",
            "r",
            "priority",
            3,
            "interval",
            10,
            "retries",
            1,
            "data",
            '{"n": 2}',
            "klass",
            "K2",
            "backlog",
            5,
            now=T0,
        )
        == 1
    )
    got = lua("recur.get", "r", now=T0)
    assert (
        got["priority"],
        got["interval"],
        got["retries"],
        got["data"],
        got["klass"],
        got["backlog"],
    ) == (3, 10, 1, '{"n": 2}', "K2", 5)
    assert lua("recur.update", "r", "queue", "q2", now=T0) == 1
    assert lua.zset("q:q-recur") == []
    assert lua.r.zscore(lua.key("q:q2-recur"), "r") == T0 + 100
    assert "q2" in lua.zset("queues")
    with pytest.raises(JobNotFound, match=r"RecurUpdate\(\): No recurring job nope"):
        lua("recur.update", "nope", "priority", 1, now=T0)
    with pytest.raises(InvalidArgument, match='unknown option "state"'):
        lua("recur.update", "r", "state", "x", now=T0)


def test_recur_tag_and_untag(lua: Lua) -> None:
    recur(lua, tags=["a"])
    assert lua("recur.tag", "r", "b", "a", now=T0) == ["a", "b"]
    assert lua("recur.untag", "r", "a", "zzz", now=T0) == ["b"]
    assert lua("recur.untag", "r", "b", now=T0) == []
    assert lua("tag", "get", "a", now=T0)["total"] == 0
    with pytest.raises(JobNotFound, match=r"RecurTag\(\): No recurring job nope"):
        lua("recur.tag", "nope", "x", now=T0)
    lua("recur.tag", "r", *[f"t{n}" for n in range(64)], now=T0)
    with pytest.raises(TooLarge, match=r"RecurTag\(\)"):
        lua("recur.tag", "r", "extra", now=T0)
