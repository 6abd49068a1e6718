"""Fixtures of the cluster tier: a real 3-master Valkey Cluster with a replica each (``cluster``,
shared by the tests of one process that do not break it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.topology import Cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster.start(tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()
