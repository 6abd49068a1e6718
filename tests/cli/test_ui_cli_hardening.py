"""``flows ui`` and ``flows scheduler`` as processes meeting a busy port, a server that is not
there yet, and a stop with event streams open."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scheduler.embedded import EmbeddedServer, find_server_binary

ROOT = Path(__file__).resolve().parents[2]
FLOWS = str(Path(sys.executable).parent / "flows")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(url: str) -> dict[str, str]:
    env = dict(os.environ, FLOWS_REDIS_URL=url)
    env.pop("FLOWS_UI_TOKEN", None)
    return env


def _get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        data: dict[str, object] = json.loads(reply.read())
        return data


def _wait_serving(process: subprocess.Popen[str], port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(f"http://127.0.0.1:{port}/api/v1/openapi.json")
            return
        except OSError:
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "flows ui did not serve"
            time.sleep(0.1)


def test_a_busy_port_is_one_line_before_anything_claims_to_serve(server: EmbeddedServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [FLOWS, "ui", "--port", str(port)],
            env=_env(server.url),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"port {port}" in lines[0] and "--port" in lines[0] and "in use" in lines[0]
    assert "flows ui on" not in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_with_event_streams_open_logs_only_the_stop(
    server: EmbeddedServer, signum: int
) -> None:
    """SIGTERM (a service manager's stop) and Ctrl-C stop it cleanly: exit 0, as the
    scheduler service and the workers."""
    port = free_port()
    process = subprocess.Popen(
        [FLOWS, "ui", "--port", str(port)],
        env=_env(server.url),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_serving(process, port)
        streams = [
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/events", timeout=10)
            for _ in range(3)
        ]
        for stream in streams:
            assert stream.readline().startswith(b":")
        process.send_signal(signum)
        _, errors = process.communicate(timeout=30)
        for stream in streams:
            stream.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, errors
    assert "flows ui stopped" in errors
    for word in ("Traceback", "TypeError", "ERROR", "Exception", "Aborted"):
        assert word not in errors, errors


@contextmanager
def _late_server(port: int, tmp_path: Path) -> Iterator[None]:
    """A server on ``port``, started by the test when it chooses (not the embedded one, which
    a waiting process would start by itself)."""
    binary = find_server_binary()
    process = subprocess.Popen(
        [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(30)


def _read_until(stream: object, needle: str, timeout: float) -> str:
    """Lines of a process's stderr up to the one holding ``needle``."""
    import select

    seen = ""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()  # type: ignore[attr-defined]
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} in:\n{seen}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536).decode()
            assert chunk, f"the process ended before {needle!r}:\n{seen}"
            seen += chunk
    return seen


@pytest.mark.parametrize("command", ["ui", "scheduler"])
def test_services_wait_for_their_server_at_start(command: str, tmp_path: Path) -> None:
    redis_port = free_port()
    ui_port = free_port()
    flows_dir = tmp_path / "flows"
    flows_dir.mkdir()
    args = (
        ["ui", "--port", str(ui_port)]
        if command == "ui"
        else ["scheduler", "--flows-dir", str(flows_dir), "--tick-interval", "0.5"]
    )
    process = subprocess.Popen(
        [FLOWS, *args],
        env=_env(f"redis://127.0.0.1:{redis_port}"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        waiting = _read_until(process.stderr, "retrying", 30)
        time.sleep(1.5)  # several attempts meanwhile: still one line
        assert process.poll() is None, waiting
        with _late_server(redis_port, tmp_path):
            more = _read_until(process.stderr, "working again", 60)
            if command == "ui":
                _wait_serving(process, ui_port)
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()
    log = waiting + more
    assert log.count("retrying") == 1, log
    assert "Traceback" not in log


@pytest.mark.parametrize("command", ["ui", "scheduler"])
def test_services_wait_while_sentinel_has_no_master(command: str, tmp_path: Path) -> None:
    """Started during a failover (the Sentinel knows no master for the service), a service waits
    and goes on once the Sentinel names one."""
    import redis

    sentinel_port, master_port, ui_port = free_port(), free_port(), free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(f"port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\n")
    sentinel = subprocess.Popen(
        [str(find_server_binary()), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    flows_dir = tmp_path / "flows"
    flows_dir.mkdir()
    args = (
        ["ui", "--port", str(ui_port)]
        if command == "ui"
        else ["scheduler", "--flows-dir", str(flows_dir), "--tick-interval", "0.5"]
    )
    process = subprocess.Popen(
        [FLOWS, *args],
        env=_env(f"redis+sentinel://127.0.0.1:{sentinel_port}/flows-master"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        waiting = _read_until(process.stderr, "retrying", 30)
        assert process.poll() is None, waiting
        with _late_server(master_port, tmp_path):
            watcher = redis.Redis(port=sentinel_port)
            deadline = time.monotonic() + 15
            while True:
                try:
                    watcher.execute_command(
                        "SENTINEL", "MONITOR", "flows-master", "127.0.0.1", master_port, 1
                    )
                    break
                except redis.ConnectionError:
                    assert time.monotonic() < deadline, "the sentinel did not start"
                    time.sleep(0.1)
            watcher.close()
            more = _read_until(process.stderr, "working again", 60)
            if command == "ui":
                _wait_serving(process, ui_port)
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    finally:
        for each in (process, sentinel):
            if each.poll() is None:
                each.kill()
                each.wait()
        assert process.stderr is not None
        process.stderr.close()
    log = waiting + more
    assert log.count("retrying") == 1, log
    assert "Traceback" not in log
