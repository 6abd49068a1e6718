"""``flows ui`` as a user starts it: a real process on a free loopback port; the start-up
refusals are one line and start nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from flows.cli import main
from scheduler.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_flows_ui_serves_the_api(server: EmbeddedServer, redis_client: redis.Redis) -> None:
    port = free_port()
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("FLOWS_UI_TOKEN", None)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "flows"), "ui", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/v1/openapi.json"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    document = json.loads(reply.read())
                break
            except OSError:
                assert process.poll() is None, process.communicate()[1]
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert document["info"]["title"] == "redis-flows"
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "Traceback" not in errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "listening on 0.0.0.0 needs a token"),
        (["--token-file", "/nonexistent/token"], "cannot read the token file"),
    ],
)
def test_refusals_at_start_are_one_line(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.delenv("FLOWS_UI_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["ui", *args], catch_exceptions=False)
    assert result.exit_code == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_short_token_is_refused(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("short\n")
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    result = CliRunner().invoke(main, ["ui", "--token-file", str(token)], catch_exceptions=False)
    assert result.exit_code == 1
    assert "holds a token of 5 characters: use at least 16" in result.stderr
