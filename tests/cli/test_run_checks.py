"""What `flows run` checks and does for the run it drives: Python steps' modules are imported
before anything is submitted, and its `wait:` steps time out without a scheduler service."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main

IMPORTS = """\
version: 1
name: imp
queue: imp
steps:
  a:
    job: missing_module_of_a_test.run
  b:
    job: present_module_of_a_test.nope
"""

WAITS = """\
version: 1
name: waits
queue: waits
steps:
  gate:
    wait: {signal: go, timeout: 1s}
  after:
    needs: [gate]
    run: echo never
"""


def flows(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args], env={"FLOWS_REDIS_URL": url})


def test_a_python_step_that_does_not_import_is_refused_before_submitting(
    url: str, redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "present_module_of_a_test.py").write_text("def run(job):\n    return 1\n")
    path = tmp_path / "imp.yaml"
    path.write_text(IMPORTS)
    with assert_unchanged(redis_client):
        result = flows(url, "run", str(path))
    assert result.exit_code == 1
    assert "job 'missing_module_of_a_test.run' does not import" in result.stderr
    assert "module 'present_module_of_a_test' has no 'nope'" in result.stderr
    assert "--no-check-imports" in result.stderr
    assert result.stderr.splitlines()[-1] == "2 errors in 1 file"  # as `flows validate` ends
    skipped = flows(url, "run", str(path), "--no-check-imports")
    assert skipped.exit_code == 1, skipped.output  # submitted: it fails at run time instead
    assert "failed: import-error" in skipped.stderr
    # --detach leaves the import to the workers that run it (they may have the module)
    assert flows(url, "run", str(path), "--detach", "--run-id", "imp-2").exit_code == 0


def test_the_submitted_line_counts_jobs_in_words(url: str, tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text("version: 1\nname: one\nsteps:\n  only: {run: echo one}\n")
    result = flows(url, "run", str(path), "--detach", "--run-id", "one-1")
    assert result.exit_code == 0, result.output
    assert "submitted run one-1 (1 job)\n" in result.stderr
    path.write_text(WAITS)
    result = flows(url, "run", str(path), "--detach", "--run-id", "two-1")
    assert "submitted run two-1 (2 jobs)\n" in result.stderr


def test_a_wait_times_out_under_flows_run_alone(url: str, tmp_path: Path) -> None:
    path = tmp_path / "waits.yaml"
    path.write_text(WAITS)
    started = time.monotonic()
    result = flows(url, "run", str(path))
    assert result.exit_code == 1, result.output
    assert time.monotonic() - started < 15
    assert "gate failed: wait-timeout" in result.stderr


def test_an_invalid_file_ends_with_the_summary_line_of_flows_validate(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nname: bad\nsteps:\n  a:\n    rnu: echo hi\n")
    with assert_unchanged(redis_client):
        result = flows(url, "run", str(path))
    assert result.exit_code == 1, result.output
    validated = flows(url, "validate", str(path))
    assert result.stderr.splitlines() == validated.stdout.splitlines()
    assert result.stderr.splitlines()[-1] == "1 error in 1 file"


def test_a_nul_character_in_a_command_is_refused_before_submitting(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """YAML double quotes read \\0 as NUL: `flows validate` and `flows run` say so at the step's
    `run:`, where the job would have failed with a Python traceback from the exec."""
    path = tmp_path / "nul.yaml"
    path.write_text("version: 1\nname: nul\nsteps:\n  a:\n    run: \"printf '\\0'\"\n")
    validated = flows(url, "validate", str(path))
    assert validated.exit_code == 1, validated.output
    assert validated.stdout.splitlines()[0] == (
        f"{path}:5:10: error: step 'a': the command contains a NUL character, which no shell "
        "can run"
    )
    with assert_unchanged(redis_client):
        result = flows(url, "run", str(path))
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == validated.stdout.splitlines()


def test_a_run_id_too_long_for_its_jobs_ids_is_named(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A --run-id within the id limit whose jobs' ids (RUN:STEP) are over it: said of the run
    id, which is what to change, not of a jid the user never typed."""
    path = tmp_path / "long.yaml"
    path.write_text("version: 1\nname: long\nsteps:\n  extract_orders: {run: echo}\n")
    run_id = "r" * 250
    with assert_unchanged(redis_client):
        result = flows(url, "run", str(path), "--run-id", run_id, "--detach")
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        f"Error: run id '{'r' * 40}…' is too long for its jobs: the id of job"
        " RUN:extract_orders would be 265 bytes, more than the limit of 256; give a shorter"
        " run id\n"
    )
