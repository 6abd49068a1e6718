"""Checks a long-running process makes before it trusts a Redis server with jobs.

:func:`check_eviction_policy` refuses a server whose ``maxmemory-policy`` may evict keys: under
memory pressure such a server silently deletes job hashes, queue indexes or locks, and the promise
"once put returns, the job runs or fails with a reason" is gone. Only ``noeviction`` is safe: a
full server then refuses writes (the put fails, loudly) instead of dropping what it accepted.

Workers (:meth:`~scheduler.worker.Worker.run`, :meth:`~scheduler.worker.WorkerPool.run`) and the
scheduler service (:meth:`~scheduler.service.loop.SchedulerService.run`) call it at start. The
policy is
read with ``CONFIG GET``; a user whose ACL forbids ``CONFIG`` (see ``docs/pages/acl.md``) falls
back to ``INFO memory``, and when that is refused too the check is skipped with a warning, since
the server's operator may have made sure by other means. On a Redis Cluster every master is
checked.
"""

from __future__ import annotations

import logging

import redis

from scheduler.engine.connections import is_cluster, primaries
from scheduler.engine.errors import ServerError
from scheduler.engine.faults import translate

log = logging.getLogger("flows.safety")

SAFE_POLICY = "noeviction"

FIX = (
    "set it to noeviction: run `CONFIG SET maxmemory-policy noeviction` on the server and put "
    "`maxmemory-policy noeviction` in its configuration file (on a managed service, set the "
    "maxmemory-policy parameter), then start again"
)


class UnsafeServer(ServerError):
    """The server may drop jobs (its eviction policy is not ``noeviction``)."""


def _from_config(client: redis.Redis) -> str | None:
    try:
        reply = client.config_get("maxmemory-policy")
    except redis.ResponseError:  # NOPERM under an ACL, or CONFIG renamed away
        return None
    value = reply.get("maxmemory-policy") if isinstance(reply, dict) else None
    return None if value is None else _text(value)


def _from_info(client: redis.Redis) -> str | None:
    try:
        info = client.info("memory")
    except redis.ResponseError:
        return None
    value = info.get("maxmemory_policy") if isinstance(info, dict) else None
    return None if value is None else _text(value)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def eviction_policy(client: redis.Redis) -> str | None:
    """The server's ``maxmemory-policy`` (CONFIG GET, else INFO), or None if neither may be read.

    On a Redis Cluster, the first unsafe policy among the masters (each namespace lives on one,
    and any may hold one), else the policy they share."""
    if is_cluster(client):
        policies = [eviction_policy(master) for master in primaries(client)]
        unsafe = [p for p in policies if p is not None and p.lower() != SAFE_POLICY]
        return unsafe[0] if unsafe else next((p for p in policies if p is not None), None)
    policy = _from_config(client)
    return policy if policy is not None else _from_info(client)


def check_eviction_policy(client: redis.Redis, *, who: str = "this process") -> str | None:
    """Raise :class:`UnsafeServer` unless the server's eviction policy is ``noeviction``.

    Returns the policy, or None when the server would not say (a warning is logged then).
    ``who`` names the caller in the message ("the worker", "the scheduler service"). A server
    that cannot be reached raises a :mod:`scheduler.engine.faults` class.
    """
    try:
        policy = eviction_policy(client)
    except redis.RedisError as error:
        raise translate(error, client) or error from error
    if policy is None:
        log.warning(
            "%s cannot read the server's maxmemory-policy (CONFIG GET and INFO are refused); "
            "make sure it is %s, or jobs may be evicted under memory pressure",
            who,
            SAFE_POLICY,
        )
        return None
    if policy.lower() != SAFE_POLICY:
        raise UnsafeServer(
            f"{who} refuses to run: the Redis server's maxmemory-policy is {policy!r}, so it may "
            f"evict jobs, locks or queue indexes when memory runs short; {FIX}"
        )
    return policy


# What shrinks the loss window of a partition (docs/pages/guarantees.md): a master that has not
# heard from a replica for this long refuses writes instead of acknowledging what the heal wipes.
SUGGESTED_MAX_LAG = 10


def _setting(client: redis.Redis, name: str) -> int | None:
    try:
        reply = client.config_get(name)
    except redis.ResponseError:  # NOPERM, or CONFIG renamed away
        return None
    value = reply.get(name) if isinstance(reply, dict) else None
    try:
        return None if value is None else int(_text(value))
    except ValueError:
        return None


def replication_advice(client: redis.Redis) -> list[str]:
    """What to change so that a partition loses less: one line per master that has replicas
    but takes writes without them (``min-replicas-to-write`` 0). Empty when nothing is to be
    said, or when the settings cannot be read."""
    advice: list[str] = []
    for master in primaries(client):
        try:
            info = master.info("replication")
        except redis.RedisError:
            continue
        replicas = int(info.get("connected_slaves", 0) or 0)
        if info.get("role") != "master" or replicas == 0:
            continue
        to_write = _setting(master, "min-replicas-to-write")
        max_lag = _setting(master, "min-replicas-max-lag")
        if to_write is None or to_write > 0:
            continue
        where = _where(master)
        advice.append(
            f"the master at {where} has {replicas} replica(s) but min-replicas-to-write is 0:"
            " cut off from them by a partition it keeps acknowledging writes (puts, completes,"
            " ticks) until Sentinel or the cluster deposes it, and the heal then wipes them;"
            f" set min-replicas-to-write 1 and min-replicas-max-lag {SUGGESTED_MAX_LAG}"
            f" (now {max_lag}) in its configuration and with CONFIG SET, so it stops taking"
            " writes once no replica has answered for that many seconds, or use a ?wait=1 URL"
        )
    return advice


def _where(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("path"):
        return str(kwargs["path"])
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"


__all__ = [
    "SAFE_POLICY",
    "SUGGESTED_MAX_LAG",
    "UnsafeServer",
    "check_eviction_policy",
    "eviction_policy",
    "replication_advice",
]
