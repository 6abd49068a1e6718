"""Odd ``$COLUMNS`` values (``0``, ``abc``, ``-5``, ``3``: some CI runners and ``env -i`` shells
set them) never make a command print nothing: every console falls back to a sane width."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flows.cli import main
from scheduler.engine.client import Client

ODD = ("0", "abc", "-5", "3", "")
RUN_ID = "widths@20260101T000000Z-3f9a1c"


def flows_with(columns: str, *args: str) -> Result:
    return CliRunner(env={"COLUMNS": columns}).invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def a_run(client: Client) -> str:
    job = {"jid": f"{RUN_ID}:extract", "queue": "q", "klass": "K", "data": "{}"}
    client.engine.call("flow.submit", RUN_ID, json.dumps({"flow": "widths"}), json.dumps([job]))
    return RUN_ID


@pytest.mark.parametrize("columns", ODD)
def test_tables_print_their_rows_whatever_columns_says(columns: str, url: str, a_run: str) -> None:
    for args, content in (
        (("runs",), a_run),
        (("status", a_run), "extract"),
        (("jobs", "--queue", "q"), f"{a_run}:extract"),
    ):
        shown = flows_with(columns, *args, "--redis", url)
        assert shown.exit_code == 0, shown.output
        assert content in shown.stdout, (args, shown.stdout)


@pytest.mark.parametrize("columns", ODD)
def test_findings_are_printed_whatever_columns_says(columns: str, tmp_path: Path) -> None:
    flow = tmp_path / "bad.yaml"
    flow.write_text("name: bad\nsteps:\n  - id: a\n    needs: [nowhere]\n")
    shown = flows_with(columns, "validate", str(flow))
    assert shown.exit_code == 1, shown.output
    assert f"{flow}:1:1: error: missing required key 'version'" in shown.output, shown.output


def test_a_valid_columns_is_still_the_width(url: str, a_run: str) -> None:
    shown = flows_with("60", "runs", "--redis", url)
    assert shown.exit_code == 0, shown.output
    assert a_run in shown.stdout and "left out to fit 60 columns" in shown.stdout, shown.stdout
