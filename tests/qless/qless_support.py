"""Helpers of the qless-dialect tier: the bundle called as a qless client calls it.

:class:`Qless` speaks qless's calling convention, ``EVALSHA <sha> 0 <command> <now> <args...>``,
with the script ``flows engine bundle`` prints: dicts and lists go as JSON, and a JSON reply is
read back parsed (empty lists arrive as ``{}``, as qless-core writes them). :class:`Events`
records what the server publishes on the ``ql:`` channels.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from scheduler.engine.scripts import qless_bundle


def encode(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


class Qless:
    """The qless bundle in the ``ql:`` layout, every call at an explicit time."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.sha = r.script_load(qless_bundle())

    def raw(self, command: str, now: float, *args: Any) -> Any:
        return self.r.evalsha(self.sha, 0, command, now, *(encode(a) for a in args))

    def __call__(self, command: str, now: float, *args: Any) -> Any:
        reply = self.raw(command, now, *args)
        if isinstance(reply, str):
            try:
                return json.loads(reply)
            except ValueError:
                return reply
        return reply

    def job(self, jid: str, now: float = 0) -> dict[str, Any]:
        job = self("get", now, jid)
        assert isinstance(job, dict), f"no job {jid}"
        return job

    def running(
        self, jid: str, queue: str = "queue", worker: str = "worker", now: float = 0
    ) -> None:
        """Put a job and pop it (the usual start of a test)."""
        self("put", now, worker, queue, jid, "klass", {}, 0)
        popped = self("pop", now, queue, worker, 10)
        assert [job["jid"] for job in popped] == [jid]


class Events:
    """Every message on the ``ql:`` channels, read up to a sentinel so no test waits."""

    SENTINEL = "qless-test-sentinel"

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.pubsub = r.pubsub()
        self.pubsub.psubscribe("ql:*", self.SENTINEL)
        for _ in range(2):
            message = self.pubsub.get_message(timeout=5)
            assert message and message["type"] == "psubscribe"

    def collect(self) -> list[tuple[str, Any]]:
        """The messages since the last collect: (channel, data), JSON data parsed."""
        self.r.publish(self.SENTINEL, "end")
        out: list[tuple[str, Any]] = []
        while True:
            message = self.pubsub.get_message(timeout=5)
            assert message is not None, "sentinel never arrived"
            if message["type"] != "pmessage":
                continue
            if message["channel"] == self.SENTINEL:
                return out
            data = message["data"]
            if data.startswith("{"):
                data = json.loads(data)
            out.append((message["channel"], data))

    def close(self) -> None:
        self.pubsub.close()
