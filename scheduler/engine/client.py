"""The Python client: :class:`Client` and the collections hanging off it.

::

    client = Client("redis://localhost:6379/0")          # scheduler.Client(): the embedded server
    jid = client.queues["etl"].put("tasks.extract", {"day": "2024-05-01"}, priority=-1)
    [job] = client.queues["etl"].pop()
    job.complete(result={"rows": 42})
    client.jobs[jid].result                              # {'rows': 42}

``client.queues`` (:class:`~scheduler.engine.queue.Queues`), ``client.jobs`` (:class:`Jobs`),
``client.config`` (:class:`Config`, a mutable mapping), ``client.workers`` (:class:`Workers`).
Every method takes an optional ``now=`` (epoch seconds) for tests; by default the engine reads the
server's clock, never this machine's. Engine refusals raise the classes of
:mod:`scheduler.engine.errors`.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterator, MutableMapping
from types import TracebackType
from typing import Any, NamedTuple, Unpack, overload

import redis as redis_py

from scheduler.engine import limits
from scheduler.engine.connections import Durability, MasterWatch, connect, split_durability
from scheduler.engine.errors import ClientClosed, JobNotFound
from scheduler.engine.events import EventListener, ListenerOptions
from scheduler.engine.job import Job, RecurringJob
from scheduler.engine.limits import MAX_ID_BYTES, id_fault
from scheduler.engine.queue import Queues
from scheduler.engine.replies import Now, as_dict, as_int, as_list
from scheduler.engine.scripts import Engine

ConfigValue = str | int | float


def default_worker_name() -> str:
    """``<hostname>-<pid>``, the qless convention."""
    return f"{socket.gethostname()}-{os.getpid()}"


def namespace_prefix(namespace: str | None) -> str | None:
    """The key prefix of a namespace (None: qless's ``ql:``).

    A value ending in ``:`` is the prefix itself (``{billing}:``, as ``--namespace`` and
    ``$FLOWS_NAMESPACE`` give it); a bare name gets a hash tag, ``billing`` → ``{billing}:``, so
    the whole namespace lives in one Redis Cluster slot.
    """
    if namespace is None:
        return None
    # The engine's rules for its key prefix (an id's), said before any call; the value is
    # quoted (cut short) unless it is empty or its size is the fault.
    fault = id_fault(namespace)
    size = len(namespace.encode("utf-8", "surrogatepass"))
    cut = namespace if len(namespace) <= 40 else namespace[:40] + "…"
    shown = f" {cut!r}" if 0 < size <= MAX_ID_BYTES else ""
    if fault is not None:
        raise ValueError(f"namespace{shown} {fault}")
    if namespace.endswith(":"):
        return namespace
    if "{" in namespace or "}" in namespace:
        raise ValueError(f"a bare namespace name may not contain braces: {namespace!r}")
    prefix = f"{{{namespace}}}:"
    fault = id_fault(prefix)
    if fault is not None:
        raise ValueError(f"namespace{shown}: its key prefix ({{NAME}}:) {fault}")
    return prefix


class Tracked(NamedTuple):
    """``client.jobs.tracked()``: the tracked jobs, and tracked jids whose data has expired."""

    jobs: list[Job]
    expired: list[str]


class Tagged(NamedTuple):
    """``client.jobs.tagged(tag)``: how many jobs carry the tag, and a page of their jids."""

    total: int
    jids: list[str]


class FailedJobs(NamedTuple):
    """``client.jobs.failed(group)``: how many jobs failed in the group, a page of them, and how
    many the group dropped to stay within ``max-failed-per-group``."""

    total: int
    jobs: list[Job]
    dropped: int = 0


class Jobs:
    """``client.jobs``: look jobs up by jid, state, tag or failure group."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _call(self, command: str, *args: Any, now: Now = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    def get(self, jid: str, *, now: Now = "") -> Job | None:
        """The job, or None if there is no such job."""
        limits.check_jid("get", "jid", jid)
        return Job.from_reply(self.client, self._call("get", jid, now=now))

    def __getitem__(self, jid: str) -> Job:
        """The job; raises :class:`~scheduler.engine.errors.JobNotFound` if there is none."""
        job = self.get(jid)
        if job is None:
            raise JobNotFound(f"no job {jid!r}", command="get")
        return job

    def multiget(self, *jids: str, now: Now = "") -> list[Job]:
        """The jobs that exist among ``jids`` (missing ones are left out)."""
        if not jids:
            return []
        limits.check_spread("multiget", "jids", jids, "multiget", "jid")
        return [Job(self.client, raw) for raw in as_list(self._call("multiget", *jids, now=now))]

    def complete(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Jids of completed jobs still retained, most recent first."""
        return as_list(self._call("jobs", "complete", offset, count, now=now))

    def tracked(self, *, now: Now = "") -> Tracked:
        """Every tracked job, and the tracked jids whose job no longer exists."""
        reply = as_dict(self._call("track", now=now))
        jobs = [Job(self.client, raw) for raw in as_list(reply.get("jobs"))]
        return Tracked(jobs, as_list(reply.get("expired")))

    def tagged(self, tag: str, offset: int = 0, count: int = 25, *, now: Now = "") -> Tagged:
        """Jids of the jobs carrying ``tag``."""
        limits.check_id("tag", "tag", tag)
        reply = as_dict(self._call("tag", "get", tag, offset, count, now=now))
        return Tagged(as_int(reply.get("total")), as_list(reply.get("jobs")))

    @overload
    def failed(
        self, group: None = None, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> dict[str, int]: ...

    @overload
    def failed(
        self, group: str, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> FailedJobs: ...

    def failed(
        self, group: str | None = None, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> dict[str, int] | FailedJobs:
        """No group: ``{group: number of failed jobs}``. A group: a page of its failed jobs."""
        if group is None:
            return {k: as_int(v) for k, v in as_dict(self._call("failed", now=now)).items()}
        reply = as_dict(self._call("failed", group, start, limit, now=now))
        jobs = [Job(self.client, raw) for raw in as_list(reply.get("jobs"))]
        return FailedJobs(as_int(reply.get("total")), jobs, as_int(reply.get("dropped")))

    def dropped(self, *groups: str, now: Now = "") -> dict[str, int]:
        """``{group: failed jobs dropped}`` by ``max-failed-per-group`` (the oldest go first,
        deleted for good): the given groups, or every group that dropped any."""
        limits.check_spread("failed.dropped", "groups", groups, "dropped")
        reply = as_dict(self._call("failed.dropped", *groups, now=now))
        return {group: as_int(count) for group, count in reply.items()}

    def failure_groups(self, *, now: Now = "") -> list[dict[str, Any]]:
        """Every failure group by name, as the CLI, the API and the dashboard list them:
        ``{group, total, dropped}``, its failed jobs kept and those dropped for good by
        ``max-failed-per-group``; a group that only dropped jobs is listed too."""
        counts = self.failed(now=now)
        dropped = self.dropped(now=now)
        return [
            {"group": g, "total": counts.get(g, 0), "dropped": dropped.get(g, 0)}
            for g in sorted({*counts, *dropped})
        ]

    def recurring(self, jid: str, *, now: Now = "") -> RecurringJob:
        """The recurring job's definition; raises JobNotFound if there is none."""
        raw = as_dict(self._call("recur.get", jid, now=now))
        if not raw:
            raise JobNotFound(f"no recurring job {jid!r}", command="recur.get")
        return RecurringJob(self.client, raw)

    def cancel(self, *jids: str, now: Now = "") -> list[str]:
        """Cancel several jobs at once (a job and its dependents must go together). A completed
        job is refused (WrongState): a cancel stops what has not ended; :meth:`delete` removes
        a job for good."""
        limits.check_spread("cancel", "jids", jids, "cancel", "jid")
        return as_list(self._call("cancel", *jids, now=now))

    def kick(self, *jids: str, now: Now = "") -> list[str]:
        """Put buried jobs back into their queues, each waiting again at its priority (a job of
        a run: its step no longer buried); returns the jids kicked. Every jid is checked first:
        one that names no job (JobNotFound) or a job that is not buried (WrongState, naming its
        state) kicks none. :meth:`~scheduler.engine.queue.Queue.kick` kicks a queue's
        longest-buried jobs instead."""
        limits.check_spread("kick.jobs", "jids", jids, "kick", "jid")
        return as_list(self._call("kick.jobs", *jids, now=now)) if jids else []

    def delete(self, *jids: str, now: Now = "") -> list[str]:
        """Delete several jobs at once, like :meth:`cancel`, but refused (WrongState) if one of
        them runs: its worker would be orphaned. Returns the jids deleted."""
        limits.check_spread("delete", "jids", jids, "delete", "jid")
        return as_list(self._call("delete", *jids, now=now)) if jids else []


def _config_value(value: Any) -> ConfigValue:
    """Config values are stored as text: numbers come back as int or float."""
    if isinstance(value, int | float):
        return value
    text = str(value)
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        if math.isfinite(number):
            return number
    return text


class Config(MutableMapping[str, ConfigValue]):
    """``client.config``: the engine's configuration as a mutable mapping.

    Reading a key gives the stored value or its default (``heartbeat`` 60, ``grace-period`` 10,
    ...); numbers come back as int or float. Deleting a key restores its default.
    Iterating and ``len`` cover :meth:`all`.
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    def all(self) -> dict[str, ConfigValue]:
        """The defaults merged with the stored values."""
        reply = as_dict(self.client.engine.call("config.get"))
        return {key: _config_value(value) for key, value in reply.items()}

    def __getitem__(self, option: str) -> ConfigValue:
        value = self.client.engine.call("config.get", option)
        if value is None:
            raise KeyError(option)
        return _config_value(value)

    def __setitem__(self, option: str, value: ConfigValue) -> None:
        limits.check_scalar("config.set", "value", value)
        self.client.engine.call("config.set", option, value)

    def __delitem__(self, option: str) -> None:
        self.client.engine.call("config.unset", option)

    def __iter__(self) -> Iterator[str]:
        return iter(self.all())

    def __len__(self) -> int:
        return len(self.all())


class Workers:
    """``client.workers``: who holds which jobs."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def counts(self, *, now: Now = "") -> list[dict[str, Any]]:
        """``[{name, jobs, stalled}]``, most recently active first."""
        return as_list(self.client.engine.call("workers", now=now))

    def jobs(self, name: str, *, now: Now = "") -> dict[str, list[str]]:
        """``{jobs: [jid...], stalled: [jid...]}`` held by worker ``name``."""
        reply = as_dict(self.client.engine.call("workers", name, now=now))
        return {"jobs": as_list(reply.get("jobs")), "stalled": as_list(reply.get("stalled"))}

    def __getitem__(self, name: str) -> dict[str, list[str]]:
        return self.jobs(name)

    def registry(self, queue: str | None = None, *, now: Now = "") -> list[dict[str, Any]]:
        """The listener registry: live workers, most recently active first, as ``{name,
        last_seen, silent, jobs, stalled, info}`` (``info``: what the worker registered -- host,
        pid, queues, ...; ``silent``: not heard from for ``worker-silent-after`` seconds).
        With ``queue``, only workers that registered it among their queues. Workers silent for
        longer than ``max-worker-age`` are left out (and forgotten)."""
        args = [] if queue is None else [queue]
        return as_list(self.client.engine.call("worker.list", *args, now=now))

    def documents(self, queue: str | None = None, *, now: Now = "") -> list[dict[str, Any]]:
        """The one JSON shape of a worker (``flows workers --json``, ``GET /api/v1/workers``):
        a :meth:`registry` entry with what the worker registered (host, pid, queues, ...)
        beside its name, jobs and times, instead of nested under ``info``."""
        return [
            {**as_dict(entry.get("info")), **{k: v for k, v in entry.items() if k != "info"}}
            for entry in self.registry(queue, now=now)
        ]

    def forget(self, name: str, *, now: Now = "") -> None:
        """Deregister worker ``name``, which is gone (killed, it never deregistered): refused
        (:class:`~scheduler.engine.errors.WrongState`) while it may be working or holds jobs,
        :class:`~scheduler.engine.errors.JobNotFound` for no such worker."""
        self.client.engine.call("worker.forget", name, now=now)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """``for worker in client.workers``: the entries of :meth:`counts`."""
        return iter(self.counts())


class Throttles(MutableMapping[str, int]):
    """``client.throttles``: named throttles shared by every queue, as a mapping name -> limit.

    ``client.throttles["api"] = 5``: at most 5 jobs put with ``throttle="api"`` run at once,
    whatever their queue; ``del client.throttles["api"]`` lifts the limit. Reading a throttle
    without a limit raises KeyError. :meth:`info` adds the running and parked jobs.
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    def info(self, *names: str, now: Now = "") -> dict[str, dict[str, Any]]:
        """``{name: {limit (None: no limit), running, parked}}`` for ``names``, or for every
        throttle with a limit, running jobs or parked jobs."""
        limits.check_spread("throttle.get", "names", names, "info")
        reply = as_dict(self.client.engine.call("throttle.get", *names, now=now))
        return {name: dict(entry) for name, entry in reply.items()}

    def __getitem__(self, name: str) -> int:
        limit = self.info(name)[name].get("limit")
        if limit is None:
            raise KeyError(name)
        return as_int(limit)

    def __setitem__(self, name: str, limit: int) -> None:
        self.client.engine.call("throttle.set", name, limit)

    def __delitem__(self, name: str) -> None:
        if not as_int(self.client.engine.call("throttle.unset", name)):
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, entry in self.info().items() if entry.get("limit") is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Client:
    """A connection to one namespace of the engine.

    ``url``: a ``redis://``, ``rediss://`` or ``unix://`` URL, or a Redis Cluster
    (``redis+cluster://``, or ``redis://`` naming any node) or Sentinel
    (``redis+sentinel://host:port[,host:port]/service``) one. This layer connects only to a URL
    it is given: ``scheduler.Client`` (:class:`scheduler.connect.Client`) also takes none, for
    ``$FLOWS_REDIS_URL`` or the embedded server. ``?wait=N&wait_timeout=S`` in
    the URL: each engine write waits until N replicas have it (see ``durability``).
    ``namespace``: keys go under ``{namespace}:`` instead of qless's ``ql:`` (a value ending in
    ``:``, such as ``{billing}:``, is used as the prefix as it is); a cluster needs one.
    ``redis``: an existing redis-py client created with ``decode_responses=True`` (instead of
    ``url``). ``worker_name``: the name this client pops, completes and heartbeats as (default
    ``<hostname>-<pid>``). ``durability``: a :class:`~scheduler.engine.connections.Durability`, for
    a client given as ``redis``.

    What it holds: ``queues`` (``client.queues[name]`` is a :class:`~scheduler.engine.queue.Queue`),
    ``jobs`` (:class:`Jobs`: ``client.jobs[jid]`` is a :class:`~scheduler.engine.job.Job`),
    ``config`` (:class:`Config`), ``throttles`` (:class:`Throttles`) and ``workers``
    (:class:`Workers`); :meth:`events` follows what the engine does. :meth:`close`, or the end
    of a ``with`` block, closes the connection it opened.
    """

    worker_name: str

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str | None = None,
        redis: redis_py.Redis | None = None,
        worker_name: str | None = None,
        durability: Durability | None = None,
    ) -> None:
        for name, value in (("url", url), ("namespace", namespace), ("worker_name", worker_name)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Client(): {name} must be text, not {type(value).__name__}")
        if redis is not None and url is not None:
            raise ValueError("pass either url or redis, not both")
        owns = redis is None
        if redis is None:
            if not url:
                raise ValueError(
                    "give a Redis URL or a redis client (scheduler.Client() without one uses"
                    " $FLOWS_REDIS_URL or the embedded server)"
                )
            durability = split_durability(url)[1] or durability
            redis = connect(url)
        if not redis.get_connection_kwargs().get("decode_responses"):
            raise ValueError("the redis client must be created with decode_responses=True")
        try:
            engine = Engine(redis, namespace_prefix(namespace), durability=durability)
        except BaseException:
            if owns:
                redis.close()
            raise
        self._setup(engine, worker_name, owns)

    @classmethod
    def from_engine(cls, engine: Engine, *, worker_name: str | None = None) -> Client:
        """A client over an existing :class:`~scheduler.engine.scripts.Engine` (namespace,
        Redis)."""
        client = cls.__new__(cls)
        client._setup(engine, worker_name, owns=False)
        return client

    def _setup(self, engine: Engine, worker_name: str | None, owns: bool) -> None:
        self._engine = engine
        self._closed = False
        self.worker_name = worker_name or default_worker_name()
        self._owns_redis = owns
        self.queues = Queues(self)
        self.jobs = Jobs(self)
        self.config = Config(self)
        self.workers = Workers(self)
        self.throttles = Throttles(self)

    def __repr__(self) -> str:
        return f"<Client prefix={self.prefix!r} worker={self.worker_name!r}>"

    @property
    def engine(self) -> Engine:
        """The :class:`~scheduler.engine.scripts.Engine` every call goes through; raises
        :class:`~scheduler.engine.errors.ClientClosed` once :meth:`close` closed the connection
        (redis-py would open another one, which nobody would close)."""
        if self._closed:
            raise ClientClosed()
        return self._engine

    @property
    def redis(self) -> redis_py.Redis:
        """The redis-py client underneath."""
        return self.engine.redis

    @property
    def prefix(self) -> str:
        """The key prefix of this client's namespace (``ql:`` by default)."""
        return self.engine.key_prefix

    # -- across jobs ------------------------------------------------------------------------------

    @overload
    def failed(
        self, group: None = None, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> dict[str, int]: ...

    @overload
    def failed(
        self, group: str, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> FailedJobs: ...

    def failed(
        self, group: str | None = None, start: int = 0, limit: int = 25, *, now: Now = ""
    ) -> dict[str, int] | FailedJobs:
        """Same as :meth:`Jobs.failed`."""
        if group is None:
            return self.jobs.failed(now=now)
        return self.jobs.failed(group, start, limit, now=now)

    def unfail(self, queue: str, group: str, count: int = 25, *, now: Now = "") -> int:
        """Put up to ``count`` failed jobs of ``group`` back into ``queue``; returns how many."""
        limits.check_id("unfail", "queue", queue)
        limits.check_id("unfail", "group", group)
        limits.check_integer("unfail", "count", count, 0, limits.MAX_COUNT)
        return as_int(self.engine.call("unfail", queue, group, count, now=now))

    def tags(self, offset: int = 0, count: int = 25, *, now: Now = "") -> list[str]:
        """Tags used by at least two jobs, most used first."""
        return as_list(self.engine.call("tag", "top", offset, count, now=now))

    def deregister_workers(self, *names: str, now: Now = "") -> None:
        """Forget workers (their jobs are untouched and will stall if nobody completes them)."""
        limits.check_spread("worker.deregister", "names", names, "deregister_workers")
        if names:
            self.engine.call("worker.deregister", *names, now=now)

    def events(self, **options: Unpack[ListenerOptions]) -> EventListener:
        """An :class:`~scheduler.engine.events.EventListener` on this namespace (not yet
        subscribed); ``options`` (``workers``, ``log``, ``tracked``, ``channels``,
        ``timeout``) are the listener's."""
        return EventListener(self, **options)

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection if this client opened it (a Sentinel client's watch of the
        master stops too); any later call raises
        :class:`~scheduler.engine.errors.ClientClosed`. A client given ``redis=`` (or made
        :meth:`from_engine`) leaves that connection to its owner: it only gives back what it
        holds itself, and stays usable. Closing twice is fine."""
        if self._closed:
            return
        engine = self.engine
        engine.close()
        if self._owns_redis:
            self._closed = True
            watch = MasterWatch.of(engine.redis)
            if watch is not None:
                watch.stop()
            engine.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "Client",
    "Config",
    "FailedJobs",
    "Jobs",
    "Tagged",
    "Throttles",
    "Tracked",
    "Workers",
    "default_worker_name",
    "namespace_prefix",
]
