"""Ctrl-C in the middle of a step of a real `flows run`, then `flows retry RUN`: the step's log
keeps both attempts apart, each under its header, and `--attempt 1` prints only the first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner, Result
from helpers import Reap

from flows.cli import main
from flows.runs.read import list_runs, load_run
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: ticks
queue: ticks
steps:
  count:
    run: |
      if [ -e "$MARK" ]; then
        for i in 1 2 3; do echo "again $i"; done
        exit 0
      fi
      touch "$MARK"
      i=0
      while true; do i=$((i + 1)); echo "tick $i"; sleep 0.1; done
    env: {MARK: "${{ params.mark }}"}
params:
  mark: {type: string}
"""


def flows(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args], env={"FLOWS_REDIS_URL": url})


def _ticks_logged(url: str, run_id: str) -> int:
    result = flows(url, "logs", run_id, "count", "--json")
    if result.exit_code != 0 or not result.stdout.strip():
        return 0
    return sum(1 for line in result.stdout.splitlines() if '"tick ' in line)


def test_ctrl_c_then_retry_keeps_each_attempts_log_apart(
    url: str, tmp_path: Path, reap: Reap
) -> None:
    path = tmp_path / "ticks.yaml"
    path.write_text(FLOW)
    mark = tmp_path / "ran-once"
    process = reap(
        subprocess.Popen(
            [str(Path(sys.executable).parent / "flows"), "run", str(path), "-p", f"mark={mark}"],
            env={**os.environ, "FLOWS_REDIS_URL": url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    client = Client(url)
    run_id = ""
    deadline = time.monotonic() + 60
    # Waiting for another process to run the step and log a few ticks: no time to pass in.
    while time.monotonic() < deadline and process.poll() is None:
        runs = list_runs(client)
        run_id = str(runs[0]["id"]) if runs else ""
        if run_id and _ticks_logged(url, run_id) >= 3:
            break
        time.sleep(0.1)
    assert run_id, "the run was not submitted"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"flows retry {run_id}" in err

    retried = flows(url, "retry", run_id)
    assert retried.exit_code == 0, retried.output
    view = load_run(client, run_id)
    assert view is not None and view.status == "succeeded"

    both = flows(url, "logs", run_id, "count")
    assert both.exit_code == 0, both.output
    lines = both.stdout.splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("── count · attempt")]
    assert [lines[i] for i in headers] == ["── count · attempt 1 ──", "── count · attempt 2 ──"]
    first, second = lines[headers[0] + 1 : headers[1]], lines[headers[1] + 1 :]
    assert len(first) >= 3 and all("| tick " in line for line in first), first
    assert [line.split("| ", 1)[1] for line in second] == ["again 1", "again 2", "again 3"]

    only_first = flows(url, "logs", run_id, "count", "--attempt", "1")
    assert only_first.exit_code == 0, only_first.output
    assert only_first.stdout.splitlines() == lines[: headers[1]]
