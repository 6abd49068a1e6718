"""The read-only entry (``FCALL_RO`` of the library's ``no-writes`` function): every command of
``lua/include/reads.lua`` answers through it, on a server that refuses writes too, and any other
command is refused by it with nothing changed."""

from __future__ import annotations

import json

import pytest
import redis
from helpers import assert_unchanged

from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine, read_commands, read_function_name

T0 = 1_699_923_600.0

# Arguments of each read, on the namespace `populate` leaves.
READ_ARGS: dict[str, list[object]] = {
    "get": ["waiting"],
    "multiget": ["waiting", "failed"],
    "jobs": ["waiting", "q"],
    "length": ["q"],
    "queues": [],
    "queue.counts": ["q"],
    "queue.stats": ["q"],
    "stats": ["q", T0],
    "failed": [],
    "failed.dropped": [],
    "config.get": [],
    "throttle.get": [],
    "recur.get": ["every"],
    "run.get": ["no-such-run"],
    "run.read": ["no-such-run"],
    "run.job": ["no-such-run", "no-such-run:a"],
    "run.counts": ["no-such-run"],
    "runs.statuses": [],
    "catalog.list": [],
    "catalog.sources": [],
    "runs": [],
    "schedule.get": ["no-such-schedule"],
    "schedule.list": [],
    "schedulers": [],
    "doctor.names": ["queues"],
    "doctor.index": ["work", "q"],
    "doctor.jobs": ["waiting", "failed"],
    "wait.get": ["waiting"],
    "deadline.count": [],
    "job.explain": ["waiting"],
    "cache.list": [],
    "backfill.get": ["no-such-backfill"],
    "backfill.list": [],
    "backfill.runs": ["no-such-run"],
}


def populate(engine: Engine) -> None:
    client = Client.from_engine(engine, worker_name="w")
    queue = client.queues["q"]
    queue.put("tasks.a", {}, jid="failed", now=T0)
    queue.pop(now=T0)[0].fail("boom", "it failed", now=T0)
    queue.put("tasks.a", {}, jid="waiting", now=T0)
    queue.recur("tasks.r", {}, 60, jid="every", now=T0)


def read_only(engine: Engine, command: str, *args: object) -> object:
    keys = [] if engine.prefix is None else [engine.prefix]
    return engine.redis.execute_command(
        "FCALL_RO", read_function_name(), len(keys), *keys, command, T0, *args
    )


def test_every_read_has_arguments_here() -> None:
    assert set(READ_ARGS) == read_commands()


@pytest.mark.parametrize("command", sorted(READ_ARGS))
def test_each_read_answers_through_the_read_only_entry_on_a_full_server(
    engine: Engine, command: str
) -> None:
    engine.load()
    populate(engine)
    r = engine.redis
    r.config_set("maxmemory", 1)
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            r.set("probe", "x")  # writes are refused
        with assert_unchanged(r):
            reply = read_only(engine, command, *READ_ARGS[command])
        assert reply == engine.call(command, *READ_ARGS[command], now=T0)
    finally:
        r.config_set("maxmemory", 0)
    if command == "get":
        assert json.loads(str(reply))["state"] == "waiting"


@pytest.mark.parametrize("command", ["put", "cancel", "pop", "peek", "workers", "worker.list"])
def test_the_read_only_entry_refuses_every_other_command(engine: Engine, command: str) -> None:
    engine.load()
    populate(engine)
    with (
        assert_unchanged(engine.redis),
        pytest.raises(
            redis.ResponseError,
            match=rf'^INVALID Engine\(\): "{command}" is not a read-only command',
        ),
    ):
        read_only(engine, command, "q", "w", "j", "tasks.a", "{}", 0)
