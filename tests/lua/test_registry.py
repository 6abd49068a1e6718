"""Blueque's listener registry and "which node and pid ran it": worker.register, worker.list (per
queue), ageing out by max-worker-age, and the host and pid the history of each job keeps."""

from __future__ import annotations

import json
from typing import Any

from lua_support import T0, Lua

from scheduler.engine.client import Client
from scheduler.engine.job import RanBy

DAY = 86400.0


def register(lua: Lua, worker: str, queues: list[str], now: float = T0, **extra: Any) -> None:
    info = {"host": f"host-{worker}", "pid": 4000 + len(worker), "queues": queues, **extra}
    lua("worker.register", worker, json.dumps(info), now=now)


def listing(lua: Lua, *queue: str, now: float = T0) -> list[dict[str, Any]]:
    reply: list[dict[str, Any]] = json.loads(lua.raw("worker.list", *queue, now=now))
    return reply


def test_history_entries_keep_the_host_and_pid_of_the_worker(lua: Lua) -> None:
    register(lua, "w1", ["q"])
    lua.put("a")
    lua.put("b")
    lua.pop(count=2)
    lua.complete("a", result='{"x": 1}')
    lua("fail.held", "b", "w1", "g", "m", now=T0)
    lua("worker.deregister", "w1", now=T0)  # gone afterwards: the history still knows
    for jid, last in (("a", "done"), ("b", "failed")):
        entries = {e["what"]: e for e in lua.job(jid)["history"]}  # type: ignore[index]
        for what in ("popped", last):
            assert (entries[what]["host"], entries[what]["pid"]) == ("host-w1", 4002), what
        assert "host" not in entries["put"]
    job = Client.from_engine(lua.engine).jobs["a"]
    assert job.ran_by == RanBy("w1", "host-w1", 4002)
    assert job.result == {"x": 1}


def test_an_unregistered_worker_leaves_no_host_and_a_log_keeps_its_own(lua: Lua) -> None:
    lua.put("a")
    lua.pop(worker="anonymous")
    register(lua, "w1", ["q"], padding="x" * 9000)  # too large to copy into every entry
    register(lua, "w2", ["q"])
    lua("log", "a", "note", '{"worker": "w1"}', now=T0)
    lua("log", "a", "note", '{"worker": "w2", "host": "mine"}', now=T0)
    lua("timeout", "a", now=T0)
    history = lua.job("a")["history"]  # type: ignore[index]
    assert "host" not in history[1] and history[1]["worker"] == "anonymous"
    assert "host" not in history[2] and "pid" not in history[2]
    assert (history[3]["host"], history[3]["pid"]) == ("mine", 4002)
    assert "host" not in history[4]
    assert Client.from_engine(lua.engine).jobs["a"].ran_by == RanBy("anonymous", None, None)


def test_a_job_that_never_ran_was_run_by_nobody(lua: Lua) -> None:
    lua.put("a")
    assert Client.from_engine(lua.engine).jobs["a"].ran_by is None


def test_the_registry_lists_workers_per_queue(lua: Lua) -> None:
    register(lua, "w1", ["q", "r"])
    register(lua, "w2", ["r"], now=T0 + 1)
    lua.put("a")
    lua.pop(worker="poller", now=T0 + 2)  # pops without registering
    everyone = listing(lua, now=T0 + 3)
    assert [w["name"] for w in everyone] == ["poller", "w2", "w1"]
    assert everyone[0] == {
        "name": "poller",
        "last_seen": T0 + 2,
        "silent": False,
        "jobs": 1,
        "stalled": 0,
        "info": {},
    }
    assert everyone[2]["info"] == {"host": "host-w1", "pid": 4002, "queues": ["q", "r"]}
    assert [w["name"] for w in listing(lua, "r", now=T0 + 3)] == ["w2", "w1"]
    assert [w["name"] for w in listing(lua, "q", now=T0 + 3)] == ["w1"]
    assert listing(lua, "nobody", now=T0 + 3) == []
    client = Client.from_engine(lua.engine)
    assert [w["name"] for w in client.workers.registry("r", now=T0 + 3)] == ["w2", "w1"]


def test_dead_workers_age_out_with_their_registrations(lua: Lua) -> None:
    lua.config("max-worker-age", DAY)
    register(lua, "old", ["q"])
    register(lua, "new", ["q"], now=T0 + DAY)
    later = T0 + DAY + 1
    assert [w["name"] for w in listing(lua, now=later)] == ["new"]
    assert not lua.r.exists(lua.key("w:old:info"))
    assert json.loads(lua.raw("worker.info", now=later)) == {
        "new": {"host": "host-new", "pid": 4003, "queues": ["q"]}
    }
    assert [w["name"] for w in lua("workers", now=later)] == ["new"]


def test_a_dead_idle_worker_ages_out_with_its_inbox_and_its_wait(lua: Lua) -> None:
    """An inbox carries no expiry: it goes with its worker."""
    lua.config("max-worker-age", DAY)
    register(lua, "old", ["q"])
    assert lua.raw("await", "old", 30, 1, "q", now=T0) == "[]"
    lua.r.rpush(lua.key("w:old:inbox"), "[]")  # a wake-up it never read
    assert lua.r.exists(lua.key("w:old:inbox"), lua.key("w:old:waiting")) == 2
    assert [w["name"] for w in listing(lua, now=T0 + DAY + 1)] == []
    assert not lua.r.exists(lua.key("w:old:info"), lua.key("w:old:inbox"), lua.key("w:old:waiting"))


def test_ageing_out_is_bounded_per_call_but_never_shows_the_dead(lua: Lua) -> None:
    for n in range(150):
        register(lua, f"dead{n:03d}", ["q"])
    later = T0 + DAY + 1
    assert lua("workers", now=later) == []
    assert lua.r.zcard(lua.key("workers")) == 50  # the next call drops the rest
    assert json.loads(lua.raw("worker.info", now=later)) == {}
    assert lua.r.zcard(lua.key("workers")) == 0
    assert not any(key.endswith(":info") for key in lua.namespace_keys())


def test_created_stays_and_updated_follows_every_change(lua: Lua) -> None:
    """Blueque's task timestamps: created once, updated by every transition."""
    client = Client.from_engine(lua.engine)
    lua.put("a", now=T0)
    steps = [
        lambda t: lua.pop(now=t),
        lambda t: lua("fail", "a", "w1", "g", "m", now=t),
        lambda t: lua("unfail", "q", "g", now=t),
        lambda t: lua.pop(now=t),
        lambda t: lua("retry", "a", "q", "w1", 0, now=t),
        lambda t: lua.pop(now=t),
        lambda t: lua.complete("a", now=t),
    ]
    for n, step in enumerate(steps, start=1):
        step(T0 + n)
        job = client.jobs["a"]
        assert (job.created, job.updated) == (T0, T0 + n), (n, job.state)


def test_worker_list_marks_workers_not_heard_from_for_worker_silent_after(lua: Lua) -> None:
    register(lua, "old", ["q"], now=T0)
    register(lua, "new", ["q"], now=T0 + 50)
    at = {w["name"]: (w["last_seen"], w["silent"]) for w in listing(lua, now=T0 + 60)}
    assert at == {"old": (T0, True), "new": (T0 + 50, False)}  # 60 s: silent from then on
    lua.config("worker-silent-after", 5)
    assert [w["silent"] for w in listing(lua, now=T0 + 54)] == [False, True]
    lua.pop(worker="old", now=T0 + 54)  # any call of the worker is a word from it
    assert [(w["name"], w["silent"]) for w in listing(lua, now=T0 + 55)] == [
        ("old", False),
        ("new", True),
    ]


def last_workers(lua: Lua) -> dict[str, dict[str, Any]]:
    return {q: json.loads(v) for q, v in lua.r.hgetall(lua.key("workers-last")).items()}


def test_a_worker_gone_is_kept_as_the_last_worker_of_its_queues(lua: Lua) -> None:
    register(lua, "w1", ["q", "r"])
    register(lua, "w2", ["r"], now=T0 + 1)
    lua.pop_jids(worker="poller", now=T0 + 2)  # never registered: listens on nothing known
    lua("worker.deregister", "w2", "poller", now=T0 + 3)
    assert last_workers(lua) == {"r": {"worker": "w2", "seen": T0 + 3}}
    lua.config("max-worker-age", DAY)
    assert listing(lua, now=T0 + DAY + 1) == []  # w1 aged out, seen at T0
    assert last_workers(lua) == {
        "q": {"worker": "w1", "seen": T0},
        "r": {"worker": "w2", "seen": T0 + 3},  # seen after w1: kept
    }


def test_the_last_workers_are_bounded(lua: Lua) -> None:
    many = [f"q{n:04d}" for n in range(150)]
    register(lua, "wide", many)
    lua("worker.deregister", "wide", now=T0)
    assert sorted(last_workers(lua)) == many[:100]  # a registration's first 100 queues
    for n in range(10):  # 1,100 queues in all: the ones seen longest ago make room
        queues = [f"w{n}-{k:03d}" for k in range(100)]
        register(lua, f"w{n}", queues, now=T0 + n)
        lua("worker.deregister", f"w{n}", now=T0 + 10 + n)
    kept = last_workers(lua)
    assert len(kept) == 1000
    assert not any(q in kept for q in many)
    assert kept["w9-099"] == {"worker": "w9", "seen": T0 + 19}
