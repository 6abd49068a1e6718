"""No job, name, datum or log drives the reader's terminal: every command shows control
characters as ``\\xNN`` (``flows.cli.terminal.visible``); ``flows logs --color`` passes colour
sequences on and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import flows

from flows.cli.terminal import visible
from scheduler.engine.client import Client

# Set the title, clear the screen and the scrollback, home the cursor; a C1 CSI; a bell.
HOSTILE = "\\033]0;TITLE\\033\\\\\\033[2J\\033[3J\\033[H\\302\\2332J\\007"
FLOW = f"""\
version: 1
name: hostile
queue: hostile
steps:
  noisy:
    retry: {{attempts: 1}}
    run: |
      printf '\\033[31mred\\033[0m {HOSTILE}\\n'
      printf '{HOSTILE}\\n' >&2
      exit 3
"""
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> None:
    found = RAW.search(text)
    assert found is None, f"raw control character {found.group()!r} in:\n{text}"


@pytest.fixture
def failed_run(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("FLOWS_REDIS_URL", url)
    path = tmp_path / "hostile.yaml"
    path.write_text(FLOW)
    result = flows("run", str(path))
    assert result.exit_code == 1
    _clean(result.stdout + result.stderr)
    assert "\\x1b]0;TITLE" in result.stderr  # shown, not obeyed
    run_id = next(
        line.split()[2] for line in result.stderr.splitlines() if line.startswith("submitted")
    )
    return run_id, f"{run_id}:noisy"


def test_flows_job_failed_and_status_show_escapes_as_text(
    failed_run: tuple[str, str], client: Client
) -> None:
    run_id, jid = failed_run
    for args in (["job", jid], ["failed"], ["status", run_id], ["jobs", "--state", "failed"]):
        result = flows(*args)
        _clean(result.stdout + result.stderr)
    group = client.jobs[jid].failure["group"]  # type: ignore[index]
    result = flows("failed", group)
    _clean(result.stdout + result.stderr)
    assert "\\x1b" in flows("job", jid).stdout


def test_flows_logs_passes_colour_only_when_asked(failed_run: tuple[str, str]) -> None:
    run_id, _ = failed_run
    plain = flows("logs", run_id)  # not a terminal: colour shown as text too
    _clean(plain.stdout)
    assert "\\x1b[31mred" in plain.stdout and "\\x1b]0;TITLE" in plain.stdout
    never = flows("logs", run_id, "--color", "never")
    assert never.stdout == plain.stdout
    coloured = flows("logs", run_id, "--color", "always").stdout
    assert "\x1b[31mred\x1b[0m" in coloured
    rest = re.sub("\x1b\\[[0-9;]*m", "", coloured)
    _clean(rest)  # no other sequence got through
    assert "\\x1b]0;TITLE" in rest and "\\x9b2J" in rest


def test_visible_escapes_c0_c1_and_del_and_keeps_tab_and_newline() -> None:
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("\x1b]0;T\x07\r\x7f\x9b") == "\\x1b]0;T\\x07\\x0d\\x7f\\x9b"
    assert visible("a\nb", newlines=False) == "a\\x0ab"
    assert visible("\x1b[1;31mx\x1b[0m\x1b[2J", sgr="keep") == "\x1b[1;31mx\x1b[0m\\x1b[2J"
