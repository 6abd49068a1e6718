"""A new job's history is implied until something else happens to it: no list is stored (a list
costs a waiting job more memory than its hash), and every reader still gets its put entry."""

from __future__ import annotations

import json

from lua_support import T0, Lua, calls


def history_key(lua: Lua, jid: str) -> str:
    return lua.key(f"j:{jid}-history")


def stored(lua: Lua, jid: str) -> list[dict[str, object]]:
    return [json.loads(entry) for entry in lua.r.lrange(history_key(lua, jid), 0, -1)]


def test_a_new_job_keeps_no_history_list_and_reads_its_put(lua: Lua) -> None:
    lua.put("a", "q", now=T0 + 0.25)
    assert not lua.r.exists(history_key(lua, "a"))
    job = lua.job("a")
    assert job is not None
    assert job["history"] == [{"q": "q", "what": "put", "when": T0 + 0.25}]
    # A job put over is written out: the same entries as a list.
    lua.put("b", "q", now=T0 + 0.25)
    lua.put("b", "q", now=T0 + 0.25)
    assert lua.job("b")["history"] == [job["history"][0]] * 2  # type: ignore[index]
    assert stored(lua, "b") == [job["history"][0]] * 2


def test_the_first_pop_writes_the_put_entry_as_it_was(lua: Lua) -> None:
    lua.put("a", "q", now=T0)
    lua.r.config_resetstat()
    lua.pop("q", "w1", now=T0 + 5)
    # both entries in one write (each is an entry of the append-only file and the replicas')
    assert calls(lua, "rpush", "lpush") == {"rpush": 1}
    assert [e["what"] for e in stored(lua, "a")] == ["put", "popped"]
    assert stored(lua, "a")[0] == {"q": "q", "what": "put", "when": T0}
    assert lua.job("a")["history"][1]["when"] == T0 + 5  # type: ignore[index]
    lua.raw("retry", "a", "q", "w1", 0, "g", "m", now=T0 + 6)
    lua.r.config_resetstat()
    lua.pop("q", "w1", now=T0 + 7)
    assert calls(lua, "rpush", "lpush") == {"rpush": 1}
    assert [e["what"] for e in stored(lua, "a")] == ["put", "popped", "retried", "popped"]


def test_a_put_into_another_queue_keeps_the_first_queue_in_the_history(lua: Lua) -> None:
    lua.put("a", "q1", now=T0)
    lua.put("a", "q2", now=T0 + 1)
    assert [(e["what"], e["q"], e["when"]) for e in stored(lua, "a")] == [
        ("put", "q1", T0),
        ("put", "q2", T0 + 1),
    ]


def test_any_entry_written_later_comes_after_the_put(lua: Lua) -> None:
    lua.put("a", "q", now=T0)
    lua("bury", "a", "w1", "a message", now=T0 + 2)
    assert [e["what"] for e in stored(lua, "a")] == ["put", "buried"]
    assert stored(lua, "a")[0]["when"] == T0


def test_the_history_limit_keeps_the_put(lua: Lua) -> None:
    lua.config("max-job-history", 2)
    lua.put("a", "q", now=T0)
    lua.pop("q", "w1", now=T0 + 1)
    lua("release", "a", "w1", 0, now=T0 + 2)
    entries = stored(lua, "a")
    assert [e["what"] for e in entries] == ["put", "released"]
    assert entries[0]["when"] == T0


def test_a_job_done_and_deleted_leaves_no_history_key(lua: Lua) -> None:
    lua.put("a", "q", now=T0)
    lua("cancel", "a", now=T0 + 1)
    assert lua.job("a") is None
    assert not lua.r.exists(history_key(lua, "a"))


def test_a_new_job_reads_its_updated_and_wait_start_from_created(lua: Lua) -> None:
    """Its hash holds neither `updated` nor `time` (both its `created` until it changes)."""
    lua.put("a", "q", now=T0 + 0.5)
    stored_fields = lua.r.hgetall(lua.key("j:a"))
    assert "updated" not in stored_fields and "time" not in stored_fields
    job = lua.job("a")
    assert job is not None and job["updated"] == T0 + 0.5
    lua.pop("q", "w1", now=T0 + 3.5)
    stats = json.loads(lua.raw("stats", "q", T0, now=T0 + 4))
    assert stats["wait"]["count"] == 1 and stats["wait"]["mean"] == 3.0
    assert lua.job("a")["updated"] == T0 + 3.5  # type: ignore[index]
