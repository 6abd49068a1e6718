"""Helpers of the script-level tier (``from lua_support import T0, Lua, ...``): the engine called
directly, time always passed explicitly. The fixtures that use them are in this folder's conftest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from helpers import assert_unchanged
from helpers import digest as digest

from scheduler.engine.events import EVENT_KINDS
from scheduler.engine.scripts import Engine

# The tier's short name for the shared helper (tests import it from here).
unchanged = assert_unchanged

# 01:00 UTC: the day's statistics bin starts an hour earlier, so offsets below a day stay in it.
T0 = 1_699_923_600.0
DAY = 86400.0
NAMESPACE = "{test}:"
# What an outside writer may leave in a key the engine reads that it refuses as a jid: white
# space, a control character, a suffix of the key layout (the key of a job's history).
NOT_JIDS = ("bad jid", "ctl\x01x", "x-history")

# Commands whose reply is JSON text (decoded by Lua.__call__).
JSON_REPLIES = {
    "get",
    "multiget",
    "queues",
    "pop",
    "pop.lean",
    "peek",
    "failed",
    "stats",
    "tag",
    "track",
    "workers",
    "recur.get",
    "recur.tag",
    "recur.untag",
}
LIST_FIELDS = ("tags", "dependents", "dependencies", "history")

MODES = [
    pytest.param((True, None), id="fcall"),
    pytest.param((False, None), id="evalsha"),
    pytest.param((True, NAMESPACE), id="fcall-prefix"),
    pytest.param((False, NAMESPACE), id="evalsha-prefix"),
]


def as_list(value: Any) -> Any:
    """cjson writes an empty list as ``{}``: read it back as ``[]``."""
    return [] if value == {} else value


def normalize(job: Any) -> Any:
    if isinstance(job, dict):
        for field in LIST_FIELDS:
            if field in job:
                job[field] = as_list(job[field])
        if job.get("failure") == []:
            job["failure"] = {}
    return job


class Lua:
    """The engine in one namespace, with shorthands for the common calls.

    ``lua(command, *args, now=...)`` returns the reply, JSON decoded for the commands that reply
    JSON (empty lists normalized). ``now`` is required: no test depends on the clock.
    """

    def __init__(self, engine: Engine, r: redis.Redis) -> None:
        self.engine = engine
        self.r = r
        self.prefix = engine.key_prefix

    def raw(self, command: str, *args: Any, now: float | str) -> Any:
        return self.engine.call(command, *args, now=now)

    def __call__(self, command: str, *args: Any, now: float | str) -> Any:
        reply = self.raw(command, *args, now=now)
        if (
            command in JSON_REPLIES
            and isinstance(reply, str)
            and reply[:1] in ("{", "[")
            and not (command == "track" and args)
        ):
            reply = json.loads(reply)
            if command in ("get", "recur.get"):
                return normalize(reply)
            if isinstance(reply, list):
                return [normalize(item) for item in reply]
            if isinstance(reply, dict) and "jobs" in reply:
                reply["jobs"] = [normalize(item) for item in as_list(reply["jobs"])]
                for field in ("expired",):
                    if field in reply:
                        reply[field] = as_list(reply[field])
        return reply

    # -- shorthands --------------------------------------------------------------------------

    def key(self, name: str) -> str:
        return self.prefix + name

    def job(self, jid: str, now: float = T0) -> dict[str, Any] | None:
        job: dict[str, Any] | None = self("get", jid, now=now)
        return job

    def state(self, jid: str, now: float = T0) -> str | None:
        job = self.job(jid, now)
        return None if job is None else job["state"]

    def put(
        self,
        jid: str,
        queue: str = "q",
        *,
        now: float = T0,
        delay: float = 0,
        data: str = "{}",
        klass: str = "K",
        worker: str = "client",
        command: str = "put",
        **options: Any,
    ) -> Any:
        args: list[Any] = [worker, queue, jid, klass, data, delay]
        for name, value in options.items():
            args += [name, json.dumps(value) if isinstance(value, list | dict) else value]
        return self(command, *args, now=now)

    def pop(self, queue: str = "q", worker: str = "w1", count: int = 1, *, now: float = T0) -> Any:
        return self("pop", queue, worker, count, now=now)

    def pop_jids(
        self, queue: str = "q", worker: str = "w1", count: int = 1, *, now: float = T0
    ) -> list[str]:
        return [job["jid"] for job in self.pop(queue, worker, count, now=now)]

    def complete(
        self,
        jid: str,
        worker: str = "w1",
        queue: str = "q",
        *,
        now: float = T0,
        data: str = "{}",
        **options: Any,
    ) -> Any:
        args: list[Any] = [jid, worker, queue, data]
        for name, value in options.items():
            args += [name, json.dumps(value) if isinstance(value, list | dict) else value]
        return self("complete", *args, now=now)

    def config(self, option: str, value: Any, *, now: float = T0) -> None:
        self("config.set", option, value, now=now)

    def namespace_keys(self) -> set[str]:
        return set(self.r.scan_iter(match=self.prefix + "*", count=500))

    def zset(self, name: str) -> list[str]:
        return list(self.r.zrange(self.key(name), 0, -1))

    def waiting(self, queue: str) -> list[str]:
        """The waiting jids of ``queue`` in pop order, read from its two keys
        (lua/include/work.lua): scores below 2^32, the list, the other scores."""
        work = self.key(f"q:{queue}-work")
        first = list(self.r.zrangebyscore(work, "-inf", f"({2**32}"))
        rest = list(self.r.zrangebyscore(work, 2**32, "+inf"))
        return first + list(self.r.lrange(self.key(f"q:{queue}-fifo"), 0, -1)) + rest

    def history(self, jid: str, now: float = T0) -> list[str]:
        job = self.job(jid, now)
        assert job is not None
        return [entry["what"] for entry in job["history"]]


def calls(lua: Lua, *names: str) -> dict[str, int]:
    """How often each of the Redis commands ``names`` ran since CONFIG RESETSTAT (those that did):
    the writes a call makes, each an entry of the append-only file and the replicas' stream."""
    stats = lua.r.info("commandstats")
    return {n: int(stats[f"cmdstat_{n}"]["calls"]) for n in names if f"cmdstat_{n}" in stats}


def submit_steps(
    lua: Lua, run_id: str, *steps: tuple[str, list[str]], now: float = T0, **extra: Any
) -> None:
    """``flow.submit`` of run ``run_id``: a job ``<run id>:<step>`` per ``(step, needs)``, each
    needing its steps' jobs; ``extra`` maps a step to more fields of its job."""
    jobs = [
        {
            "jid": f"{run_id}:{step}",
            "queue": "q",
            "klass": "K",
            "data": "{}",
            "retries": 0,
            "depends": [f"{run_id}:{n}" for n in needs],
            "trigger": "all_success",
            **extra.get(step, {}),
        }
        for step, needs in steps
    ]
    lua.raw("flow.submit", run_id, json.dumps({"flow": "f"}), json.dumps(jobs), now=now)


def assert_counts_kept(api: Lua) -> None:
    """Every run's kept counts (include/run_counts.lua) are what a scan of its jobs finds, and
    the status the run list gives from them is the one run.read decides from its jobs."""
    marker = api.prefix + "run-counts:"
    runs = [key[len(marker) :] for key in api.r.scan_iter(match=marker + "*", count=500)]
    if not runs:
        return
    listed = {r["id"]: r["status"] for r in json.loads(api("runs.statuses", "", 0, 1000, now=T0))}
    for run_id in runs:
        if not api.r.exists(api.prefix + "run:" + run_id) or api.r.hexists(
            key_of(api, run_id), "!unkept"
        ):
            continue  # not kept: a jid of it does not start with the run's id (always scanned)
        reply = json.loads(api("run.counts", run_id, now=T0))
        assert reply["kept"] == reply["scanned"], f"run {run_id}: counts drifted"
        read = json.loads(api("run.read", run_id, now=T0))
        if run_id in listed:
            assert listed[run_id] == read["status"], f"run {run_id}: statuses differ"
        # the same read from a scan of every job (a run without counts is read so)
        api.r.rename(key_of(api, run_id), key_of(api, run_id) + "-aside")
        try:
            scanned = json.loads(api("run.read", run_id, now=T0))
        finally:
            api.r.rename(key_of(api, run_id) + "-aside", key_of(api, run_id))
        assert read == scanned, f"run {run_id}: the read from counts differs from a scan"


def key_of(api: Lua, run_id: str) -> str:
    return api.prefix + "run-counts:" + run_id


def lua_in_mode(mode: tuple[bool, str | None], redis_client: redis.Redis) -> Iterator[Lua]:
    """The Lua helper for one mode; afterwards, no key may exist outside its namespace."""
    use_functions, prefix = mode
    api = Lua(Engine(redis_client, prefix=prefix, use_functions=use_functions), redis_client)
    yield api
    assert_counts_kept(api)
    stray = sorted(k for k in redis_client.scan_iter(count=500) if not k.startswith(api.prefix))
    assert not stray, f"keys written outside the namespace {api.prefix!r}: {stray[:10]}"


def assert_known_kind(data: str) -> None:
    """A JSON event's kind is one Python knows (``EventListener.on`` accepts it)."""
    event = json.loads(data).get("event") if data.startswith("{") else None
    assert event is None or event in EVENT_KINDS, f"an event of a kind Python does not know: {data}"


class Channels:
    """Every message the server publishes (pattern ``*``), read up to a sentinel so no test waits.

    ``collect()`` publishes a sentinel from the test and returns what came before it: the engine's
    messages were published inside calls that already returned, so they all precede it.
    """

    SENTINEL = "__sentinel__"

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.pubsub = r.pubsub()
        self.pubsub.psubscribe("*")
        # Wait for the subscription to be confirmed before any engine call.
        message = self.pubsub.get_message(timeout=5)
        assert message and message["type"] == "psubscribe"

    def collect(self) -> list[tuple[str, str]]:
        self.r.publish(self.SENTINEL, "end")
        out: list[tuple[str, str]] = []
        while True:
            message = self.pubsub.get_message(timeout=5)
            assert message is not None, "sentinel never arrived"
            assert message["type"] == "pmessage", message
            if message["channel"] == self.SENTINEL:
                return out
            assert_known_kind(message["data"])
            out.append((message["channel"], message["data"]))

    def close(self) -> None:
        self.pubsub.close()
