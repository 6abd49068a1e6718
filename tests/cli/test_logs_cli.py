"""``flows logs`` and ``flows run --logs`` / the failed steps' log tails, through click's runner
and, for ``-f``, real processes: a worker and ``flows logs -f`` against the session's server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
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


def test_run_prints_a_failed_shell_steps_exit_code_and_output_tail(
    url: str, tmp_path: Path
) -> None:
    result, run_id = run_flow(tmp_path)
    assert result.exit_code == 1
    assert (
        f"{run_id}:broken failed: exit-code-3\n"
        "    command exited with code 3\n"
        "    about to fail\n"
        f"run {run_id} failed\n"
    ) in result.stderr
    assert "Traceback" not in result.output


def test_run_with_logs_streams_every_step_prefixed(url: str, tmp_path: Path) -> None:
    result, _ = run_flow(tmp_path, "--logs")
    lines = result.stdout.splitlines()
    assert any(line.endswith(" hello | hello from tests") for line in lines), result.stdout
    assert any(line.endswith(" hello | careful") for line in lines)
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
    # one pipe: the lines in the order the command wrote them
    assert [json.loads(line)["text"] for line in job.stdout.splitlines()] == [
        "hello from tests",
        "careful",
    ]
    # the step's name in `step`, as `flows logs RUN --json` gives it, the jid in its own field
    assert {
        (json.loads(line)["step"], json.loads(line)["jid"]) for line in job.stdout.splitlines()
    } == {("hello", f"{run_id}:hello")}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "give a RUN"),
        (("--job", "x", "some-run"), 2, "give a RUN"),
        (("some-run", "--attempt", "2"), 1, "no run 'some-run'"),
        (("no-such-run",), 1, "no run 'no-such-run' (see `flows runs`)"),
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
    assert "flows runs" not in result.stderr  # the run is there: no pointer to the listing


def test_follow_shows_a_running_shell_steps_lines_within_a_second(url: str, tmp_path: Path) -> None:
    client = Client(url, worker_name="test-client")
    go = tmp_path / "go"
    command = f'echo first; while [ ! -e "{go}" ]; do sleep 0.02; done; echo second'
    jid = client.queues["live"].put("flows.runtime.tasks.shell", {"command": command})
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


def _follow_attempt(url: str, jid: str, attempt: int) -> subprocess.Popen[str]:
    """`flows logs --job JID -f --attempt N --json` in its own process."""
    flows_script = str(Path(sys.executable).parent / "flows")
    return subprocess.Popen(
        [flows_script, "logs", "--job", jid, "-f", "--attempt", str(attempt), "--json"],
        env=dict(os.environ, FLOWS_REDIS_URL=url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_follow_waits_for_an_attempt_that_has_not_started_yet(url: str) -> None:
    """`-f --attempt 2` of a job waiting for its retry waits for the second attempt to start,
    as -f waits for a job's lines, and prints that attempt's lines (it was refused at once)."""
    client = Client(url, worker_name="test-client")
    queue = client.queues["again"]
    jid = queue.put("K", {}, retries=2)
    [job] = queue.pop()
    client.engine.call("log.append", jid, 1, 0, 1, 1.0, "stdout", "", "first try")
    job.retry()  # waiting for its second attempt
    follower = _follow_attempt(url, jid, 2)
    try:
        assert follower.stdout is not None and follower.stderr is not None
        waiting = f"note: job {jid} has made 1 attempt; waiting for attempt 2 to start\n"
        assert follower.stderr.readline() == waiting  # said once it waits: the job moves now
        [job] = queue.pop()
        client.engine.call("log.append", jid, 2, 0, 1, 2.0, "stdout", "", "second try")
        line = json.loads(follower.stdout.readline())
        assert (line["attempt"], line["text"]) == (2, "second try")
        job.complete()
        out, err = follower.communicate(timeout=30)  # the job ended: -f stops
        assert (follower.returncode, out, err) == (0, "", "")
    finally:
        follower.kill()
        follower.communicate(timeout=30)


def test_follow_of_an_attempt_the_job_no_longer_reaches_stops_and_says_why(url: str) -> None:
    client = Client(url, worker_name="test-client")
    queue = client.queues["again"]
    jid = queue.put("K", {}, retries=2)
    [job] = queue.pop()  # running its first attempt
    follower = _follow_attempt(url, jid, 2)
    try:
        assert follower.stderr is not None
        waiting = f"note: job {jid} has made 1 attempt; waiting for attempt 2 to start\n"
        assert follower.stderr.readline() == waiting
        job.complete()  # the first attempt succeeded: there will be no second
        out, err = follower.communicate(timeout=30)
        assert (follower.returncode, out) == (1, "")
        assert err == f"Error: job {jid} has no attempt 2: it completed after 1 attempt\n"
    finally:
        follower.kill()
        follower.communicate(timeout=30)
    # Asked once the job has ended, -f says so at once.
    ended = flows("logs", "--job", jid, "-f", "--attempt", "2")
    assert ended.exit_code == 1
    assert ended.stderr == f"Error: job {jid} has no attempt 2: it completed after 1 attempt\n"
    failed = queue.put("K", {}, retries=0)
    queue.pop()[0].fail("boom", "it broke")
    for_good = flows("logs", "--job", failed, "-f", "--attempt", "2")
    assert for_good.exit_code == 1
    assert for_good.stderr == (
        f"Error: job {failed} has no attempt 2: it failed for good after 1 attempt\n"
    )


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


RETRIED = """\
version: 1
name: twice
queue: twice
steps:
  flaky:
    retry: {attempts: 2, delay: 0}
    run: |
      if [ -e "$FLOWS_SANDBOX/../tried-$FLOWS_JID" ]; then echo "second try"; exit 0; fi
      touch "$FLOWS_SANDBOX/../tried-$FLOWS_JID"
      echo "first try"; exit 4
  chatty:
    job: chatty_step.run
"""

CHATTY = """\
import logging


def run(job):
    logging.getLogger("chatty").info("an info record")
    print("x" * 20000)
"""


def test_every_attempt_under_a_header_one_with_attempt_and_a_missing_one_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chatty_step.py").write_text(CHATTY)
    path = tmp_path / "twice.yaml"
    path.write_text(RETRIED)
    result = flows("run", str(path))
    assert result.exit_code == 0, result.output
    run_id = next(w for w in result.stderr.split() if w.startswith("twice@"))
    both = flows("logs", run_id, "flaky").stdout.splitlines()
    assert both[0] == "── flaky · attempt 1 ──"
    assert both[1].endswith("| first try")
    assert both[2] == "── flaky · attempt 2 ──"
    assert both[3].endswith("| second try")
    second = flows("logs", run_id, "flaky", "--attempt", "2").stdout.splitlines()
    assert second == both[2:]
    missing = flows("logs", run_id, "flaky", "--attempt", "3")
    assert missing.exit_code == 1
    assert "step flaky has no attempt 3 (it has 2 attempts)" in missing.stderr
    followed = flows("logs", run_id, "flaky", "-f", "--attempt", "3")  # -f: it will never come
    assert (followed.exit_code, followed.stderr) == (
        1,
        "Error: step flaky has no attempt 3: it completed after 2 attempts\n",
    )
    # flows run keeps a step's logging.info (the default --log-level is INFO, as a worker's)
    chatty = flows("logs", run_id, "chatty")
    assert "~ INFO chatty: an info record" in chatty.stdout
    assert "… [3,616 bytes cut]" in chatty.stdout
    assert "chatty attempt 1: 1 line cut short" in chatty.stderr
    quiet = flows("run", str(path), "--log-level", "warning")
    quiet_id = next(w for w in quiet.stderr.split() if w.startswith("twice@"))
    assert "an info record" not in flows("logs", quiet_id, "chatty").stdout


def test_a_closed_pipe_ends_flows_logs_quietly(url: str, tmp_path: Path) -> None:
    client = Client(url, worker_name="test-client")
    jid = client.queues["pipe"].put("K", {})
    for call in range(4):  # 20,000 lines: more than a pipe holds, so the writer meets EPIPE
        args: list[object] = []
        for i in range(5000):
            args += [1.0, "stdout", "", f"line {call} {i} " + "." * 40]
        client.engine.call("log.append", jid, 1, 0, 5000, *args)
    flows_bin = Path(sys.executable).parent / "flows"
    done = subprocess.run(
        f"'{flows_bin}' logs --job {jid} | head -3; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        env=dict(os.environ, FLOWS_REDIS_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.count("\n") == 3
    assert (done.returncode, done.stderr) == (0, "")


LAST_LINE = """\
version: 1
name: last
queue: last
steps:
  one:
    run: echo "first"; sleep 0.0$(( $$ % 5 )); printf 'last line'
  two:
    needs: [one]
    run: echo "then"; echo "the end"
"""


@pytest.mark.slow  # 200 runs, ten followers
def test_following_a_run_loses_no_line_in_200_runs(url: str, tmp_path: Path) -> None:
    """The loop `flows run --logs` and `flows logs -f` print from races the run's end: the last
    line a step stored just before the run ended must still be printed, every time. Ten
    followers at once, twenty runs each, against one worker."""
    from flows.cli.logs import _run_over
    from flows.runs.logs import follow, run_tree_jobs
    from scheduler.worker import Worker

    path = tmp_path / "last.yaml"
    path.write_text(LAST_LINE)
    worker = Worker(Client(url, worker_name="w-last"), ["last"], threads=8, poll_interval=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    for i in range(200):
        submitted = flows("run", str(path), "--detach", "--run-id", f"last-{i}")
        assert submitted.exit_code == 0, submitted.output
    lost: list[tuple[str, list[str]]] = []

    def follower(first: int) -> None:
        client = Client(url, worker_name=f"follower-{first}")
        for i in range(first, 200, 10):
            run_id = f"last-{i}"
            texts = [
                f"{item.label}: {item.line.text}"
                for item in follow(
                    client,
                    run_tree_jobs(client, run_id),
                    stop=lambda run_id=run_id: _run_over(client, run_id),  # type: ignore[misc]
                    more=lambda run_id=run_id: run_tree_jobs(client, run_id),  # type: ignore[misc]
                )
            ]
            if "one: last line" not in texts or texts[-1:] != ["two: the end"]:
                lost.append((run_id, texts))

    try:
        threads = [threading.Thread(target=follower, args=(n,)) for n in range(10)]
        for each in threads:
            each.start()
        thread.start()  # the followers are waiting: each run is followed while it runs
        for each in threads:
            each.join(120)
    finally:
        worker.stop()
        thread.join(15)
    assert lost == []


RAISING = """\
version: 1
name: raising
queue: raising
steps:
  parse:
    job: bad_step.run
"""

BAD_STEP = """\
def helper(row):
    raise ValueError(f"bad row {row}")


def run(job):
    helper(7)
"""


def test_a_python_steps_failure_shows_its_exception_and_only_its_own_frames(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad_step.py").write_text(BAD_STEP)
    path = tmp_path / "raising.yaml"
    path.write_text(RAISING)
    result = flows("run", str(path))
    assert result.exit_code == 1
    run_id = next(w for w in result.stderr.split() if w.startswith("raising@"))
    job = json.loads(flows("job", f"{run_id}:parse", "--json").stdout)
    message = job["failure"]["message"]
    assert job["failure"]["group"] == "ValueError"
    assert message.startswith("Traceback (most recent call last):\n")
    assert message.count('bad_step.py", line') == 2  # run, then helper: the user's frames
    assert "scheduler/" not in message and "/flows/" not in message
    assert message.rstrip().endswith("ValueError: bad row 7")
    assert "ValueError: bad row 7" in result.stderr


SLOW = """\
version: 1
name: slow
queue: slow
steps:
  ticking:
    run: echo "tick 1"; echo "tick 2"; sleep 30
"""


def test_canceling_a_running_step_keeps_what_it_logged(url: str, tmp_path: Path) -> None:
    from scheduler.engine import joblogs as logs_of
    from scheduler.worker import Worker

    path = tmp_path / "slow.yaml"
    path.write_text(SLOW)
    assert flows("run", str(path), "--detach", "--run-id", "slow-1").exit_code == 0
    client = Client(url, worker_name="test-client")
    worker = Worker(Client(url, worker_name="w-slow"), ["slow"], poll_interval=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # waiting for another thread's job: no time to pass
            if logs_of.read(client.engine, "slow-1:ticking").total == 2:
                break
            time.sleep(0.05)
        assert flows("cancel", "slow-1").exit_code == 0
    finally:
        worker.stop()
        thread.join(15)
    assert client.engine.call("get", "slow-1:ticking") is None  # the job is gone ...
    shown = flows("logs", "slow-1")
    assert shown.exit_code == 0, shown.output
    assert [line.split(" | ")[-1] for line in shown.stdout.splitlines()] == ["tick 1", "tick 2"]
    job = json.loads(flows("logs", "--job", "slow-1:ticking", "--json").stdout.splitlines()[0])
    assert job["text"] == "tick 1"  # ... and its log is kept with the run
    assert job["step"] == "ticking"  # named from its jid: the job is gone


QUIET_RETRY = """\
version: 1
name: quiet
queue: quiet
steps:
  once:
    retry: {attempts: 2, delay: 0}
    run: |
      if [ -e "$FLOWS_SANDBOX/../tried-$FLOWS_JID" ]; then exit 0; fi
      touch "$FLOWS_SANDBOX/../tried-$FLOWS_JID"
      echo "first try"; exit 4
"""


def test_an_attempt_that_wrote_nothing_is_an_attempt(url: str, tmp_path: Path) -> None:
    """`--attempt` is checked against the attempts made (`flows status`), not the attempts that
    wrote a line: the second, silent attempt is there, and says it wrote nothing."""
    path = tmp_path / "quiet.yaml"
    path.write_text(QUIET_RETRY)
    result = flows("run", str(path))
    assert result.exit_code == 0, result.output
    run_id = next(w for w in result.stderr.split() if w.startswith("quiet@"))
    status = json.loads(flows("status", run_id, "--json").stdout)
    assert [s["attempts"] for s in status["steps"]] == [2]
    second = flows("logs", run_id, "once", "--attempt", "2")
    assert second.exit_code == 0, second.output
    assert second.stdout == ""
    assert second.stderr == "step once: attempt 2 wrote no lines\n"
    job = flows("logs", "--job", f"{run_id}:once", "--attempt", "2")
    assert (job.exit_code, job.stderr) == (0, f"job {run_id}:once: attempt 2 wrote no lines\n")
    quiet = """\
version: 1
name: mute
steps:
  hush: {run: "true"}
"""
    path.write_text(quiet)
    assert flows("run", str(path), "--run-id", "mute-1").exit_code == 0
    nothing = flows("logs", "mute-1", "hush")
    assert (nothing.exit_code, nothing.stdout) == (0, "")
    assert nothing.stderr == "step hush: no lines\n"
    third = flows("logs", run_id, "once", "--attempt", "3")
    assert third.exit_code == 1
    assert "step once has no attempt 3 (it has 2 attempts)" in third.stderr


def test_only_a_python_steps_stderr_is_marked_as_the_help_says(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"warns_{uuid.uuid4().hex[:8]}"  # workers cache imported modules
    (tmp_path / f"{module}.py").write_text(
        "import sys\n\ndef run(job):\n    print('careful', file=sys.stderr)\n"
    )
    path = tmp_path / "both.yaml"
    path.write_text(
        "version: 1\nname: both\nqueue: both\nsteps:\n"
        f"  py: {{job: {module}.run}}\n  sh: {{run: echo careful >&2}}\n"
    )
    monkeypatch.chdir(tmp_path)
    assert flows("run", str(path), "--run-id", "both").exit_code == 0
    lines = flows("logs", "both").stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in sorted(lines, key=lambda x: x.split()[1])] == [
        "py ! careful",
        "sh | careful",
    ]
    shown = " ".join(flows("logs", "--help").stdout.split())
    assert "stdout (|), a Python step's stderr (!), log records (~)" in shown
    assert (
        "A shell step's stdout and stderr share one pipe, so its lines keep the order it wrote "
        "them in and all show as stdout (|); only what a Python step writes to sys.stderr is "
        "marked !."
    ) in shown


SHORT_CHILD = """\
version: 1
name: short-child
queue: talk
steps:
  inner:
    run: echo "from the child"
"""

SHORT_PARENT = """\
version: 1
name: short-parent
queue: talk
steps:
  first:
    run: echo "from the parent"
  sub:
    flow: short-child.yaml
    needs: [first]
"""


def test_following_reads_a_child_run_that_started_and_ended_between_two_looks(
    url: str, tmp_path: Path
) -> None:
    """A child run is found by asking for the run's jobs again (at most once a second): one
    that started and ended between two asks, after which every job known had ended, was
    skipped by `flows logs -f` and `flows run --logs`."""
    from flows.cli.logs import _run_over
    from flows.runs.logs import Follower, follow, run_jobs, run_tree_jobs

    (tmp_path / "short-child.yaml").write_text(SHORT_CHILD)
    (tmp_path / "short-parent.yaml").write_text(SHORT_PARENT)
    ran = flows("run", str(tmp_path / "short-parent.yaml"), "--run-id", "short")
    assert ran.exit_code == 0, ran.output
    client = Client(url, worker_name="test-client")
    asked: list[int] = []

    def more() -> list[tuple[str, str]]:
        # The first ask saw the run as it was before its child run existed; later ones see it.
        asked.append(1)
        return run_jobs(client, "short") if len(asked) == 1 else run_tree_jobs(client, "short")

    texts = [
        f"{item.label}: {item.line.text}"
        for item in follow(
            client,
            Follower(client, run_jobs(client, "short")),
            stop=lambda: _run_over(client, "short"),
            more=more,
        )
    ]
    assert texts == ["first: from the parent", "sub/inner: from the child"]


def test_a_child_run_steps_label_names_its_lines(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """`flows logs RUN` labels a child run's lines `step/child-step`: that label, as STEP, gives
    those lines (it was refused as no step of the run)."""
    (tmp_path / "short-child.yaml").write_text(SHORT_CHILD)
    (tmp_path / "short-parent.yaml").write_text(SHORT_PARENT)
    ran = flows("run", str(tmp_path / "short-parent.yaml"), "--run-id", "labels")
    assert ran.exit_code == 0, ran.output
    assert " sub/inner | from the child" in flows("logs", "labels").stdout
    one = flows("logs", "labels", "sub/inner", "--json")
    assert one.exit_code == 0, one.output
    assert [(row["step"], row["text"]) for row in map(json.loads, one.stdout.splitlines())] == [
        ("sub/inner", "from the child")
    ]
    for step, message in [
        ("sub/iner", "run labels.sub has no step 'iner' (did you mean 'inner'?)"),
        (
            "first/inner",
            "run labels: step 'first' started no child run"
            " (a 'flow:' step starts one once it runs)",
        ),
        ("sib/inner", "run labels has no step 'sib' (did you mean 'sub'?)"),
    ]:
        with assert_unchanged(redis_client):
            refused = flows("logs", "labels", step)
        assert (refused.exit_code, refused.stderr) == (1, f"Error: {message}\n")


def test_a_child_run_steps_label_names_its_job(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """`flows logs --job` and `flows job` take RUN:STEP/CHILD-STEP as `flows retry` does: the job
    of the child run's step (a jid holds no "/", so the label is never a jid)."""
    (tmp_path / "short-child.yaml").write_text(SHORT_CHILD)
    (tmp_path / "short-parent.yaml").write_text(SHORT_PARENT)
    assert flows("run", str(tmp_path / "short-parent.yaml"), "--run-id", "jl").exit_code == 0
    lines = flows("logs", "--job", "jl:sub/inner")
    assert lines.exit_code == 0, lines.output
    assert "| from the child" in lines.stdout
    shown = flows("job", "jl:sub/inner", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["jid"] == "jl.sub:inner"
    assert json.loads(flows("job", "jl:first", "--json").stdout)["jid"] == "jl:first"
    for target, message in [
        ("jl:sub/iner", "run jl.sub has no step 'iner' (did you mean 'inner'?)"),
        ("jl:sib/inner", "run jl has no step 'sib' (did you mean 'sub'?)"),
        ("nope:sub/inner", "no run 'nope' (see `flows runs`)"),
    ]:
        for command in (["logs", "--job", target], ["job", target], ["cancel", target]):
            with assert_unchanged(redis_client):
                refused = flows(*command)
            assert (refused.exit_code, refused.stderr) == (1, f"Error: {message}\n"), command


FLAKY = """\
version: 1
name: flaky
queue: flaky
steps:
  fetch:
    job: flaky_step.run
    retry: {attempts: 2, delay: 0}
"""

FLAKY_STEP = """\
import os
from pathlib import Path


def run(job):
    mark = Path(os.environ["FLAKY_MARK"])
    if not mark.exists():
        mark.touch()
        print("first try: connecting")
        raise RuntimeError("connection reset")
    raise RuntimeError("quota exceeded")
"""


def test_a_failures_log_lines_from_an_earlier_attempt_say_which(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second (last) attempt wrote no line: the tail shown is the first attempt's, and
    says so, in `flows run` and `flows status`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLAKY_MARK", str(tmp_path / "tried"))
    module = f"flaky_{uuid.uuid4().hex[:8]}"  # workers cache imported modules
    (tmp_path / f"{module}.py").write_text(FLAKY_STEP)
    path = tmp_path / "flaky.yaml"
    path.write_text(FLAKY.replace("flaky_step.", f"{module}."))
    result = flows("run", str(path), "--run-id", "flaky-1")
    assert result.exit_code == 1
    assert "RuntimeError: quota exceeded" in result.stderr
    header = "    last 1 log lines of flaky-1:fetch, from attempt 1 of 2 (attempt 2 wrote none):\n"
    assert header in result.stderr
    assert result.stderr.index(header) < result.stderr.index("first try: connecting")
    status = flows("status", "flaky-1")
    assert header in status.stderr
