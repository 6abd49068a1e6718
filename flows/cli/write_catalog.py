"""Writes :mod:`flows.cli.catalog` from the command modules: ``python -m flows.cli.write_catalog``
after adding or renaming a command or changing the first sentence of its docstring."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

SUMMARY_LENGTH = 10**6
"""The limit given to click's short help when the catalog is written: the whole first sentence
is kept, and ``--help`` shortens it to the screen as it would the docstring."""

CATALOG_FILE = Path(__file__).with_name("catalog.py")


def read_catalog(modules: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Every command the modules register, as the catalog holds it (imports them all)."""
    catalog: dict[str, tuple[str, str]] = {}
    for module in modules:
        scratch = click.Group()
        importlib.import_module(f"flows.cli.{module}").register(scratch)
        for name, command in scratch.commands.items():
            catalog[name] = (module, command.get_short_help_str(SUMMARY_LENGTH))
    return catalog


def render_catalog(catalog: Mapping[str, tuple[str, str]]) -> str:
    """The source of :mod:`flows.cli.catalog`."""
    lines = [
        '"""What ``flows --help`` lists without importing the command modules: each command\'s',
        "module and the first sentence of its docstring. Generated from the modules (do not edit):",
        '``python -m flows.cli.write_catalog`` rewrites it."""',
        "",
        "COMMANDS: dict[str, tuple[str, str]] = {",
    ]
    for name in sorted(catalog):
        module, summary = catalog[name]
        lines.append(f"    {name!r}: (")
        lines.append(f"        {module!r},")
        lines.extend(f"        {chunk!r}" for chunk in _chunks(summary))
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _chunks(text: str, width: int = 80) -> list[str]:
    """``text`` cut at spaces into pieces that concatenate back to it (short source lines)."""
    chunks: list[str] = []
    current = ""
    for word in text.split(" "):
        if current and len(current) + len(word) > width:
            chunks.append(current)
            current = ""
        current += word + " "
    chunks.append(current[:-1])
    return chunks


def current_catalog_source() -> str:
    """The catalog as the modules say it should be today."""
    from flows.cli import COMMAND_MODULES

    return render_catalog(read_catalog(COMMAND_MODULES))


def _format(path: Path) -> None:
    """Lay the file out as the rest of the code is (ruff, beside this interpreter, when there)."""
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.is_file():
        subprocess.run([str(ruff), "format", "--quiet", str(path)], check=False)


if __name__ == "__main__":
    CATALOG_FILE.write_text(current_catalog_source())
    _format(CATALOG_FILE)
    sys.stdout.write(f"wrote {CATALOG_FILE}\n")
