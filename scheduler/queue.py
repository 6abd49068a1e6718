"""Queues: ``client.queues[name]`` is a :class:`Queue`; ``client.queues.counts()`` lists them all.

A queue needs no creating: the engine records it the first time a job is put in it.
Every method takes an optional ``now=`` (epoch seconds) for tests; by default the engine uses the
server's clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.job import (
    Job,
    Klass,
    Now,
    as_bool,
    as_dict,
    as_int,
    as_list,
    dumps,
    klass_name,
    pairs,
)

if TYPE_CHECKING:
    from scheduler.client import Client


class QueueJobs:
    """The jids of one queue's jobs by state (``queue.jobs.running()`` ...), oldest first."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def _jids(self, state: str, offset: int, count: int, now: Now) -> list[str]:
        reply = self.queue.client.engine.call(
            "jobs", state, self.queue.name, offset, count, now=now
        )
        return as_list(reply)

    def waiting(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Jobs ready to be popped, in the order a pop takes them."""
        return self._jids("waiting", offset, count, now)

    def running(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Jobs a worker holds whose lock has not expired."""
        return self._jids("running", offset, count, now)

    def stalled(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Running jobs whose lock has expired (the next pop hands them out again)."""
        return self._jids("stalled", offset, count, now)

    def scheduled(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Jobs put with a delay that has not yet passed."""
        return self._jids("scheduled", offset, count, now)

    def depends(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Jobs waiting for their dependencies to complete."""
        return self._jids("depends", offset, count, now)

    def recurring(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Recurring job definitions that put their jobs in this queue."""
        return self._jids("recurring", offset, count, now)


class Queue:
    """One named queue of a :class:`~scheduler.client.Client`'s namespace."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name
        self.jobs = QueueJobs(self)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def _call(self, command: str, *args: Any, now: Now = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    # -- putting ------------------------------------------------------------------------------

    def put(
        self,
        klass: Klass,
        data: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        tags: Iterable[str] | None = None,
        retries: int | None = None,
        depends: Iterable[str] | None = None,
        delay: float = 0,
        jid: str | None = None,
        now: Now = "",
    ) -> str:
        """Put a job in this queue (or move an existing ``jid`` here); returns its jid.

        ``klass`` is a dotted path (or a class or function, whose dotted path is used); ``data`` a
        JSON object. ``priority``: lower runs sooner (default 0). ``retries``: how many times the
        job may be retried or lose its lock before it fails (default 5). ``depends``: jids that
        must complete first. ``delay``: seconds before the job may run; with ``depends`` it counts
        from when the last dependency completes. Options left None keep the job's current values
        when it already exists. ``jid`` defaults to a new uuid4 hex.
        """
        return self._put("put", klass, data, priority, tags, retries, depends, delay, jid, now)

    def requeue(
        self,
        klass: Klass,
        data: Mapping[str, Any] | None = None,
        *,
        priority: int | None = None,
        tags: Iterable[str] | None = None,
        retries: int | None = None,
        depends: Iterable[str] | None = None,
        delay: float = 0,
        jid: str | None = None,
        now: Now = "",
    ) -> str:
        """Like :meth:`put`, but raises JobNotFound unless the job ``jid`` already exists."""
        return self._put("requeue", klass, data, priority, tags, retries, depends, delay, jid, now)

    def _put(
        self,
        command: str,
        klass: Klass,
        data: Mapping[str, Any] | None,
        priority: int | None,
        tags: Iterable[str] | None,
        retries: int | None,
        depends: Iterable[str] | None,
        delay: float,
        jid: str | None,
        now: Now,
    ) -> str:
        options = pairs(
            priority=priority,
            tags=None if tags is None else list(tags),
            retries=retries,
            depends=None if depends is None else list(depends),
        )
        reply = self._call(
            command,
            self.client.worker_name,
            self.name,
            jid or uuid.uuid4().hex,
            klass_name(klass),
            dumps(dict(data or {})),
            delay,
            *options,
            now=now,
        )
        return str(reply)

    def recur(
        self,
        klass: Klass,
        data: Mapping[str, Any] | None,
        interval: float,
        offset: float = 0,
        *,
        priority: int | None = None,
        tags: Iterable[str] | None = None,
        retries: int | None = None,
        backlog: int | None = None,
        jid: str | None = None,
        now: Now = "",
    ) -> str:
        """Put a job in this queue every ``interval`` seconds, the first one ``offset`` s from now.

        ``backlog`` bounds how many missed runs are put at once after a pause. Returns the
        recurring job's jid (see ``client.jobs.recurring(jid)``).
        """
        options = pairs(
            priority=priority,
            tags=None if tags is None else list(tags),
            retries=retries,
            backlog=backlog,
        )
        reply = self._call(
            "recur",
            self.name,
            jid or uuid.uuid4().hex,
            klass_name(klass),
            dumps(dict(data or {})),
            "interval",
            interval,
            offset,
            *options,
            now=now,
        )
        return str(reply)

    # -- taking -------------------------------------------------------------------------------

    def pop(self, count: int = 1, *, now: Now = "") -> list[Job]:
        """Take up to ``count`` jobs for this client's worker (they are now running, locked)."""
        reply = self._call("pop", self.name, self.client.worker_name, count, now=now)
        return [Job(self.client, raw) for raw in as_list(reply)]

    def peek(self, count: int = 1, *, now: Now = "") -> list[Job]:
        """The next ``count`` jobs a pop would return, left unchanged."""
        return [
            Job(self.client, raw) for raw in as_list(self._call("peek", self.name, count, now=now))
        ]

    # -- state ----------------------------------------------------------------------------------

    def counts(self, *, now: Now = "") -> dict[str, Any]:
        """``{name, waiting, stalled, running, scheduled, depends, recurring, paused}``."""
        return as_dict(self._call("queues", self.name, now=now))

    def paused(self, *, now: Now = "") -> bool:
        """Whether :meth:`pause` is in force."""
        return as_bool(self.counts(now=now).get("paused"))

    def length(self, *, now: Now = "") -> int:
        """Running + waiting + scheduled jobs."""
        return as_int(self._call("length", self.name, now=now))

    def __len__(self) -> int:
        return self.length()

    def stats(self, date: float | datetime | None = None, *, now: Now = "") -> dict[str, Any]:
        """The day's statistics: ``{retries, failed, failures, wait: {...}, run: {...}}``.

        ``date`` is any moment of the day (epoch seconds or a datetime); by default ``now`` if
        given, else today by the server's clock. ``wait`` and ``run`` hold ``count``, ``mean``,
        ``std`` and ``histogram``.
        """
        if isinstance(date, datetime):
            when: float = date.timestamp()
        elif date is not None:
            when = date
        elif now != "":
            when = float(now)
        else:
            seconds, micros = self.client.redis.time()
            when = seconds + micros / 1e6
        return as_dict(self._call("stats", self.name, when, now=now))

    def pause(self, *, now: Now = "") -> None:
        """Stop handing out jobs: pop returns nothing until :meth:`unpause`."""
        self._call("pause", self.name, now=now)

    def unpause(self, *, now: Now = "") -> None:
        """Hand out jobs again."""
        self._call("unpause", self.name, now=now)

    def forget(self, *, now: Now = "") -> None:
        """Drop the queue from the list of known queues (its jobs are untouched)."""
        self._call("queue.forget", self.name, now=now)


class Queues:
    """``client.queues[name]`` is a :class:`Queue`; ``client.queues.counts()`` lists them all."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __getitem__(self, name: str) -> Queue:
        return Queue(self.client, name)

    def counts(self, *, now: Now = "") -> list[dict[str, Any]]:
        """Every known queue's ``{name, waiting, running, ...}`` (see :meth:`Queue.counts`)."""
        return as_list(self.client.engine.call("queues", now=now))
