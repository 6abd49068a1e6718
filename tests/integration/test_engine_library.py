"""The engine's Functions library is called by name, and any user allowed FUNCTION LOAD chooses
what a name runs: the client runs a library under the engine's name only when its code is this
release's, byte for byte (scheduler/engine/scripts.py), on a real server.

* a library under the engine's name with other code (a worker's user loaded it before the
  release that carries that name was installed) is refused before any call, by the Python
  client, its pipelines and an operator's command (``flows doctor --repair``), and nothing runs;
* so is another library that registers the engine's function names;
* the engine's own library, loaded by another client, is used; ``flows engine load`` loads it,
  or checks the one there;
* the script path (``EVALSHA``) is content-addressed and needs no such check;
* the long-running processes (``flows scheduler``, ``flows worker``) stop over such a library,
  with one line and exit status 78, rather than retry for ever, also when it is swapped while
  they run: real processes.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from engine_library_support import PWNED, another_release, impostor
from flows_cli_support import flows
from helpers import assert_unchanged

from scheduler.embedded import EmbeddedServer
from scheduler.engine import scripts
from scheduler.engine.backoff import EXIT_CONFIG
from scheduler.engine.errors import ForeignEngine
from scheduler.engine.scripts import Engine, function_name, library_name


@pytest.mark.parametrize("holder", ["the engine's name", "another name"])
def test_a_library_that_is_not_the_engine_is_never_run(functions: redis.Redis, holder: str) -> None:
    other = None if holder == "the engine's name" else "helper"
    functions.execute_command("FUNCTION", "LOAD", impostor(other))
    engine = Engine(functions)
    with assert_unchanged(functions), pytest.raises(ForeignEngine) as refused:
        engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000)
    message = str(refused.value)
    assert functions.exists(PWNED) == 0
    assert f"FUNCTION DELETE {other or library_name()}" in message
    assert "`flows engine load`" in message and "nothing was done" in message
    if other:
        assert f"the function {function_name()}" in message and "library helper" in message
    else:
        assert f"library {library_name()} there is not this release's engine" in message
    # a pipeline loads through the same check
    with assert_unchanged(functions), pytest.raises(ForeignEngine):
        Engine(functions).pipeline().call("put", "w", "q", "j2", "K", "{}", 0, now=1000).execute()
    assert functions.exists(PWNED) == 0


def test_an_operator_command_refuses_the_impostor_in_one_line(
    functions: redis.Redis, server: EmbeddedServer
) -> None:
    functions.execute_command("FUNCTION", "LOAD", impostor())
    cli = CliRunner(env={"FLOWS_REDIS_URL": server.url})
    for command in (["doctor", "--repair"], ["engine", "load"], ["runs"]):
        with assert_unchanged(functions):
            result = flows(cli, *command)
        assert result.exit_code == 1, (command, result.output)
        assert "Traceback" not in result.output
        assert f"FUNCTION DELETE {library_name()}" in result.output, (command, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
    assert functions.exists(PWNED) == 0
    assert functions.function_list(library_name())  # left for an operator to look into


def test_the_engines_own_library_is_checked_and_used(
    functions: redis.Redis, server: EmbeddedServer
) -> None:
    cli = CliRunner(env={"FLOWS_REDIS_URL": server.url})
    loaded = flows(cli, "engine", "load")
    assert loaded.exit_code == 0 and loaded.output == f"{library_name()}: loaded\n"
    again = flows(cli, "engine", "load")
    assert again.output == f"{library_name()}: already loaded, its code checked\n"
    engine = Engine(functions)  # a client that did not load it
    assert engine.load() is False
    assert engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000) == "j1"
    assert json.loads(engine.call("get", "j1", now=1000))["state"] == "waiting"
    [listed] = functions.function_list(library_name(), withcode=True)
    if not isinstance(listed, dict):  # RESP2: names and values in turn
        listed = dict(zip(listed[::2], listed[1::2], strict=True))
    assert listed["library_code"] == scripts.functions_library()


def test_the_script_path_is_content_addressed(functions: redis.Redis) -> None:
    """EVALSHA names the text by its SHA1: a library under the engine's name is not used."""
    functions.execute_command("FUNCTION", "LOAD", impostor())
    engine = Engine(functions, use_functions=False)
    assert engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000) == "j1"
    assert engine.script_sha == functions.script_load(scripts.native_bundle())
    assert functions.exists(PWNED) == 0


def test_a_look_again_reads_the_code_only_after_someone_loaded_functions(
    functions: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a long-running process's look costs: the server's counts of code writes (INFO
    commandstats, under 1 KB) each time; the library's ~530 KB of code only when they moved."""
    monkeypatch.setattr(scripts, "LIBRARY_CHECK_EVERY", 0.0)

    def code_reads() -> int:
        stats = functions.info("commandstats").get("cmdstat_function|list") or {}
        return int(stats.get("calls", 0))

    engine = Engine(functions)
    engine.load()
    engine.check_library()  # the first look reads it: nothing was seen before
    reads = code_reads()
    for _ in range(3):
        engine.check_library()
    assert code_reads() == reads
    functions.execute_command(
        "FUNCTION", "LOAD", "#!lua name=helper\nredis.register_function('helper', function() end)"
    )
    engine.check_library()  # another library loaded: this one is read again, and still ours
    assert code_reads() == reads + 1
    assert engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000) == "j1"
    functions.execute_command("FUNCTION", "LOAD", "REPLACE", another_release())
    with assert_unchanged(functions), pytest.raises(ForeignEngine):
        engine.check_library()
    with assert_unchanged(functions), pytest.raises(ForeignEngine):  # and every call after it
        engine.call("put", "w", "q", "j2", "K", "{}", 0, now=1000)


def test_a_refused_library_is_read_again_only_after_someone_loaded_functions(
    functions: redis.Redis,
) -> None:
    """While the library is refused, a call looks at the server's counts of code writes (under
    1 KB) before it reads the ~530 KB of code again: every request to a refused `flows ui` read
    it, so any reader could make the server send it at will. Once an operator has loaded the
    engine (the counts moved), the next call reads it, and runs."""

    def code_reads() -> int:
        stats = functions.info("commandstats").get("cmdstat_function|list") or {}
        return int(stats.get("calls", 0))

    functions.execute_command("FUNCTION", "LOAD", another_release())
    engine = Engine(functions)
    with assert_unchanged(functions):
        with pytest.raises(ForeignEngine) as first:
            engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000)
        reads = code_reads()
        for _ in range(5):
            with pytest.raises(ForeignEngine) as again:
                engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000)
            assert str(again.value) == str(first.value)
        with pytest.raises(ForeignEngine):
            engine.pipeline()
        with pytest.raises(ForeignEngine):
            engine.check_library()
        assert code_reads() == reads
    functions.function_delete(library_name())
    Engine(functions).load()  # the operator's `flows engine load`
    assert engine.call("put", "w", "q", "j1", "K", "{}", 0, now=1000) == "j1"


def _flows_process(*args: str) -> list[str]:
    """The command line of a real ``flows ARGS`` process."""
    return [
        sys.executable,
        "-c",
        "import sys; sys.argv[0] = 'flows'; from flows.entry import main; main()",
        *args,
    ]


def _environment(server: EmbeddedServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
    env["FLOWS_REDIS_URL"] = server.url
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this checkout's code
    return env


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["scheduler", "--flows-dir", "."],
        ["worker", "-q", "q"],
        ["worker", "-q", "q", "--processes", "0"],
        ["ui", "--port", "0"],
    ],
    ids=["scheduler", "worker pool", "worker in-process", "ui"],
)
def test_a_long_running_process_stops_over_a_foreign_library(
    functions: redis.Redis, server: EmbeddedServer, tmp_path: Path, command: list[str]
) -> None:
    # The service logged and retried every step for ever: nothing showed a supervisor that it
    # could not work until an operator came.
    functions.execute_command("FUNCTION", "LOAD", impostor())
    process = subprocess.run(
        _flows_process(*command),
        cwd=tmp_path,
        env=_environment(server),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == EXIT_CONFIG, process.stderr
    assert "Traceback" not in process.stderr and "retrying" not in process.stderr
    said = [line for line in process.stderr.splitlines() if "not this release's engine" in line]
    assert len(said) == 1, process.stderr
    assert f"FUNCTION DELETE {library_name()}) and runs `flows engine load`" in said[0]
    assert functions.exists(PWNED) == 0


def _read_until(process: subprocess.Popen[str], text: str, deadline: float) -> str:
    """The process's stderr up to a line holding ``text``; fails if it ends first."""
    assert process.stderr is not None
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.5)
        if ready:
            chunk = os.read(process.stderr.fileno(), 65536).decode(errors="replace")
            if not chunk:
                break
            seen += chunk
            if text in seen:
                return seen
    process.kill()
    raise AssertionError(f"never saw {text!r}; stderr so far:\n{seen}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "started"),
    [
        (["scheduler", "--flows-dir", "."], "watching"),
        (["worker", "-q", "q"], "started on q"),
        (["worker", "-q", "q", "--processes", "0"], "started on q"),
    ],
    ids=["scheduler", "worker pool", "worker in-process"],
)
def test_a_library_swapped_while_a_process_runs_stops_it(
    functions: redis.Redis,
    server: EmbeddedServer,
    tmp_path: Path,
    command: list[str],
    started: str,
) -> None:
    # Only the first call checked the library: one swapped later ran with the process's rights
    # for as long as it lived. Now it looks every few seconds (scripts.LIBRARY_CHECK_EVERY).
    Engine(functions).load()
    process = subprocess.Popen(
        _flows_process(*command),
        cwd=tmp_path,
        env=_environment(server),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        before = _read_until(process, started, time.monotonic() + 60)
        functions.execute_command("FUNCTION", "LOAD", "REPLACE", another_release())
        swapped = time.monotonic()
        _, rest = process.communicate(timeout=60)
        after = rest.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    stderr = before + after
    assert process.returncode == EXIT_CONFIG, stderr
    assert time.monotonic() - swapped < scripts.LIBRARY_CHECK_EVERY + 10, stderr
    assert "Traceback" not in stderr and "retrying" not in stderr, stderr
    said = [line for line in stderr.splitlines() if "not this release's engine" in line]
    assert len(said) == 1, stderr
    assert f"FUNCTION DELETE {library_name()}) and runs `flows engine load`" in said[0]
