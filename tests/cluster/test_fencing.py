"""Fencing a deposed master (scheduler.engine.fencing) on a real Sentinel group: a server that
still claims to be the master after Sentinel elected another is made a replica of the elected
one, and nothing is done while the Sentinels do not name that master. The whole partition
(a master cut off and healed) is tests/partition's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.topology import HOST, Node, SentinelGroup, start_node, wait_for
from scheduler.engine.fencing import Fence

pytestmark = pytest.mark.slow


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    started = SentinelGroup.start(tmp_path / "sentinel", replicas=1)
    yield started
    started.stop()


@pytest.fixture
def stale(tmp_path: Path) -> Iterator[Node]:
    """A master Sentinel no longer names: the old master a partition cut off."""
    node = start_node(tmp_path / "stale", [])
    yield node
    node.stop()


def fence(group: SentinelGroup, old: Node, new: Node) -> Fence:
    sentinels = [s.client() for s in group.sentinels]
    return Fence(sentinels, group.service, (HOST, old.port), (HOST, new.port), {})


def test_a_deposed_master_becomes_a_replica_of_the_elected_one(
    group: SentinelGroup, stale: Node
) -> None:
    stale.client().set("written-in-the-split", "1")
    master = group.data[0]
    fenced = fence(group, stale, master)
    assert fenced.attempt() == "fenced"
    role = stale.client().execute_command("ROLE")
    assert role[0] == "slave" and int(role[2]) == master.port
    # It syncs from the elected master: what only it had is gone, as Sentinel would have done.
    wait_for(lambda: stale.client().get("written-in-the-split") is None, 15, "the sync")
    wait_for(lambda: fenced.relink() == "synced", 15, "the link up")
    assert fence(group, stale, master).attempt() == "already a replica"


def test_nothing_is_fenced_unless_the_sentinels_name_that_master(
    group: SentinelGroup, stale: Node
) -> None:
    replica = group.data[1]
    # The Sentinels name data[0]: a fence towards the replica (a stale announcement) waits.
    assert fence(group, stale, replica).attempt() == ""
    assert fence(group, group.data[0], replica).attempt() == ""
    assert stale.client().execute_command("ROLE")[0] == "master"
    assert group.data[0].client().execute_command("ROLE")[0] == "master"
