"""SIGKILL of the namespace's master mid-drain, on a real cluster and under Sentinel: workers,
a flow run and a writer carry on against the promoted replica, and every job is accounted for.

Drains of 2,000 jobs by default; ``FLOWS_CLUSTER=long`` drains 20,000.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot

from benchmarks.failover import FailoverResult, drain_through_failover
from benchmarks.topology import Cluster, SentinelGroup

JOBS = 20_000 if os.environ.get("FLOWS_CLUSTER") == "long" else 2_000
NAMESPACE = "failover"
MODES = {"async": "", "wait": "?wait=1&wait_timeout=2"}

pytestmark = pytest.mark.slow


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = Cluster.start(tmp_path / "cluster")
    yield started
    started.stop()


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    started = SentinelGroup.start(tmp_path / "sentinel")
    yield started
    started.stop()


def check(result: FailoverResult, mode: str) -> None:
    print(f"\n{mode}: {result.as_dict()}")  # the figures docs/pages/scaling-out.md quotes
    # The drain was put long before the kill, so the replica had all of it: nothing may go
    # missing, and every job ends complete (a job whose completion the failover lost ran again).
    assert (result.completed, result.missing, result.unfinished) == (JOBS, 0, {})
    assert result.flow_status == "succeeded"
    assert result.doctor_problems == 0
    assert result.service_healthy
    assert result.acknowledged > 0
    assert 0 < result.recovery_seconds < 30
    # Every job runs again within 10 s of the server's return: none waits out its 60 s lock
    # because the failover lost the reply of its pop or of its complete.
    assert result.finished_after_kill < result.recovery_seconds + 10
    if mode == "wait":
        # WAIT's promise: a write acknowledged to the caller is on a replica, so it survives.
        assert result.lost == 0
        # And no job runs twice: a completion that raised is sent again until the new master
        # has it, a pop that raised gives the worker nothing (a job popped again after a lost
        # pop reply ran once: pop_replies_lost, not a rerun).
        assert result.reruns == 0


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_cluster_master_killed_mid_drain(own_cluster: Cluster, tmp_path: Path, mode: str) -> None:
    slot = key_slot(f"{{{NAMESPACE}}}:".encode())
    owner = own_cluster.node_of_slot(slot)
    # The workers are given a node that is not the master being killed.
    entry = next(node for node in own_cluster.nodes if node is not owner)
    result = drain_through_failover(
        entry.url + MODES[mode],
        NAMESPACE,
        lambda: own_cluster.fail_over(slot),
        jobs=JOBS,
        mode=mode,
        workdir=tmp_path,
    )
    check(result, mode)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_sentinel_master_killed_mid_drain(
    sentinel_group: SentinelGroup, tmp_path: Path, mode: str
) -> None:
    result = drain_through_failover(
        sentinel_group.url + MODES[mode],
        NAMESPACE,
        sentinel_group.fail_over,
        jobs=JOBS,
        mode=mode,
        workdir=tmp_path,
    )
    check(result, mode)
