"""Fixtures of the cluster tier: a real 3-master Valkey Cluster with a replica each (``cluster``,
shared by the tests of one process that do not break it) and helpers to run ``flows``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.topology import Cluster

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = Cluster.start(tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()


def flows_command(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``flows ARGS`` as a user runs it: a process of its own, output captured."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
