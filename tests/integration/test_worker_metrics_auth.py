"""``flows worker --metrics-port`` under ``flows ui``'s rules: a non-loopback address needs a
token, a presented token must be the right one, and only the server's own names are answered."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from scheduler.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[2]
FLOWS = str(Path(sys.executable).parent / "flows")
TOKEN = "metrics-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _status(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            reply.read()
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@contextlib.contextmanager
def _serving_worker(server: EmbeddedServer, *options: str) -> Iterator[str]:
    """A worker serving its metrics on a free loopback port with ``options``: the metrics' URL
    once it answers; the worker stopped after."""
    port = free_port()
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("FLOWS_UI_TOKEN", None)
    worker = subprocess.Popen(
        [FLOWS, "worker", "-q", "q", "--processes", "0", "--metrics-port", str(port), *options],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                _status(url, {})  # any answer: it serves
                break
            except OSError:
                assert time.monotonic() < deadline, "no metrics served"
                time.sleep(0.1)
        yield url
    finally:
        worker.terminate()
        worker.wait(30)


def test_metrics_on_a_non_loopback_address_need_a_token(server: EmbeddedServer) -> None:
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("FLOWS_UI_TOKEN", None)
    done = subprocess.run(
        [FLOWS, "worker", "-q", "q", "--processes", "0", "--metrics-port", str(free_port()),
         "--metrics-host", "0.0.0.0"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "0.0.0.0" in done.stderr and "--metrics-token-file" in done.stderr


def test_a_presented_token_must_be_the_right_one(server: EmbeddedServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with _serving_worker(server, "--metrics-token-file", str(token_file)) as url:
        assert _status(url, {}) == 200  # loopback: reads are open
        assert _status(url, {"Authorization": f"Bearer {TOKEN}"}) == 200
        assert _status(url, {"Authorization": "Bearer wrong-" + TOKEN}) == 403
        assert _status(url, {"Authorization": "Basic eDp5"}) == 401
        assert _status(url, {"Host": "evil.example.com"}) == 400


def test_the_worker_logs_where_it_serves_metrics(server: EmbeddedServer) -> None:
    """An operator reading the worker's log learns the address to scrape."""
    port = free_port()
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("FLOWS_UI_TOKEN", None)
    done = subprocess.run(
        [FLOWS, "worker", "-q", "q", "--processes", "0", "--burst", "--metrics-port", str(port)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"metrics of q at http://127.0.0.1:{port}/metrics" in done.stderr, done.stderr


def test_a_rotated_token_file_works_without_a_restart(
    server: EmbeddedServer, tmp_path: Path
) -> None:
    """The metrics' token file is read again when it changes, as ``flows ui``'s is: the new
    token works and the old one stops working, without restarting the worker."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    rotated = "rotated-" + TOKEN
    options = ["--metrics-host", "0.0.0.0", "--metrics-token-file", str(token_file)]
    with _serving_worker(server, *options) as url:
        assert _status(url, {"Authorization": f"Bearer {TOKEN}"}) == 200
        token_file.write_text(rotated + "\n")
        assert _status(url, {"Authorization": f"Bearer {rotated}"}) == 200
        assert _status(url, {"Authorization": f"Bearer {TOKEN}"}) == 403
