"""Partitions of a Redis Cluster, as Jepsen would try them: three masters with a replica each
(c1-c6, ``cluster-node-timeout 3000``), the master of the namespace's slot cut off from the
five other nodes (not from the clients in nc) by packets dropped silently, then healed. The
clients of tests/partition/partition_workload.py put, complete, fire ticks and run them through
the cluster URL, one service and one worker starting from the cut-off master's address; then
the acknowledged writes lost and the ticks run twice are counted.

``pytest -m chaos tests/partition`` runs a short partition in ``?wait=1`` mode;
``FLOWS_CHAOS=long`` adds 18 s partitions in both modes (the figures of
docs/pages/guarantees.md).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns import Network
from redis.crc import key_slot
from test_partition import LONG, WHY_NOT, Topology, run_scenario, server_binary

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"partition tests: {WHY_NOT}"),
]

SERVERS = ("c1", "c2", "c3", "c4", "c5", "c6")
PORT = 6379
NAMESPACE = "part"
SLOT = key_slot(b"{part}:")  # the whole namespace lives in this slot


def cli(net: Network, *args: str) -> str:
    """``valkey-cli ARGS`` from the clients' namespace."""
    binary = str(Path(server_binary()).with_name("valkey-cli"))
    return subprocess.run(
        ["ip", "netns", "exec", net.ns("nc"), binary, *args],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip


def slot_master(net: Network, node: str) -> str:
    """The node that ``node`` says serves the namespace's slot."""
    for line in cli(net, "-h", net.address(node), "-p", str(PORT), "cluster", "nodes").splitlines():
        fields = line.split()
        if "master" not in fields[2] or "fail" in fields[2]:
            continue
        for part in fields[8:]:
            low, _, high = part.partition("-")
            if low.isdigit() and int(low) <= SLOT <= int(high or low):
                host = fields[1].split(":")[0]
                return next(n for n in SERVERS if net.address(n) == host)
    raise LookupError(f"{node} names no master for slot {SLOT}")


def cluster_ok(net: Network) -> bool:
    for node in SERVERS:
        info = cli(net, "-h", net.address(node), "-p", str(PORT), "cluster", "info")
        if "cluster_state:ok" not in info:
            return False
    replication = [
        cli(net, "-h", net.address(n), "-p", str(PORT), "info", "replication") for n in SERVERS
    ]
    return all("connected_slaves:1" in r for r in replication if "role:master" in r)


def start_cluster(net: Network, work: Path) -> None:
    server = server_binary()
    for name in SERVERS:
        folder = work / name
        folder.mkdir()
        net.run(
            name,
            [server, "--bind", net.address(name), "--port", str(PORT), "--dir", str(folder),
             "--protected-mode", "no", "--appendonly", "yes", "--appendfsync", "everysec",
             "--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0",
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", "3000"],
            folder / "log",
        )  # fmt: skip
    addresses = [f"{net.address(n)}:{PORT}" for n in SERVERS]
    deadline = time.monotonic() + 30
    while True:  # until every server listens
        try:
            for address in addresses:
                host, port = address.split(":")
                cli(net, "-h", host, "-p", port, "ping")
            break
        except subprocess.CalledProcessError:
            assert time.monotonic() < deadline, "the cluster's servers never answered"
            time.sleep(0.1)
    cli(net, "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes")
    deadline = time.monotonic() + 60
    while not cluster_ok(net):
        assert time.monotonic() < deadline, "the cluster never became ok"
        time.sleep(0.2)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Topology]:
    with Network((*SERVERS, "nc")) as net:
        start_cluster(net, tmp_path)
        isolated = slot_master(net, "c1")
        yield Topology(
            net,
            tmp_path,
            url="redis+cluster://" + ",".join(f"{net.address(n)}:{PORT}" for n in SERVERS),
            pinned=f"redis://{net.address(isolated)}:{PORT}",
            isolated=isolated,
            others=tuple(n for n in SERVERS if n != isolated),
            namespace=NAMESPACE,
        )


def scenario(top: Topology, mode: str, partition_s: float, after_heal: float) -> dict[str, object]:
    result = run_scenario(top, mode=mode, partition_s=partition_s, after_heal=after_heal)
    promoted = slot_master(top.net, top.others[0])
    assert promoted != top.isolated, "the cut-off master's replica was never promoted"
    return result


def check_wait_mode(result: dict[str, object]) -> None:
    assert result["acknowledged_puts"] and result["acknowledged_completes"]
    assert result["lost_puts"] == 0, result["lost_examples"]
    assert result["completes_lost"] == 0 and result["completed_twice"] == 0
    assert result["acknowledged_fires_lost"] == []
    assert result["ran_twice"] == []


def test_a_partitioned_cluster_master_in_wait_mode_loses_nothing(cluster: Topology) -> None:
    result = scenario(cluster, "wait", partition_s=8.0, after_heal=8.0)
    check_wait_mode(result)
    assert result["first_put_after_heal_s"] is not None


@pytest.mark.skipif(not LONG, reason="the long partition scenarios run with FLOWS_CHAOS=long")
@pytest.mark.parametrize("mode", ["default", "wait"])
def test_an_18_second_partition_of_a_cluster_master(cluster: Topology, mode: str) -> None:
    result = scenario(cluster, mode, partition_s=18.0, after_heal=25.0)
    assert result["acknowledged_fires_lost"] == []
    if mode == "wait":
        check_wait_mode(result)
