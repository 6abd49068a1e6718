"""The catalogue of the services' folders at script level (commands/catalog.lua): publishing,
listing, each source's record, removing a source's folder, and the time a source was last seen
left by its services' leaving the health list (commands/schedulers.lua), time always explicit."""

from __future__ import annotations

import json

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import JobNotFound

FILES = json.dumps({"a.yaml": "version: 1", "sub/b.yaml": "version: 1\n"})
DAY = 86400


def sync(lua: Lua, source: str, digest: str = "d1", files: str = FILES, now: float = T0) -> str:
    return str(lua.raw("catalog.sync", source, digest, f"/srv/{source}", files, now=now))


def sources(lua: Lua) -> list[dict[str, object]]:
    return list(json.loads(lua.raw("catalog.sources", now=T0)))


def ping(lua: Lua, service: str, source: str, now: float) -> None:
    assert lua.raw("scheduler.ping", service, json.dumps({"source": source}), now=now) == "ok"


def test_each_source_is_listed_with_its_folder_files_and_publishing_time(lua: Lua) -> None:
    assert lua.raw("catalog.sources", now=T0) == "[]"
    assert sync(lua, "old", now=T0) == "synced"
    assert sync(lua, "new", files=json.dumps({"c.yaml": "x"}), now=T0 + 5) == "synced"
    assert sources(lua) == [
        {"source": "new", "folder": "/srv/new", "files": 1, "synced": T0 + 5},
        {"source": "old", "folder": "/srv/old", "files": 2, "synced": T0},
    ]


def test_removing_a_source_forgets_its_folder_and_no_other(lua: Lua) -> None:
    sync(lua, "old")
    sync(lua, "new", files=json.dumps({"c.yaml": "x"}))
    assert lua.raw("catalog.remove", "old", now=T0) == "removed"
    assert [s["source"] for s in sources(lua)] == ["new"]
    assert {e["source"] for e in json.loads(lua.raw("catalog.list", now=T0))} == {"new"}
    assert not lua.r.exists(lua.key("catalog:old"))
    # The service publishing again (restarted, or its folder changed) is a new publication.
    assert sync(lua, "old", now=T0 + 10) == "synced"
    assert [s["source"] for s in sources(lua)] == ["new", "old"]


def test_removing_a_source_that_published_nothing_is_refused_and_changes_nothing(
    lua: Lua,
) -> None:
    sync(lua, "new")
    with assert_unchanged(lua.r), pytest.raises(JobNotFound, match="no source gone has"):
        lua.raw("catalog.remove", "gone", now=T0)


def test_a_service_stopping_leaves_when_its_source_was_last_seen(lua: Lua) -> None:
    sync(lua, "pipelines")
    ping(lua, "svc-1", "pipelines", T0 + 10)
    ping(lua, "svc-2", "pipelines", T0 + 20)
    assert "seen" not in sources(lua)[0]  # its services are listed: their ticks say it
    assert lua.raw("scheduler.forget", "svc-2", now=T0 + 30) == "forgotten"
    assert sources(lua)[0]["seen"] == T0 + 30
    # An earlier time never replaces a later one.
    assert lua.raw("scheduler.forget", "svc-1", now=T0 + 25) == "forgotten"
    assert sources(lua)[0]["seen"] == T0 + 30


def test_a_service_dropped_for_its_silence_leaves_its_last_tick(lua: Lua) -> None:
    sync(lua, "pipelines")
    ping(lua, "dead", "pipelines", T0 + 10)
    ping(lua, "other", "elsewhere", T0 + DAY + 11)  # drops `dead`, silent past max-worker-age
    assert [s["id"] for s in json.loads(lua.raw("schedulers", now=T0))] == ["other"]
    assert sources(lua)[0]["seen"] == T0 + 10


def test_a_service_of_no_published_source_leaves_the_catalogue_alone(lua: Lua) -> None:
    sync(lua, "pipelines")
    ping(lua, "svc", "unpublished", T0)
    lua.raw("scheduler.ping", "bare", "{}", now=T0)  # a service without a source in its info
    with assert_unchanged(lua.r, lua.key("catalog*")):
        assert lua.raw("scheduler.forget", "svc", now=T0 + 1) == "forgotten"
        assert lua.raw("scheduler.forget", "bare", now=T0 + 1) == "forgotten"
