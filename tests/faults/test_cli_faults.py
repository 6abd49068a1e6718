"""Each CLI command under each fault of the server: one line that says what failed, where and
what to do (exit status 1, no traceback, no password), nothing changed, and reads still working
where the server allows reads (full, a read-only replica, a read-only ACL user).
"""

from __future__ import annotations

import os
import secrets
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from fault_support import Valkey, acl_users, invoke, populate
from helpers import assert_unchanged

from flows.cli import main
from scheduler.engine.faults import ServerUnavailable

UNREACHABLE = "redis://flows-user:s3cret-pw@127.0.0.1:1/0"


def commands(flow_file: Path, flows_dir: Path) -> dict[str, list[str]]:
    """Every command that talks to the server, reads first."""
    return {
        "queues": ["queues"],
        "jobs": ["jobs", "--state", "waiting", "--queue", "q"],
        "job": ["job", "waiting"],
        "runs": ["runs"],
        "status": ["status"],
        "failed": ["failed"],
        "doctor": ["doctor", "--deep"],
        "workers": ["workers"],
        "run": ["run", str(flow_file), "--detach"],
        "cancel": ["cancel", "waiting"],
        "worker": ["worker", "-q", "q", "--burst", "--processes", "0"],
        "pool": ["worker", "-q", "q", "--burst"],
        "scheduler": ["scheduler", "--flows-dir", str(flows_dir), "--once"],
    }


LONG_RUNNING = ("worker", "pool", "ui")
"""What exits 78 (EX_CONFIG) when restarting it cannot mend what stopped it."""
READS = ("queues", "jobs", "job", "runs", "status", "failed", "doctor")
# What a full server refuses (a worker waits for memory instead: see test_worker_faults.py).
WRITES = ("run", "cancel", "scheduler")


def one_line_error(code: int, output: str, *expected: str, status: int = 1) -> str:
    """The output is exactly one error line containing ``expected`` (exit ``status``); returns
    it."""
    assert code == status, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("Error: ")
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def run(args: Sequence[str], url: str) -> tuple[int, str]:
    return invoke([*args, "--redis", url])


@pytest.fixture
def flows_dir(tmp_path: Path, flow_file: Path) -> Path:
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(
        flow_file.read_text().replace("name: faulty", "name: nightly")
        + 'schedule: {cron: "* * * * *"}\n'
    )
    return folder


def test_an_unreachable_server_is_one_line_for_every_command(
    flow_file: Path, flows_dir: Path
) -> None:
    for name, args in commands(flow_file, flows_dir).items():
        line = one_line_error(
            *run(args, UNREACHABLE), "cannot reach Redis at 127.0.0.1:1", "start the server"
        )
        assert "s3cret" not in line, name


def test_a_malformed_url_is_blamed_on_the_url(flow_file: Path, flows_dir: Path) -> None:
    url = "redis://flows-user:s3cret-pw@[::1/0"
    for name, args in commands(flow_file, flows_dir).items():
        line = one_line_error(
            *run(args, url),
            "invalid Redis URL",
            "redis://flows-user:***@",
            status=78 if name in LONG_RUNNING else 1,
        )
        assert "namespace" not in line and "s3cret" not in line, name


@pytest.mark.parametrize(
    "args",
    [
        ["ui", "--port", "0"],
        ["scheduler", "--flows-dir", "{flows_dir}"],
        ["worker", "-q", "q", "--processes", "0"],
        ["worker", "-q", "q", "--processes", "2"],
    ],
    ids=["ui", "scheduler", "worker", "pool"],
)
def test_a_malformed_url_stops_a_long_lived_command_as_unworkable(
    args: list[str], flows_dir: Path
) -> None:
    """Every long-lived command, as its own process, stops over a URL no restart can mend
    with one line and exit 78, as a pool's worker process does: a supervisor that restarts on
    exit 1 would otherwise restart it for ever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["FLOWS_REDIS_URL"] = "redis://flows-user:s3cret-pw@[::1/0"
    command = [a.replace("{flows_dir}", str(flows_dir)) for a in args]
    done = subprocess.run(
        [str(Path(sys.executable).with_name("flows")), *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    one_line_error(done.returncode, done.stderr, "invalid Redis URL", status=78)
    assert "s3cret" not in done.stderr


@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_a_command_serving_several_namespaces_says_78_as_its_processes_do(
    command: str, flows_dir: Path
) -> None:
    """With --namespace a,b each namespace's process stops over the malformed URL with 78:
    so does the command that started them, not 1 (a supervisor would restart it for ever)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["FLOWS_REDIS_URL"] = "redis://flows-user:s3cret-pw@[::1/0"
    args = (
        ["-q", "q", "--processes", "0"] if command == "worker" else ["--flows-dir", str(flows_dir)]
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("flows")), command, *args, "--namespace", "a,b"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 78, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and all("invalid Redis URL" in line for line in lines), done.stderr
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr


def test_a_host_name_that_cannot_be_one_is_blamed_on_the_url(
    flow_file: Path, flows_dir: Path
) -> None:
    """An empty or over-long label (a doubled dot, a pasted token) is no host name: said as a
    malformed URL, not as an unexpected error of the IDNA codec."""
    for host in ("my..host", "x" * 64 + ".example"):
        url = f"redis://flows-user:s3cret-pw@{host}:6379/0"
        for name, args in commands(flow_file, flows_dir).items():
            line = one_line_error(
                *run(args, url),
                "invalid Redis URL",
                f"host name {host!r}",
                status=78 if name in LONG_RUNNING else 1,
            )
            assert "s3cret" not in line, name


@pytest.fixture
def not_redis() -> Iterator[str]:
    """The URL of a server that answers every connection as a web server does."""

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(1024)
            self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answer) as server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"redis://127.0.0.1:{server.server_address[1]}/0"
        server.shutdown()


def test_a_server_that_is_not_redis_is_named_with_what_to_check(
    not_redis: str, flow_file: Path, flows_dir: Path
) -> None:
    port = not_redis.rsplit(":", 1)[1].split("/")[0]
    for args in commands(flow_file, flows_dir).values():
        one_line_error(
            *run(args, not_redis),
            f"Redis at 127.0.0.1:{port}",
            "does not answer as a Redis server",
            "check the host and port in --redis or $FLOWS_REDIS_URL",
        )


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--debug`` lets the exception through (in-process); ``FLOWS_DEBUG=1`` prints its
    traceback (a real process)."""
    monkeypatch.setenv("FLOWS_DEBUG", "0")  # restored after the test: --debug sets it to 1
    result = CliRunner().invoke(main, ["--debug", "queues", "--redis", UNREACHABLE])
    assert isinstance(result.exception, ServerUnavailable)
    env = {k: v for k, v in os.environ.items() if k != "FLOWS_DEBUG"}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("flows")), "queues", "--redis", UNREACHABLE],
        capture_output=True,
        text=True,
        env={**env, "FLOWS_DEBUG": "1"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert (
        "scheduler.engine.faults.ServerUnavailable: cannot reach Redis at 127.0.0.1:1"
        in done.stderr
    )


@pytest.fixture
def acl_server(
    servers: list[Valkey], tmp_path: Path, flow_file: Path
) -> tuple[Valkey, dict[str, str]]:
    """A server with the users of docs/pages/acl.md (from an ACL file), holding jobs and a run."""
    passwords = {user: secrets.token_urlsafe(16) for user in ("flows-viewer", "flows-worker")}
    folder = tmp_path / "acl"
    folder.mkdir()
    (folder / "users.acl").write_text("\n".join(acl_users(passwords)) + "\n")
    server = Valkey(folder, [f"aclfile {folder / 'users.acl'}"])
    servers.append(server)
    populate(server.url())
    code, output = run(["run", str(flow_file), "--detach"], server.url())
    assert code == 0, output
    return server, passwords


def test_a_wrong_password_is_one_line_for_every_command(
    acl_server: tuple[Valkey, dict[str, str]], flow_file: Path, flows_dir: Path
) -> None:
    """A long-running command (a worker, in-process or a pool, and the dashboard) exits 78,
    as a pool's process and the scheduler service do: restarting it cannot mend a password
    (they exited 1, which a supervisor restarts for ever)."""
    server, _ = acl_server
    url = server.url("flows-viewer", "wrong-password")
    every = {**commands(flow_file, flows_dir), "ui": ["ui", "--port", "0"]}
    with assert_unchanged(server.admin()):
        for name, args in every.items():
            line = one_line_error(
                *run(args, url),
                "refused the login as user 'flows-viewer'",
                "password",
                status=78 if name in LONG_RUNNING else 1,
            )
            assert "wrong-password" not in line, name


def test_the_viewer_reads_and_every_write_names_what_was_refused(
    acl_server: tuple[Valkey, dict[str, str]], flow_file: Path, flows_dir: Path
) -> None:
    server, passwords = acl_server
    url = server.url("flows-viewer", passwords["flows-viewer"])
    every = commands(flow_file, flows_dir)
    with assert_unchanged(server.admin()):
        for name in READS:
            if name == "doctor":
                continue
            code, output = run(every[name], url)
            assert code == 0, (name, output)
        code, output = run(["job", "waiting", "--json"], url)
        assert '"state": "waiting"' in output
        line = one_line_error(*run(every["doctor"], url), "may not run Redis command 'scan'")
        assert "flows-viewer" in line and "Least-privilege Redis users" in line
        for name in ("run", "cancel"):
            one_line_error(
                *run(every[name], url), "ACL user 'flows-viewer' may not run", "nothing was done"
            )


def test_the_worker_user_works_and_is_refused_what_it_lacks(
    acl_server: tuple[Valkey, dict[str, str]], flow_file: Path, flows_dir: Path
) -> None:
    server, passwords = acl_server
    url = server.url("flows-worker", passwords["flows-worker"])
    every = commands(flow_file, flows_dir)
    with assert_unchanged(server.admin()):
        one_line_error(
            *run(every["doctor"], url), "'flows-worker' may not run Redis command 'scan'"
        )
    code, output = run(every["worker"], url)
    assert code == 0, output
    # worked under the user: popped and reported (tasks.a is no module here: import-error)
    job = server.admin().hgetall("ql:j:waiting")
    assert job["state"] == "failed" and '"import-error"' in job["failure"], job


def test_a_full_server_serves_every_read_and_refuses_writes_in_one_line(
    populated: Valkey, flow_file: Path, flows_dir: Path
) -> None:
    url = populated.url()
    every = commands(flow_file, flows_dir)
    populated.fill_memory()
    with assert_unchanged(populated.admin()):
        for name in READS:
            code, output = run(every[name], url)
            assert code == 0, (name, output)
            assert "Traceback" not in output
        code, output = run(["jobs", "--state", "failed", "--queue", "q"], url)
        assert "failed" in output
        for name in WRITES:
            one_line_error(*run(every[name], url), "is out of memory", "raise maxmemory")


def test_a_read_only_replica_serves_reads_and_refuses_writes_in_one_line(
    populated: Valkey, servers: list[Valkey], tmp_path: Path, flow_file: Path, flows_dir: Path
) -> None:
    replica = Valkey(tmp_path / "replica")
    servers.append(replica)
    replica.replica_of(populated)
    url = replica.url()
    every = commands(flow_file, flows_dir)
    with assert_unchanged(replica.admin()):
        for name in READS:
            code, output = run(every[name], url)
            assert code == 0, (name, output)
        for name in ("run", "cancel", "worker"):
            one_line_error(*run(every[name], url), "read-only replica", "primary")


def test_the_module_entry_points_say_it_in_one_line_too(flows_dir: Path) -> None:
    """``python -m scheduler`` (the service) and ``python -m scheduler.worker`` (a pool's
    process), as real processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    service = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "--flows-dir",
            str(flows_dir),
            "--once",
            "--redis",
            UNREACHABLE,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert service.returncode == 1
    assert service.stderr.startswith("Error: cannot reach Redis at 127.0.0.1:1"), service.stderr
    assert len(service.stderr.splitlines()) == 1 and "s3cret" not in service.stderr
    worker = subprocess.run(
        [sys.executable, "-m", "scheduler.worker", "-q", "q"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "FLOWS_REDIS_URL": "redis://flows-user:s3cret-pw@[::1/0"},
    )
    assert worker.returncode == 78, worker.stderr
    assert len(worker.stderr.splitlines()) == 1, worker.stderr
    assert "invalid Redis URL 'redis://flows-user:***@[::1/0'" in worker.stderr
