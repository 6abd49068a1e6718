"""Commands that would do nothing because of a typo, or that meet an argument the engine would
refuse, say so with the exit code the CLI documents (1 a refusal, 2 a usage error) and change
nothing; an engine refusal is said without the engine's name for its command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_unchanged
from refusal_support import refused

from flows.cli import main
from scheduler.engine.client import Client

# (arguments, exit code, the error's words); {flow} is a good flow file.
CASES: list[tuple[list[str], int, str]] = [
    (["delete", "nope"], 1, "no job 'nope' (see `flows jobs`); nothing deleted"),
    # One unknown jid among known ones: none is deleted.
    (["delete", "waiting", "nope"], 1, "no job 'nope'"),
    (
        ["unfail", "nope", "-q", "x"],
        1,
        "no failed jobs in group 'nope' (`flows failed` lists the groups); nothing moved",
    ),
    (["unfail", "bom", "-q", "q"], 1, "did you mean 'boom'?"),
    (["worker", "-q", "a b", "--burst"], 2, "a queue name contains white space"),
    (["worker", "-q", "q,a\tb", "--burst", "--processes", "0"], 2, "'-q' / '--queues'"),
    (["run", "{flow}", "--run-id", "has space", "--detach"], 2, "Invalid value for '--run-id'"),
    (["plan", "{flow}", "--run-id", ""], 2, "run id is empty"),
    (["signal", "run-1", "a", "--data", "notjson"], 2, "Invalid value for '--data': is not JSON"),
    (["signal", "run-1", "a", "--data", "[1]"], 2, "must be a JSON object"),
    # Deeper than Python's decoder goes, or than the surfaces that show outputs read.
    (
        ["signal", "run-1", "a", "--data", '{"a":' + "[" * 5000 + "]" * 5000 + "}"],
        2,
        "Invalid value for '--data': nests more than 64 deep",
    ),
    (
        ["signal", "run-1", "a", "--data", '{"a":' + "[" * 65 + "]" * 65 + "}"],
        2,
        "nests more than 64 deep",
    ),
    (["throttle", "set", "x", "-1"], 2, "expected how many of its jobs may run at once"),
    (["throttle", "set", "x", "abc"], 2, "a whole number from 0 to 2147483647"),
    (["logs", "--job", "run-1:lod"], 1, "Error: no job run-1:lod"),
    (["rerun", "run-1", "lod", "--detach"], 1, "run run-1 has no step 'lod' (its steps: a)"),
    (["unfail", "boom", "-q", "a b"], 2, "queue name 'a b' contains white space"),
    (["failed", "a b"], 2, "failure group 'a b' contains white space"),
    (["jobs", "--queue", "a\x1bb"], 2, "queue name 'a\\x1bb' contains white space"),
    (["queue", "pause", ""], 2, "queue name is empty"),
    (
        ["sources", "remove", "registerd"],
        1,
        "no source 'registerd' has published flow files; did you mean 'registered'?",
    ),
    (["sources", "remove", "a b"], 1, "no source 'a b' has published flow files"),
]


@pytest.mark.parametrize(
    ("args", "code", "expected"), CASES, ids=[" ".join(c[0])[:40] for c in CASES]
)
def test_a_command_that_would_do_nothing_or_wrong_says_so_and_changes_nothing(
    args: list[str], code: int, expected: str, cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    flow = tmp_path / "good.yaml"
    flow.write_text("version: 1\nname: good\nqueue: q\nsteps:\n  a: {job: tasks.a}\n")
    argv = [a.replace("{flow}", str(flow)) for a in args]
    output = refused(cli, populated.redis, argv, (code,))
    assert expected in output, output
    assert "(): " not in output, "the engine's name for a command reached the user"


@pytest.mark.parametrize("kind", ["a file", "below a file"])
def test_an_unusable_data_directory_is_named_with_its_variable(
    kind: str, cli: CliRunner, populated: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLOWS_REDIS_URL")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    data_dir = blocker if kind == "a file" else blocker / "flows"
    monkeypatch.setenv("FLOWS_DATA_DIR", str(data_dir))
    with assert_unchanged(populated.redis):
        result = cli.invoke(main, ["runs"])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines() == [
        f"Error: cannot use the embedded server's data directory {data_dir} ($FLOWS_DATA_DIR):"
        " it (or a folder above it) is a file, not a directory; set $FLOWS_DATA_DIR to a"
        " directory you can write, or use a server of your own with --redis or $FLOWS_REDIS_URL"
    ]
