"""The README's `flows validate` transcripts are what the command prints for the flow files the
README shows: a file is a yaml block whose first line names it (`# broken.yaml`), saved as shown,
that comment included, so the line numbers a reader sees are those of the block."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from flows.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NAMED = re.compile(r"# (\S+\.ya?ml)\n")


def _blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == language]


def _flow_files() -> dict[str, str]:
    return {m[1]: body for body in _blocks("yaml") if (m := NAMED.match(body))}


def _transcripts() -> list[str]:
    return [body for body in _blocks("text") if body.startswith("$ flows validate ")]


def test_the_readme_has_a_validate_transcript_of_its_own_flow_files() -> None:
    transcripts = _transcripts()
    assert transcripts  # the test below would pass on none
    for body in transcripts:
        files = [
            arg for arg in shlex.split(body.splitlines()[0]) if arg.endswith((".yaml", ".yml"))
        ]
        assert files and set(files) <= set(_flow_files()), files


@pytest.mark.parametrize("transcript", _transcripts(), ids=lambda body: body.splitlines()[0])
def test_a_validate_transcript_is_what_the_command_prints(
    transcript: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in _flow_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # the transcript names the files relative to where it runs
    command, expected = transcript.split("\n", 1)
    result = CliRunner().invoke(main, shlex.split(command)[2:])  # after "$ flows"
    assert result.stdout == expected
    assert result.exit_code == (1 if " error" in expected.splitlines()[-1] else 0)
