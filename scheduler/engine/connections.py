"""Connecting to Redis for a URL; Redis Cluster and Sentinel: routing a namespace to its shard,
riding out failovers.

:func:`connect` gives a client for any URL the project takes (``redis://``, ``rediss://``,
``unix://``, and the cluster and Sentinel ones), and :func:`redact_url` the URL fit to show. Which
URL to use when none is given (``$FLOWS_REDIS_URL``, else the embedded server) is decided above
this layer, in :mod:`scheduler.connect`; what the engine layer needs to know of that server comes
back as a :class:`Keeper` registered on the client.

Cluster and Sentinel URLs (see ``docs/pages/scaling-out.md``):

* ``redis+cluster://host:port[,host:port...]`` (``rediss+cluster://`` with TLS): a Redis Cluster,
  through any of its nodes. A plain ``redis://`` URL naming a cluster node is detected too (one
  ``INFO cluster`` when connecting).
* ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`` (``rediss+sentinel``
  with TLS to the master): the master Sentinel knows as ``service``; the password is the master's,
  ``?sentinel_password=`` the Sentinels' own.

A namespace is one hash slot, so one shard runs each engine call. On a cluster, :class:`Route`
sends the call straight to the node owning the namespace's slot (redis-py's cluster client would
ask the server for the keys of every ``FCALL``: a second round trip each time).

:class:`Failover` decides what an engine call does when the cluster or Sentinel is changing
masters. A reply that proves the call did not run (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, READONLY,
LOADING, a connection that could not be opened, no master known yet) is retried until
:data:`FAILOVER_WAIT` seconds have passed; a connection lost after the call was sent is retried
only for reads and the commands in :data:`REPLAYABLE_WRITES`, and otherwise raised as
:class:`~scheduler.engine.errors.OutcomeUnknown`. Writes may wait for a replica
(:class:`Durability`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from scheduler.engine.errors import (
    URL_GIVEN_IN,
    ClusterDown,
    ClusterError,
    Given,
    NamespaceNotInOneSlot,
    NotReplicated,
    OutcomeUnknown,
    ReadOnlyReplica,
    ServerError,
    SlotMoving,
    carrying_given,
    given_now,
)
from scheduler.engine.fencing import Fence

T = TypeVar("T")

log = logging.getLogger("flows.connections")

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SCHEMES = (*CLUSTER_SCHEMES, *SENTINEL_SCHEMES)
URL_SCHEMES = ("redis", "rediss", "unix", *SCHEMES)

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^:@]*)(:.*)?@", re.DOTALL)
_QUERY_PASSWORD = re.compile(r"([?&][^&#=]*password=)[^&#]*", re.IGNORECASE)
"""A query's password, whoever's: the server's, the Sentinels' (``sentinel_password``), a TLS
key's (``ssl_password``)."""

# Long enough for a cluster (node timeout + election) or Sentinel (down-after + election) to
# promote a replica with their usual settings; only spent while calls keep failing.
FAILOVER_WAIT = 30.0
_BACKOFF = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)

# Engine commands that write, yet whose replay changes nothing a caller relies on: renewals of a
# lock or a service's liveness, and reads that prune or reclaim on the way. With the commands
# that only read (lua/include/reads.lua, :func:`scheduler.engine.scripts.read_commands`) they are
# the
# calls resent after a connection was lost mid-call; anything else is OutcomeUnknown.
REPLAYABLE_WRITES = frozenset(
    {
        "heartbeat",
        "peek",
        "schedule.due",
        "scheduler.ping",
        "worker.info",
        "worker.list",
        "workers",
    }
)


# -- connecting ------------------------------------------------------------------------------


def _no_retry() -> Retry:
    # redis-py would otherwise resend a command after a reset, even one that already ran;
    # Failover decides instead, knowing which engine commands are safe to resend.
    return Retry(NoBackoff(), 0)


def _hosts(netloc: str, url: str) -> tuple[dict[str, str], list[tuple[str, int]]]:
    """The credentials and ``host:port`` list of a URL's network location."""
    auth: dict[str, str] = {}
    userinfo, _, hosts = netloc.rpartition("@")
    if userinfo:
        user, sep, password = userinfo.partition(":")
        if sep:
            auth["password"] = unquote(password)
            if user:
                auth["username"] = unquote(user)
        else:
            auth["password"] = unquote(user)
    found: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ServerError(
                f"invalid Redis URL {redact_url(url)!r}: each server must be host:port,"
                f" got {item.strip()!r}"
            )
        _check_host(host.strip("[]"), url)
        found.append((host.strip("[]"), int(port)))
    return auth, found


def _check_host(host: str | None, url: str) -> None:
    """Refuse a host name no resolver takes (an empty part, ``a..b``; a part over 63
    characters), which the socket would refuse with a ``UnicodeError`` of its IDNA codec at the
    first connection."""
    try:
        (host or "").encode("idna")
    except UnicodeError:
        raise ServerError(
            f"invalid Redis URL {redact_url(url)!r}: the host name {host!r} is not one (each of"
            " its parts between dots is 1 to 63 characters)"
        ) from None


def redact_url(url: str) -> str:
    """``url`` with any password (in the user info or a ``...password=`` query) replaced by ***.

    Works on the raw text, so a malformed URL (say, a password with an unencoded ``/``) is
    redacted too: everything between ``://`` and the last ``@`` is user info.
    """
    url = _USERINFO.sub(lambda m: m.group(1) + m.group(2) + (":***@" if m.group(3) else "@"), url)
    return _QUERY_PASSWORD.sub(r"\1***", url)


def connect(url: str) -> redis.Redis:
    """A client for ``url`` (see :func:`_connect`), recording how ``url`` was given
    (:func:`given_as`)."""
    client = _connect(url)
    given = given_now()
    if given != "argument":
        _GIVEN[client] = given
    return client


def _connect(url: str) -> redis.Redis:
    """A client for ``url`` (``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://``,
    ``redis+sentinel://``), ``decode_responses=True``.

    Errors name the URL with its password redacted. ``rediss://`` checks the server certificate
    and host name unless the URL's query says otherwise. A ``redis://`` or ``rediss://`` URL
    naming a Redis Cluster node gives a cluster client. Durability options (``?wait=``) are
    dropped here: :class:`~scheduler.engine.client.Client` reads them.
    """
    try:
        url, _ = split_durability(url)
        scheme = urlsplit(url).scheme
    except ValueError:  # "Invalid IPv6 URL": a malformed host part
        raise _invalid_url(url) from None
    if scheme not in URL_SCHEMES:
        raise ServerError(
            f"unsupported Redis URL {redact_url(url)!r}: it must start with redis://, rediss://,"
            " unix://, redis+cluster:// or redis+sentinel://"
        )
    if scheme in CLUSTER_SCHEMES:
        return connect_cluster(url)
    if scheme in SENTINEL_SCHEMES:
        return connect_sentinel(url)
    # Explicit because redis-py 5 did not check host names by default; the URL query still wins.
    tls: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    options = tls if scheme == "rediss" else {}
    _check_path(url, scheme)
    if scheme != "unix":
        _check_host(urlsplit(url).hostname, url)
    try:
        client = redis.Redis.from_url(url, decode_responses=True, **options)
    except ValueError as error:
        # redis-py's message can quote part of a malformed password, so it is not repeated;
        # only the name of an option whose value it refused is.
        option = _REFUSED_VALUE.search(str(error))
        if option is not None:
            raise ServerError(
                f"invalid Redis URL {redact_url(url)!r}: the value of {option.group(1)!r} is"
                " not one it takes"
            ) from None
        raise _invalid_url(url) from None
    _check_options(client, url)
    return client if scheme == "unix" else detect_cluster(client, url)


_REFUSED_VALUE = re.compile(r"^Invalid value for '(\w+)' in connection URL")

# A redis:// or rediss:// URL's path: nothing, or the database number.
_DATABASE_PATH = re.compile(r"/?(\d+/?)?")


def _check_path(url: str, scheme: str) -> None:
    """Refuse what redis-py would let through and then use wrongly: a ``unix://`` URL without
    a socket path (it would connect to nothing, reported as localhost:6379), a database that is
    not a number (it would silently use database 0)."""
    path = unquote(urlsplit(url).path)
    if scheme == "unix" and not path:
        raise ServerError(
            f"invalid Redis URL {redact_url(url)!r}: a unix:// URL needs the socket's path"
            " (unix:///path/to/redis.sock)"
        )
    if scheme != "unix" and not _DATABASE_PATH.fullmatch(path):
        raise ServerError(
            f"invalid Redis URL {redact_url(url)!r}: the path must be the database number"
            f" (redis://host:6379/0), not {path!r}"
        )


_UNEXPECTED_OPTION = re.compile(r"unexpected keyword argument '([^']+)'")


def _check_options(client: redis.Redis, url: str) -> None:
    """Refuse a query option the connection does not take (``?foo=1``, ``?ssl_cert_reqs=``
    on a plain ``redis://`` URL): redis-py passes every option on to the connection, which
    refuses it with a ``TypeError`` only when it is first made, at the first command. Making
    one here opens no socket."""
    pool = client.connection_pool
    try:
        pool.connection_class(**pool.connection_kwargs)
    except TypeError as error:
        match = _UNEXPECTED_OPTION.search(str(error))
        option = repr(match.group(1)) if match else "an option"
        raise ServerError(
            f"invalid Redis URL {redact_url(url)!r}: {option} is not an option of a"
            f" {urlsplit(url).scheme}:// connection"
        ) from None


def _invalid_url(url: str) -> ServerError:
    return ServerError(
        f"invalid Redis URL {redact_url(url)!r}: check the host, port and database number"
        " (percent-encode '/', '@' and ':' in a password)"
    )


# -- the keeper of a server ------------------------------------------------------------------


@dataclass(frozen=True)
class Keeper:
    """What the code that connected knows of the server, told to the engine layer, which cannot
    know it (the embedded server is managed above it): ``start`` starts the server again if it
    is down (True if this call did), ``unreachable`` is the advice when it cannot be reached."""

    start: Callable[[], bool]
    unreachable: str


# Keyed by the redis-py client (by identity), so a Keeper lives as long as its client.
_KEEPERS: weakref.WeakKeyDictionary[Any, Keeper] = weakref.WeakKeyDictionary()


def set_keeper(client: Any, keeper: Keeper) -> None:
    """Register ``keeper`` for the server ``client`` connects to."""
    _KEEPERS[client] = keeper


# Keyed like _KEEPERS: how each client's URL was given, when connect() was called in a
# given_as() context, so faults after that context still say it.
_GIVEN: weakref.WeakKeyDictionary[Any, Given] = weakref.WeakKeyDictionary()


def url_given_in(client: Any = None) -> str:
    """Where the URL ``client`` connects to was given (:data:`URL_GIVEN_IN`): as recorded when
    it connected, else as in this context."""
    given = _GIVEN.get(client) if client is not None else None
    return URL_GIVEN_IN[given or given_now()]


def keeper_of(client: Any) -> Keeper | None:
    """The :class:`Keeper` registered for ``client``, if any."""
    return _KEEPERS.get(client) if client is not None else None


def connect_cluster(url: str) -> redis.Redis:
    """A cluster client over the nodes of a ``redis+cluster://`` URL (any one is enough)."""
    parts = urlsplit(url)
    auth, hosts = _hosts(parts.netloc, url)
    tls = parts.scheme.startswith("rediss")
    try:
        cluster = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in hosts],  # type: ignore[no-untyped-call]
            decode_responses=True,
            ssl=tls,
            retry=_no_retry(),
            **auth,  # type: ignore[arg-type]
        )
    except (redis.RedisError, redis.exceptions.RedisClusterException) as error:
        # The client reads the slot map from a node when it is made: none answered.
        nodes = ", ".join(f"{host}:{port}" for host, port in hosts)
        raise ClusterDown(
            f"cannot reach the Redis Cluster at {nodes} ({_brief(error).rstrip('.')}): start"
            f" it, or check the hosts and ports in {url_given_in()}"
        ) from None
    # RedisCluster answers the same command methods; typed as Redis so callers keep one type.
    return cast(redis.Redis, cluster)


def connect_sentinel(url: str) -> redis.Redis:
    """A client of the master Sentinel names in a ``redis+sentinel://`` URL; after a failover
    its next connection goes to the new master."""
    parts = urlsplit(url)
    auth, hosts = _hosts(parts.netloc, url)
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ServerError(
            f"invalid Sentinel URL {redact_url(url)!r}: it must end with /<service name>[/<db>]"
        )
    query = parse_qs(parts.query)
    sentinel_auth: dict[str, str] = {}
    if "sentinel_password" in query:
        sentinel_auth["password"] = query["sentinel_password"][0]
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        hosts,
        # Ours to retry (MasterWatch resubscribes, discovery asks the next Sentinel); redis-py's
        # own retry would also draw its jitter from the process's shared random generator.
        sentinel_kwargs={"socket_timeout": 2.0, "retry": _no_retry(), **sentinel_auth},
        socket_timeout=10.0,
        socket_connect_timeout=2.0,
    )
    options: dict[str, Any] = {"decode_responses": True, "retry": _no_retry(), **auth}
    if len(path) == 2:
        options["db"] = int(path[1])
    if parts.scheme.startswith("rediss"):
        options["ssl"] = True
    client = cast(redis.Redis, sentinel.master_for(path[0], **options))  # type: ignore[no-untyped-call]
    MasterWatch.attach(client, sentinel, path[0])
    return client


# -- following Sentinel's master ---------------------------------------------------------------

# Seconds each Sentinel's subscription is read for before the next one's: a switch is heard
# within about this times the number of Sentinels.
_LISTEN_SLICE = 0.2
# Seconds before a Sentinel that could not be subscribed to is tried again.
_RESUBSCRIBE = 1.0


class MasterWatch:
    """Follows the master Sentinel names for one Sentinel-managed client.

    redis-py asks Sentinel for the master only when it opens a connection, so connections opened
    before a failover keep writing to the old master, which, cut off from the others by a
    partition, still takes writes that the heal then wipes. A watch subscribes to
    ``+switch-master`` on every Sentinel (a daemon thread) and on the announcement drops every
    connection of the client's pool, idle or in use, so the next command asks Sentinel again;
    :meth:`recheck` does the same when a call found a replica (READONLY) or lost its connection.
    The thread ends with the client's pool, and starts again in a forked child on first use.
    """

    def __init__(self, pool: SentinelConnectionPool, sentinel: Sentinel, service: str) -> None:
        self._pool = weakref.ref(pool)
        self.sentinel = sentinel
        self.service = service
        self.switches = 0
        self.switched_at = 0.0  # time.monotonic() of the last switch
        self.fences: list[Fence] = []  # deposed masters made replicas (fence_deposed on)
        self._fencing = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stopped = threading.Event()

    @classmethod
    def attach(cls, client: redis.Redis, sentinel: Sentinel, service: str) -> MasterWatch:
        pool = cast(SentinelConnectionPool, client.connection_pool)
        watch = cls(pool, sentinel, service)
        pool.flows_master_watch = watch  # type: ignore[attr-defined]
        watch.ensure_running()
        return watch

    @staticmethod
    def of(client: Any) -> MasterWatch | None:
        watch = getattr(getattr(client, "connection_pool", None), "flows_master_watch", None)
        return watch if isinstance(watch, MasterWatch) else None

    def ensure_running(self) -> None:
        """Start the listening thread unless it runs in this process (cheap: called per call)."""
        if (
            self._pid == os.getpid()
            and self._thread is not None
            and self._thread.is_alive()
            and not self._stopped.is_set()
        ):
            return
        with self._lock:
            if self._pid == os.getpid() and self._thread is not None and self._thread.is_alive():
                self._stopped.clear()  # used again after a close: the stopping thread goes on
                return
            self._pid = os.getpid()
            self._stopped.clear()
            self._thread = threading.Thread(
                target=carrying_given(self._listen),
                name=f"sentinel-watch-{self.service}",
                daemon=True,
            )
            self._thread.start()

    def stop(self) -> None:
        """Let the thread end (the client was closed); :meth:`ensure_running` starts it again."""
        self._stopped.set()

    @property
    def listening(self) -> bool:
        """Whether the thread runs in this process (after :meth:`stop`, until its current round
        of listening to each Sentinel ends)."""
        return self._pid == os.getpid() and self._thread is not None and self._thread.is_alive()

    def fence_deposed(self) -> None:
        """From now on, on each ``+switch-master``, make the old master a replica of the new one
        if it still claims to be a master and we reach it (see :mod:`.fencing`). Only a client
        with that authority turns this on: the scheduler service."""
        self._fencing = True

    def switch(self, address: tuple[str, int] | None, why: str) -> bool:
        """Drop every connection of the pool unless it already follows ``address`` (None: ask
        Sentinel on the next connection). Returns whether connections were dropped."""
        pool = self._pool()
        if pool is None:
            return False
        current = pool.master_address
        if address is not None and current is not None and tuple(current) == tuple(address):
            return False
        pool.proxy.master_address = tuple(address) if address is not None else None
        pool.disconnect(inuse_connections=False)
        # A connection in use by another thread (a call under way, a subscription) is shut
        # down rather than closed: the thread's read ends with a connection error it handles,
        # where closing the socket under it breaks redis-py's parser; the pool then drops the
        # connection when it comes back (it no longer points at the master).
        for connection in list(getattr(pool, "_in_use_connections", ())):
            sock = getattr(connection, "_sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self.switches += 1
        self.switched_at = time.monotonic()
        log.warning(
            "Sentinel service %r: %s; left %s for %s",
            self.service,
            why,
            _address(current),
            _address(address) if address is not None else "the master Sentinel names next",
        )
        return True

    def recheck(self) -> None:
        """Ask Sentinel for the master now and follow it if it moved (a call met a replica or
        lost its connection: the master may have changed without our hearing of it)."""
        try:
            address = self.sentinel.discover_master(self.service)  # type: ignore[no-untyped-call]
        except redis.RedisError:
            return  # no master known yet: the next connection asks again
        self.switch((str(address[0]), int(address[1])), "the master changed")

    def _listen(self) -> None:
        subscriptions: dict[int, Any] = {}
        retry_at: dict[int, float] = {}
        try:
            while not self._stopped.is_set() and self._pool() is not None:
                for index, node in enumerate(self.sentinel.sentinels):
                    pubsub = subscriptions.get(index)
                    if pubsub is None:
                        if time.monotonic() < retry_at.get(index, 0.0):
                            continue
                        pubsub = self._subscribe(node)
                        if pubsub is None:
                            retry_at[index] = time.monotonic() + _RESUBSCRIBE
                            continue
                        subscriptions[index] = pubsub
                    try:
                        message = pubsub.get_message(timeout=_LISTEN_SLICE)
                    except (redis.RedisError, OSError, ValueError):
                        _close(pubsub)
                        del subscriptions[index]
                        retry_at[index] = time.monotonic() + _RESUBSCRIBE
                        continue
                    if message is not None and message.get("type") == "message":
                        self._heard(message.get("data"))
                if not subscriptions:
                    self._stopped.wait(_LISTEN_SLICE)
        finally:
            for pubsub in subscriptions.values():
                _close(pubsub)

    def _subscribe(self, node: redis.Redis) -> Any:
        pubsub = node.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe("+switch-master")
        except (redis.RedisError, OSError):
            _close(pubsub)
            return None
        return pubsub

    def _heard(self, data: Any) -> None:
        # "<service> <old ip> <old port> <new ip> <new port>"
        text = data.decode() if isinstance(data, bytes) else str(data)
        fields = text.split()
        if len(fields) != 5 or fields[0] != self.service or not fields[4].isdigit():
            return
        new = (fields[3], int(fields[4]))
        self.switch(new, "Sentinel announced a new master")
        if self._fencing and fields[2].isdigit():
            self._fence((fields[1], int(fields[2])), new)

    def _fence(self, old: tuple[str, int], new: tuple[str, int]) -> None:
        # Every Sentinel announces the switch: one fence for each.
        if old == new or any(f.old == old and f.new == new for f in self.fences):
            return
        pool = self._pool()
        kwargs = pool.connection_kwargs if pool is not None else {}
        options = {k: kwargs[k] for k in ("username", "password") if kwargs.get(k) is not None}
        if pool is not None and issubclass(pool.connection_class, redis.SSLConnection):
            options["ssl"] = True
        fence = Fence(self.sentinel.sentinels, self.service, old, new, options)
        self.fences.append(fence)
        fence.start()


def _address(address: Any) -> str:
    return "?" if address is None else f"{address[0]}:{address[1]}"


def _close(pubsub: Any) -> None:
    with contextlib.suppress(Exception):
        pubsub.close()


def detect_cluster(client: redis.Redis, url: str) -> redis.Redis:
    """``client`` itself, or a cluster client if the server it names is a cluster node.

    Costs one ``INFO cluster`` at connect time. A server that cannot be asked (down, or ``INFO``
    not allowed) is taken as it is: the first real command reports the problem.
    """
    try:
        enabled = client.info("cluster").get("cluster_enabled")
    except redis.RedisError:
        return client
    if str(enabled) != "1":
        return client
    client.close()
    parts = urlsplit(url)
    scheme = parts.scheme + "+cluster"
    return connect_cluster(f"{scheme}://{parts.netloc}")


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def is_sentinel_managed(client: Any) -> bool:
    from redis.sentinel import SentinelConnectionPool

    return isinstance(getattr(client, "connection_pool", None), SentinelConnectionPool)


def needs_failover(client: Any) -> bool:
    """Whether engine calls on ``client`` should ride out failovers (cluster or Sentinel)."""
    return is_cluster(client) or is_sentinel_managed(client)


# -- routing ---------------------------------------------------------------------------------


def hash_tag_slot_key(prefix: str) -> str:
    """The part of ``prefix`` Redis Cluster hashes (its ``{tag}``); refuse a prefix without one,
    whose keys would spread over many slots."""
    start = prefix.find("{")
    end = prefix.find("}", start + 1)
    if start < 0 or end <= start + 1:
        raise NamespaceNotInOneSlot(
            f"namespace prefix {prefix!r} has no hash tag, so its keys would spread over the"
            " cluster's slots: name the namespace (--namespace billing, keys under {billing}:)"
            " or put a tag in the prefix ('{billing}:')"
        )
    return prefix


def primaries(client: redis.Redis) -> list[redis.Redis]:
    """A client of each master of a cluster; ``client`` itself otherwise."""
    if not is_cluster(client):
        return [client]
    cluster = cast(RedisCluster, client)
    return [cluster.get_redis_connection(n) for n in cluster.get_primaries()]  # type: ignore[no-untyped-call]


class Route:
    """Which redis-py client reaches a namespace: the node owning its slot on a cluster (looked
    up on every call, so a failover's new topology is used as soon as it is known)."""

    def __init__(self, client: redis.Redis, prefix: str | None) -> None:
        self.client = client
        self.cluster = cast(RedisCluster, client) if is_cluster(client) else None
        self.watch = MasterWatch.of(client)
        self.slot = 0
        if self.cluster is not None:
            if prefix is None:
                raise NamespaceNotInOneSlot(
                    "a Redis Cluster needs a named namespace (the default 'ql:' spreads over"
                    " every slot): give --namespace NAME or set $FLOWS_NAMESPACE (keys then go"
                    " under {NAME}: in one hash slot)"
                )
            self.slot = int(self.cluster.keyslot(hash_tag_slot_key(prefix)))  # type: ignore[no-untyped-call]

    def target(self) -> redis.Redis:
        if self.cluster is None:
            if self.watch is not None:
                self.watch.ensure_running()
            return self.client
        node = self.cluster.nodes_manager.get_node_from_slot(self.slot)
        return self.cluster.get_redis_connection(node)

    def primaries(self) -> list[redis.Redis]:
        """Every master: a Functions library must be loaded on each (replicas copy theirs)."""
        return primaries(self.client)

    def refresh(self) -> None:
        """Re-read the cluster's slot map (after MOVED, or while a failover settles); under
        Sentinel, ask it for the master and drop every connection to an old one."""
        if self.watch is not None:
            self.watch.recheck()
        if self.cluster is not None:
            # No node may answer yet: the next attempt tries again.
            with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
                self.cluster.nodes_manager.initialize()


# -- failover --------------------------------------------------------------------------------


def not_run(error: BaseException) -> bool:
    """Whether ``error`` proves the server never ran the command."""
    if isinstance(
        error,
        redis.exceptions.AskError  # MovedError is one too
        | redis.exceptions.TryAgainError
        | redis.exceptions.ClusterDownError
        | redis.exceptions.ReadOnlyError
        | redis.exceptions.BusyLoadingError
        | redis.exceptions.SlotNotCoveredError,
    ):
        return True
    if isinstance(error, redis.ConnectionError | redis.TimeoutError):
        text = str(error)
        # redis-py's wording when the socket could not be opened, when Sentinel names no master
        # yet, and when an old master answered READONLY (the command was refused, not run).
        return (
            "connecting to" in text
            or "Connection refused" in text
            or "No master found" in text
            or "previous master is now a slave" in text
            or isinstance(error, redis.sentinel.MasterNotFoundError)
        )
    return isinstance(error, redis.exceptions.RedisClusterException)


def lost_in_flight(error: BaseException) -> bool:
    return isinstance(error, redis.ConnectionError | redis.TimeoutError) and not not_run(error)


def _brief(error: BaseException) -> str:
    # redis-py appends the repr of a whole client to some messages (passwords redacted, but long).
    return str(error).split(" : <", 1)[0].strip()[:200]


def as_cluster_error(error: BaseException, command: str) -> ClusterError:
    """The :mod:`scheduler.engine.errors` class for a failover error that outlasted the wait."""
    name = f"engine call {command!r}"
    error_text = _brief(error)
    if isinstance(error, redis.exceptions.ReadOnlyError) or "previous master" in str(error):
        return ReadOnlyReplica(f"{name}: the server is a replica now and no new master was found")
    if isinstance(error, redis.exceptions.AskError | redis.exceptions.TryAgainError):
        return SlotMoving(f"{name}: the namespace's slot kept moving between nodes ({error_text})")
    if lost_in_flight(error):
        return OutcomeUnknown(
            f"{name}: the connection was lost after the call was sent, so it may or may not"
            f" have run ({error_text})"
        )
    return ClusterDown(f"{name}: no master served the namespace ({error_text})")


@dataclass(frozen=True)
class Durability:
    """Wait after each engine write until ``replicas`` replicas acknowledge it (``WAIT``), at
    most ``timeout`` seconds; fewer acknowledgements raise :class:`NotReplicated`. A single
    call asks again for up to ``reconcile`` seconds in all before it raises (a lagging replica
    or a short partition then still acknowledges it)."""

    replicas: int = 1
    timeout: float = 1.0
    reconcile: float = 5.0

    def check(self, acknowledged: Any, command: str) -> None:
        # An error in WAIT's place (refused or unblocked: the server became a replica) means
        # the call ran and no replica acknowledged it.
        if isinstance(acknowledged, Exception):
            acknowledged = 0
        if int(acknowledged) < self.replicas:
            raise NotReplicated(
                f"engine call {command!r} ran on the master but {acknowledged} of"
                f" {self.replicas} replicas acknowledged it within {self.timeout:g}s: a failover"
                " now could lose it"
            )


# How a scheduler service fires ticks when its server has replicas and its URL asks for no
# WAIT: a tick a minute can afford the round trip, and a tick written only to a master that a
# partition then deposes would fire again on the new one (run twice).
TICK_DURABILITY = Durability(1, 2.0)


def connected_replicas(client: redis.Redis) -> int:
    """How many replicas are connected to the server ``client`` reaches (0 if INFO is refused)."""
    try:
        info = client.info("replication")
    except redis.RedisError:
        return 0
    return int(info.get("connected_slaves", 0) or 0)


DURABILITY_OPTIONS = ("wait", "wait_timeout")


def split_durability(url: str) -> tuple[str, Durability | None]:
    """The URL without its ``wait`` / ``wait_timeout`` query options, and the
    :class:`Durability` they ask for (None: acknowledge writes as soon as the master has them)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # malformed: connect() says what is wrong with it
        return url, None
    if "wait" not in parts.query:
        return url, None
    query = parse_qs(parts.query, keep_blank_values=True)
    options = {key: query.pop(key)[-1] for key in DURABILITY_OPTIONS if key in query}
    rest = "&".join(f"{key}={value}" for key, values in query.items() for value in values)
    # Cut by hand: urlsplit's geturl() drops the empty host of unix:///path URLs.
    base, _, _ = url.partition("?")
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    stripped = base + (f"?{rest}" if rest else "") + fragment
    if "wait" not in options:
        return url, None
    try:
        replicas = int(options["wait"])
        timeout = float(options.get("wait_timeout", "1"))
    except ValueError:
        replicas, timeout = -1, -1.0
    if replicas < 0 or not 0 < timeout <= 3600:
        raise ServerError(
            f"invalid durability options in {redact_url(url)!r}: wait=<replicas, 0 or more>"
            " and wait_timeout=<seconds, over 0>"
        )
    return stripped, Durability(replicas, timeout) if replicas else None


_REDIRECTS = (redis.exceptions.AskError, redis.exceptions.TryAgainError)


class Failover:
    """Runs engine calls, retrying them while a failover settles (see the module's notes)."""

    def __init__(self, route: Route, wait: float = FAILOVER_WAIT) -> None:
        self.route = route
        self.wait = wait
        # Until a call has succeeded there is no failover to wait for: a wrong URL or a server
        # that is down is reported at once (redirects are still followed). A cluster client
        # has already read the slot map from a live node when it was made.
        self.contacted = route.cluster is not None

    def run(self, command: str, attempt: Callable[[], T], *, replayable: bool) -> T:
        deadline = time.monotonic() + self.wait
        tries = 0
        while True:
            try:
                reply = attempt()
                self.contacted = True
                return reply
            except (redis.RedisError, redis.exceptions.RedisClusterException) as error:
                safe = not_run(error) or (replayable and lost_in_flight(error))
                redirect = isinstance(error, _REDIRECTS)
                if not self.contacted and not redirect:
                    deadline = 0.0
                if not safe or time.monotonic() >= deadline:
                    if self.route.watch is not None and lost_in_flight(error):
                        # A failed write: the master may have moved without our hearing of it.
                        self.route.watch.recheck()
                    if safe or lost_in_flight(error):
                        raise as_cluster_error(error, command) from None
                    raise
                if not isinstance(error, redis.exceptions.MovedError) or tries:
                    # MOVED names the new owner: refresh and resend at once, the first time.
                    time.sleep(_BACKOFF[min(tries, len(_BACKOFF) - 1)])
                self.route.refresh()
                tries += 1


__all__ = [
    "CLUSTER_SCHEMES",
    "FAILOVER_WAIT",
    "REPLAYABLE_WRITES",
    "SCHEMES",
    "SENTINEL_SCHEMES",
    "TICK_DURABILITY",
    "URL_SCHEMES",
    "Durability",
    "Failover",
    "Keeper",
    "MasterWatch",
    "Route",
    "connect",
    "connected_replicas",
    "detect_cluster",
    "is_cluster",
    "keeper_of",
    "needs_failover",
    "not_run",
    "primaries",
    "redact_url",
    "set_keeper",
    "split_durability",
]
