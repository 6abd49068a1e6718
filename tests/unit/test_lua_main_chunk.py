"""The joined engine script's main chunk: Lua refuses to compile a function with more than 200
active locals, and each branch adding top-level locals can pass alone and fail merged. A
command's own lines are joined in a `do ... end` block (their locals end with it); what counts
is the shared code's locals outside those blocks."""

from __future__ import annotations

import re

from scheduler.engine.scripts import functions_library, qless_bundle

LUA_LIMIT = 200
_TOP_LOCAL = re.compile(r"^local\s+(function\s+)?([A-Za-z_][\w\s,]*?)\s*(=|\(|$)", re.MULTILINE)


def main_chunk_locals(source: str) -> list[str]:
    names: list[str] = []
    # a command's block: `do -- commands/<name>` ... `end -- commands/<name>` (join_includes)
    outside = re.sub(
        r"^do -- (commands/\S+)\n.*?^end -- \1$", "", source, flags=re.MULTILINE | re.DOTALL
    )
    for match in _TOP_LOCAL.finditer(outside):
        names.extend(name.strip() for name in match.group(2).split(","))
    return names


def test_the_main_chunk_stays_under_luas_local_limit() -> None:
    for source in (functions_library(), qless_bundle()):
        names = main_chunk_locals(source)
        assert len(names) <= LUA_LIMIT, (
            f"{len(names)} top-level locals (Lua allows {LUA_LIMIT}): hang helpers off a module "
            f"table instead; the last ones: {names[-5:]}"
        )
