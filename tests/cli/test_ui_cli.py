"""``flows ui`` as a user starts it: a real process on a free loopback port; the start-up
refusals are one line and start nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import reaped

from flows.access import audit
from flows.cli import main
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

ROOT = Path(__file__).resolve().parents[2]


def test_flows_ui_serves_the_api(server: EmbeddedServer) -> None:
    with flows_ui(server) as base, urllib.request.urlopen(f"{base}/api/v1/openapi.json") as reply:
        document = json.loads(reply.read())
    assert document["info"]["title"] == "redis-flows"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "listening on 0.0.0.0 needs a token"),
        # a proxy on this machine forwards anyone's requests from loopback
        (
            ["--allowed-host", "flows.example.com"],
            "answering requests forwarded from elsewhere (--allowed-host flows.example.com) "
            "needs a token",
        ),
        (
            ["--trusted-proxy", "127.0.0.1"],
            "answering requests forwarded from elsewhere (--trusted-proxy 127.0.0.1) needs a token",
        ),
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


@contextmanager
def flows_ui(server: EmbeddedServer, *args: str, said: list[str] | None = None) -> Iterator[str]:
    """A real `flows ui` process with ``args`` on a loopback port of its own; yields its base
    URL. The port is the one it bound (``--port 0``), read from its start line: a port found
    free beforehand could be taken meanwhile by another test's server, which then answered.
    ``said`` receives the lines it wrote to stderr, once it has stopped."""
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    env.pop("FLOWS_UI_TOKEN", None)
    env.pop("FORWARDED_ALLOW_IPS", None)  # uvicorn's own setting: not what this test is about
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "flows"), "ui", "--port", "0", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with reaped(process):  # killed and its pipe closed if it does not stop when told
        try:
            deadline = time.monotonic() + 60  # against a hang: it starts in a second
            assert process.stderr is not None
            before = ""
            while (started := re.search(r"flows ui on http://[^:]+:(\d+) ", before)) is None:
                assert time.monotonic() < deadline, f"flows ui did not start: {before}"
                line = process.stderr.readline()
                assert line, f"flows ui ended: {before}"
                before += line
            base = f"http://127.0.0.1:{started.group(1)}"
            while True:
                # Any answer of the app's will do; a stylesheet costs it nothing (its first
                # OpenAPI document takes it up to a second or two to build).
                try:
                    with urllib.request.urlopen(f"{base}/static/app.css", timeout=5):
                        break
                except urllib.error.HTTPError:
                    break
                except OSError:
                    assert process.poll() is None, process.communicate()[1]
                    assert time.monotonic() < deadline, "flows ui did not start"
                    time.sleep(0.1)
            yield base
        finally:
            process.terminate()
            _, errors = process.communicate(timeout=30)
    assert "Traceback" not in before + errors
    if said is not None:
        said.extend((before + errors).splitlines())


def test_its_log_is_its_own_lines_each_with_its_time(server: EmbeddedServer) -> None:
    """Started and stopped, `flows ui` says where it listens and that it stopped, each later
    line in the format of its other log lines (with the time), and nothing of its web
    server's start-up and shut-down steps."""
    said: list[str] = []
    with flows_ui(server, said=said):
        pass
    assert said[0].startswith("flows ui on http://127.0.0.1:"), said
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ", x) for x in said[1:]), said
    assert said[-1].endswith(" INFO flows ui stopped"), said
    assert len(said) == 2, said


@pytest.mark.parametrize(
    ("args", "recorded"),
    [
        ([], "127.0.0.1"),  # the header is anyone's to write: the connection's address counts
        (["--trusted-proxy", "127.0.0.1"], "6.6.6.6"),  # the proxy named says who it forwards
    ],
)
def test_the_audit_log_believes_x_forwarded_for_only_from_a_trusted_proxy(
    server: EmbeddedServer,
    redis_client: redis.Redis,
    tmp_path: Path,
    args: list[str],
    recorded: str,
) -> None:
    token = "a-token-for-the-proxy-test-0123"
    with Client(server.url) as client:
        client.queues["etl"].put("K", {})  # the queue it pauses
    (tmp_path / "token").write_text(token + "\n")
    with flows_ui(server, "--token-file", str(tmp_path / "token"), *args) as base:
        request = urllib.request.Request(f"{base}/api/v1/queues/etl/pause", method="POST")
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("X-Forwarded-For", "6.6.6.6")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200
        with Client(server.url) as client:
            entry = audit.recent(client, 1)[0]
    assert (entry["action"], entry["target"]) == ("pause_queue", "queue=etl")
    assert entry["address"] == recorded


@pytest.mark.parametrize("value", ["*", "localhost", "10.0.0.300"])
def test_a_trusted_proxy_must_be_an_address_or_a_network(
    server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    result = CliRunner().invoke(main, ["ui", "--trusted-proxy", value], catch_exceptions=False)
    assert result.exit_code == 2
    assert "is not an IP address or network" in result.stderr


@pytest.mark.parametrize(
    ("args", "status"),
    [
        ([], 200),  # loopback, no proxy named: only this machine reaches it
        (["--allowed-host", "localhost"], 200),  # a loopback name is this machine still
        (["--allowed-host", "flows.example.com"], 401),
        (["--trusted-proxy", "127.0.0.1"], 401),
        (["--allowed-host", "flows.example.com", "--read-only-open"], 200),
    ],
)
def test_reads_on_loopback_behind_a_proxy_need_the_token(
    server: EmbeddedServer, tmp_path: Path, args: list[str], status: int
) -> None:
    """Behind a proxy on this machine, loopback is whoever the proxy lets through: a page of
    runs, job data and logs is not for anyone on the internet."""
    token = "a-token-for-the-proxy-test-0123"
    (tmp_path / "token").write_text(token + "\n")
    with flows_ui(server, "--token-file", str(tmp_path / "token"), *args) as base:
        hosts = ["127.0.0.1", *(["flows.example.com"] if "flows.example.com" in args else [])]
        for host in hosts:
            request = urllib.request.Request(f"{base}/api/v1/runs", headers={"Host": host})
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    got = reply.status
            except urllib.error.HTTPError as error:
                got = error.code
            assert got == status, (host, args)
            request.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(request, timeout=10) as reply:
                assert reply.status == 200


def _pause_status(base: str, token: str) -> int:
    """The status of a write (pausing queue etl) with ``token``."""
    request = urllib.request.Request(f"{base}/api/v1/queues/etl/pause", method="POST")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_rotated_token_file_takes_effect_without_a_restart(
    server: EmbeddedServer, tmp_path: Path
) -> None:
    """The token file was read once, at start: rotating it needed a restart, and until then
    the old token kept working. Now a change of the file is read (on a token that does not
    match, or at the next request a second later): the new token works, the old one no longer
    does; a file that no longer holds a usable token keeps the one read last, with a warning."""
    with Client(server.url) as client:
        client.queues["etl"].put("K", {})
    old, new = "the-old-token-0123456789", "the-new-token-rotated-0123456789"
    token_file = tmp_path / "token"
    token_file.write_text(old + "\n")
    said: list[str] = []
    with flows_ui(server, "--token-file", str(token_file), said=said) as base:
        assert _pause_status(base, old) == 200
        token_file.write_text(new + "\n")
        assert _pause_status(base, new) == 200
        assert _pause_status(base, old) == 403
        token_file.write_text("short\n")  # too short: not a token; the one read last stays
        assert _pause_status(base, "short") == 403
        assert _pause_status(base, new) == 200
    changed = [line for line in said if " INFO the token file " in line]
    assert len(changed) == 1 and changed[0].endswith("changed: its new token is the server's")
    warned = [line for line in said if " WARNING " in line]
    assert len(warned) == 1, said
    assert "holds a token of 5 characters" in warned[0] and "the token read before" in warned[0]
    assert "short" not in warned[0].replace("a token of 5 characters", "")
