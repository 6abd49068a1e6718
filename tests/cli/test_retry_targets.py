"""`flows retry` of a run's step (RUN:STEP), a foreach step's too, whose jobs are
RUN:STEP[i]; a run still running with nothing failed is resumed, a finished one refused, as
`flows retry --help` says. Real engine, the local worker of `flows retry`."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from cli_support import flows
from helpers import assert_unchanged

from scheduler.engine.client import Client

FLOW = """\
version: 1
name: fe
queue: fe
defaults: {{retry: {{attempts: 1, delay: 0}}}}
steps:
  each:
    foreach: {{items: [1, 2, 3], as: n}}
    run: test "${{{{ n }}}}" != 2 || test -e {mark}
  after:
    needs: [each]
    run: echo done
"""


@pytest.fixture
def failed_item(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run fe1 worked here until it failed: item each[1] failed, the others succeeded; the
    mark that lets the item succeed (not there yet)."""
    monkeypatch.setenv("FLOWS_REDIS_URL", url)
    mark = tmp_path / "fixed"
    flow = tmp_path / "fe.yaml"
    flow.write_text(FLOW.format(mark=mark))
    ran = flows("run", str(flow), "--run-id", "fe1")
    assert ran.exit_code == 1, ran.output
    return mark


def test_retry_of_a_foreach_step_puts_back_its_failed_items(
    failed_item: Path, client: Client, redis_client: redis.Redis
) -> None:
    failed_item.touch()
    retried = flows("retry", "fe1:each", "--detach")
    assert retried.exit_code == 0, retried.output
    assert retried.stdout == "run fe1: 1 failed job(s) of fe1:each put back\n"
    states = {i: client.jobs[f"fe1:each[{i}]"].state for i in range(3)}
    assert states == {0: "complete", 1: "waiting", 2: "complete"}

    # Running, nothing failed, --detach: nothing to put back and nothing worked here, so
    # refused as the API and the run page refuse it (no Retry run), not said to be resumed.
    with assert_unchanged(redis_client):
        detached = flows("retry", "fe1", "--detach")
    assert detached.exit_code == 1, detached.output
    assert detached.stderr == (
        "Error: run fe1 has status running: retry is not allowed (allowed: cancel)\n"
    )

    # Running, nothing failed (as after Ctrl-C in `flows run`): resumed, not refused.
    resumed = flows("retry", "fe1")
    assert resumed.exit_code == 0, resumed.output
    assert "run fe1: nothing failed; working what is left" in resumed.stderr
    assert "run fe1 succeeded" in resumed.stderr


def test_retry_of_what_has_nothing_failed_is_refused(
    failed_item: Path, client: Client, redis_client: redis.Redis
) -> None:
    failed_item.touch()
    assert flows("retry", "fe1").exit_code == 0  # it fails no more: the run succeeds
    for target, words in (
        ("fe1", "run fe1 has status succeeded: retry is not allowed (allowed: rerun)"),
        ("fe1:each", "step each has status success: retry is not allowed (allowed: rerun)"),
        ("fe1:eech", "run fe1 has no step 'eech' (did you mean 'each'?)"),
    ):
        with assert_unchanged(redis_client):
            refused = flows("retry", target, "--detach")
        assert refused.exit_code == 1, refused.output
        assert refused.stderr == f"Error: {words}\n"


def test_retry_help_says_when_it_resumes_and_when_it_refuses() -> None:
    shown = " ".join(flows("retry", "--help").stdout.split())
    assert "a step of a run (RUN:STEP, a foreach step's items too) or a job" in shown
    assert (
        "A run still running with nothing failed, expired or canceled (an interrupted `flows "
        "run`) is resumed as it is: nothing is put back, and what is left is worked here."
    ) in shown
    assert (
        "Anything else with nothing failed, expired or canceled to put back (such a run with "
        "--detach, a run that is not running, a step, a job) is refused (exit code 1, nothing "
        "changed)"
    ) in shown


def test_retry_of_a_step_of_a_run_whose_id_holds_a_bracket(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: Client
) -> None:
    """A run id may hold ``[`` (``--run-id 'fe[eu]'``): RUN:STEP is still its step, not the item
    of a run ``fe`` (the dashboard's Retry step sends the same target)."""
    monkeypatch.setenv("FLOWS_REDIS_URL", url)
    mark = tmp_path / "fixed"
    flow = tmp_path / "fe.yaml"
    flow.write_text(FLOW.format(mark=mark))
    assert flows("run", str(flow), "--run-id", "fe[eu]").exit_code == 1
    mark.touch()
    retried = flows("retry", "fe[eu]:each", "--detach")
    assert retried.exit_code == 0, retried.output
    assert retried.stdout == "run fe[eu]: 1 failed job(s) of fe[eu]:each put back\n"
    assert client.jobs["fe[eu]:each[1]"].state == "waiting"
