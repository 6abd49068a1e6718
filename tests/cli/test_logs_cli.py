"""``flows logs`` and ``flows run --logs`` / the failed steps' log tails, through click's runner
and, for ``-f``, real processes: a worker and ``flows logs -f`` against the session's server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result
from helpers import assert_unchanged

from flows.cli import main
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

ROOT = Path(__file__).resolve().parents[2]

FLOW = """\
version: 1
name: talk
queue: talk
steps:
  hello:
    run: echo "hello from ${{ params.who }}"; echo "careful" >&2
  each:
    foreach: {items: [1, 2]}
    run: echo "item"
  broken:
    needs: [hello]
    retry: {attempts: 1}
    run: |
      echo "about to fail"
      exit 3
params:
  who: {type: string, default: tests}
"""


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    return server.url


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_flow(tmp_path: Path, *args: str) -> tuple[Result, str]:
    path = tmp_path / "talk.yaml"
    path.write_text(FLOW)
    result = flows("run", str(path), *args)
    submitted = next(line for line in result.stderr.splitlines() if line.startswith("submitted"))
    return result, submitted.split()[2]


def test_run_prints_the_log_tail_of_a_failed_step(url: str, tmp_path: Path) -> None:
    result, run_id = run_flow(tmp_path)
    assert result.exit_code == 1
    assert f"last 1 log lines of {run_id}:broken" in result.stderr
    assert "| about to fail" in result.stderr


def test_run_with_logs_streams_every_step_prefixed(url: str, tmp_path: Path) -> None:
    result, _ = run_flow(tmp_path, "--logs")
    lines = result.stdout.splitlines()
    assert any(line.endswith(" hello | hello from tests") for line in lines), result.stdout
    assert any(line.endswith(" hello ! careful") for line in lines)
    assert sum(" each[0] | item" in line or " each[1] | item" in line for line in lines) == 2
    assert any(line.endswith(" broken | about to fail") for line in lines)


def test_logs_of_a_run_a_step_and_a_job(url: str, tmp_path: Path) -> None:
    _, run_id = run_flow(tmp_path)
    everything = flows("logs", run_id)
    assert everything.exit_code == 0
    assert "hello | hello from tests" in everything.stdout
    assert "broken | about to fail" in everything.stdout
    step = flows("logs", run_id, "each", "--json")
    rows = [json.loads(line) for line in step.stdout.splitlines()]
    assert sorted(row["step"] for row in rows) == ["each[0]", "each[1]"]
    assert {(row["stream"], row["text"], row["attempt"]) for row in rows} == {("stdout", "item", 1)}
    assert rows[0]["jid"].startswith(run_id + ":each[")
    job = flows("logs", "--job", f"{run_id}:hello", "--attempt", "1", "--json")
    # two pipes: which of the two lines was read first is up to the scheduler
    assert sorted(json.loads(line)["stream"] for line in job.stdout.splitlines()) == [
        "stderr",
        "stdout",
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "give a RUN"),
        (("--job", "x", "some-run"), 2, "give a RUN"),
        (("some-run", "--attempt", "2"), 2, "--attempt goes with --job or a STEP"),
        (("no-such-run",), 1, "no run 'no-such-run'"),
        (("--job", "no-such-job"), 1, "no-such-job"),
    ],
)
def test_bad_logs_requests_say_what_is_wrong_and_change_nothing(
    url: str, redis_client: redis.Redis, args: tuple[str, ...], code: int, message: str
) -> None:
    with assert_unchanged(redis_client):
        result = flows("logs", *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_logs_of_an_unknown_step_names_the_steps(url: str, tmp_path: Path) -> None:
    _, run_id = run_flow(tmp_path)
    result = flows("logs", run_id, "nope")
    assert result.exit_code == 1
    assert "has no step 'nope' (its steps: broken, each, hello)" in result.stderr


def test_follow_shows_a_running_shell_steps_lines_within_a_second(url: str, tmp_path: Path) -> None:
    client = Client(url, worker_name="test-client")
    go = tmp_path / "go"
    command = f'echo first; while [ ! -e "{go}" ]; do sleep 0.02; done; echo second'
    jid = client.queues["live"].put("flows.tasks.shell", {"command": command})
    env = dict(os.environ, FLOWS_REDIS_URL=url)
    worker = subprocess.Popen(
        [sys.executable, "-m", "scheduler.worker", "-q", "live", "--poll-interval", "0.1"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    follower = subprocess.Popen(
        [str(Path(sys.executable).parent / "flows"), "logs", "--job", jid, "-f", "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())  # written before `flows logs` started
        assert first["text"] == "first"
        assert first["jid"] == jid
        go.touch()  # now the step writes its second line, which -f must print within a second
        second = json.loads(follower.stdout.readline())
        assert second["text"] == "second"
        assert time.time() - second["time"] < 1.0
        assert follower.wait(10) == 0  # the job ended: -f stops
    finally:
        go.touch()
        for process in (follower, worker):
            process.terminate()
            process.communicate(timeout=30)  # also closes its pipes


def test_logs_of_a_canceled_run_skip_its_deleted_jobs(url: str, tmp_path: Path) -> None:
    path = tmp_path / "talk.yaml"
    path.write_text(FLOW)
    submitted = flows("run", str(path), "--detach")
    run_id = submitted.stdout.strip().splitlines()[-1]
    assert flows("cancel", run_id).exit_code == 0  # its jobs are deleted
    result = flows("logs", run_id)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    followed = flows("logs", run_id, "-f")
    assert followed.exit_code == 0 and followed.stdout == ""


def test_a_jobs_terminal_escapes_are_shown_not_run(url: str) -> None:
    client = Client(url, worker_name="test-client")
    jid = client.queues["esc"].put("K", {})
    client.engine.call("log.append", jid, 1, 0, 1, 1.0, "stdout", "", "red \x1b[31m bell \x07\tok")
    text = flows("logs", "--job", jid).stdout
    assert "red \\x1b[31m bell \\x07\tok" in text and "\x1b" not in text
    raw = json.loads(flows("logs", "--job", jid, "--json").stdout)
    assert raw["text"] == "red \x1b[31m bell \x07\tok"  # JSON keeps the text as written
