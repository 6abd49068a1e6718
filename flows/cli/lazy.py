"""The ``flows`` group loads a command's module only when that command runs.

Importing every command module costs most of a second (the web framework for ``flows ui``, the
flow model for ``flows run``, redis for anything that connects), so ``flows --help`` and each
command pay only for what they use. What ``--help`` lists without loading anything comes from
:mod:`flows.cli.catalog`: each command's name, the module that registers it, and the first
sentence of its docstring, generated from the modules themselves (``python -m
flows.cli.write_catalog`` rewrites it; a test fails when it is stale), so the docstrings stay
the one place of the help text. A module of :data:`~flows.cli.COMMAND_MODULES` that the
catalog does not know yet is loaded whenever the commands are listed or looked up, and a name
the catalog does not know loads every module, so a command is never missing, only slower.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import click

from flows.cli.common import GuardedGroup


class LazyGroup(GuardedGroup):
    """A group whose commands are registered by their modules (``register(group)``) on first use.

    ``catalog`` maps a command's name to ``(module, summary)``; ``modules`` lists every module
    that contributes commands (the catalog may lag behind it)."""

    def __init__(
        self,
        *args: Any,
        modules: Sequence[str] = (),
        catalog: Mapping[str, tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.modules = list(modules)
        self.catalog = dict(catalog or {})
        self._loaded: set[str] = set()

    def load(self, module: str) -> None:
        """Import ``flows.cli.<module>`` and let it add its commands (once)."""
        if module not in self._loaded:
            self._loaded.add(module)
            importlib.import_module(f"flows.cli.{module}").register(self)

    def _load_uncatalogued(self) -> None:
        known = {module for module, _ in self.catalog.values()}
        for module in self.modules:
            if module not in known:
                self.load(module)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_uncatalogued()
        return sorted(set(self.commands) | set(self.catalog))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            entry = self.catalog.get(cmd_name)
            if entry is not None:
                self.load(entry[0])
            else:  # a typo, or a command newer than the catalog: only loading them all tells
                for module in self.modules:
                    self.load(module)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing of ``--help``, from the catalog for the commands not loaded."""
        self._load_uncatalogued()
        stand_ins = {
            name: click.Command(name, help=summary)
            for name, (_, summary) in self.catalog.items()
            if name not in self.commands
        }
        commands = {**stand_ins, **self.commands}
        listed = [(name, commands[name]) for name in sorted(commands) if not commands[name].hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        rows = [(name, command.get_short_help_str(limit)) for name, command in listed]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
