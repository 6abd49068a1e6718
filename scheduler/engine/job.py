"""Jobs as the engine reports them: :class:`Job` and :class:`RecurringJob`.

A :class:`Job` is a snapshot of the engine's job JSON (decoded: ``data`` and ``result`` are
Python values; empty lists arrive as ``{}`` from Lua's cjson and become ``[]``) plus methods that
act on the job through the engine. Every method takes an optional ``now=`` (epoch seconds) for
tests; the default ``""`` makes the engine read the server's clock, so client clock skew never
matters.
Methods that change the job also update the snapshot's fields they know about; call
:meth:`Job.refresh` to re-read everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from scheduler.engine import limits
from scheduler.engine.errors import JobNotFound, LockLost, WrongState
from scheduler.secrets import shown_data

if TYPE_CHECKING:
    import redis

    from scheduler.engine.scripts import Engine

from scheduler.engine.replies import (
    Klass,
    Now,
    as_bool,
    as_dict,
    as_int,
    as_list,
    as_number,
    dumps,
    loads,
    optional_number,
    pairs,
)


class Requeuing(Protocol):
    """A queue, as a job asks it to take the job back (:meth:`Job.requeue`)."""

    def requeue(self, *args: Any, **options: Any) -> str: ...


class QueueLookup(Protocol):
    def __getitem__(self, name: str) -> Requeuing: ...


class JobLookup(Protocol):
    def get(self, jid: str, *, now: Now = "") -> Job | None: ...

    def multiget(self, *jids: str, now: Now = "") -> list[Job]: ...


class Session(Protocol):
    """What a job needs of the :class:`~scheduler.engine.client.Client` that read it: named
    here, so this module does not depend on the client module (which builds jobs)."""

    @property
    def engine(self) -> Engine: ...

    @property
    def worker_name(self) -> str: ...

    @property
    def redis(self) -> redis.Redis: ...

    @property
    def queues(self) -> QueueLookup: ...

    @property
    def jobs(self) -> JobLookup: ...


# -- jobs ----------------------------------------------------------------------------------------


class RanBy(NamedTuple):
    """Who ran a job (Blueque's node and pid): the worker's name, and the host and pid it
    registered with ``worker.register`` (None when it had not registered)."""

    worker: str
    host: str | None
    pid: int | None


def _pid(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _limit(raw: Mapping[str, Any]) -> int | None:
    limit = raw.get("concurrency_limit")
    return None if limit is None else as_int(limit)


# The details: the fields of the job JSON that pop.lean leaves out, and how each is read.
_DETAIL_READERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "history": lambda raw: as_list(raw.get("history")),
    "failure": lambda raw: as_dict(raw.get("failure")) or None,
    "dependents": lambda raw: as_list(raw.get("dependents")),
    "dependencies": lambda raw: as_list(raw.get("dependencies")),
    "tracked": lambda raw: as_bool(raw.get("tracked")),
    "result": lambda raw: loads(raw.get("result")),
    "spawned_from_jid": lambda raw: raw.get("spawned_from_jid") or None,
    "created": lambda raw: optional_number(raw.get("created")),
    "updated": lambda raw: optional_number(raw.get("updated")),
    "time_to_live": lambda raw: optional_number(raw.get("ttl")),
    "deadline": lambda raw: optional_number(raw.get("deadline")),
    "concurrency_limit": _limit,
    "parked": lambda raw: raw.get("parked") or None,
    "child": lambda raw: raw.get("child") or None,
}


class Job:
    """One job as the engine last reported it (the job JSON of ``get``, lua/include/job.lua).

    Fields: ``jid``, ``klass``, ``state`` (waiting, scheduled, depends, running, stalled, failed,
    complete; ours: buried, expired), ``queue``, ``worker`` (``""`` unless running),
    ``priority`` (lower runs sooner; assigning it calls the engine), ``expires`` (lock expiry,
    epoch seconds), ``retries``, ``remaining``, ``lost`` (times it ran again after a lost
    worker, which uses none of its retries), ``runs`` (times it started running since it was
    put, this run included: its step log's attempt; 0 before the first), ``data`` (dict),
    ``tags``, ``history`` (list of ``{when, what, ...}``), ``failure`` (``{group, message,
    when, worker}`` or None),
    ``dependents``, ``dependencies``, ``tracked``, ``result`` (decoded JSON, None when absent),
    ``spawned_from_jid``, ``created``, ``updated``.

    The put extensions, None when the job was put without them: ``time_to_live`` (the put's
    ``ttl``; :meth:`ttl` is the lock's time left), ``deadline`` (when the job expires unless it
    has started; set once it is ready), ``ttr``, ``concurrency_key``, ``concurrency_limit``,
    ``throttle``, and ``parked`` (``"concurrency_key"`` or ``"throttle"`` while the waiting job
    waits for a slot). ``child``: the run a flow's sub-flow step started (the step waits for it
    while in state ``depends``), None for any other job.

    A job made from a worker's lean pop (``pop.lean``) holds the fields a worker needs; the
    others (history, failure, dependents, ...) are read from the engine when first asked for.
    """

    jid: str
    klass: str
    state: str
    queue: str
    worker: str
    _priority: int
    expires: float
    retries: int
    remaining: int
    lost: int
    runs: int
    data: dict[str, Any]
    tags: list[str]
    ttr: float | None
    concurrency_key: str | None
    throttle: str | None
    # The details (_DETAIL_READERS): absent after a lean reply (pop.lean) until first read.
    history: list[dict[str, Any]]
    failure: dict[str, Any] | None
    dependents: list[str]
    dependencies: list[str]
    tracked: bool
    result: Any
    spawned_from_jid: str | None
    created: float | None
    updated: float | None
    time_to_live: float | None
    deadline: float | None
    concurrency_limit: int | None
    parked: str | None
    child: str | None

    def __init__(self, client: Session, raw: Mapping[str, Any]) -> None:
        self.client = client
        self._load(raw, fresh=True)

    @classmethod
    def from_reply(cls, client: Session, reply: Any) -> Job | None:
        """A job from a ``get``-style reply (JSON text), or None for nil."""
        raw = as_dict(reply)
        return cls(client, raw) if raw else None

    def _load(self, raw: Mapping[str, Any], *, fresh: bool = False) -> None:
        """Take every field from ``raw``; ``fresh``: a new job, with no details to forget."""
        get = raw.get  # a worker makes a Job per job it runs: this is on its hot path
        self.jid = str(raw["jid"])
        self.klass = str(get("klass") or "")
        self.state = str(get("state") or "")
        self.queue = str(get("queue") or "")
        self.worker = str(get("worker") or "")
        self._priority = as_int(get("priority"))
        self.expires = as_number(get("expires"))
        self.retries = as_int(get("retries"))
        self.remaining = as_int(get("remaining"))
        self.lost = as_int(get("lost"))
        self.runs = as_int(get("runs"))
        self.data = as_dict(get("data"))
        self.tags = as_list(get("tags"))
        self.ttr = optional_number(get("ttr"))
        self.concurrency_key = get("concurrency_key") or None
        self.throttle = get("throttle") or None
        if "history" in raw:
            for name, read in _DETAIL_READERS.items():
                self.__dict__[name] = read(raw)
        elif not fresh:  # pop.lean: the details are read on first use
            for name in _DETAIL_READERS:
                self.__dict__.pop(name, None)

    if not TYPE_CHECKING:  # seen by a type checker, it would make any misspelt name an Any

        def __getattr__(self, name: str) -> Any:
            # Only called for an attribute that is not set: a detail a lean reply left out.
            if name in _DETAIL_READERS and "jid" in self.__dict__:
                raw = as_dict(self._call("get", self.jid))
                if raw:
                    for field, read in _DETAIL_READERS.items():
                        self.__dict__[field] = read(raw)
                    return self.__dict__[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<Job {self.jid} {self.klass} {self.state} queue={self.queue!r}>"

    def _call(self, command: str, *args: Any, now: Now = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    @property
    def _worker(self) -> str:
        return self.client.worker_name

    # -- reading ------------------------------------------------------------------------------

    def refresh(self, *, now: Now = "") -> Job:
        """Re-read every field from the engine; raises JobNotFound if the job is gone."""
        raw = as_dict(self._call("get", self.jid, now=now))
        if not raw:
            raise JobNotFound(f"Get(): Job {self.jid} does not exist", command="get")
        self._load(raw)
        return self

    def as_json(self) -> dict[str, Any]:
        """The job as `flows job --json` and the REST API show it: its fields (environment values
        named like credentials masked: :func:`scheduler.secrets.shown_data`), and the put
        options it was put with (:meth:`put_options`)."""
        return {
            "jid": self.jid,
            "klass": self.klass,
            "state": self.state,
            "queue": self.queue,
            "worker": self.worker,
            "priority": self.priority,
            "retries": self.retries,
            "remaining": self.remaining,
            "data": shown_data(self.data),
            "tags": self.tags,
            "result": self.result,
            "failure": self.failure,
            "history": self.history,
            "dependencies": self.dependencies,
            "dependents": self.dependents,
            "created": self.created,
            "updated": self.updated,
            "expires": self.expires,
            "tracked": self.tracked,
            **({"child": self.child} if self.child else {}),
            **self.put_options(),
        }

    def put_options(self) -> dict[str, Any]:
        """The extensions the job was put with (:meth:`scheduler.engine.queue.Queue.put`), those
        set."""
        fields = {
            "ttl": self.time_to_live,
            "deadline": self.deadline,
            "ttr": self.ttr,
            "concurrency_key": self.concurrency_key,
            "concurrency_limit": self.concurrency_limit,
            "throttle": self.throttle,
            "parked": self.parked,
        }
        return {name: value for name, value in fields.items() if value is not None}

    @property
    def ran_by(self) -> RanBy | None:
        """Who ran the job last (its latest pop), from its history; None if it never ran.

        The engine copies the host and pid a worker registered into each history entry naming
        that worker, so this stays known after the worker is gone.
        """
        runs = [i for i, entry in enumerate(self.history) if entry.get("what") == "popped"]
        if not runs:
            return None
        worker = str(self.history[runs[-1]].get("worker") or "")
        host: Any = None
        pid: Any = None
        for entry in self.history[runs[-1] :]:  # a later entry of the run may know more
            if entry.get("worker") == worker:
                host = host or entry.get("host")
                pid = pid if pid is not None else entry.get("pid")
        return RanBy(worker, str(host) if host else None, _pid(pid))

    def ttl(self, now: float | None = None) -> float:
        """Seconds left on the lock at ``now`` (default: this machine's clock; negative if past)."""
        return self.expires - (time.time() if now is None else now)

    # -- the worker's side ----------------------------------------------------------------------

    def complete(
        self,
        next: str | None = None,
        *,
        delay: float | None = None,
        depends: Iterable[str] | None = None,
        result: Any = None,
        now: Now = "",
    ) -> str:
        """Finish the job (as this client's worker), optionally moving it to queue ``next``.

        ``delay`` / ``depends`` apply in ``next``; ``result`` (any JSON value) is stored on the
        job. Returns the new state: ``complete``, ``waiting``, ``scheduled`` or ``depends``.
        Raises LockLost if this worker does not hold the lock, WrongState if it is not running.
        """
        if next is not None:
            limits.check_id("complete", "next", next)
        checked = (
            None if depends is None else limits.check_ids("complete", "depends", depends, jids=True)
        )
        args = pairs(next=next, delay=delay, depends=checked)
        if result is not None:
            args += [
                "result",
                limits.encode_payload(
                    "complete", "result", result, max_depth=limits.MAX_RESULT_DEPTH
                ),
            ]
        state = str(
            self._call(
                "complete", self.jid, self._worker, self.queue, dumps(self.data), *args, now=now
            )
        )
        self.state, self.worker = state, ""
        if next is not None:
            self.queue = next
        if result is not None:
            self.result = result
        return state

    def try_complete(self, *, result: Any = None, now: Now = "") -> bool:
        """Complete the job if this worker still holds it; whether it did (Redis Work Queue's
        complete).

        However many workers were handed the same job (its lock expired and another worker took
        it), exactly one of them gets True; the others get False: another worker holds it, their
        lock expired or was taken away, or the job was completed, moved or canceled meanwhile.
        """
        try:
            self.complete(result=result, now=now)
        except (LockLost, WrongState, JobNotFound):
            return False
        return True

    def fail(
        self, group: str, message: str, *, data: Mapping[str, Any] | None = None, now: Now = ""
    ) -> str:
        """Mark the job failed in ``group`` with ``message`` (optionally replacing its data)."""
        limits.check_id("fail", "group", group)
        limits.check_message("fail", "message", message)
        args = _data_arg("fail", data)
        jid = str(self._call("fail", self.jid, self._worker, group, message, *args, now=now))
        if data is not None:
            self.data = dict(data)
        self.state, self.worker = "failed", ""
        return jid

    def retry(
        self,
        delay: float = 0,
        group: str | None = None,
        message: str | None = None,
        *,
        now: Now = "",
    ) -> int:
        """Give the job back to its queue, using one retry; returns the retries left.

        A negative result means none were left and the job is now failed (in ``group`` with
        ``message`` when given).
        """
        args: list[Any] = [delay]
        if group is not None or message is not None:
            args += [group or "", message or ""]  # "" means "not given" to the engine
        remaining = as_int(self._call("retry", self.jid, self.queue, self._worker, *args, now=now))
        self.remaining, self.worker = remaining, ""
        return remaining

    def heartbeat(self, data: Mapping[str, Any] | None = None, *, now: Now = "") -> float:
        """Renew this worker's lock (optionally replacing the data); returns the new expiry."""
        args = _data_arg("heartbeat", data)
        self.expires = as_number(self._call("heartbeat", self.jid, self._worker, *args, now=now))
        if data is not None:
            self.data = dict(data)
        return self.expires

    def release(self, delay: float = 0, *, now: Now = "") -> str:
        """Hand the job back without using a retry (Tarantool's release), runnable after
        ``delay`` seconds; returns its state (``waiting`` or ``scheduled``)."""
        state = str(self._call("release", self.jid, self._worker, delay, now=now))
        self.state, self.worker = state, ""
        return state

    def touch(self, increment: float, *, now: Now = "") -> float:
        """Give the running job ``increment`` more seconds (Tarantool's touch): its lock and its
        ttr grow by that much (later heartbeats renew for the longer time), and so does its ttl
        deadline if it has one. Returns the new lock expiry (a job put without a ttr gets the
        queue's heartbeat plus ``increment``: :meth:`refresh` reads it)."""
        limits.check_number("touch", "increment", increment, 0)
        self.expires = as_number(self._call("touch", self.jid, self._worker, increment, now=now))
        if increment > 0:
            if self.ttr is not None:
                self.ttr += increment
            if self.deadline is not None:
                self.deadline += increment
        return self.expires

    def bury(self, message: str | None = None, *, now: Now = "") -> str:
        """Take the job out of circulation without failing it (a waiting or scheduled job, or a
        running one this worker holds); :meth:`kick` brings it back (or
        :meth:`~scheduler.engine.queue.Queue.kick`, a queue's longest-buried jobs)."""
        args = [] if message is None else [message]
        state = str(self._call("bury", self.jid, self._worker, *args, now=now))
        self.state, self.worker = state, ""
        return state

    def kick(self, *, now: Now = "") -> str:
        """Put the buried job back into its queue, waiting again at its priority (a job of a
        run: its step no longer buried); returns its state, ``waiting``. Raises
        :class:`~scheduler.engine.errors.WrongState` when it is not buried and
        :class:`~scheduler.engine.errors.JobNotFound` when it no longer exists."""
        self._call("kick.jobs", self.jid, now=now)
        self.state = "waiting"
        return self.state

    # -- management -----------------------------------------------------------------------------

    def delete(self, *, now: Now = "") -> list[str]:
        """Delete the job for good, like :meth:`cancel`, but refused (WrongState) while it runs:
        its worker would be orphaned. Returns ``[jid]``, or ``[]`` if it was already gone."""
        return as_list(self._call("delete", self.jid, now=now))

    def cancel(self, *, now: Now = "") -> list[str]:
        """Delete the job; raises HasDependents if a job still depends on it."""
        return as_list(self._call("cancel", self.jid, now=now))

    def requeue(
        self,
        queue: str | None = None,
        *,
        delay: float = 0,
        priority: int | None = None,
        tags: Iterable[str] | None = None,
        retries: int | None = None,
        depends: Iterable[str] | None = None,
        now: Now = "",
    ) -> str:
        """Move the job (in any state) to ``queue`` (default: its own) as a fresh waiting job,
        keeping its ttl, ttr, concurrency key and throttle."""
        return self.client.queues[queue or self.queue].requeue(
            self.klass,
            self.data,
            jid=self.jid,
            delay=delay,
            priority=self._priority if priority is None else priority,
            tags=self.tags if tags is None else tags,
            retries=self.retries if retries is None else retries,
            depends=depends,
            ttl=self.time_to_live,
            ttr=self.ttr,
            concurrency_key=self.concurrency_key,
            concurrency_limit=self.concurrency_limit if self.concurrency_key else None,
            throttle=self.throttle,
            now=now,
        )

    def timeout(self, *, now: Now = "") -> None:
        """Expire the running job's lock now (the worker is told it lost the lock)."""
        self._call("timeout", self.jid, now=now)

    def track(self, *, now: Now = "") -> bool:
        """Start publishing this job's transitions on the tracking channels."""
        done = as_bool(self._call("track", "track", self.jid, now=now))
        self.tracked = True
        return done

    def untrack(self, *, now: Now = "") -> bool:
        """Stop tracking the job."""
        done = as_bool(self._call("track", "untrack", self.jid, now=now))
        self.tracked = False
        return done

    def tag(self, *tags: str, now: Now = "") -> list[str]:
        """Add tags; returns the job's tags."""
        limits.check_spread("tag", "tags", tags, "tag")
        self.tags = as_list(self._call("tag", "add", self.jid, *tags, now=now))
        return self.tags

    def untag(self, *tags: str, now: Now = "") -> list[str]:
        """Remove tags; returns the job's tags."""
        limits.check_spread("tag", "tags", tags, "untag")
        self.tags = as_list(self._call("tag", "remove", self.jid, *tags, now=now))
        return self.tags

    @property
    def priority(self) -> int:
        """Lower runs sooner. Assigning changes it in the engine (see :meth:`set_priority`)."""
        return self._priority

    @priority.setter
    def priority(self, value: int) -> None:
        self.set_priority(value)

    def set_priority(self, priority: int, *, now: Now = "") -> int:
        """Change the priority; a waiting job moves in its queue accordingly."""
        self._priority = as_int(self._call("priority", self.jid, priority, now=now))
        return self._priority

    def depend(self, *jids: str, now: Now = "") -> bool:
        """Add dependencies (the job must be in state ``depends``, else WrongState)."""
        limits.check_spread("depends", "jids", jids, "depend", "jid")
        done = as_bool(self._call("depends", self.jid, "on", *jids, now=now))
        self.dependencies = sorted({*self.dependencies, *jids})
        return done

    def undepend(self, *jids: str, all: bool = False, now: Now = "") -> bool:
        """Remove dependencies (``all=True``: every one); the job may become waiting."""
        if not all:
            limits.check_spread("depends", "jids", jids, "undepend", "jid")
        args = ("all",) if all else jids
        done = as_bool(self._call("depends", self.jid, "off", *args, now=now))
        self.dependencies = [] if all else [d for d in self.dependencies if d not in jids]
        return done

    def log(self, message: str, data: Mapping[str, Any] | None = None, *, now: Now = "") -> None:
        """Append a custom entry ``{what: message, ...data}`` to the job's history."""
        args = _data_arg("log", data)
        self._call("log", self.jid, message, *args, now=now)


def _data_arg(command: str, data: Mapping[str, Any] | None) -> list[str]:
    """A call's optional ``data`` (a JSON object) as its argument list, refused as the engine
    would refuse it (not a mapping, not JSON) before the round trip."""
    if data is None:
        return []
    body = dict(data) if isinstance(data, Mapping) else data
    return [limits.encode_payload(command, "data", body, kind="object")]


class RecurringJob:
    """A recurring job's definition: every ``interval`` seconds a job is put in ``queue``.

    Fields: ``jid``, ``klass``, ``queue``, ``priority``, ``interval``, ``retries``, ``count``
    (jobs spawned so far), ``data``, ``tags``, ``backlog``.
    """

    def __init__(self, client: Session, raw: Mapping[str, Any]) -> None:
        self.client = client
        self._load(raw)

    def _load(self, raw: Mapping[str, Any]) -> None:
        self.jid: str = str(raw["jid"])
        self.klass: str = str(raw.get("klass") or "")
        self.state: str = str(raw.get("state") or "recur")
        self.queue: str = str(raw.get("queue") or "")
        self.priority: int = as_int(raw.get("priority"))
        self.interval: float = as_number(raw.get("interval"))
        self.retries: int = as_int(raw.get("retries"))
        self.count: int = as_int(raw.get("count"))
        self.data: dict[str, Any] = as_dict(raw.get("data"))
        self.tags: list[str] = as_list(raw.get("tags"))
        self.backlog: int = as_int(raw.get("backlog"))

    def __repr__(self) -> str:
        every = f"every {self.interval:g}s"
        return f"<RecurringJob {self.jid} {self.klass} {every} queue={self.queue!r}>"

    def _call(self, command: str, *args: Any, now: Now = "") -> Any:
        return self.client.engine.call(command, *args, now=now)

    def refresh(self, *, now: Now = "") -> RecurringJob:
        """Re-read the definition; raises JobNotFound if it was canceled."""
        raw = as_dict(self._call("recur.get", self.jid, now=now))
        if not raw:
            raise JobNotFound(
                f"Recur.get(): Recurring job {self.jid} does not exist", command="recur.get"
            )
        self._load(raw)
        return self

    def update(
        self,
        *,
        priority: int | None = None,
        interval: float | None = None,
        retries: int | None = None,
        data: Mapping[str, Any] | None = None,
        klass: Klass | None = None,
        queue: str | None = None,
        backlog: int | None = None,
        now: Now = "",
    ) -> None:
        """Change the given fields (the others are kept) and re-read the definition."""
        args = pairs(
            priority=priority,
            interval=interval,
            retries=retries,
            data=None if data is None else dict(data),
            klass=None if klass is None else limits.check_klass("recur.update", klass),
            queue=queue,
            backlog=backlog,
        )
        if args:
            self._call("recur.update", self.jid, *args, now=now)
        self.refresh(now=now)

    def tag(self, *tags: str, now: Now = "") -> list[str]:
        """Add tags given to every job spawned from now on; returns the tags."""
        limits.check_spread("recur.tag", "tags", tags, "tag")
        self.tags = as_list(self._call("recur.tag", self.jid, *tags, now=now))
        return self.tags

    def untag(self, *tags: str, now: Now = "") -> list[str]:
        """Remove tags; returns the tags."""
        limits.check_spread("recur.untag", "tags", tags, "untag")
        self.tags = as_list(self._call("recur.untag", self.jid, *tags, now=now))
        return self.tags

    def cancel(self, *, now: Now = "") -> None:
        """Stop spawning jobs (``unrecur``); jobs already spawned are left alone."""
        self._call("unrecur", self.jid, now=now)
