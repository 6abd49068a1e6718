"""Schedules at script level: register, get, list, pause, resume, unregister, due, fire, trigger,
and the scheduler services' health (schedule*.lua, schedulers.lua), time always explicit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua, calls

from scheduler.engine.errors import InvalidArgument, JobNotFound, WrongState

TICK = T0 + 60


def definition(name: str = "f", digest: str = "h1", **changes: Any) -> dict[str, Any]:
    return {
        "flow": name,
        "hash": digest,
        "file": f"/flows/{name}.yaml",
        "cron": ["* * * * *"],
        "timezone": "UTC",
        "overlap": "skip",
        "catchup": "latest",
        "jitter": 0,
        "params": {},
        "paused": False,
        **changes,
    }


def register(
    lua: Lua,
    name: str = "f",
    digest: str = "h1",
    nxt: Any = TICK,
    expected_hash: str = "",
    expected_next: Any = "",
    now: float = T0,
    **changes: Any,
) -> Any:
    return lua.raw(
        "schedule.register",
        name,
        json.dumps(definition(name, digest, **changes)),
        f"source of {name}",
        nxt,
        expected_hash,
        expected_next,
        now=now,
    )


def get(lua: Lua, name: str = "f", skips: int = 20, now: float = T0) -> Any:
    raw = lua.raw("schedule.get", name, skips, now=now)
    return None if raw is None else json.loads(raw)


def due(
    lua: Lua, now: float, offset: int = 0, limit: int = 500, *name: str
) -> dict[str, list[Any]]:
    reply = json.loads(lua.raw("schedule.due", offset, limit, *name, now=now))
    return {key: value or [] for key, value in reply.items()}


def run_args(run_id: str, jobs: int = 1, queue: str = "q", flow: str = "f") -> list[str]:
    specs = [
        {"jid": f"{run_id}:s{i}", "queue": queue, "klass": "K", "data": "{}"} for i in range(jobs)
    ]
    for i in range(1, jobs):
        specs[i]["depends"] = [f"{run_id}:s{i - 1}"]
    return [run_id, json.dumps({"flow": flow, "trigger": "schedule"}), json.dumps(specs)]


def fire(
    lua: Lua,
    action: str = "fire",
    expected: Any = TICK,
    nxt: Any = TICK + 60,
    tick: Any = TICK,
    skips: Any = (),
    run: list[str] | None = None,
    cancel: str | None = None,
    name: str = "f",
    digest: str = "h1",
    now: float = TICK + 1,
) -> Any:
    args: list[Any] = [name, digest, expected, nxt, action, tick, json.dumps(list(skips))]
    if action in ("fire", "buffered"):
        args += run if run is not None else run_args(f"{name}@{int(tick)}")
        if cancel:
            args.append(cancel)
    return lua.raw("schedule.fire", *args, now=now)


def skip(
    first: float,
    last: float | None = None,
    count: int | None = 1,
    reason: str = "overlap skip: previous run still active",
) -> dict[str, Any]:
    return {
        "first": first,
        "last": first if last is None else last,
        "count": count,
        "reason": reason,
    }


# -- registering -------------------------------------------------------------------------------


def test_register_get_list(lua: Lua) -> None:
    assert register(lua) == "registered"
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK
    got = get(lua)
    assert got["name"] == "f" and got["hash"] == "h1" and got["flow"] == "f"
    assert json.loads(got["definition"]) == definition()
    assert got["source"] == "source of f"
    assert got["next"] == "1699923660"
    assert (got["paused"], got["file_paused"], got["last_run_status"]) == (False, False, "missing")
    assert (got["fired"], got["skipped"], got["triggered"]) == ("0", "0", "0")
    assert get(lua, "nope") is None
    register(lua, "a", nxt=TICK + 5)
    listed = json.loads(lua.raw("schedule.list", now=T0))
    assert [s["name"] for s in listed] == ["a", "f"]
    assert all("source" not in s for s in listed)
    assert [s["name"] for s in json.loads(lua.raw("schedule.list", 1, 5, now=T0))] == ["f"]
    assert lua.raw("schedule.list", 5, 5, now=T0) == "[]"
    assert json.loads(lua.raw("schedule.list", 0, 5, "1", now=T0)) == [
        {"name": "a", "hash": "h1", "file": "/flows/a.yaml", "origin": "", "path": ""},
        {"name": "f", "hash": "h1", "file": "/flows/f.yaml", "origin": "", "path": ""},
    ]


def test_same_content_is_unchanged_whatever_the_score(lua: Lua) -> None:
    register(lua)
    with assert_unchanged(lua.r):
        assert register(lua, nxt=TICK + 999) == "unchanged"


def test_update_is_a_compare_and_set(lua: Lua) -> None:
    register(lua)
    with assert_unchanged(lua.r):
        assert register(lua, digest="h2", nxt=TICK + 120) == "conflict"  # expected no schedule
        assert register(lua, digest="h2", expected_hash="h1", expected_next=TICK + 1) == "conflict"
        assert register(lua, digest="h2", expected_hash="hx", expected_next=TICK) == "conflict"
    lua.raw("schedule.pause", "f", "maintenance", now=T0)
    fire(lua)
    assert (
        register(
            lua,
            digest="h2",
            nxt=TICK + 300,
            expected_hash="h1",
            expected_next=TICK + 60,
            now=T0 + 5,
            overlap="allow",
        )
        == "updated"
    )
    got = get(lua)
    assert got["hash"] == "h2" and got["overlap"] == "allow" and got["next"] == str(int(TICK + 300))
    # What the operator and the ticks did survives a new version of the file.
    assert got["paused"] is True and got["pause_note"] == "maintenance"
    assert got["last_run"] == f"f@{int(TICK)}" and got["fired"] == "1"
    assert got["registered"] == str(int(T0))


def test_register_without_fire_time_ends_the_schedule(lua: Lua) -> None:
    register(lua, nxt="")
    assert lua.r.zscore(lua.key("schedules"), "f") is None
    got = get(lua)
    assert got["ended"] == str(int(T0)) and "next" not in got
    assert register(lua, digest="h2", expected_hash="h1", nxt=TICK) == "updated"
    assert "ended" not in get(lua)


def test_file_paused_flag(lua: Lua) -> None:
    register(lua, paused=True)
    assert get(lua)["file_paused"] is True
    assert due(lua, TICK)["due"][0]["paused"] is True
    with assert_unchanged(lua.r), pytest.raises(WrongState, match="paused in its file"):
        lua.raw("schedule.resume", "f", TICK, TICK + 60, "[]", now=TICK)


def test_unregister(lua: Lua) -> None:
    register(lua)
    fire(lua, "skip", skips=[skip(TICK)], run=None)
    fire(lua, "buffer", expected=TICK + 60, nxt=TICK + 120, tick=TICK + 60)
    with assert_unchanged(lua.r):
        assert lua.raw("schedule.unregister", "f", "h9", now=T0) == "conflict"
        assert lua.raw("schedule.unregister", "nope", now=T0) == "missing"
    assert lua.raw("schedule.unregister", "f", "h1", now=T0) == "unregistered"
    assert not any("schedule" in key for key in lua.namespace_keys())


# -- due and fire ------------------------------------------------------------------------------


def test_due_lists_due_schedules_in_order(lua: Lua) -> None:
    register(lua, "late", nxt=TICK + 30)
    register(lua, "early", nxt=TICK - 30)
    register(lua, "now", nxt=TICK)
    assert due(lua, TICK - 31) == {"due": [], "buffered": []}
    names = [e["name"] for e in due(lua, TICK)["due"]]
    assert names == ["early", "now"]
    assert [e["name"] for e in due(lua, TICK + 30, offset=1, limit=1)["due"]] == ["now"]
    entry = due(lua, TICK)["due"][1]
    assert entry == {
        "name": "now",
        "next": str(int(TICK)),
        "hash": "h1",
        "origin": "",
        "paused": False,
        "last_run": "",
        "active": False,
        "buffered": "",
    }


def test_due_of_one_schedule_is_its_entries_as_the_whole_index_lists_them(lua: Lua) -> None:
    register(lua, "early", nxt=TICK - 30, overlap="buffer_one")
    register(lua, "now", nxt=TICK, overlap="buffer_one")
    for name in ("early", "now"):
        fire(lua, name=name, expected=TICK - 30 if name == "early" else TICK, tick=TICK)
        fire(lua, "buffer", name=name, expected=TICK + 60, nxt=TICK + 120, tick=TICK + 60)
    register(lua, "later", nxt=TICK + 300)
    whole = due(lua, TICK + 120)
    for name in ("early", "now", "later"):
        assert due(lua, TICK + 120, 0, 500, name) == {
            key: [e for e in entries if e["name"] == name] for key, entries in whole.items()
        }
    assert due(lua, TICK + 120, 1, 500, "now")["due"] == []  # past its one entry
    assert due(lua, TICK + 120, 0, 500, "nope") == {"due": [], "buffered": []}


def test_fire_submits_the_run_and_moves_the_score_in_one_call(lua: Lua) -> None:
    register(lua)
    assert (
        fire(lua, run=run_args("f@1", jobs=2), skips=[skip(T0, reason="catch-up policy none")])
        == "fired"
    )
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK + 60
    record = json.loads(lua.raw("run.get", "f@1", now=TICK + 1))
    assert record["jids"] == ["f@1:s0", "f@1:s1"] and record["trigger"] == "schedule"
    assert lua.state("f@1:s0") == "waiting" and lua.state("f@1:s1") == "depends"
    got = get(lua)
    assert got["last_run"] == "f@1" and got["last_tick"] == str(int(TICK))
    assert got["fired"] == "1" and got["skipped"] == "1" and got["last_run_status"] == "running"
    assert got["skips"] == [
        {"first": T0, "last": T0, "count": 1, "reason": "catch-up policy none", "at": TICK + 1}
    ]
    # The same tick again, by a second service that planned from the same score: nothing.
    with assert_unchanged(lua.r):
        assert fire(lua, run=run_args("f@1", jobs=2)) == "conflict"
        assert fire(lua, digest="h2", expected=TICK + 60, tick=TICK + 60) == "conflict"


def test_a_run_that_exists_is_not_submitted_again(lua: Lua) -> None:
    register(lua)
    assert lua.raw("flow.submit", *run_args("f@1"), now=T0) == "submitted"
    assert fire(lua, run=run_args("f@1", jobs=3)) == "exists"
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK + 60
    assert json.loads(lua.raw("run.get", "f@1", now=TICK))["jobs"] == 1
    got = get(lua)
    assert got["last_run"] == "f@1" and got["last_tick"] == str(int(TICK))
    assert got["fired"] == "0"  # no fire made that run


def test_a_tick_fired_again_is_counted_once(lua: Lua) -> None:
    register(lua)
    assert fire(lua) == "fired"
    # A new version of the file puts the score back on the tick just fired: the same tick's
    # fire again (as a second service, or one resending a fire, would send it) finds its run.
    register(lua, digest="h2", nxt=TICK, expected_hash="h1", expected_next=TICK + 60)
    assert fire(lua, digest="h2", now=TICK + 2) == "exists"
    got = get(lua)
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK + 60
    assert got["last_run"] == f"f@{int(TICK)}" and got["last_fired_at"] == str(int(TICK + 2))
    assert got["fired"] == "1"


def test_fire_with_a_bad_run_changes_nothing(lua: Lua) -> None:
    register(lua)
    lua.put("f@1:s0")
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="already exists"):
        fire(lua, run=run_args("f@1"))


def test_last_fire_time_ends_the_schedule(lua: Lua) -> None:
    register(lua)
    assert fire(lua, nxt="") == "fired"
    assert lua.r.zscore(lua.key("schedules"), "f") is None
    assert get(lua)["ended"] == str(int(TICK + 1))
    assert due(lua, TICK + 10_000)["due"] == []


def test_a_fire_deletes_no_ended_mark_it_does_not_find(lua: Lua) -> None:
    """A tick's fire moves the score on and writes the schedule once: no HDEL of an `ended`
    mark a schedule that has a fire time does not carry."""
    register(lua)
    lua.r.config_resetstat()
    assert fire(lua) == "fired"
    assert "hdel" not in calls(lua, "hdel")
    assert "ended" not in get(lua)


def test_a_fire_still_clears_an_ended_mark_left_on_a_due_schedule(lua: Lua) -> None:
    register(lua)
    lua.r.hset(lua.key("schedule:f"), "ended", "1")  # written by an older release, say
    assert fire(lua) == "fired"
    assert "ended" not in get(lua)


def test_skips_merge_by_reason_and_are_capped(lua: Lua) -> None:
    register(lua, nxt=T0)
    score = T0
    for _ in range(3):
        assert (
            fire(
                lua,
                "skip",
                expected=score,
                nxt=score + 60,
                tick="",
                skips=[skip(score, reason="paused")],
                now=score + 1,
            )
            == "skipped"
        )
        score += 60
    records = get(lua)["skips"]
    assert records == [
        {"first": T0, "last": T0 + 120, "count": 3, "reason": "paused", "at": T0 + 121}
    ]
    # An uncounted group makes the merged count unknown.
    fire(
        lua,
        "skip",
        expected=score,
        nxt=score + 60,
        tick="",
        skips=[skip(score, score + 10, None, "paused")],
        now=score,
    )
    assert get(lua)["skips"][0]["count"] is None
    score += 60
    for i in range(120):
        fire(
            lua,
            "skip",
            expected=score,
            nxt=score + 60,
            tick="",
            skips=[skip(score, reason=f"r{i % 2}")],
            now=score,
        )
        score += 60
    assert lua.r.llen(lua.key("schedule-skips:f")) == 100
    assert get(lua, skips=2)["skips"][0]["reason"] == "r1"
    assert get(lua)["skipped"] == str(3 + 1 + 120)


def test_active_last_run(lua: Lua) -> None:
    register(lua)
    register(lua, "g", overlap="allow")
    fire(lua, run=run_args("f@1"))
    fire(lua, name="g", run=run_args("g@1", flow="g"))
    entries = {e["name"]: e for e in due(lua, TICK + 60)["due"]}
    assert entries["f"]["active"] is True and entries["f"]["last_run"] == "f@1"
    assert entries["g"]["active"] is False  # overlap allow never looks
    lua.pop(count=5, now=TICK + 2)
    lua.complete("f@1:s0", now=TICK + 3)
    assert due(lua, TICK + 60)["due"][0]["active"] is False
    assert get(lua)["last_run_status"] == "succeeded"


@pytest.mark.parametrize(
    ("setup", "status"),
    [
        ("fail", "failed"),
        ("block", "blocked"),
        ("outside", "running"),
        ("expire", "expired"),
        ("none", "running"),
    ],
)
def test_last_run_status(lua: Lua, setup: str, status: str) -> None:
    register(lua)
    run = run_args("f@1", jobs=2)
    if setup == "outside":  # its first job waits for a job outside the run that can still run
        lua.put("outside-0")
        lua.put("outside", depends=["outside-0"])
        specs = json.loads(run[2])
        specs[0]["depends"] = ["outside"]
        run[2] = json.dumps(specs)
    fire(lua, run=run)
    if setup == "block":  # a buried job holds the run back until it is kicked
        lua("bury", "f@1:s0", "admin", now=TICK + 2)
    if setup == "fail":
        lua.pop(now=TICK + 2)
        lua("fail", "f@1:s0", "w1", "boom", "broken", "{}", now=TICK + 3)
    elif setup == "expire":  # its completed jobs removed from the history
        for jid in ("f@1:s0", "f@1:s1"):
            assert lua.pop_jids(now=TICK + 2) == [jid]
            lua.complete(jid, now=TICK + 3)
        lua("delete", "f@1:s0", "f@1:s1", now=TICK + 4)
    assert get(lua)["last_run_status"] == status


def test_buffer_and_fire_the_buffered_tick(lua: Lua) -> None:
    register(lua, overlap="buffer_one")
    fire(lua, run=run_args("f@1"))
    assert fire(lua, "buffer", expected=TICK + 60, nxt=TICK + 120, tick=TICK + 60) == "buffered"
    assert lua.r.zscore(lua.key("schedules-buffered"), "f") == TICK + 60
    with assert_unchanged(lua.r):
        assert (
            fire(lua, "buffer", expected=TICK + 120, nxt=TICK + 180, tick=TICK + 120) == "conflict"
        )
        assert fire(lua, "buffered", expected=TICK + 61, nxt="", tick=TICK + 60) == "conflict"
    listed = due(lua, TICK + 120)
    assert listed["buffered"] == [
        {
            "name": "f",
            "tick": str(int(TICK + 60)),
            "hash": "h1",
            "last_run": "f@1",
            "active": True,
            "origin": "",
        }
    ]
    assert listed["due"][0]["buffered"] == str(int(TICK + 60))
    assert (
        fire(lua, "buffered", expected=TICK + 60, nxt="", tick=TICK + 60, run=run_args("f@2"))
        == "fired"
    )
    assert lua.r.zscore(lua.key("schedules-buffered"), "f") is None
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK + 120  # left alone
    got = get(lua)
    assert "buffered" not in got and got["last_run"] == "f@2" and got["fired"] == "2"


def test_cancel_running_cancels_the_last_run_in_the_same_call(lua: Lua) -> None:
    register(lua, overlap="cancel_running")
    fire(lua, run=run_args("f@1", jobs=3))
    lua.pop(now=TICK + 2)
    with assert_unchanged(lua.r):
        assert (
            fire(lua, expected=TICK + 60, tick=TICK + 60, run=run_args("f@2"), cancel="f@0")
            == "conflict"
        )
    assert (
        fire(
            lua,
            expected=TICK + 60,
            tick=TICK + 60,
            run=run_args("f@2"),
            cancel="f@1",
            now=TICK + 61,
        )
        == "fired"
    )
    assert [lua.state(f"f@1:s{i}") for i in range(3)] == [None, None, None]
    assert json.loads(lua.raw("run.get", "f@1", now=TICK))["canceled"] == str(int(TICK + 61))
    assert lua.state("f@2:s0") == "waiting"
    assert get(lua)["last_run"] == "f@2"


def test_cancel_keeps_finished_jobs(lua: Lua) -> None:
    register(lua, overlap="cancel_running")
    fire(lua, run=run_args("f@1", jobs=2))
    lua.pop(now=TICK + 2)
    lua.complete("f@1:s0", now=TICK + 3)
    fire(lua, expected=TICK + 60, tick=TICK + 60, run=run_args("f@2"), cancel="f@1")
    assert lua.state("f@1:s0") == "complete" and lua.state("f@1:s1") is None


def test_trigger(lua: Lua) -> None:
    register(lua)
    with assert_unchanged(lua.r), pytest.raises(JobNotFound):
        lua.raw("schedule.trigger", "nope", *run_args("x-1"), now=T0)
    assert lua.raw("schedule.trigger", "f", *run_args("f-manual"), now=T0 + 5) == "fired"
    assert lua.raw("schedule.trigger", "f", *run_args("f-manual"), now=T0 + 6) == "exists"
    got = get(lua)
    assert got["last_run"] == "f-manual" and got["triggered"] == "1" and got["fired"] == "0"
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK  # the ticks are untouched


def test_pause_and_resume(lua: Lua) -> None:
    register(lua)
    with assert_unchanged(lua.r):
        assert lua.raw("schedule.resume", "f", TICK, TICK, "[]", now=T0) == "not-paused"
    assert lua.raw("schedule.pause", "f", "deploy", now=T0) == "paused"
    got = get(lua)
    assert (
        got["paused"] is True and got["pause_note"] == "deploy" and got["paused_at"] == str(int(T0))
    )
    assert due(lua, TICK)["due"][0]["paused"] is True
    with assert_unchanged(lua.r):
        assert lua.raw("schedule.resume", "f", TICK + 1, TICK + 60, "[]", now=T0) == "conflict"
    skips = json.dumps([skip(TICK, TICK + 60, 2, "paused")])
    assert lua.raw("schedule.resume", "f", TICK, TICK + 120, skips, now=TICK + 90) == "resumed"
    got = get(lua)
    assert got["paused"] is False and "paused_at" not in got and got["next"] == str(int(TICK + 120))
    assert got["skips"][0]["count"] == 2 and got["skipped"] == "2"


# -- health ------------------------------------------------------------------------------------


def test_scheduler_ping_list_forget(lua: Lua) -> None:
    assert lua.raw("scheduler.ping", "a", json.dumps({"pid": 1}), now=T0) == "ok"
    assert lua.raw("scheduler.ping", "b", "{}", now=T0 + 5) == "ok"
    assert json.loads(lua.raw("schedulers", now=T0)) == [
        {"id": "b", "last_tick": str(int(T0 + 5)), "info": {}},
        {"id": "a", "last_tick": str(int(T0)), "info": {"pid": 1}},
    ]
    assert lua.raw("scheduler.forget", "a", now=T0) == "forgotten"
    assert lua.raw("scheduler.forget", "a", now=T0) == "missing"
    # A service silent for longer than max-worker-age is dropped by the next ping.
    lua.raw("scheduler.ping", "c", "{}", now=T0 + 86400 + 10)
    assert [s["id"] for s in json.loads(lua.raw("schedulers", now=T0))] == ["c"]
    assert lua.r.exists(lua.key("scheduler:b")) == 0
    lua.raw("scheduler.forget", "c", now=T0)
    assert lua.raw("schedulers", now=T0) == "[]"


def test_a_ping_writes_the_info_only_when_it_changed(lua: Lua) -> None:
    """A service pings every second or so: the time always, its info (the same between fires)
    only when it differs from what is kept."""
    lua.raw("scheduler.ping", "a", json.dumps({"fired": 1}), now=T0)
    lua.r.config_resetstat()
    lua.raw("scheduler.ping", "a", json.dumps({"fired": 1}), now=T0 + 1)
    assert calls(lua, "set", "zadd") == {"zadd": 1}
    lua.raw("scheduler.ping", "a", json.dumps({"fired": 2}), now=T0 + 2)
    assert calls(lua, "set", "zadd") == {"set": 1, "zadd": 2}
    assert json.loads(lua.raw("schedulers", now=T0)) == [
        {"id": "a", "last_tick": str(int(T0 + 2)), "info": {"fired": 2}},
    ]


# -- origins: the service source a schedule belongs to ------------------------------------------


def test_a_schedule_belongs_to_the_origin_that_registered_it(lua: Lua) -> None:
    assert register(lua, origin="pipelines", path="etl/f.yaml") == "registered"
    assert (
        lua.r.hget(lua.key("schedule:f"), "origin"),
        lua.r.hget(lua.key("schedule:f"), "path"),
    ) == (
        "pipelines",
        "etl/f.yaml",
    )
    [brief] = json.loads(lua.raw("schedule.list", 0, 10, "1", now=T0))
    assert (brief["origin"], brief["path"]) == ("pipelines", "etl/f.yaml")
    assert due(lua, TICK)["due"][0]["origin"] == "pipelines"
    assert register(lua, origin="pipelines", path="etl/f.yaml") == "unchanged"
    # Another origin, even with the same content, is refused and changes nothing.
    with assert_unchanged(lua.r):
        assert register(lua, origin="examples", expected_hash="h1", expected_next=TICK) == "owned"
        assert register(lua, digest="h2", expected_hash="h1", expected_next=TICK) == "owned"
    # Once unregistered, another origin may have it.
    assert lua("schedule.unregister", "f", now=T0) == "unregistered"
    assert register(lua, origin="examples") == "registered"


def test_a_schedule_without_an_origin_is_taken_over_by_the_first_origin(lua: Lua) -> None:
    assert register(lua) == "registered"
    assert due(lua, TICK)["due"][0]["origin"] == ""
    assert register(lua, origin="pipelines", expected_hash="h1", expected_next=TICK) == "updated"
    assert lua.r.hget(lua.key("schedule:f"), "origin") == "pipelines"


def test_an_origin_that_is_not_an_id_is_refused(lua: Lua) -> None:
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match=r"definition\.origin"):
        register(lua, origin="two words")


def limited_run(run_id: str, limit: int) -> list[str]:
    """A run whose object carries the flow's max_active_runs."""
    args = run_args(run_id)
    args[1] = json.dumps({"flow": "f", "trigger": "schedule", "max_active_runs": limit})
    return args


@pytest.mark.parametrize(
    ("overlap", "reply"),
    [("allow", "skipped"), ("buffer_one", "buffered"), ("skip", "skipped")],
)
def test_a_tick_respects_max_active_runs_in_the_firing_call(
    lua: Lua, overlap: str, reply: str
) -> None:
    register(lua, overlap=overlap)
    assert fire(lua, run=limited_run("f@1", 1)) == "fired"
    # f@1 is still active: the next tick's run would be a second one
    got = fire(lua, expected=TICK + 60, nxt=TICK + 120, tick=TICK + 60, run=limited_run("f@2", 1))
    assert got == reply
    assert lua.raw("run.get", "f@2", now=TICK + 2) is None  # nothing submitted
    assert lua.r.zscore(lua.key("schedules"), "f") == TICK + 120  # the schedule moved on
    if reply == "skipped":
        assert get(lua)["skips"][0]["reason"] == "max_active_runs"
    else:
        assert lua.r.zscore(lua.key("schedules-buffered"), "f") == TICK + 60
    # with room (the first run done), a tick fires again
    lua.pop(now=TICK + 3)
    lua.complete("f@1:s0", now=TICK + 4)
    tick = TICK + 120
    if reply == "buffered":
        assert fire(lua, "buffered", expected=TICK + 60, nxt="", tick=TICK + 60) == "fired"
    else:
        assert fire(lua, expected=tick, nxt=tick + 60, tick=tick, run=limited_run("f@3", 1)) == (
            "fired"
        )


def test_cancel_running_makes_room_for_its_own_tick(lua: Lua) -> None:
    register(lua, overlap="cancel_running")
    assert fire(lua, run=limited_run("f@1", 1)) == "fired"
    got = fire(
        lua,
        expected=TICK + 60,
        nxt=TICK + 120,
        tick=TICK + 60,
        run=limited_run("f@2", 1),
        cancel="f@1",
    )
    assert got == "fired"


@pytest.mark.parametrize("command", ["flow.submit", "schedule.trigger"])
def test_a_run_started_by_hand_is_refused_at_max_active_runs(lua: Lua, command: str) -> None:
    """flow.submit and schedule.trigger hold the flow's limit in the call that would submit:
    refused with the limit and the active runs named, and nothing written."""
    register(lua)
    prefix = ["f"] if command == "schedule.trigger" else []
    assert lua.raw(command, *prefix, *limited_run("f@1", 2), now=TICK) in ("fired", "submitted")
    assert lua.raw(command, *prefix, *limited_run("f@2", 2), now=TICK + 1) in (
        "fired",
        "submitted",
    )
    with assert_unchanged(lua.r), pytest.raises(WrongState) as refused:
        lua.raw(command, *prefix, *limited_run("f@3", 2), now=TICK + 2)
    message = str(refused.value)
    assert "concurrency.max_active_runs (2)" in message
    assert "active: f@2, f@1" in message
    assert "run f@3 not submitted" in message
    # A run id that exists already is still 'exists' (nothing to refuse), and a run of another
    # flow, or one without the limit, is not held by it.
    assert lua.raw(command, *prefix, *limited_run("f@1", 2), now=TICK + 2) == "exists"
    assert lua.raw("flow.submit", *run_args("g@1", flow="g"), now=TICK + 2) == "submitted"
    # An ended run makes room.
    lua.pop(now=TICK + 3)
    lua.complete("f@1:s0", now=TICK + 4)
    assert lua.raw(command, *prefix, *limited_run("f@3", 2), now=TICK + 5) in (
        "fired",
        "submitted",
    )
