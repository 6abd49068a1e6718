"""``flows server`` and ``flows engine``, through click's CliRunner against real servers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from flows.cli import main
from scheduler.embedded import DEFAULT_APPENDFSYNC, EmbeddedServer
from scheduler.engine import scripts


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A data directory whose server, if a test starts one, is stopped afterwards."""
    path = tmp_path / "data"
    yield path
    EmbeddedServer(path).stop()


# -- flows server ------------------------------------------------------------------------------


def test_help_lists_the_groups() -> None:
    result = flows("--help")
    assert result.exit_code == 0
    assert "server" in result.output and "engine" in result.output


def test_start_status_stop(data_dir: Path) -> None:
    started = flows("server", "start", "--data-dir", str(data_dir))
    assert started.exit_code == 0, started.output
    assert started.stdout.startswith(f"started: unix://{data_dir}/redis.sock (pid ")

    again = flows("server", "start", "--data-dir", str(data_dir))
    assert again.exit_code == 0
    assert again.stdout.startswith("already running: ")

    status = flows("server", "status", "--data-dir", str(data_dir))
    assert status.exit_code == 0
    rows = {line.split()[0]: line.split()[1] for line in status.stdout.splitlines()}
    assert rows["running"] == "yes"
    assert rows["data_dir"] == str(data_dir)
    assert rows["pid"] == str(EmbeddedServer(data_dir).info()["pid"])

    stopped = flows("server", "stop", "--data-dir", str(data_dir))
    assert stopped.exit_code == 0
    assert stopped.stdout == f"stopped: {data_dir}\n"
    assert not EmbeddedServer(data_dir).is_running()

    idle = flows("server", "stop", "--data-dir", str(data_dir))
    assert idle.exit_code == 0
    assert idle.stdout == f"not running: {data_dir}\n"


def test_status_json(data_dir: Path) -> None:
    stopped = json.loads(flows("server", "status", "--data-dir", str(data_dir), "--json").stdout)
    assert stopped["running"] is False and stopped["pid"] is None
    assert stopped["data_dir"] == str(data_dir)

    flows("server", "start", "--data-dir", str(data_dir))
    running = json.loads(flows("server", "status", "--data-dir", str(data_dir), "--json").stdout)
    assert running["running"] is True
    assert running["url"] == EmbeddedServer(data_dir).url
    assert running["appendfsync"] == DEFAULT_APPENDFSYNC
    assert isinstance(running["pid"], int)
    assert set(running) == {
        "running", "url", "data_dir", "socket", "log", "pid", "binary", "version", "appendfsync",
    }  # fmt: skip


def test_status_table_keeps_long_paths_whole(tmp_path: Path) -> None:
    deep = tmp_path / ("long-directory-name-" * 6) / "data"
    result = flows("server", "status", "--data-dir", str(deep))
    assert result.exit_code == 0
    assert str(deep / "server.log") in result.stdout


def test_default_data_dir_comes_from_the_environment(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_DATA_DIR", str(data_dir))
    assert flows("server", "start").exit_code == 0
    assert EmbeddedServer(data_dir).is_running()
    assert flows("server", "stop").stdout == f"stopped: {data_dir}\n"


def test_appendfsync_option(data_dir: Path) -> None:
    started = flows("server", "start", "--data-dir", str(data_dir), "--appendfsync", "always")
    assert "appendfsync always" in started.stdout
    with EmbeddedServer(data_dir).client() as client:
        assert client.config_get("appendfsync") == {"appendfsync": "always"}

    other = flows("server", "start", "--data-dir", str(data_dir), "--appendfsync", "no")
    assert other.exit_code == 0
    assert "already running" in other.stdout
    assert "uses appendfsync always; stop it first" in other.stderr

    silent = flows("server", "start", "--data-dir", str(data_dir))
    assert silent.stderr == ""  # no --appendfsync asked for, nothing to warn about

    refused = flows("server", "start", "--data-dir", str(data_dir), "--appendfsync", "sometimes")
    assert refused.exit_code == 2


def test_a_server_error_is_a_clean_cli_error(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_SERVER_BIN", "no-such-server-binary")
    result = flows("server", "start", "--data-dir", str(data_dir))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: $FLOWS_SERVER_BIN names 'no-such-server-binary'")
    assert "Traceback" not in result.output


# -- flows engine ------------------------------------------------------------------------------

FAKE_API = """\
-- api.lua: a stand-in engine for these tests.
-- @include keys
function Engine.dispatch(keys, args) return Keys.prefix(keys) .. args[1] end
"""
FAKE_KEYS = """\
-- keys.lua
local Engine, Keys = {}, {}
function Keys.prefix(keys) return keys[1] or 'ql:' end
"""


@pytest.fixture
def fake_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the bundler at a tiny engine, so these tests do not depend on the real one."""
    root = tmp_path / "lua"
    (root / "include").mkdir(parents=True)
    (root / "api.lua").write_text(FAKE_API)
    (root / "include" / "keys.lua").write_text(FAKE_KEYS)
    monkeypatch.setattr(scripts, "lua_dir", lambda: root)
    scripts.engine_source.cache_clear()
    yield root
    scripts.engine_source.cache_clear()


def test_bundle_prints_the_qless_script(fake_sources: Path, redis_client: redis.Redis) -> None:
    result = flows("engine", "bundle")
    assert result.exit_code == 0
    assert result.stdout == scripts.qless_bundle()
    assert "@include" not in result.stdout
    assert result.stdout.endswith("return Engine.dispatch(KEYS, ARGV)\n")
    # What a qless client in another language would do with it:
    sha = redis_client.script_load(result.stdout)
    assert redis_client.evalsha(sha, 1, "{billing}:", "put") == "{billing}:put"


def test_bundle_functions_prints_the_library(fake_sources: Path, redis_client: redis.Redis) -> None:
    result = flows("engine", "bundle", "--functions")
    assert result.exit_code == 0
    assert result.stdout == scripts.functions_library()
    assert result.stdout.startswith(f"#!lua name={scripts.library_name()}\n")
    redis_client.function_load(result.stdout, replace=True)
    try:
        assert redis_client.fcall(scripts.function_name(), 0, "pop") == "ql:pop"
    finally:
        redis_client.function_delete(scripts.library_name())


def test_engine_info(fake_sources: Path, redis_client: redis.Redis) -> None:
    data = json.loads(flows("engine", "info", "--json").stdout)
    bundle = scripts.qless_bundle()
    assert data == {
        "sources": str(fake_sources),
        "source_hash": scripts.source_hash(),
        "bundle_sha1": hashlib.sha1(bundle.encode()).hexdigest(),
        "bundle_bytes": len(bundle.encode()),
        "library": scripts.library_name(),
        "function": scripts.function_name(),
    }
    assert redis_client.script_load(bundle) == data["bundle_sha1"]  # the EVALSHA hash

    table = flows("engine", "info")
    assert table.exit_code == 0
    rows = dict(line.split() for line in table.stdout.splitlines())
    assert rows == {key: str(value) for key, value in data.items()}


def test_missing_sources_are_a_clean_cli_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scripts, "lua_dir", lambda: tmp_path)
    scripts.engine_source.cache_clear()
    try:
        result = flows("engine", "bundle")
    finally:
        scripts.engine_source.cache_clear()
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: missing Lua include 'api'")


def test_status_says_when_commands_use_another_server(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With $FLOWS_REDIS_URL set, the embedded server is not the one the other commands use:
    its status says so (the URL's password hidden), so a stopped one alarms no one."""
    monkeypatch.setenv("FLOWS_REDIS_URL", "redis://ops:hunter2@db.example:6379/0")
    result = flows("server", "status", "--data-dir", str(data_dir))
    assert result.exit_code == 0
    assert result.stderr == (
        "note: $FLOWS_REDIS_URL is set (redis://ops:***@db.example:6379/0): other commands use"
        " that server, not this one\n"
    )
    assert json.loads(flows("server", "status", "--data-dir", str(data_dir), "--json").stdout)
    monkeypatch.delenv("FLOWS_REDIS_URL")
    assert flows("server", "status", "--data-dir", str(data_dir)).stderr == ""
