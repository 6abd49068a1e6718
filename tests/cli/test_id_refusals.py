"""A run or job id the engine would refuse is a usage error (exit code 2) in the command's
words, said before anything is sent: the commands here are pointed at a server that does not
exist, so one that tried to reach it would fail otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import flows

SPACED = "a b" * 50

# (arguments, the error's line)
CASES: list[tuple[list[str], str]] = [
    (["job", ""], "job id is empty"),
    (["job", "x" * 5000], "job id is 5000 bytes, more than the limit of 256 bytes"),
    (
        ["job", "x-history"],
        "job id 'x-history' may not end in \"-history\" (reserved by the key layout)",
    ),
    (["status", "a b"], "run id 'a b' contains white space or a control character"),
    (["status", ""], "run id is empty"),
    (["status", "a/b"], 'run id \'a/b\' may not hold "/" or "\\" nor be "." or ".."'),
    (["logs", "a b"], "run id 'a b' contains white space or a control character"),
    (["logs", "--job", "a\tb"], "job id 'a\\tb' contains white space or a control character"),
    (["cancel", "r1", "a b"], "run or job id 'a b' contains white space or a control character"),
    (["retry", "a b"], "run or job id 'a b' contains white space or a control character"),
    (
        ["retry", SPACED],
        f"run or job id '{SPACED[:40]}…' contains white space or a control character",
    ),
    (["explain", "a\nb"], "job or run id 'a\\nb' contains white space or a control character"),
    (["bury", "\x1b[2J"], "job id '\\x1b[2J' contains white space or a control character"),
    (["delete", "ok", "a b"], "job id 'a b' contains white space or a control character"),
    (["rerun", "a b", "s"], "run id 'a b' contains white space or a control character"),
    (["rerun", "r", "s", "--item", ""], "job id is empty"),
    (["signal", "a b", "s"], "run id 'a b' contains white space or a control character"),
    (["approve", "a\u009bb", "s"], "run id 'a\\x9bb' contains white space or a control character"),
]


@pytest.mark.parametrize(("args", "line"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_a_bad_id_is_a_usage_error_in_the_commands_words(
    args: list[str], line: str, tmp_path: Path
) -> None:
    result = flows(*args, "--redis", f"unix://{tmp_path / 'no-server.sock'}")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == f"Error: {line}"
    assert "Arg " not in result.output and "Traceback" not in result.output


def test_a_bad_run_id_option_is_worded_alike(tmp_path: Path) -> None:
    flow = tmp_path / "good.yaml"
    flow.write_text("version: 1\nname: good\nqueue: q\nsteps:\n  a: {run: echo hi}\n")
    result = flows("run", str(flow), "--run-id", "x y", "--detach", "--redis", "unix:///none")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--run-id': run id 'x y' contains white space or a control "
        "character"
    )
