"""A short one-line field (a schedule pause's ``--note``, who signals or approves:
``$FLOWS_USER``) that holds a control character other than tab is a usage error (exit code 2)
naming it, said before anything is sent: the commands are pointed at a server that does not
exist, so one that tried to reach it would fail otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import flows


@pytest.mark.parametrize(
    ("note", "shown"),
    [("db\nmigration", "\\n"), ("a\x1b[2Jb", "\\x1b"), ("a\rb", "\\r"), ("a\u2028b", "\\u2028")],
)
def test_a_pause_note_on_more_than_one_line_is_a_usage_error(
    note: str, shown: str, tmp_path: Path
) -> None:
    result = flows(
        "schedule", "pause", "etl", "--note", note, "--redis", f"unix://{tmp_path / 'none.sock'}"
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for '--note': holds a control character ({shown}): "
        "one line of text is expected (a tab is allowed)"
    )
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["signal", "approve"])
def test_who_signals_on_more_than_one_line_is_a_usage_error(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_USER", "ada\nadmin")
    result = flows(command, "r1", "gate", "--redis", f"unix://{tmp_path / 'none.sock'}")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: $FLOWS_USER (who runs this command) holds a control character (\\n): one line "
        "of text is expected (a tab is allowed)"
    )


@pytest.mark.parametrize(
    "command",
    [
        ("user", "add", "bob", "--role", "viewer"),
        ("user", "revoke", "bob"),
        ("schedule", "pause", "etl"),
        ("queue", "pause", "q"),
        ("run", str(Path(__file__).parents[2] / "examples" / "nightly.yaml"), "--detach"),
    ],
)
def test_who_runs_an_audited_command_on_more_than_one_line_is_a_usage_error(
    command: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The audit log records $FLOWS_USER: refused before the change, not after it.
    monkeypatch.setenv("FLOWS_USER", "ada\nadmin")
    result = flows(*command, "--redis", f"unix://{tmp_path / 'none.sock'}")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: $FLOWS_USER (who runs this command) holds a control character (\\n): one line "
        "of text is expected (a tab is allowed)"
    )
    assert "Traceback" not in result.output
