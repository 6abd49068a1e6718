"""Every rule of the qless dialect a Lua file reads (`Dialect.rules.<name>`) is listed in
include/dialect.lua's QLESS table: a misspelt name would read nil, our rule, in both dialects."""

from __future__ import annotations

import re

from scheduler.engine.scripts import lua_dir

_READ = re.compile(r"Dialect\.rules\.([A-Za-z_]\w*)")
_LISTED = re.compile(r"^  ([a-z_]+) = true,$", re.MULTILINE)


def test_every_rule_read_is_listed() -> None:
    root = lua_dir()
    table = (root / "include" / "dialect.lua").read_text().split("Dialect.QLESS = {", 1)[1]
    listed = set(_LISTED.findall(table.split("\n}", 1)[0]))
    read = {
        (name, path.relative_to(root).as_posix())
        for path in root.rglob("*.lua")
        for name in _READ.findall(path.read_text())
    }
    assert listed
    assert {name for name, _ in read} <= listed, sorted(read)
    assert listed <= {name for name, _ in read}, "a rule nothing reads"


def test_no_command_path_asks_which_dialect_it_runs_in() -> None:
    # A difference is a named rule (above) or an encoding at an edge, never a dialect flag.
    root = lua_dir()
    asking = [
        path.relative_to(root).as_posix()
        for path in root.rglob("*.lua")
        if re.search(r"Engine\.qless\b", path.read_text())
    ]
    assert asking == []
