"""Running the ``flows`` command line in-process from the integration tier's end-to-end tests
(``from flows_cli_support import flows, status_json``)."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from flows.cli import main


def flows(cli: CliRunner, *args: str) -> Result:
    """``flows ARGS...`` through ``cli`` (whose environment names the server)."""
    return cli.invoke(main, list(args), catch_exceptions=False)


def status_json(cli: CliRunner, run_id: str | None = None) -> dict[str, object]:
    """``flows status --json [RUN]``, decoded; the command must succeed."""
    result = flows(cli, "status", "--json", *([run_id] if run_id else []))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
