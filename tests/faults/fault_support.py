"""Helpers of the fault tier: real servers, started by the tests, in the state a fault needs.

* :class:`Valkey` -- a ``valkey-server`` (the binary ``scheduler.embedded`` finds) in a temp dir, on
  a unix socket and, when asked, a loopback TCP port, with extra configuration lines (an ACL
  file, ``maxmemory``); ``replica_of`` makes it a read-only replica of another;
* :func:`populate` -- jobs in every state (what reads show and a fault must leave unchanged);
* :func:`invoke` -- ``flows`` in-process: its exit code and output (a traceback fails the test);
* :func:`acl_users` -- the users of docs/pages/acl.md as ACL file lines;
* :func:`worker_env`, :func:`wait_until` -- a ``flows`` process's environment, a wait for it;
* :func:`outage_log` -- a long-lived ``flows`` command's log across a server stopped and started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner

from flows.cli import main
from scheduler.embedded import find_server_binary
from scheduler.engine.client import Client
from scheduler.engine.connections import connect

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FLOWS = Path(sys.executable).with_name("flows")


def worker_env(url: str | None, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    # the tests' tasks first, then whatever path this test run was given (a checkout's code)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env["FLOWS_DATA_DIR"] = str(data_dir)
    if url is not None:
        env["FLOWS_REDIS_URL"] = url
    return env


def wait_until(done: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def outage_log(
    args: Sequence[str],
    servers: list[Valkey],
    folder: Path,
    *,
    started: str,
    noticed: str,
    settle: float = 0.0,
) -> tuple[Valkey, str]:
    """Run ``flows ARGS`` on a server of its own in ``folder``; once its log says ``started``
    stop the server, once it says ``noticed`` keep it away 3 s (real time: the process's own
    clock, nothing to pass in), start it again in the same folder, wait for the process to say
    it is back (and ``settle`` seconds for every activity to meet it), then SIGTERM it, which
    must exit 0. The server, and the process's log."""
    server = Valkey(folder / "away")
    servers.append(server)
    log = folder / "process.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(FLOWS), *args],
            env=worker_env(server.url(), folder / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: started in log.read_text(), 20, f"{started!r} in the log")
        server.stop()
        wait_until(lambda: noticed in log.read_text(), 20, "the outage noticed")
        time.sleep(3)  # every activity fails many times meanwhile
        servers.append(Valkey(folder / "away"))
        wait_until(lambda: "is back after" in log.read_text(), 20, "the server back")
        time.sleep(settle)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return server, log.read_text()


# The page of the least-privilege users (docs/pages/ once the docs are a site).
_ACL_PAGES = (ROOT / "docs" / "pages" / "acl.md",)
ACL_DOC = next((path for path in _ACL_PAGES if path.exists()), _ACL_PAGES[-1])
FLOW = """\
version: 1
name: faulty
queue: q
steps:
  a: {job: tasks.a, with: {n: 1}}
  b: {job: tasks.b, needs: [a]}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Valkey:
    """One real server process in ``folder`` (stopped by :meth:`stop` or the fixture)."""

    def __init__(self, folder: Path, config: Sequence[str] = (), *, tcp: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.socket = folder / "s.sock"
        self.port = free_port() if tcp else 0
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"unixsocket {self.socket}",
            "unixsocketperm 700",
            'save ""',
            "appendonly no",
            "maxmemory-policy noeviction",
            "repl-diskless-sync-delay 0",  # a replica catches up at once
            f"dir {folder}",
            *config,
        ]
        (folder / "server.conf").write_text("\n".join(lines) + "\n")
        with (folder / "server.log").open("wb") as log:
            self.process = subprocess.Popen(
                [str(find_server_binary()), str(folder / "server.conf")],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(redis.RedisError, OSError):
                if self.admin().ping():
                    break
            assert self.process.poll() is None, (folder / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    def url(self, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{quote(password or '', safe='')}@" if user else ""
        return f"unix://{auth}{self.socket}"

    def admin(self) -> redis.Redis:
        """A client as the ``default`` user (every test server lets it do anything)."""
        return connect(self.url())

    def fill_memory(self) -> None:
        """Set ``maxmemory`` just under what the server uses: every write is refused."""
        admin = self.admin()
        used = int(admin.info("memory")["used_memory"])
        admin.config_set("maxmemory", max(1, used - 1024 * 1024))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            admin.set("probe", "x")

    def free_memory(self) -> None:
        self.admin().config_set("maxmemory", 0)

    def replica_of(self, primary: Valkey) -> None:
        """Follow ``primary`` (over loopback TCP) until it has caught up."""
        admin = self.admin()
        admin.replicaof("127.0.0.1", primary.port)
        deadline = time.monotonic() + 10
        while admin.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.05)
        while admin.dbsize() != primary.admin().dbsize():
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)


def populate(url: str) -> None:
    """A waiting, a running, a failed and a completed job, and one waiting on another: state
    every read shows and no fault may change."""
    client = Client(url)
    queue = client.queues["q"]
    for name in ("running", "failed", "completed"):
        queue.put("tasks.a", {"name": name}, jid=name)
    for job in queue.pop(3):
        if job.jid == "failed":
            job.fail("boom", "it failed")
        elif job.jid == "completed":
            job.complete(result={"ok": True})
    queue.put("tasks.a", {"name": "waiting"}, jid="waiting")
    queue.put("tasks.b", {}, jid="later", depends=["running"])
    client.close()


def invoke(args: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """``flows ARGS`` in this process: its exit code and everything it printed."""
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback would have reached the user
    return result.exit_code, result.output


def acl_users(passwords: dict[str, str]) -> list[str]:
    """The users of the ACL page as ACL file lines, with ``passwords``; ``default`` keeps all."""
    import re

    lines = ["user default on nopass ~* &* +@all"]
    for match in re.finditer(r"^ACL SETUSER (\S+) (.*)$", ACL_DOC.read_text(), re.MULTILINE):
        user, rules = match.group(1), match.group(2)
        if user in passwords:
            lines.append(f"user {user} {rules.replace('CHANGE-ME', passwords[user])}")
    return lines
