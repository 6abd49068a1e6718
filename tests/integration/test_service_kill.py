"""A scheduler service killed with SIGKILL around a fire neither duplicates nor loses the tick;
SIGTERM stops the long-running service cleanly.

The fire itself is one Lua call, atomic on the server: a client killed while it runs cannot
stop it half-way. What can happen is a kill before the call is sent, or after it returned and
before anything else; the service stops dead at those two points when
``FLOWS_SCHEDULER_FAILPOINT`` names them, and the test kills it there. No test sleeps to let
time pass: each waits for a line the process prints, with a deadline.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from scheduler_support import MIN, T, make_service, registration, run_ids, write_flow

from flows.expand.run_ids import run_id_for
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules

pytestmark = pytest.mark.slow  # real services killed and restarted: seconds each

DEADLINE = 60.0


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client) as client:
        yield client


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    return path


def _scheduler(
    server: EmbeddedServer, *args: str, failpoint: str | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FLOWS_REDIS_URL": server.url}
    env.pop("FLOWS_NAMESPACE", None)
    env.pop("FLOWS_SCHEDULER_FAILPOINT", None)
    if failpoint:
        env["FLOWS_SCHEDULER_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(process: subprocess.Popen[bytes], text: str) -> str:
    """Read the process's stderr until a line contains ``text``; fail if it exits first."""
    assert process.stderr is not None
    seen = b""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            chunk = os.read(process.stderr.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
            if text.encode() in seen:
                return seen.decode(errors="replace")
        elif process.poll() is not None:
            break
    process.kill()
    raise AssertionError(f"never saw {text!r}; stderr so far:\n{seen.decode(errors='replace')}")


def _kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=DEADLINE)  # also closes its pipes
    assert process.returncode == -signal.SIGKILL


def _once(server: EmbeddedServer, folder: Path, now: float) -> None:
    process = _scheduler(server, "--flows-dir", str(folder), "--once", "--now", repr(now))
    _, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0, err.decode()


def _killed_at(server: EmbeddedServer, folder: Path, now: float, failpoint: str) -> None:
    args = ("--flows-dir", str(folder), "--once", "--now", repr(now))
    process = _scheduler(server, *args, failpoint=failpoint)
    _wait_for(process, f"failpoint {failpoint} reached")
    _kill(process)


def test_killed_before_the_fire_call(server: EmbeddedServer, client: Client, folder: Path) -> None:
    write_flow(folder, steps=2)
    make_service(client, folder).scan(T - 1)
    _killed_at(server, folder, T + 1, "before-fire")
    assert run_ids(client) == []
    assert registration(client).next == T  # still due: nothing lost
    _once(server, folder, T + 2)
    assert run_ids(client) == [run_id_for("f", T)]
    _once(server, folder, T + 3)
    assert run_ids(client) == [run_id_for("f", T)]


def test_killed_after_the_fire_call(server: EmbeddedServer, client: Client, folder: Path) -> None:
    write_flow(folder, steps=2)
    make_service(client, folder).scan(T - 1)
    _killed_at(server, folder, T + 1, "after-fire")
    assert run_ids(client) == [run_id_for("f", T)]  # the fire happened, whole
    assert len(client.engine.call("run.get", run_id_for("f", T))) > 0
    reg = registration(client)
    assert (reg.next, reg.fired) == (T + 5 * MIN, 1)
    _once(server, folder, T + 2)
    _once(server, folder, T + 5 * MIN + 1)
    assert run_ids(client) == [run_id_for("f", T), run_id_for("f", T + 5 * MIN)]
    assert registration(client).fired == 2


def test_killed_between_two_catch_up_fires(
    server: EmbeddedServer, client: Client, folder: Path
) -> None:
    write_flow(folder, catchup="all", max_runs=100, overlap="allow")
    make_service(client, folder).scan(T - 1)
    # Four ticks missed: each engine call fires one, so the kill lands between the first two.
    _killed_at(server, folder, T + 17 * MIN, "after-fire")
    assert run_ids(client) == [run_id_for("f", T)]
    _once(server, folder, T + 17 * MIN)
    assert run_ids(client) == sorted(run_id_for("f", T + m * MIN) for m in (0, 5, 10, 15))


def test_two_killed_services_and_a_survivor(
    server: EmbeddedServer, client: Client, folder: Path
) -> None:
    """One service dies holding a planned fire, another after firing; the third finishes."""
    for name in ("a", "b", "c"):
        write_flow(folder, name)
    make_service(client, folder).scan(T - 1)
    _killed_at(server, folder, T + 1, "before-fire")
    _killed_at(server, folder, T + 1, "after-fire")
    _once(server, folder, T + 1)
    for name in ("a", "b", "c"):
        assert run_ids(client, name) == [run_id_for(name, T)]
        assert registration(client, name).fired == 1


def test_sigterm_stops_the_service_cleanly(
    server: EmbeddedServer, client: Client, folder: Path
) -> None:
    write_flow(folder)
    process = _scheduler(
        server, "--flows-dir", str(folder), "--tick-interval", "0.1", "--id", "sigterm-test"
    )
    try:
        _wait_for(process, "registered schedule f")
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:  # the first tick pings its health entry
            if [s.id for s in Schedules(client).services()] == ["sigterm-test"]:
                break
            time.sleep(0.05)
        assert _health(server, "sigterm-test").returncode == 0
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err.decode()
    assert b"stopped" in err
    assert Schedules(client).services() == []  # deregistered on the way out
    unhealthy = _health(server, "sigterm-test")
    assert unhealthy.returncode == 1 and b"unhealthy" in unhealthy.stdout


def test_sigterm_stops_a_scan_in_progress(
    server: EmbeddedServer, client: Client, folder: Path
) -> None:
    """A large folder takes seconds to validate: SIGTERM ends the scan at the next file, and
    the service exits without registering or unregistering anything of that pass."""
    # Sorted first: its 'cannot read' line says the scan has started and has files to go.
    (folder / "000-unreadable.yaml").write_bytes(b"version: 1\nname: \xff\n")
    files = 1000
    for i in range(files):
        write_flow(folder, f"f{i:04d}")
    process = _scheduler(server, "--flows-dir", str(folder), "--id", "scan-stop-test")
    try:
        said = _wait_for(process, "cannot read")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    said += err.decode(errors="replace")
    assert process.returncode == 0, said
    stopped = re.search(rf"scan of \S+ stopped after (\d+) of the {files + 1} files found", said)
    assert stopped is not None, said
    assert int(stopped.group(1)) < files + 1
    assert said.rstrip().endswith("scan-stop-test stopped")
    assert Schedules(client).all() == []  # the scan registered none of the files it read


def _health(server: EmbeddedServer, service_id: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "FLOWS_REDIS_URL": server.url}
    command = [sys.executable, "-m", "scheduler", "--health", "--id", service_id]
    return subprocess.run(command, env=env, capture_output=True, timeout=DEADLINE, check=False)
