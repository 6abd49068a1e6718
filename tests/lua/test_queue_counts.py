"""queue.counts: queue length and leased jobs per queue, cheap enough to drive autoscaling
(Redis Work Queue's queue_len and processing)."""

from __future__ import annotations

import json
from typing import Any

from lua_support import T0, Lua

from scheduler.engine.client import Client


def counts(lua: Lua, *queues: str, now: float = T0) -> list[dict[str, Any]]:
    reply: list[dict[str, Any]] = json.loads(lua.raw("queue.counts", *queues, now=now))
    return reply


def test_counts_split_the_queue_the_way_an_autoscaler_reads_it(lua: Lua) -> None:
    lua.config("grace-period", 0)
    lua.config("q-heartbeat", 10)
    for n in range(5):
        lua.put(f"w{n}")
    lua.put("soon", delay=5)
    lua.put("later", delay=500)
    lua.put("dep", depends=["later"])
    lua.pop(count=2)  # w0 and w1 run until T0 + 10
    lua.pop(worker="w2", count=1, now=T0 + 4)  # w2 runs until T0 + 14
    [q, other] = counts(lua, "q", "other", now=T0 + 12)
    assert q == {
        "name": "q",
        "waiting": 2,  # w3, w4
        "due": 1,  # soon
        "backlog": 3,
        "running": 1,  # w2
        "stalled": 2,  # w0, w1: their locks expired, a pop takes them back
        "leased": 3,
        "scheduled": 2,  # soon (due) and later
        "depends": 1,
        "paused": False,
    }
    assert other == {
        "name": "other",
        "waiting": 0,
        "due": 0,
        "backlog": 0,
        "running": 0,
        "stalled": 0,
        "leased": 0,
        "scheduled": 0,
        "depends": 0,
        "paused": False,
    }
    lua("pause", "q", now=T0)
    assert counts(lua, "q", now=T0 + 12)[0]["paused"] is True


def test_the_client_reads_every_known_queue_or_the_ones_named(lua: Lua) -> None:
    lua.put("a", "q1")
    lua.put("b", "q2")
    client = Client.from_engine(lua.engine)
    assert [c["name"] for c in client.queues.load(now=T0)] == ["q1", "q2"]
    assert client.queues["q2"].load(now=T0)["backlog"] == 1
    assert client.queues.load("q2", "q1", now=T0)[1]["waiting"] == 1
