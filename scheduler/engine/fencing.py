"""Fencing a deposed Sentinel master: make it a replica of the master Sentinel elected.

After a partition heals, Sentinel converts the old master into a replica of the new one only
once it has reported its role twice, 8 s apart (Sentinel asks a replica for INFO every 10 s):
about 10 s after the heal. Until then the old master takes writes that the conversion wipes,
and in ``?wait=1`` mode a new master without replicas acknowledges nothing. A client that still
reaches the old master (it was cut off from the Sentinels, not from us) can do the conversion
itself as soon as Sentinel has announced the new master: the old master then refuses writes at
once (a replica is read-only) and syncs from the new one as soon as it can reach it.

It does only what Sentinel is about to do, and only when Sentinel has decided it: a
``+switch-master`` announcement (sent for a failover under a new configuration epoch), a
majority of the URL's Sentinels naming the new master under the same epoch, the new master
answering as a master, and the old one still claiming to be one. Only the scheduler service
fences (see :meth:`scheduler.engine.connections.MasterWatch.fence_deposed`); workers and
clients only follow the switch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from scheduler.engine.errors import carrying_given

log = logging.getLogger(__name__)

# How long a deposed master is tried for after the announcement: past it, Sentinel has long
# converted it (or it is gone for good).
FENCE_FOR = 300.0
# Seconds between tries while the old master or a majority of Sentinels cannot be reached.
FENCE_RETRY = 0.5
# Seconds a fenced master's link to the new one may wait on one connect before a fresh one.
RELINK = 2.0
_TIMEOUT = 1.0

Address = tuple[str, int]


class Fence:
    """One deposed master to fence, tried in a daemon thread until done or :data:`FENCE_FOR`."""

    def __init__(
        self,
        sentinels: Sequence[redis.Redis],
        service: str,
        old: Address,
        new: Address,
        options: dict[str, Any],
    ) -> None:
        self.sentinels = list(sentinels)
        self.service = service
        self.old, self.new = old, new
        self.options = options  # credentials and TLS of the master connections
        self.done = threading.Event()
        self.outcome = ""  # "fenced", "already a replica" or "gave up" once decided
        self.link = ""  # once fenced: "synced", or "reconfigured" by Sentinel
        self._relink_at = 0.0

    def start(self) -> None:
        threading.Thread(
            target=carrying_given(self.run), name=f"fence-{self.service}", daemon=True
        ).start()

    def run(self) -> None:
        deadline = time.monotonic() + FENCE_FOR
        self.outcome = self._until(self.attempt, deadline)
        if self.outcome == "fenced":
            self.link = self._until(self.relink, deadline)
        self.done.set()

    def _until(self, step: Callable[[], str], deadline: float) -> str:
        while time.monotonic() < deadline:
            try:
                outcome = step()
            except (redis.RedisError, OSError) as error:
                log.debug("fencing %s:%s: %s", *self.old, error)
                outcome = ""  # out of reach for now (a partition): tried again
            if outcome:
                return outcome
            time.sleep(FENCE_RETRY)
        return "gave up"

    def attempt(self) -> str:
        """One try: a non-empty outcome ends the fence."""
        epoch = self.agreed_epoch()
        if epoch is None:
            return ""  # the Sentinels have not all heard yet, or a majority is out of reach
        with self._node(self.new) as new:
            if _role(new) != "master":
                return ""  # not promoted yet (or demoted since): Sentinel's move, not ours
        with self._node(self.old) as old:
            if _role(old) != "master":
                return "already a replica"
            # Re-checked just before: a newer failover in between would name another master.
            if self.agreed_epoch() != epoch:
                return ""
            old.execute_command("REPLICAOF", self.new[0], str(self.new[1]))
            self._relink_at = time.monotonic() + RELINK
        log.warning(
            "Sentinel service %r: %s:%s still claimed to be the master after Sentinel elected "
            "%s:%s (configuration epoch %s); made it a replica of it",
            self.service, *self.old, *self.new, epoch,
        )  # fmt: skip
        return "fenced"

    def relink(self) -> str:
        """One look at the fenced master's link to the new one: a non-empty outcome once it is
        up, or once someone else reconfigured the server.

        The fence is usually sent during the partition, and the server's connect to the new
        master then waits on TCP's retries (1, 3, 7, 15 s... after the first SYN): the link
        would come up seconds after the heal. While no sync is under way, a fresh connect is
        started every :data:`RELINK` seconds, so it comes up within about a second of it."""
        with self._node(self.old) as old:
            info = old.info("replication")
            following = (str(info.get("master_host")), int(info.get("master_port") or 0))
            if info.get("role") != "slave" or following != self.new:
                return "reconfigured"  # by Sentinel (a newer failover): its move now
            if info.get("master_link_status") == "up":
                return "synced"
            if int(info.get("master_sync_in_progress") or 0) or time.monotonic() < self._relink_at:
                return ""
            if self.agreed_epoch() is None:
                return ""
            # One transaction: no command runs while it is briefly a master in between.
            pipe = old.pipeline(transaction=True)
            pipe.execute_command("REPLICAOF", "NO", "ONE")
            pipe.execute_command("REPLICAOF", self.new[0], str(self.new[1]))
            pipe.execute()
            self._relink_at = time.monotonic() + RELINK
        return ""

    def agreed_epoch(self) -> int | None:
        """The configuration epoch under which a majority of the Sentinels name the new master
        (all of those answering agree on it), or None."""
        epochs: list[int] = []
        for sentinel in self.sentinels:
            try:
                reply = sentinel.execute_command("SENTINEL", "MASTER", self.service)  # type: ignore[no-untyped-call]
            except (redis.RedisError, OSError):
                continue
            fields = _fields(reply)
            address = (fields.get("ip", ""), int(fields.get("port", "0") or 0))
            if address != self.new:
                return None  # a Sentinel names another master: not settled
            epochs.append(int(fields.get("config-epoch", "0") or 0))
        if len(epochs) * 2 <= len(self.sentinels) or len(set(epochs)) != 1:
            return None
        return epochs[0]

    def _node(self, address: Address) -> redis.Redis:
        return redis.Redis(
            host=address[0],
            port=address[1],
            socket_timeout=_TIMEOUT,
            socket_connect_timeout=_TIMEOUT,
            decode_responses=True,
            single_connection_client=True,
            **self.options,
        )


def _role(node: redis.Redis) -> str:
    return str(node.execute_command("ROLE")[0])  # type: ignore[no-untyped-call]


def _fields(reply: Any) -> dict[str, str]:
    """``SENTINEL MASTER``'s fields (a map, or a flat list in RESP2), as text."""
    if isinstance(reply, dict):
        items = [x for pair in reply.items() for x in pair]
    else:
        items = list(reply or ())
    text = [x.decode() if isinstance(x, bytes) else str(x) for x in items]
    return dict(zip(text[::2], text[1::2], strict=False))
