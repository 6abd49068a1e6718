"""Tables fit the terminal by wrapping and then leaving out columns, never by cutting an id or
a status (flows.cli.tables)."""

from __future__ import annotations

import io

from rich.console import Console

from flows.cli.tables import fitted, show

RUN_ID = "nightly-data-quality@20260301T020000Z-3f9a1c"
COLUMNS = ("run", "flow", "status", "trigger", "submitted", "jobs")


def render(width: int, rows: list[list[str]], **options: object) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    show(console, fitted("Runs", COLUMNS, rows, width=width, **options))  # type: ignore[arg-type]
    return console.export_text()


def test_at_80_columns_ids_and_statuses_are_whole_and_the_rest_gives_way() -> None:
    rows = [
        [RUN_ID, "nightly-data-quality", status, "schedule", "3m ago", "41"]
        for status in ("succeeded", "upstream_failed", "running")
    ]
    text = render(80, rows)
    assert all(len(line) <= 80 for line in text.splitlines())
    for status in ("succeeded", "upstream_failed", "running"):
        assert any(RUN_ID in line and status in line for line in text.splitlines()), text
    assert "…" not in text


def test_columns_that_cannot_fit_are_left_out_and_named() -> None:
    rows = [[RUN_ID, "nightly-data-quality", "succeeded", "schedule", "3m ago", "41"]]
    text = render(70, rows)
    assert RUN_ID in text and "succeeded" in text
    assert "left out to fit 70 columns: " in text and "(--json has all)" in text
    assert all(len(line) <= 70 for line in text.splitlines())


def test_cells_are_text_never_markup() -> None:
    text = render(120, [["profile[region=eu,size=s]", "[bold]x[/bold]", "ok", "", "", ""]])
    assert "profile[region=eu,size=s]" in text and "[bold]x[/bold]" in text


def test_plan_names_matrix_jobs_by_their_ids(tmp_path: object) -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from flows.cli import main

    path = Path(str(tmp_path)) / "m.yaml"
    path.write_text(
        "version: 1\nname: m\nsteps:\n  profile:\n    matrix: {region: [eu, us], size: [s, l]}\n"
        "    run: echo ${{ matrix.region }}\n"
    )
    result = CliRunner().invoke(main, ["plan", str(path), "--run-id", "r1"])
    assert result.exit_code == 0, result.output
    for region in ("eu", "us"):
        for size in ("s", "l"):
            assert f"profile[region={region},size={size}]" in result.stdout


def test_ids_wider_than_the_terminal_are_never_cut() -> None:
    """At 40 columns a run id and its status do not fit: the table is as wide as they need and
    printed uncropped (the terminal wraps the lines), so the id is whole on its line, to copy;
    folded, for a view redrawn in place, every character is kept inside the width."""
    rows = [[RUN_ID, "nightly-data-quality", "upstream_failed", "schedule", "3m ago", "41"]]
    text = render(40, rows)
    [row] = [line for line in text.splitlines() if RUN_ID in line]
    assert "upstream_failed" in row, text
    assert "left out to fit 40 columns: flow, trigger, submitted, jobs" in text
    folded = render(40, rows, fold_keys=True)
    assert all(len(line) <= 40 for line in folded.splitlines()), folded
    cells = "".join(line.split("│")[1].strip() for line in folded.splitlines() if "│" in line)
    assert RUN_ID in cells and "upstream_failed" in folded.replace("│", "")
