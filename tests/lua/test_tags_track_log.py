"""tag add / remove / get / top, track / untrack, log, multiget, the bound on history."""

from __future__ import annotations

import json

import pytest
from lua_support import NOT_JIDS, T0, Lua, unchanged

from scheduler.engine.errors import InvalidArgument, JobNotFound, TooLarge
from scheduler.engine.scripts import qless_bundle

# -- tags ------------------------------------------------------------------------------------


def test_tag_add_and_remove(lua: Lua) -> None:
    lua.put("a", tags=["x"])
    assert lua("tag", "add", "a", "y", "x", "z", now=T0 + 1) == ["x", "y", "z"]
    job = lua.job("a")
    assert job is not None and job["tags"] == ["x", "y", "z"] and job["updated"] == T0 + 1
    assert lua("tag", "remove", "a", "x", "nope", now=T0 + 2) == ["y", "z"]
    assert lua("tag", "remove", "a", "y", "z", now=T0 + 3) == []
    assert lua("tag", "add", "a", now=T0 + 4) == []
    assert lua.r.exists(lua.key("tags"), lua.key("t:x"), lua.key("t:y")) == 0


def test_tag_of_unknown_job(lua: Lua) -> None:
    with pytest.raises(JobNotFound, match=r"Tag\(\): Job a does not exist"):
        lua("tag", "add", "a", "x", now=T0)


def test_tag_limit(lua: Lua) -> None:
    lua.put("a", tags=[f"t{n}" for n in range(64)])
    with pytest.raises(TooLarge, match=r"Tag\(\): a job may have at most 64 tags"):
        lua("tag", "add", "a", "one-more", now=T0)
    assert lua("tag", "add", "a", "t0", now=T0)[0] == "t0"  # already there: fine


def test_tag_get_in_tagging_order_with_paging(lua: Lua) -> None:
    for n, jid in enumerate(["c", "a", "b"]):
        lua.put(jid, now=T0 + n)
        lua("tag", "add", jid, "t", now=T0 + n)
    assert lua("tag", "get", "t", now=T0) == {"total": 3, "jobs": ["c", "a", "b"]}
    assert lua("tag", "get", "t", 1, 1, now=T0) == {"total": 3, "jobs": ["a"]}
    assert lua("tag", "get", "t", 3, 5, now=T0) == {"total": 3, "jobs": []}
    assert lua("tag", "get", "none", now=T0) == {"total": 0, "jobs": []}


def test_tag_top_lists_tags_used_at_least_twice(lua: Lua) -> None:
    lua.put("a", tags=["common", "pair", "single"])
    lua.put("b", tags=["common", "pair"])
    lua.put("c", tags=["common"])
    assert lua("tag", "top", now=T0) == ["common", "pair"]
    assert lua("tag", "top", 1, 1, now=T0) == ["pair"]
    assert lua("tag", "top", 0, 0, now=T0) == []
    lua("cancel", "a", "b", now=T0)
    assert lua("tag", "top", now=T0) == []


# -- track -----------------------------------------------------------------------------------


def test_track_and_untrack(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    assert lua("track", "track", "a", now=T0) == 1
    job = lua.job("a")
    assert job is not None and job["tracked"] is True
    tracked = lua("track", now=T0)
    assert [j["jid"] for j in tracked["jobs"]] == ["a"]
    assert tracked["expired"] == []
    assert lua("track", "untrack", "a", now=T0) == 1
    assert lua("track", "untrack", "a", now=T0) == 0
    assert lua("track", now=T0) == {"jobs": [], "expired": []}
    with pytest.raises(JobNotFound, match=r"Track\(\): Job z does not exist"):
        lua("track", "track", "z", now=T0)


def test_canceled_tracked_job_is_not_listed(lua: Lua) -> None:
    lua.put("a")
    lua("track", "track", "a", now=T0)
    lua("cancel", "a", now=T0)
    assert lua("track", now=T0) == {"jobs": [], "expired": []}


# -- what an outside writer left -------------------------------------------------------------


def test_tag_track_and_failed_listings_skip_entries_that_are_not_jids(lua: Lua) -> None:
    """An entry no command takes as a jid, left in a tag's index, the tracked set or a failed
    list (its name may be another key's: a history list), is no job: the listings skip it, as
    the queues' do, and the writes that read the list pass it by (`flows doctor` removes it)."""
    lua.put("x", tags=["t"])
    lua("log", "x", "noted", now=T0)  # x-history: the key of a list
    lua("track", "track", "x", now=T0)
    for jid in ("f1", "f2"):
        lua.put(jid)
        lua("fail", jid, "w1", "g", "broke", now=T0)
    tagged, tracked = lua("tag", "get", "t", now=T0), lua("track", now=T0)
    failed = lua("failed", "g", now=T0)
    lua.r.zadd(lua.key("t:t"), dict.fromkeys(NOT_JIDS, T0 + 1))
    lua.r.zadd(lua.key("tracked"), dict.fromkeys(NOT_JIDS, T0 + 1))
    lua.r.rpush(lua.key("f:g"), *NOT_JIDS)  # the oldest
    assert lua("tag", "get", "t", now=T0)["jobs"] == tagged["jobs"]
    assert lua("track", now=T0) == tracked
    assert lua("failed", "g", now=T0)["jobs"] == failed["jobs"]
    qless = lua.r.script_load(qless_bundle())
    listed = lua.r.evalsha(qless, 0, "failed", T0, "g") if lua.prefix == "ql:" else None
    assert listed is None or json.loads(listed)["jobs"] == ["f2", "f1"]
    lua.config("max-failed-per-group", 4)  # the bound reads the oldest entries
    lua.put("f3")
    lua("fail", "f3", "w1", "g", "broke", now=T0 + 2)
    lua("unfail", "q", "g", 10, now=T0 + 3)
    assert lua.r.exists(lua.key("f:g")) == 0
    assert {jid: lua.state(jid) for jid in ("f1", "f2", "f3")} == dict.fromkeys(
        ("f1", "f2", "f3"), "waiting"
    )


# -- log and history -------------------------------------------------------------------------


def test_log_appends_to_history(lua: Lua) -> None:
    lua.put("a")
    assert lua("log", "a", "checkpoint", '{"step": 3, "what": "ignored"}', now=T0 + 1) is None
    assert lua("log", "a", "plain", now=T0 + 2) is None
    job = lua.job("a")
    assert job is not None
    assert job["history"][1:] == [
        {"what": "checkpoint", "when": T0 + 1, "step": 3},
        {"what": "plain", "when": T0 + 2},
    ]
    with pytest.raises(JobNotFound, match=r"Log\(\): Job b does not exist"):
        lua("log", "b", "x", now=T0)


def test_log_keeps_long_numbers_of_its_data_as_given(lua: Lua) -> None:
    lua.put("a")
    data = '{"id": 12345678901234567, "at": {"us": [1700000000123456]}, "n": 1.5, "what": 1}'
    lua("log", "a", "checkpoint", data, now=T0 + 1)
    job = lua.job("a")
    assert job is not None
    assert job["history"][-1] == {
        "what": "checkpoint",
        "when": T0 + 1,
        "id": 12345678901234567,
        "at": {"us": [1700000000123456]},
        "n": 1.5,
    }


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def test_log_data_nesting_is_bounded_so_the_job_stays_readable(lua: Lua) -> None:
    lua.put("a")
    lua("log", "a", "deep", nested(100), now=T0)
    job = lua.job("a")  # the entry sits two levels deeper in the job's JSON
    assert job is not None and job["history"][-1]["what"] == "deep"
    for levels in (101, 999):  # 999 decodes, but no job JSON could then be encoded again
        with unchanged(lua.r), pytest.raises(InvalidArgument, match="nests more than 100"):
            lua("log", "a", "deeper", nested(levels), now=T0)
    assert [j["jid"] for j in lua.pop(now=T0)] == ["a"]


def test_history_is_bounded_keeping_the_first_entry(lua: Lua) -> None:
    lua.config("max-job-history", 5)
    lua.put("a")
    for n in range(1, 20):
        lua("log", "a", f"e{n}", now=T0 + n)
    assert lua.history("a") == ["put", "e16", "e17", "e18", "e19"]
    job = lua.job("a")
    assert job is not None and job["history"][0] == {"what": "put", "when": T0, "q": "q"}
    lua.config("max-job-history", 1)
    lua("log", "a", "last", now=T0 + 30)
    assert lua.history("a") == ["put"]
    lua.config("max-job-history", 0)  # 0: unbounded
    for n in range(3):
        lua("log", "a", f"u{n}", now=T0 + 40)
    assert lua.history("a") == ["put", "u0", "u1", "u2"]


def test_default_history_bound_is_100(lua: Lua) -> None:
    lua.put("a")
    for n in range(150):
        lua("log", "a", f"e{n}", now=T0)
    history = lua.history("a")
    assert len(history) == 100
    assert history[0] == "put" and history[1] == "e51" and history[-1] == "e149"


# -- multiget --------------------------------------------------------------------------------


def test_multiget(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", delay=5)
    jobs = lua("multiget", "b", "missing", "a", now=T0)
    assert [(j["jid"], j["state"]) for j in jobs] == [("b", "scheduled"), ("a", "waiting")]
    assert lua("multiget", "missing", now=T0) == []
    assert lua("multiget", now=T0) == []


def test_get_of_unknown_job_is_nil(lua: Lua) -> None:
    assert lua("get", "nope", now=T0) is None
