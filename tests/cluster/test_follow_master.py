"""The Sentinel client follows the master: on Sentinel's ``+switch-master`` every connection to
the old master is dropped at once (idle or in use), so no write goes on to a deposed master; a
call that meets a replica asks Sentinel again. On a real Sentinel group, loopback ports."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from benchmarks.topology import SentinelGroup, wait_for
from scheduler import Client
from scheduler.engine.connections import MasterWatch

pytestmark = pytest.mark.slow


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    started = SentinelGroup.start(tmp_path / "sentinel", replicas=1)
    yield started
    started.stop()


def open_sockets(client: redis.Redis) -> list[tuple[str, int]]:
    pool = cast(Any, client.connection_pool)
    return [
        (c.host, c.port)
        for c in [*pool._available_connections, *pool._in_use_connections]
        if c._sock is not None
    ]


def announced(group: SentinelGroup) -> tuple[threading.Event, list[float]]:
    """An independent listener of ``+switch-master``: when it was announced."""
    heard, at = threading.Event(), []
    pubsub = group.sentinels[1].client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe("+switch-master")

    def listen() -> None:
        while not heard.is_set():
            message = pubsub.get_message(timeout=0.05)
            if message is not None:
                at.append(time.monotonic())
                heard.set()
        pubsub.close()

    threading.Thread(target=listen, daemon=True).start()
    return heard, at


def test_connections_to_the_old_master_are_dropped_when_the_switch_is_announced(
    group: SentinelGroup,
) -> None:
    client = Client(group.url)
    queue = client.queues["q"]
    queue.put("k", {}, jid="before")
    old = group.master()
    assert open_sockets(client.redis) == [("127.0.0.1", old.port)]
    watch = MasterWatch.of(client.redis)
    assert watch is not None

    heard, at = announced(group)
    group.switch_master()
    # The other Sentinels hear of it from the one asked, which says so every publish-period.
    assert heard.wait(30), "Sentinel never announced the switch"
    # Within a second of the announcement, with no call made meanwhile: nothing left open to
    # the old master, and the pool names the new one.
    while watch.switches == 0 and time.monotonic() < at[0] + 1.0:
        time.sleep(0.01)
    assert watch.switches == 1
    new = group.master()
    assert new.port != old.port
    assert open_sockets(client.redis) == []
    pool = cast(Any, client.redis.connection_pool)
    assert tuple(pool.master_address)[1] == new.port

    queue.put("k", {}, jid="after")
    assert open_sockets(client.redis) == [("127.0.0.1", new.port)]
    assert new.client().exists("ql:j:after") == 1


def test_a_call_that_meets_a_replica_asks_sentinel_again(group: SentinelGroup) -> None:
    client = Client(group.url)
    client.queues["q"].put("k", {}, jid="one")
    watch = MasterWatch.of(client.redis)
    assert watch is not None
    watch.stop()  # deaf to announcements: only the READONLY reply tells the client
    wait_for(lambda: not watch.listening, 10, "the watch to stop listening")
    # Done when Sentinel made the old master, where the client's connection is, a replica.
    old, new = group.planned_failover()
    assert watch.switches == 0  # nothing heard: still connected to the old master
    assert open_sockets(client.redis) == [("127.0.0.1", old.port)]
    client.queues["q"].put("k", {}, jid="two")
    assert new.client().exists("ql:j:two") == 1
    assert open_sockets(client.redis) == [("127.0.0.1", new.port)]


def test_a_cluster_client_follows_moved_after_a_failover_and_keeps_the_new_map(
    tmp_path: Path,
) -> None:
    from redis.crc import key_slot

    from benchmarks.topology import Cluster

    cluster = Cluster.start(tmp_path / "cluster")
    try:
        client = Client(f"redis+cluster://127.0.0.1:{cluster.nodes[0].port}", namespace="moved")
        slot = key_slot(b"moved")
        queue = client.queues["q"]
        queue.put("k", {}, jid="before")
        old = cluster.node_of_slot(slot)
        assert client.engine.route.target().connection_pool.connection_kwargs["port"] == old.port

        # A planned failover: the replica takes over, the old master becomes its replica and
        # answers MOVED to whoever still writes to it.
        def replica_of_old() -> Any:
            for node in cluster.nodes:
                info = node.client().info("replication")
                if info.get("role") == "slave" and int(info.get("master_port", 0)) == old.port:
                    return node
            return None

        wait_for(lambda: replica_of_old() is not None, 30, "the master's replica")
        replica = replica_of_old()
        replica.client().execute_command("CLUSTER", "FAILOVER")
        wait_for(lambda: cluster.node_of_slot(slot) is replica, 30, "the replica's promotion")
        queue.put("k", {}, jid="after")  # sent to the old master, MOVED, followed
        target = client.engine.route.target().connection_pool.connection_kwargs["port"]
        assert target == replica.port  # the slot map was refreshed: no MOVED from now on
        assert replica.client().exists("{moved}:j:after", "{moved}:j:before") == 2
    finally:
        cluster.stop()
