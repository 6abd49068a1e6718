"""What `flows status`, `flows runs` and the live view say about a run: every status word
rendered, skipped / upstream_failed / canceled steps, durations from first start to end.

The jobs are driven through the real engine with explicit times (no worker, no sleeping)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest
import redis
from click.testing import CliRunner, Result
from rich.console import Console

from flows.cli import main
from flows.cli.run import render_run
from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.read import STEP_STATUSES, JobView, RunView, StepView, load_run
from flows.runs.submit import submit
from flows.validation.validate import load_flow
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.job import Job

T = time.time() + 10_000  # engine time for the pops and completes below, after every put


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


def flows(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--redis", url], catch_exceptions=False)


def start(client: Client, tmp_path: Path, text: str, run_id: str) -> None:
    path = tmp_path / f"{run_id}.yaml"
    path.write_text(dedent(text))
    flow = load_flow(path)
    requests = expand(
        flow, run_id=run_id, logical_time=datetime.fromtimestamp(T, UTC), flow_dir=tmp_path
    )
    submit(client, assemble_run(run_id, flow.name, requests, params={}))


def pop(client: Client, queue: str, jid: str, now: float) -> Job:
    jobs = client.queues[queue].pop(now=now)
    assert [j.jid for j in jobs] == [jid]
    return jobs[0]


def steps_json(url: str, run_id: str) -> dict[str, dict[str, object]]:
    result = flows(url, "status", run_id, "--json")
    assert result.exit_code == 0, result.output
    return {s["step"]: s for s in json.loads(result.stdout)["steps"]}


RETRIED = """\
    version: 1
    name: retried
    queue: st
    steps:
      a: {job: x.work, retry: {attempts: 3, delay: 0}}
      alarm: {job: x.alarm, needs: [a], trigger_rule: one_failed}
    hooks:
      on_success: {job: x.hook}
"""


def test_a_skipped_step_says_skipped_and_a_retried_one_counts_from_its_first_start(
    client: Client, url: str, tmp_path: Path
) -> None:
    start(client, tmp_path, RETRIED, "retried-1")
    first = pop(client, "st", "retried-1:a", T)
    first.retry(now=T + 1)
    again = pop(client, "st", "retried-1:a", T + 5)
    again.complete(now=T + 7)

    steps = steps_json(url, "retried-1")
    assert (steps["a"]["status"], steps["a"]["duration"], steps["a"]["attempts"]) == (
        "success",
        7.0,
        2,
    )
    assert (steps["alarm"]["status"], steps["alarm"]["duration"]) == ("skipped", None)
    # A step skipped by its own rule is no failure: the on_success hook runs.
    assert steps["on_success"]["status"] == "waiting"
    pop(client, "st", "retried-1:on_success", T + 8).complete(now=T + 9)
    table = flows(url, "status", "retried-1")
    assert table.exit_code == 0
    assert "7.0s" in table.stdout and "skipped" in table.stdout
    assert "succeeded" in table.stdout


FAILING = """\
    version: 1
    name: failing
    queue: st
    steps:
      a: {job: x.work}
      b: {job: x.work, needs: [a]}
      c: {job: x.work, needs: [b]}
      alarm: {job: x.alarm, needs: [a], trigger_rule: one_failed}
    hooks:
      on_success: {job: x.hook}
"""


def test_dependents_of_a_failed_step_are_upstream_failed_and_a_resumed_skip_has_no_duration(
    client: Client, url: str, tmp_path: Path
) -> None:
    start(client, tmp_path, FAILING, "failing-1")
    pop(client, "st", "failing-1:a", T).fail("boom", "it broke", now=T + 1)
    pop(client, "st", "failing-1:alarm", T + 2).complete(now=T + 3)
    steps = steps_json(url, "failing-1")
    assert {name: s["status"] for name, s in steps.items()} == {
        "a": "failed",
        "b": "upstream_failed",
        "c": "upstream_failed",
        "alarm": "success",
        "on_success": "upstream_failed",
    }
    view = load_run(client, "failing-1")
    assert view is not None and view.status == "failed"

    client.engine.call("run.retry", "failing-1")  # a waits again; alarm waits for a again
    pop(client, "st", "failing-1:a", T + 10).complete(now=T + 11)
    steps = steps_json(url, "failing-1")
    assert (steps["alarm"]["status"], steps["alarm"]["duration"]) == ("skipped", None)
    assert (steps["a"]["status"], steps["a"]["duration"]) == ("success", 1.0)
    assert steps["b"]["status"] == "waiting"


def test_a_canceled_run_renders_in_status_runs_and_json(
    client: Client, url: str, tmp_path: Path
) -> None:
    start(client, tmp_path, FAILING, "canceled-1")
    pop(client, "st", "canceled-1:a", T).complete(now=T + 1)
    assert flows(url, "cancel", "canceled-1").exit_code == 0

    table = flows(url, "status", "canceled-1")
    assert table.exit_code == 0, table.output
    assert "canceled" in table.stdout
    steps = steps_json(url, "canceled-1")
    assert (steps["a"]["status"], steps["alarm"]["status"]) == ("success", "skipped")
    assert {steps[name]["status"] for name in ("b", "c", "on_success")} == {"canceled"}
    assert "canceled" in flows(url, "runs").stdout


@pytest.mark.parametrize("status", STEP_STATUSES)
def test_every_step_status_renders(client: Client, status: str) -> None:
    job = JobView(jid="r-1:s", state=None, status=status)
    step = StepView(step="s", status=status, total=1, jobs=[job])
    view = RunView(id="r-1", status="running", steps=[step])
    out = Console(record=True, width=200, color_system="truecolor")
    out.print(render_run(view))
    assert status in out.export_text()


def test_every_run_status_renders(client: Client, url: str, tmp_path: Path) -> None:
    def started(text: str, run_id: str) -> str:
        start(client, tmp_path, text.replace("queue: st", f"queue: {run_id}"), run_id)
        return run_id

    pop(client, started(RETRIED, "shown-running"), "shown-running:a", T)  # keeps running
    ok = started(RETRIED, "shown-ok")
    pop(client, ok, "shown-ok:a", T).complete(now=T + 1)
    pop(client, ok, "shown-ok:on_success", T + 1).complete(now=T + 2)
    failed = started(FAILING, "shown-failed")
    pop(client, failed, "shown-failed:a", T).fail("boom", "x", now=T + 1)
    pop(client, failed, "shown-failed:alarm", T + 1).complete(now=T + 2)
    flows(url, "cancel", started(FAILING, "shown-canceled"))
    seen = set()
    for run_id in ("shown-running", "shown-ok", "shown-failed", "shown-canceled"):
        view = load_run(client, run_id)
        assert view is not None
        seen.add(view.status)
        result = flows(url, "status", run_id)
        assert result.exit_code == 0 and view.status in result.stdout
    assert seen == {"running", "succeeded", "failed", "canceled"}
