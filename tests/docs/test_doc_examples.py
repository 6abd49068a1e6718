"""The flow files the README and the documentation pages show, and their `flows validate`
transcripts, are what the command takes and prints. A file is a yaml block whose first line
names it (`# broken.yaml`, `# pipelines/nightly.yaml`), saved as shown, that comment included, so
the line numbers a reader sees are those of the block; a page's transcripts run in a folder
holding that page's files. A named flow file no transcript shows validates without an error,
and so does every other yaml block of a flow (one that starts with a top-level key), given a
`version` and `name` when it has none and the params it reads."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from flows.cli import main
from flows.flowfile.model import json_schema

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "pages").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NAMED = re.compile(r"# (\S+\.ya?ml)\n")

# A page's prose that changes a file it shows before a transcript: (file, shown, written).
EDITS = {
    ("subflows.md", 0): [("report.yaml", 'outputs.total }}"\n', 'outputs.totl }}"\n')],
    ("subflows.md", 1): [("parent.yaml", "with: {day:", "with: {dya:")],
}
# The previews start at the schedule's `start:` or now, whichever is later.
PREVIEWS_VALID_UNTIL = datetime(2030, 1, 6, tzinfo=UTC)


def _blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def _flow_files(page: Path) -> dict[str, str]:
    files = {m[1]: body for body in _blocks(page, "yaml") if (m := NAMED.match(body))}
    return {name: text for name, text in files.items() if not name.endswith(".test.yaml")}


def _transcripts(page: Path) -> list[str]:
    return [body for body in _blocks(page, "text") if body.startswith("$ flows validate ")]


def _files_of(command: str) -> list[str]:
    return [arg for arg in shlex.split(command) if arg.endswith((".yaml", ".yml"))]


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


TRANSCRIPTS = [
    pytest.param(page, i, body, id=f"{page.name}:{body.splitlines()[0]}")
    for page in PAGES
    for i, body in enumerate(_transcripts(page))
]
CHECKED = {
    (page.name, name)
    for page in PAGES
    for body in _transcripts(page)
    for name in _files_of(body.splitlines()[0])
}
UNSHOWN = [
    pytest.param(page, name, id=f"{page.name}:{name}")
    for page in PAGES
    for name in _flow_files(page)
    if (page.name, name) not in CHECKED
]


TOP_LEVEL = tuple(f"{key}:" for key in json_schema()["properties"])
FRAGMENTS = [
    pytest.param(body, id=f"{page.name}:{i}")
    for page in PAGES
    for i, body in enumerate(_blocks(page, "yaml"))
    if not NAMED.match(body) and body.startswith(TOP_LEVEL)
]


def test_the_pages_have_transcripts_and_files() -> None:
    assert len(TRANSCRIPTS) >= 5 and len(UNSHOWN) >= 3  # the tests below would pass on none
    assert len(FRAGMENTS) >= 5


@pytest.mark.parametrize(("page", "index", "transcript"), TRANSCRIPTS)
def test_a_validate_transcript_is_what_the_command_prints(
    page: Path, index: int, transcript: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command, expected = transcript.split("\n", 1)
    if "--preview" in command and datetime.now(UTC) >= PREVIEWS_VALID_UNTIL:
        pytest.skip("the page's preview dates have passed: move its schedules' bounds forward")
    files = _flow_files(page)
    assert set(_files_of(command)) <= set(files), "a transcript validates a file the page shows"
    for name, shown, written in EDITS.get((page.name, index), []):
        assert shown in files[name]
        files[name] = files[name].replace(shown, written, 1)
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)  # the transcript names the files relative to where it runs
    result = CliRunner().invoke(main, shlex.split(command)[2:])  # after "$ flows"
    assert result.stdout == expected
    failed = any(re.fullmatch(r"\d+ errors? in \d+ files?", line) for line in expected.splitlines())
    assert result.exit_code == (1 if failed else 0)


@pytest.mark.parametrize(("page", "name"), UNSHOWN)
def test_a_flow_file_a_page_shows_validates(
    page: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, _flow_files(page))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["validate", name])
    assert result.exit_code == 0, result.stdout


@pytest.mark.parametrize("block", FRAGMENTS)
def test_a_flow_a_page_shows_in_part_validates(block: str, tmp_path: Path) -> None:
    if not block.startswith("version:"):
        block = f"version: 1\nname: shown\n{block}"
    (tmp_path / "shown.yaml").write_text(block)
    result = CliRunner().invoke(
        main, ["validate", "--format", "json", str(tmp_path / "shown.yaml")]
    )
    errors = [
        f"{f['line']}:{f['col']}: {f['message']}"
        for f in json.loads(result.stdout)["findings"]
        if f["severity"] == "error" and not f["message"].startswith("unknown param ")
    ]
    assert not errors
