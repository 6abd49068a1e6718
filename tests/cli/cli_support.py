"""Helpers of the CLI tier (``from cli_support import flows``)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from flows.cli import main


def flows(*args: str) -> Result:
    """``flows ARGS...`` through click's runner, in this process."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)
