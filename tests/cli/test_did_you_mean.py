"""A misspelt step, queue or param gets the name that was likely meant, on every command that
takes one, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: gated
queue: gated
params:
  day: {type: string, default: x}
steps:
  approve:
    wait: {signal: approval}
  publish:
    needs: [approve]
    run: echo published
"""


def flows(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args], env={"FLOWS_REDIS_URL": url})


@pytest.fixture
def run_id(url: str, tmp_path: Path) -> str:
    path = tmp_path / "gated.yaml"
    path.write_text(FLOW)
    submitted = flows(url, "run", str(path), "--detach", "--run-id", "gated-1")
    assert submitted.exit_code == 0, submitted.output
    return "gated-1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("approve", "gated-1", "aprove"), "no step 'aprove' (did you mean 'approve'?)"),
        (("signal", "gated-1", "aprove"), "no step 'aprove' (did you mean 'approve'?)"),
        (("logs", "gated-1", "publsh"), "no step 'publsh' (did you mean 'publish'?)"),
        (("rerun", "gated-1", "publsh"), "no step 'publsh' (did you mean 'publish'?)"),
        (("unfail", "gatd", "-q", "gated"), "no failed jobs in group 'gatd'"),
        (("queue", "stats", "gatd"), "no queue 'gatd' (did you mean 'gated'?)"),
        (("queue", "truncate", "gatd", "--yes"), "no queue 'gatd' (did you mean 'gated'?)"),
        (("kick", "gatd"), "no queue 'gatd' (did you mean 'gated'?)"),
        (("queue", "drop", "gatd", "--yes"), "no queue 'gatd' (did you mean 'gated'?)"),
    ],
)
def test_a_misspelt_name_gets_the_likely_one_and_changes_nothing(
    url: str, redis_client: redis.Redis, run_id: str, args: tuple[str, ...], message: str
) -> None:
    with assert_unchanged(redis_client):
        result = flows(url, *args)
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_unknown_queue_in_a_listing_is_noted(url: str, client: Client, run_id: str) -> None:
    result = flows(url, "jobs", "-q", "gatd")
    assert result.exit_code == 0
    assert "note: no queue 'gatd' (did you mean 'gated'?)" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("worker", "-q", "gatd", "--burst", "--processes", "0"),
        ("unfail", "some-group", "-q", "gatd"),
    ],
)
def test_a_likely_misspelt_new_queue_is_noted_never_refused(
    url: str, run_id: str, args: tuple[str, ...]
) -> None:
    """A worker may listen on, and unfail may fill, a queue no job has used yet: a close name
    gets a note on stderr, and the command does its work."""
    if args[0] == "unfail":  # a failed job for each of the three unfails (one each)
        args = (*args, "--count", "1")
        with Client(url, worker_name="w") as client:
            for n in range(3):
                client.queues["broken"].put("tasks.x", {}, jid=f"broken-{n}")
                client.queues["broken"].pop()[0].fail("some-group", "it broke")
    result = flows(url, *args)
    assert result.exit_code == 0, result.output
    assert (
        "note: no queue 'gatd' yet (did you mean 'gated'?); taking it as a new queue"
        in result.stderr
    )
    # A new name close to none, and a known one, get no note.
    for queue in ("reports", "gated"):
        other = tuple(queue if a == "gatd" else a for a in args)
        result = flows(url, *other)
        assert result.exit_code == 0, result.output
        assert "note:" not in result.stderr
