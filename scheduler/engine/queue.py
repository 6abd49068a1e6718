"""Queues: ``client.queues[name]`` is a :class:`Queue`; ``client.queues.counts()`` lists them all.

A queue needs no creating: the engine records it the first time a job is put in it.
Every method takes an optional ``now=`` (epoch seconds) for tests; by default the engine uses the
server's clock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from scheduler.engine import limits
from scheduler.engine.envelope import check_envelope
from scheduler.engine.errors import EngineError, InvalidArgument
from scheduler.engine.job import Job, Session
from scheduler.engine.replies import (
    Klass,
    Now,
    as_bool,
    as_dict,
    as_int,
    as_list,
    dumps,
    pairs,
)


class QueueSession(Session, Protocol):
    """What a queue needs of the :class:`~scheduler.engine.client.Client` that made it (what a
    job needs, and its queues as they are): named here, so this module does not depend on the
    client module (which builds queues)."""

    @property
    def queues(self) -> Queues: ...


class PutResult(str):
    """What a put returns: the jid (a ``str``), and whether the put wrote the job.

    ``created`` is False only for a ``unique`` put that found the job already there and not
    finished, and so changed nothing (the engine replied ``exists``).
    """

    created: bool

    def __new__(cls, jid: str, created: bool = True) -> PutResult:
        result = str.__new__(cls, jid)
        result.created = created
        return result


@dataclass(frozen=True)
class NewJob:
    """One job of :meth:`Queue.put_many`: what :meth:`Queue.put` takes per job (``jid``
    defaults to a new uuid4 hex; ``delay`` in seconds)."""

    klass: Klass
    data: Mapping[str, Any] | None = None
    jid: str | None = None
    delay: float = 0


#: Jobs removed per ``queue.truncate`` call by :meth:`Queue.truncate`.
TRUNCATE_BATCH = 1000


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

    def buried(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Buried jobs (see :meth:`~scheduler.engine.job.Job.bury`), the longest buried first."""
        return self._jids("buried", offset, count, now)

    def parked(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Waiting jobs set aside until their concurrency key or throttle has a free slot."""
        return self._jids("parked", offset, count, now)


class Queue:
    """One named queue of a :class:`~scheduler.engine.client.Client`'s namespace."""

    def __init__(self, client: QueueSession, name: str) -> None:
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
        ttl: float | None = None,
        ttr: float | None = None,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        throttle: str | None = None,
        unique: bool = False,
        now: Now = "",
    ) -> PutResult:
        """Put a job in this queue (or move an existing ``jid`` here); returns its jid.

        ``klass`` is a dotted path (or a class or function of a module's top level, whose dotted
        path is used: a worker imports it); ``data`` a JSON object. ``priority``: lower runs
        sooner (default 0). ``retries``: how many times the job may be retried or lose its lock
        before it fails (default 5). ``depends``: jids that must complete first. ``delay``:
        seconds before the job may run; with ``depends`` it counts from when the last dependency
        completes. Options left None keep the job's current values when it already exists.
        ``jid`` defaults to a new uuid4 hex.

        Extensions (each cleared by a later put without it):

        * ``ttl``: seconds the job has, once ready (after ``delay`` and ``depends``), to start;
          if it is still waiting, scheduled or buried then, it expires (state ``expired``);
        * ``ttr``: the job's lock time (time to run), instead of the queue's heartbeat;
        * ``concurrency_key`` / ``concurrency_limit`` (default 1): at most that many jobs of the
          key run at once in this queue, starting in priority, then put order (1: one at a time,
          like a Tarantool utube sub-queue);
        * ``throttle``: at most the throttle's limit (``client.throttles[name] = n``) of its jobs
          run at once, over all queues;
        * ``unique``: if the job exists and is neither complete nor expired, change nothing; the
          result's ``created`` is then False. Without it a put moves an existing job (qless).
        """
        return self._put(
            "put",
            klass,
            data,
            priority,
            tags,
            retries,
            depends,
            delay,
            jid,
            now,
            _extensions(ttl, ttr, concurrency_key, concurrency_limit, throttle, unique),
        )

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
        ttl: float | None = None,
        ttr: float | None = None,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        throttle: str | None = None,
        unique: bool = False,
        now: Now = "",
    ) -> PutResult:
        """Like :meth:`put`, but raises JobNotFound unless the job ``jid`` already exists."""
        return self._put(
            "requeue",
            klass,
            data,
            priority,
            tags,
            retries,
            depends,
            delay,
            jid,
            now,
            _extensions(ttl, ttr, concurrency_key, concurrency_limit, throttle, unique),
        )

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
        extensions: list[Any],
    ) -> PutResult:
        # The engine's own limits, checked before the round trip (scheduler/engine/limits.py).
        limits.check_name(command, "queue", self.name)
        jid, name, payload, delay = _checked_job(command, klass, data, jid, delay)
        _check_counts(command, priority, retries)
        options: list[Any] = []
        # Most puts give none of these: no pairs to build.
        if priority is not None or tags is not None or retries is not None or depends is not None:
            checked_depends = (
                None
                if depends is None
                else limits.check_ids(command, "depends", depends, jids=True)
            )
            options = pairs(
                priority=priority,
                tags=None if tags is None else limits.check_tags(command, tags),
                retries=retries,
                depends=checked_depends,
            )
        reply = self.client.engine.call(  # not through _call: one frame less on every put
            command,
            self.client.worker_name,
            self.name,
            jid,
            name,
            payload,
            delay,
            *options,
            *extensions,
            now=now,
        )
        if reply == "exists":
            return PutResult(jid, created=False)
        return PutResult(str(reply))

    def put_many(
        self,
        jobs: Iterable[NewJob],
        *,
        priority: int | None = None,
        tags: Iterable[str] | None = None,
        retries: int | None = None,
        ttl: float | None = None,
        ttr: float | None = None,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        throttle: str | None = None,
        now: Now = "",
    ) -> list[str]:
        """Put many jobs into this queue, 1,000 per engine call (``put.many``); returns their
        jids in order.

        Each job is put as :meth:`put` puts it with the options given here, which every job
        shares (a job that exists is moved, as put moves it). There is no ``depends``: a job
        with dependencies is put alone, or as a step of a flow. Every job is checked before the
        first call, and a jid given twice is refused. Each call writes its jobs all at once; a
        refusal only the engine can make leaves the calls before it written.
        """
        command = "put.many"
        limits.check_name(command, "queue", self.name)
        options = self._shared_options(
            command,
            priority=priority,
            tags=None if tags is None else limits.check_tags(command, tags),
            retries=retries,
            ttl=ttl,
            ttr=ttr,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
            throttle=throttle,
        )
        arguments = [_many_arguments(index, job) for index, job in enumerate(jobs, 1)]
        jids = [args[0] for args in arguments]
        limits.check_distinct_jids(command, jids)
        for start in range(0, len(arguments), limits.MAX_PUT_MANY):
            chunk = arguments[start : start + limits.MAX_PUT_MANY]
            flat = [value for args in chunk for value in args]
            self._call(command, self.client.worker_name, self.name, options, *flat, now=now)
        return jids

    @staticmethod
    def _shared_options(command: str, **options: Any) -> str:
        """put.many's options argument: '' or a JSON object of the options given."""
        _check_counts(command, options["priority"], options["retries"])
        given = {name: value for name, value in options.items() if value is not None}
        return json.dumps(given, separators=(",", ":")) if given else ""

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
        check_envelope("recur", data)
        options = pairs(
            priority=priority,
            tags=None if tags is None else limits.check_tags("recur", tags),
            retries=retries,
            backlog=backlog,
        )
        reply = self._call(
            "recur",
            self.name,
            jid or new_jid(),
            limits.check_klass("recur", klass),
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

    def load(self, *, now: Now = "") -> dict[str, Any]:
        """What an autoscaler reads, cheaply (see :meth:`Queues.load`): ``{name, backlog,
        leased, waiting, due, running, stalled, scheduled, depends, paused}``."""
        [load] = self.client.queues.load(self.name, now=now)
        return load

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
            when = self.client.engine.server_time()
        return as_dict(self._call("stats", self.name, when, now=now))

    def statistics(self, date: float | datetime | None = None, *, now: Now = "") -> dict[str, Any]:
        """Tarantool-style statistics: ``{name, tasks: {ready, taken, buried, delayed, depends,
        done, total}, calls: {put, take, ack, release, bury, kick, delete, touch, expire}}``.

        ``tasks`` counts the jobs in each state now (``done``: completed on the day); ``calls``
        are the day's (``date``: any moment of it, default today by the server's clock).
        """
        args: list[Any] = []
        if date is not None:
            args.append(date.timestamp() if isinstance(date, datetime) else date)
        return as_dict(self._call("queue.stats", self.name, *args, now=now))

    def kick(self, count: int = 1, *, now: Now = "") -> int:
        """Make up to ``count`` buried jobs waiting again, the longest buried first; how many.
        ``client.jobs.kick(*jids)`` kicks named jobs instead."""
        return as_int(self._call("kick", self.name, count, now=now))

    def truncate(self, *, batch: int = TRUNCATE_BATCH, now: Now = "") -> int:
        """Remove every job of the queue (waiting, parked, scheduled, depends, buried), ``batch``
        per engine call; returns how many. Raises WrongState while a job of the queue runs, and
        HasDependents when a job of another queue depends on one of them."""
        total = 0
        while True:
            removed = as_int(self._call("queue.truncate", self.name, batch, now=now))
            total += removed
            if removed < batch:
                return total

    def drop(self, *, now: Now = "") -> None:
        """Forget the queue: its place among the queues, pause and settings. Raises WrongState
        while it has jobs or recurring jobs (see :meth:`truncate`), JobNotFound if unknown."""
        self._call("queue.drop", self.name, now=now)

    def pause(self, *, now: Now = "") -> None:
        """Stop handing out jobs: pop returns nothing until :meth:`unpause`."""
        self._call("pause", self.name, now=now)

    def unpause(self, *, now: Now = "") -> None:
        """Hand out jobs again."""
        self._call("unpause", self.name, now=now)

    def forget(self, *, now: Now = "") -> None:
        """Drop the queue from the list of known queues (its jobs are untouched)."""
        self._call("queue.forget", self.name, now=now)


_NO_EXTENSIONS = (None, None, None, None, None)


def _extensions(
    ttl: float | None,
    ttr: float | None,
    concurrency_key: str | None,
    concurrency_limit: int | None,
    throttle: str | None,
    unique: bool,
) -> list[Any]:
    """The trailing option pairs of put's extensions that are set."""
    if not unique and (ttl, ttr, concurrency_key, concurrency_limit, throttle) == _NO_EXTENSIONS:
        return []  # most puts
    return pairs(
        ttl=ttl,
        ttr=ttr,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
        throttle=throttle,
        unique=1 if unique else None,
    )


def _many_arguments(index: int, job: NewJob) -> tuple[str, str, str, float]:
    """One job's ``jid klass data delay`` for put.many, checked as :meth:`Queue.put` checks
    them; an error names the job as the engine would (``PutMany jobs[3](): ...``)."""
    command = "put.many"
    if not isinstance(job, NewJob):
        raise InvalidArgument(
            f"PutMany jobs[{index}](): not a NewJob: {type(job).__name__}"
            " (give NewJob(klass, data, jid=..., delay=...))",
            command=command,
        )
    try:
        return _checked_job(command, job.klass, job.data, job.jid, job.delay)
    except EngineError as error:
        named = str(error).replace("PutMany()", f"PutMany jobs[{index}]()", 1)
        raise type(error)(named, command=command) from None


def _checked_job(
    command: str, klass: Klass, data: Mapping[str, Any] | None, jid: str | None, delay: float
) -> tuple[str, str, str, float]:
    """A put's jid (a new uuid4 hex for None), klass name, data as JSON text and delay, each
    within the engine's limits (else the engine's error class for ``command``)."""
    jid = new_jid() if jid is None else limits.check_jid(command, "jid", jid)
    name = limits.check_klass(command, klass)
    body = data
    if type(body) is not dict:  # a dict is taken as it is (nothing here changes it)
        body = dict(body) if isinstance(body, Mapping) else ({} if body is None else body)
    payload = limits.encode_payload(command, "data", body, kind="object")
    check_envelope(command, body)
    return jid, name, payload, limits.check_delay(command, delay)


def new_jid() -> str:
    """A new jid: a uuid4 in hex (32 characters, a valid jid), made from 16 random bytes without
    building a :class:`uuid.UUID`."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


def _check_counts(command: str, priority: int | None, retries: int | None) -> None:
    """A put's priority and retries, when given, within the engine's limits."""
    if priority is not None:
        limits.check_priority(command, priority)
    if retries is not None:
        limits.check_retries(command, retries)


#: Queues per ``queue.counts`` call (the engine takes at most 100).
_LOAD_BATCH = 100


class Queues:
    """``client.queues[name]`` is a :class:`Queue`; ``client.queues.counts()`` lists them all."""

    def __init__(self, client: QueueSession) -> None:
        self.client = client

    def __getitem__(self, name: str) -> Queue:
        return Queue(self.client, name)

    def counts(self, *, now: Now = "") -> list[dict[str, Any]]:
        """Every known queue's ``{name, waiting, running, ...}`` (see :meth:`Queue.counts`)."""
        return as_list(self.client.engine.call("queues", now=now))

    def documents(self, *names: str, now: Now = "") -> list[dict[str, Any]]:
        """The one JSON shape of a queue (``flows queues --json``, ``GET /api/v1/queues``): its
        counts by state (:meth:`counts`) and its load (:meth:`load`: due, backlog, leased),
        for ``names`` (every known queue when none are given), in that order."""
        limits.check_spread("queue.counts", "names", names, "documents")
        counts = {str(c["name"]): c for c in self.counts(now=now)}
        wanted = list(names) or list(counts)
        load = {str(entry["name"]): entry for entry in self.load(*wanted, now=now)}
        return [{**counts.get(name, {"name": name}), **load.get(name, {})} for name in wanted]

    def load(self, *names: str, now: Now = "") -> list[dict[str, Any]]:
        """How much work each queue holds (``queue.counts``), every known queue when no names
        are given: ``{name, backlog, leased, waiting, due, running, stalled, scheduled, depends,
        paused}``, each field one O(log n) count whatever the queue's size.

        ``backlog`` (waiting + scheduled jobs already due) is what workers could start now;
        ``leased`` (running + stalled) what they hold. An autoscaler wants about
        ``ceil((backlog + leased) / jobs_per_worker)`` workers on a queue that is not paused.
        """
        limits.check_spread("queue.counts", "names", names, "load")
        wanted = list(names) or [str(c["name"]) for c in self.counts(now=now)]
        out: list[dict[str, Any]] = []
        for start in range(0, len(wanted), _LOAD_BATCH):
            batch = wanted[start : start + _LOAD_BATCH]
            out += as_list(self.client.engine.call("queue.counts", *batch, now=now))
        return out
