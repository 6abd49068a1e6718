"""`flows run` prints its local worker's warnings and errors on stderr (a real run whose step
loses its lock), shown as text, and nothing the command says itself: not the steps' own records
(their log) nor the jobs' outcomes (the run's table and failures)."""

from __future__ import annotations

import io
import logging
import re
import uuid
from pathlib import Path

from cli_support import flows

from flows.cli.run import worker_log
from scheduler.engine.client import Client
from scheduler.worker.batching import OUTCOME

# The first run loses its job's lock, as when the server gives a job to another worker: it
# moves its own job to a queue no worker here reads, where another worker takes and finishes
# it, so this worker's report of its outcome is refused (or the worker, told first, stops it).
# (Timed out instead, the job could be popped again by this same worker while the run goes
# on, which then stands: its outcome would be taken, and no lock lost.)
TASKS = """\
import logging
from pathlib import Path

from scheduler.engine.client import Client


def lose(job):
    logging.getLogger(__name__).warning("the step's own warning")
    marker = Path(job.data["marker"])
    if not marker.exists():
        marker.write_text("lost")
        job.job.requeue("elsewhere")
        thief = Client.from_engine(job.job.client.engine, worker_name="thief")
        [taken] = thief.queues["elsewhere"].pop(1)
        taken.complete(result={"ok": True})
    return {"ok": True}
"""


def _flow(folder: Path) -> Path:
    module = f"losing_{uuid.uuid4().hex[:8]}"  # workers keep the modules they imported
    (folder / f"{module}.py").write_text(TASKS)
    path = folder / "lose.yaml"
    path.write_text(
        "version: 1\nname: lose\nqueue: lose\nsteps:\n"
        f"  a: {{job: {module}.lose, with: {{marker: '{folder / 'marker'}'}}}}\n"
    )
    return path


def test_a_lost_lock_is_said_on_stderr(url: str, client: Client, tmp_path: Path) -> None:
    result = flows("run", str(_flow(tmp_path)), "--run-id", "lose1", "--redis", url)
    assert result.exit_code == 0, result.output
    lost = [line for line in result.stderr.splitlines() if re.search("lock[- ]lost", line)]
    assert lost, result.stderr
    assert all(line.startswith("WARNING flows.worker: job lose1:a") for line in lost), lost
    # The step's own record is in its log, not on stderr; nothing is said twice.
    assert "the step's own warning" not in result.stderr
    logged = flows("logs", "lose1", "a", "--redis", url)
    assert "the step's own warning" in logged.stdout
    assert len(set(result.stderr.splitlines())) == len(result.stderr.splitlines())
    assert client.jobs["lose1:a"].state == "complete"


def test_only_warnings_unless_a_log_level_is_given(url: str, tmp_path: Path) -> None:
    path = _flow(tmp_path)
    quiet = flows("run", str(path), "--run-id", "lose2", "--redis", url)
    assert quiet.exit_code == 0
    assert "INFO" not in quiet.stderr
    (tmp_path / "marker").unlink()
    told = flows("run", str(path), "--run-id", "lose3", "--log-level", "info", "--redis", url)
    assert told.exit_code == 0
    assert re.search(r"^INFO flows\.worker: worker .* started on lose", told.stderr, re.M)
    assert " done: lose3:a" not in told.stderr  # a job's outcome: the table says it
    (tmp_path / "marker").unlink()
    errors_only = flows("run", str(path), "--run-id", "lose4", "--log-level", "error")
    assert errors_only.exit_code == 0
    assert "WARNING" not in errors_only.stderr


LONG = "broke" + " and a line of more than eighty columns" * 3


def test_a_failed_step_is_said_once(url: str, tmp_path: Path) -> None:
    path = tmp_path / "fails.yaml"
    path.write_text(
        "version: 1\nname: fails\nqueue: fails\nsteps:\n"
        f"  a: {{run: 'echo {LONG}; exit 3', retry: {{attempts: 2, delay: 0}}}}\n"
    )
    result = flows("run", str(path), "--run-id", "fails1", "--redis", url)
    assert result.exit_code == 1
    assert "fails1:a failed: exit-code-3" in result.stderr  # the command's own words
    # The step's line whole, never wrapped at 80 columns off a terminal.
    assert f"\n    {LONG}\n" in result.stderr
    # The worker's lines of the same (failed, retried) are not printed again.
    assert "flows.worker" not in result.stderr, result.stderr


def test_the_worker_log_shows_control_characters_as_text() -> None:
    stream = io.StringIO()
    handler = worker_log("INFO", stream)
    assert handler.level == logging.INFO
    worker = logging.getLogger("flows.worker")
    hostile = "\x1b]0;TITLE\x07\x1b[2J \u202egnp.exe"
    record = worker.makeRecord(
        worker.name, logging.WARNING, __file__, 1, "job %s: lost\nFORGED", (hostile,), None
    )
    handler.handle(record)
    # A later line is indented: it cannot pass for a record of its own.
    assert stream.getvalue() == (
        "WARNING flows.worker: job \\x1b]0;TITLE\\x07\\x1b[2J \\u202egnp.exe: lost\n  FORGED\n"
    )
    # Neither a step's record nor a job's outcome.
    step = logging.getLogger("mytasks")
    handler.handle(step.makeRecord(step.name, logging.WARNING, __file__, 1, "x", (), None))
    outcome = worker.makeRecord(
        worker.name, logging.WARNING, __file__, 1, "job j failed", (), None, extra=OUTCOME
    )
    handler.handle(outcome)
    assert stream.getvalue().count("\n") == 2
