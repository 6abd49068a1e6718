"""A server that lacks what the engine needs is named in one line, with its version and what is
needed: a server without Functions and scripts, and one without a command the engine's Lua
calls. Real servers (the wheel's, and the system's redis-server when there is one) with those
commands renamed away (``rename-command``), as a managed or an older server would lack them."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from flows.cli import main
from scheduler.embedded import wheel_binary
from scheduler.engine.scripts import Engine, engine_source
from scheduler.engine.server_support import (
    UnsupportedServer,
    engine_commands,
    missing_commands,
    server_version,
)

Start = Callable[..., redis.Redis]


def _binaries() -> list[Path]:
    found = [wheel_binary()]
    system = shutil.which("redis-server")
    if system is not None:
        found.append(Path(system))
    return [b for b in dict.fromkeys(f for f in found if f is not None) if b.is_file()]


@pytest.fixture(params=_binaries(), ids=lambda path: path.name + ":" + str(path.parent.name))
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Start]:
    """Start the binary with these commands renamed away; returns a client of it."""
    binary: Path = request.param
    processes: list[subprocess.Popen[bytes]] = []

    def make(*renamed: str) -> redis.Redis:
        where = tmp_path / f"s{len(processes)}"
        where.mkdir()
        socket = where / "s.sock"
        args = [str(binary), "--port", "0", "--unixsocket", str(socket), "--dir", str(where)]
        args += ["--save", "", "--appendonly", "no"]
        for name in renamed:
            args += ["--rename-command", name, ""]
        processes.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
        client = redis.Redis(unix_socket_path=str(socket), decode_responses=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return client
            except redis.ConnectionError:
                assert time.monotonic() < deadline, f"{binary} did not start"
                time.sleep(0.02)

    yield make
    for process in processes:
        process.terminate()
        process.wait(10)


def test_a_server_without_functions_or_scripts_is_named_with_its_version(start: Start) -> None:
    r = start("FUNCTION", "SCRIPT")
    version = server_version(r)
    with pytest.raises(UnsupportedServer) as refused:
        Engine(r).call("put", "w", "q", "j1", "K", "{}", 0)
    message = str(refused.value)
    assert message.startswith(f"the server ({version}) runs neither Functions")
    assert "FUNCTION LOAD" in message and "Redis 7.0+" in message and "SCRIPT LOAD" in message
    # the command line says it in one line, no traceback
    url = f"unix://{r.connection_pool.connection_kwargs['path']}"
    result = CliRunner().invoke(main, ["jobs", "--redis", url], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"Error: {message}"]


def test_without_functions_the_engine_runs_as_a_script(start: Start) -> None:
    r = start("FUNCTION")
    engine = Engine(r)
    assert engine.call("put", "w", "q", "j1", "K", "{}", 0) == "j1"
    assert engine._use_functions is False


def test_a_command_the_engine_calls_is_named_with_the_version_that_has_it(start: Start) -> None:
    r = start("GETDEL")
    version = server_version(r)
    assert missing_commands(r, ["getdel", "hset"]) == ["getdel"]
    engine = Engine(r)
    # An idle worker waits on q: the put hands the job over, which takes GETDEL.
    assert engine.call("await", "w1", 30, 1, "q") == "[]"
    with pytest.raises(UnsupportedServer) as refused:
        engine.call("put", "w2", "q", "j1", "K", "{}", 0)
    assert str(refused.value).startswith(
        f"the server ({version}) has no GETDEL (Redis 6.2+), which the engine's 'put' needs"
    )


def test_the_engine_commands_are_read_from_its_source() -> None:
    used = engine_commands(engine_source())
    assert {"hset", "zadd", "getdel", "lpos", "xadd", "rpush"} <= used
    assert all(name == name.lower() for name in used)
