"""A minimal qless client, written for these tests: the calls qless-py makes, nothing of ours.

It speaks to the bundle as qless-py's current client does (one script, ``EVALSHA <sha> 0
<command> <now> <args...>``, JSON arguments and replies, the worker name sent with every put,
``failed <group>`` read as jids then fetched with ``multiget``, ``{}`` read as an empty list), so a
scenario that runs here runs for a qless client. The clock is the test's: ``client.now``.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from scheduler.engine.scripts import qless_bundle


def as_list(value: Any) -> list[Any]:
    """qless writes an empty list as ``{}``."""
    return [] if value == {} or value is None else list(value)


class Client:
    def __init__(self, r: redis.Redis, worker_name: str = "host-1") -> None:
        self.redis = r
        self.worker_name = worker_name
        self.now = 0.0
        self._script = r.register_script(qless_bundle())
        self.jobs = Jobs(self)
        self.workers = Workers(self)
        self.config = Config(self)

    def __call__(self, command: str, *args: Any) -> Any:
        return self._script(keys=[], args=[command, repr(self.now), *args])

    def queue(self, name: str) -> Queue:
        return Queue(name, self)


class Config:
    """qless-py's dict-like view of the settings: one value read back as JSON when it is."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __getitem__(self, option: str) -> Any:
        value = self.client("config.get", option)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    def __setitem__(self, option: str, value: Any) -> None:
        self.client("config.set", option, value)

    def __delitem__(self, option: str) -> None:
        self.client("config.unset", option)

    def all(self) -> dict[str, Any]:
        return dict(json.loads(self.client("config.get")))

    def clear(self) -> None:
        for option in self.all():
            self.client("config.unset", option)

    def update(self, settings: dict[str, Any]) -> None:
        for option, value in settings.items():
            self[option] = value

    def pop(self, option: str) -> Any:
        value = self[option]
        del self[option]
        return value


class Job:
    def __init__(self, client: Client, **fields: Any) -> None:
        self.client = client
        self.jid: str = fields["jid"]
        self.klass_name: str = fields["klass"]
        self.queue_name: str = fields["queue"]
        self.state: str = fields["state"]
        self.worker_name: str = fields["worker"]
        self.data: Any = json.loads(fields["data"])
        self.priority: int = fields["priority"]
        self.tags = as_list(fields["tags"])
        self.expires_at: float = fields["expires"]
        self.original_retries: int = fields["retries"]
        self.retries_left: int = fields["remaining"]
        self.failure: dict[str, Any] = fields["failure"]
        self.history = as_list(fields["history"])
        self.dependencies = as_list(fields["dependencies"])
        self.dependents = as_list(fields["dependents"])
        self.tracked: bool = fields["tracked"]
        self.spawned_from_jid = fields["spawned_from_jid"]

    def complete(self, nextq: str | None = None, delay: float = 0, depends: Any = None) -> Any:
        if nextq:
            return self.client(
                "complete",
                self.jid,
                self.client.worker_name,
                self.queue_name,
                json.dumps(self.data),
                "next",
                nextq,
                "delay",
                delay or 0,
                "depends",
                json.dumps(depends or []),
            )
        return self.client(
            "complete", self.jid, self.client.worker_name, self.queue_name, json.dumps(self.data)
        )

    def heartbeat(self) -> float:
        self.expires_at = float(
            self.client("heartbeat", self.jid, self.client.worker_name, json.dumps(self.data)) or 0
        )
        return self.expires_at

    def fail(self, group: str, message: str) -> Any:
        return (
            self.client(
                "fail", self.jid, self.client.worker_name, group, message, json.dumps(self.data)
            )
            or False
        )

    def retry(self, delay: float = 0, group: str | None = None, message: str | None = None) -> int:
        args = ["retry", self.jid, self.queue_name, self.client.worker_name, delay]
        if group is not None and message is not None:
            args += [group, message]
        return int(self.client(*args))

    def cancel(self) -> Any:
        return self.client("cancel", self.jid)

    def track(self) -> Any:
        return self.client("track", "track", self.jid)

    def tag(self, *tags: str) -> Any:
        return json.loads(self.client("tag", "add", self.jid, *tags))

    def depend(self, *jids: str) -> Any:
        return self.client("depends", self.jid, "on", *jids)

    def undepend(self, *jids: str) -> Any:
        return self.client("depends", self.jid, "off", *jids)

    def move(self, queue: str, delay: float = 0, depends: Any = None) -> Any:
        """qless-py's move: a put naming the job's own worker ('' unless it is running)."""
        return self.client(
            "put",
            self.worker_name,
            queue,
            self.jid,
            self.klass_name,
            json.dumps(self.data),
            delay,
            "depends",
            json.dumps(depends or []),
        )

    def requeue(self, queue: str, delay: float = 0, depends: Any = None) -> Any:
        """qless-core's requeue, by this client's worker (a process moving another's job)."""
        return self.client(
            "requeue",
            self.client.worker_name,
            queue,
            self.jid,
            self.klass_name,
            json.dumps(self.data),
            delay,
            "depends",
            json.dumps(depends or []),
        )


class RecurringJob:
    def __init__(self, client: Client, **fields: Any) -> None:
        self.client = client
        self.jid: str = fields["jid"]
        self.interval: float = fields["interval"]
        self.priority_value: int = fields["priority"]
        self.count: int = fields["count"]
        self.tags = as_list(fields["tags"])

    def update(self, option: str, value: Any) -> Any:
        return self.client("recur.update", self.jid, option, value)

    def tag(self, *tags: str) -> Any:
        return json.loads(self.client("recur.tag", self.jid, *tags))

    def cancel(self) -> Any:
        return self.client("unrecur", self.jid)


class Jobs:
    def __init__(self, client: Client) -> None:
        self.client = client

    def __getitem__(self, jid: str) -> Job | RecurringJob | None:
        found = json.loads(self.client("multiget", jid))
        if found:
            return Job(self.client, **found[0])
        recurring = self.client("recur.get", jid)
        return RecurringJob(self.client, **json.loads(recurring)) if recurring else None

    def get(self, *jids: str) -> list[Job]:
        if not jids:
            return []
        return [
            Job(self.client, **job) for job in as_list(json.loads(self.client("multiget", *jids)))
        ]

    def failed(self, group: str | None = None, start: int = 0, limit: int = 25) -> Any:
        if not group:
            return json.loads(self.client("failed"))
        results = json.loads(self.client("failed", group, start, limit))
        results["jobs"] = self.get(*as_list(results["jobs"]))
        return results

    def complete(self, offset: int = 0, count: int = 25) -> list[str]:
        return list(self.client("jobs", "complete", offset, count))

    def tagged(self, tag: str, offset: int = 0, count: int = 25) -> dict[str, Any]:
        result = json.loads(self.client("tag", "get", tag, offset, count))
        result["jobs"] = as_list(result["jobs"])
        return dict(result)

    def tracked(self) -> dict[str, Any]:
        result = json.loads(self.client("track"))
        return {
            "jobs": [Job(self.client, **job) for job in as_list(result["jobs"])],
            "expired": as_list(result["expired"]),
        }


class Workers:
    def __init__(self, client: Client) -> None:
        self.client = client

    def counts(self) -> list[dict[str, Any]]:
        return as_list(json.loads(self.client("workers")))

    def __getitem__(self, name: str) -> dict[str, Any]:
        result = json.loads(self.client("workers", name))
        return {"jobs": as_list(result["jobs"]), "stalled": as_list(result["stalled"])}


class Queue:
    def __init__(self, name: str, client: Client) -> None:
        self.name = name
        self.client = client

    def put(
        self,
        klass: str,
        data: Any,
        priority: int = 0,
        tags: list[str] | None = None,
        delay: float = 0,
        retries: int = 5,
        jid: str = "",
        depends: list[str] | None = None,
    ) -> str:
        return str(
            self.client(
                "put",
                self.client.worker_name,
                self.name,
                jid,
                klass,
                json.dumps(data),
                delay,
                "priority",
                priority,
                "tags",
                json.dumps(tags or []),
                "retries",
                retries,
                "depends",
                json.dumps(depends or []),
            )
        )

    def recur(
        self,
        klass: str,
        data: Any,
        interval: float,
        offset: float = 0,
        jid: str = "",
        **options: Any,
    ) -> str:
        extra: list[Any] = []
        for option in ("priority", "retries", "backlog"):
            if option in options:
                extra += [option, options[option]]
        if "tags" in options:
            extra += ["tags", json.dumps(options["tags"])]
        return str(
            self.client(
                "recur",
                self.name,
                jid,
                klass,
                json.dumps(data),
                "interval",
                interval,
                offset,
                *extra,
            )
        )

    def pop(self, count: int = 1) -> list[Job]:
        jobs = as_list(json.loads(self.client("pop", self.name, self.client.worker_name, count)))
        return [Job(self.client, **job) for job in jobs]

    def peek(self, count: int = 1) -> list[Job]:
        return [
            Job(self.client, **job)
            for job in as_list(json.loads(self.client("peek", self.name, count)))
        ]

    def counts(self) -> dict[str, Any]:
        return dict(json.loads(self.client("queues", self.name)))

    def unfail(self, group: str, count: int = 25) -> int:
        return int(self.client("unfail", self.name, group, count))

    def __len__(self) -> int:
        return int(self.client("length", self.name))
