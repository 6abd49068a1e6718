"""The library draws from no shared random generator: not ``random``'s module functions, nor a
standard function that does (``email.utils.make_msgid``). A draw from a library thread moves the
state that a program (or a property test) seeded for itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What of `random` makes a generator of its own; the rest draws from (or reseeds) the shared one.
ALLOWED = {"Random", "SystemRandom"}
DRAWING_ELSEWHERE = {"make_msgid"}


def shared_draws(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "random" and node.attr not in ALLOWED:
                found.append(f"{where}:{node.lineno}: random.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("random", "email.utils"):
            for alias in node.names:
                if alias.name not in ALLOWED and (
                    node.module == "random" or alias.name in DRAWING_ELSEWHERE
                ):
                    found.append(f"{where}:{node.lineno}: {alias.name}")
        elif isinstance(node, ast.Name) and node.id in DRAWING_ELSEWHERE:
            found.append(f"{where}:{node.lineno}: {node.id}")
    return found


def test_the_library_never_draws_from_a_shared_generator() -> None:
    found = [
        line
        for package in ("flows", "scheduler")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in shared_draws(path)
    ]
    assert found == []


def test_the_check_sees_a_shared_draw(tmp_path: Path) -> None:
    # The check itself, on a file that does it three ways (it must not pass by seeing nothing).
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import random\nfrom random import choice\nfrom email.utils import make_msgid\n"
        "random.uniform(0, 1)\nrandom.Random().random()\n"
    )
    assert sorted(line.split(": ", 1)[1] for line in shared_draws(sample)) == [
        "choice",
        "make_msgid",
        "random.uniform",
    ]
