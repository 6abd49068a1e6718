"""A CLI call that must be refused: run it, check it changed nothing and ended cleanly."""

from __future__ import annotations

import redis
from click.testing import CliRunner
from helpers import assert_unchanged

from flows.cli import main


def refused(cli: CliRunner, server: redis.Redis, argv: list[str], codes: tuple[int, ...]) -> str:
    """The output of ``flows ARGV``, which must exit with one of ``codes``, raise nothing but
    its exit, print no traceback and leave every key of ``server`` as it was."""
    with assert_unchanged(server):
        result = cli.invoke(main, argv)
    output = result.output
    assert result.exit_code in codes, (result.exit_code, output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert "Traceback" not in output
    return output
