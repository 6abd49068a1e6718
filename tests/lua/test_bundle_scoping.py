"""The bundle keeps each command file's own locals in a block of its own, so the engine's main
chunk stays well under Lua's limit of 200 locals, however many command files are added."""

from __future__ import annotations

from pathlib import Path

import redis

from scheduler.engine.scripts import join_includes, lua_dir


def test_a_command_files_code_is_its_own_block_after_its_includes(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "commands").mkdir()
    (tmp_path / "api.lua").write_text("local api = {}\n-- @include commands/a\n")
    (tmp_path / "include" / "m.lua").write_text("local M = {}\n")
    (tmp_path / "commands" / "a.lua").write_text(
        "-- @include m\nlocal LIMIT = 3\napi['a'] = function() return M, LIMIT end\n"
    )
    assert join_includes(tmp_path).splitlines() == [
        "local api = {}",
        "local M = {}",  # the module, for every file after it
        "do -- commands/a",
        "local LIMIT = 3",
        "api['a'] = function() return M, LIMIT end",
        "end -- commands/a",
    ]


def test_the_engine_has_room_for_many_more_locals(redis_client: redis.Redis) -> None:
    source = join_includes(lua_dir())
    spare = "\n".join(f"local spare_{i} = {i}" for i in range(50)) + "\n"
    body = source.replace("local api = {}", spare + "local api = {}", 1)
    assert body != source
    redis_client.script_load(body + "return Engine.dispatch(KEYS, ARGV, true)\n")
