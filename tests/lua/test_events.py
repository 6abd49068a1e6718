"""What the engine publishes: P log, P w:<worker>, the tracked-job channels and P ready:<queue>.

Every message is read (pattern ``*``), so a channel outside the namespace would show up too.
"""

from __future__ import annotations

import json
from typing import Any

from lua_support import T0, Channels, Lua


def decoded(lua: Lua, messages: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for channel, data in messages:
        assert channel.startswith(lua.prefix), f"published outside the namespace: {channel}"
        name = channel[len(lua.prefix) :]
        out.append((name, json.loads(data) if data.startswith("{") else data))
    return out


def events(lua: Lua, channels: Channels) -> list[tuple[str, Any]]:
    return decoded(lua, channels.collect())


def test_put_publishes_log_and_ready(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.put("b", delay=10)
    lua.put("c", depends=["a"])
    assert events(lua, channels) == [
        ("ready:q", "q"),
        ("log", {"jid": "a", "event": "put", "queue": "q"}),
        ("log", {"jid": "b", "event": "put", "queue": "q"}),
        ("log", {"jid": "c", "event": "put", "queue": "q"}),
    ]


def test_put_event_quotes_names_as_cjson_does(lua: Lua, channels: Channels) -> None:
    # A jid and a queue may hold '"' (escaped) and UTF-8 (kept as it is), as cjson writes them.
    lua.put('a"b', 'q"\u00e9')
    logged = [data for channel, data in channels.collect() if channel == lua.prefix + "log"]
    assert logged == ['{"jid":"a\\"b","event":"put","queue":"q\\"\u00e9"}']


def test_ready_once_per_call_and_queue(lua: Lua, channels: Channels) -> None:
    for jid in "abc":
        lua.put(jid, delay=5)
    channels.collect()
    lua.put("d", "q2", now=T0 + 5)
    # a pop that promotes three jobs publishes ready:q once
    lua.pop_jids(count=1, now=T0 + 5)
    assert [e for e in events(lua, channels) if e[0].startswith("ready:")] == [
        ("ready:q2", "q2"),
        ("ready:q", "q"),
    ]


def test_tracked_job_lifecycle(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua("track", "track", "a", now=T0)
    lua.put("a", now=T0 + 1)
    lua.pop_jids(now=T0 + 2)
    lua.complete("a", now=T0 + 3)
    lua("track", "untrack", "a", now=T0 + 4)
    assert [e for e in events(lua, channels) if e[0] != "ready:q"] == [
        ("log", {"jid": "a", "event": "put", "queue": "q"}),
        ("track", "a"),
        ("put", "a"),
        ("log", {"jid": "a", "event": "put", "queue": "q"}),
        ("popped", "a"),
        ("completed", "a"),
        ("log", {"jid": "a", "event": "completed", "queue": "q"}),
        ("untrack", "a"),
    ]


def test_untracked_jobs_publish_nothing_on_tracked_channels(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.pop_jids()
    lua("fail", "a", "w1", "g", "m", now=T0)
    names = {name for name, _ in events(lua, channels)}
    assert names == {"log", "ready:q"}


def test_complete_with_next_publishes_advanced(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.pop_jids()
    channels.collect()
    lua.complete("a", next="q2")
    assert events(lua, channels) == [
        ("log", {"jid": "a", "event": "advanced", "queue": "q", "to": "q2"}),
        ("ready:q2", "q2"),
    ]


def test_fail_publishes_failed(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua("track", "track", "a", now=T0)
    lua.pop_jids()
    channels.collect()
    lua("fail", "a", "w1", "boom", "it broke", now=T0)
    assert events(lua, channels) == [
        ("failed", "a"),
        (
            "log",
            {"jid": "a", "event": "failed", "worker": "w1", "group": "boom", "message": "it broke"},
        ),
    ]


def test_retry_exhaustion_publishes_failed(lua: Lua, channels: Channels) -> None:
    lua.put("a", retries=0)
    lua.pop_jids()
    channels.collect()
    lua("retry", "a", "q", "w1", now=T0)
    assert events(lua, channels) == [
        (
            "log",
            {
                "jid": "a",
                "event": "failed",
                "worker": "w1",
                "group": "failed-retries-q",
                "message": 'Job exhausted retries in queue "q"',
            },
        ),
    ]


def test_retry_publishes_ready(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.pop_jids()
    channels.collect()
    lua("retry", "a", "q", "w1", now=T0)
    assert events(lua, channels) == [("ready:q", "q")]


def test_cancel_of_a_running_job_tells_its_worker(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua("track", "track", "a", now=T0)
    lua.pop_jids()
    channels.collect()
    lua("cancel", "a", now=T0)
    told = {"jid": "a", "event": "canceled", "worker": "w1"}
    assert events(lua, channels) == [
        ("w:w1", told),
        ("log", told),
        ("canceled", "a"),
        ("log", {"jid": "a", "event": "canceled", "worker": "w1", "queue": "q"}),
    ]


def test_timeout_tells_the_worker_lock_lost(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua("track", "track", "a", now=T0)
    lua.pop_jids()
    channels.collect()
    lua("timeout", "a", now=T0 + 1)
    lost = {"jid": "a", "event": "lock_lost", "worker": "w1"}
    assert events(lua, channels) == [("stalled", "a"), ("w:w1", lost), ("log", lost)]


def test_lock_expiry_tells_the_worker_once(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.pop_jids()
    channels.collect()
    lua.pop_jids(worker="w2", now=T0 + 60)
    lua.pop_jids(worker="w2", now=T0 + 65)
    lost = {"jid": "a", "event": "lock_lost", "worker": "w1"}
    assert events(lua, channels) == [("w:w1", lost), ("log", lost)]
    lua.pop_jids(worker="w2", now=T0 + 70)  # reclaimed: no second message
    assert events(lua, channels) == []


def test_put_moving_a_running_job_tells_the_old_worker(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.pop_jids()
    channels.collect()
    lua.put("a", "q2", now=T0 + 1)
    lost = {"jid": "a", "event": "lock_lost", "worker": "w1"}
    assert events(lua, channels) == [
        ("w:w1", lost),
        ("log", lost),
        ("ready:q2", "q2"),
        ("log", {"jid": "a", "event": "put", "queue": "q2"}),
    ]


def test_released_dependents_publish_ready(lua: Lua, channels: Channels) -> None:
    lua.put("a")
    lua.put("b", "q2", depends=["a"])
    lua.pop_jids()
    channels.collect()
    lua.complete("a")
    assert events(lua, channels) == [
        ("log", {"jid": "a", "event": "completed", "queue": "q"}),
        ("ready:q2", "q2"),
    ]


def test_config_events(lua: Lua, channels: Channels) -> None:
    lua.config("heartbeat", 30)
    lua("config.unset", "heartbeat", now=T0)
    assert events(lua, channels) == [
        ("log", {"event": "config_set", "option": "heartbeat", "value": "30"}),
        ("log", {"event": "config_unset", "option": "heartbeat"}),
    ]


def test_unpause_publishes_ready_only_with_waiting_jobs(lua: Lua, channels: Channels) -> None:
    lua("pause", "q", "empty", now=T0)
    lua.put("a")
    channels.collect()
    lua("unpause", "q", "empty", now=T0)
    assert events(lua, channels) == [("ready:q", "q")]


def test_reads_publish_nothing(lua: Lua, channels: Channels) -> None:
    lua.put("a", tags=["t"])
    lua.pop_jids()
    channels.collect()
    for command, args in [
        ("get", ["a"]),
        ("multiget", ["a"]),
        ("queues", []),
        ("queues", ["q"]),
        ("peek", ["q", 5]),
        ("failed", []),
        ("jobs", ["running", "q"]),
        ("stats", ["q", T0]),
        ("workers", []),
        ("tag", ["get", "t"]),
        ("track", []),
        ("config.get", []),
        ("length", ["q"]),
    ]:
        lua(command, *args, now=T0)
    assert events(lua, channels) == []


def _run_jobs(*specs: dict[str, Any]) -> str:
    return json.dumps(
        [{"queue": "q", "klass": "K", "data": "{}", "trigger": "all_success", **s} for s in specs]
    )


def test_a_submitted_run_is_announced_once_not_job_by_job(lua: Lua, channels: Channels) -> None:
    # One event for the run (its jobs are its `run:<id>-jobs`), not a put event per job.
    jobs = _run_jobs({"jid": "r:a"}, {"jid": "r:b", "depends": ["r:a"]})
    assert lua("flow.submit", "r", '{"flow": "f"}', jobs, now=T0) == "submitted"
    assert events(lua, channels) == [
        ("ready:q", "q"),
        ("log", {"event": "run_submitted", "run": "r", "flow": "f", "jobs": 2}),
    ]


def test_a_fan_out_is_announced_once_not_item_by_item(lua: Lua, channels: Channels) -> None:
    template = {"jid": "r:each", "depends": ["r:list"], "fanout": {"from": "r:list", "output": "x"}}
    jobs = _run_jobs({"jid": "r:list"}, template)
    lua("flow.submit", "r", '{"flow": "f"}', jobs, now=T0)
    lua.pop_jids(now=T0 + 1)
    channels.collect()
    lua.complete("r:list", now=T0 + 1, result=json.dumps({"x": [1, 2, 3]}))
    logged = [data for name, data in events(lua, channels) if name == "log"]
    assert [e["event"] for e in logged] == ["completed", "fanout"]
    assert logged[1] == {"jid": "r:each", "event": "fanout", "items": 3, "run": "r"}
