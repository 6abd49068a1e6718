"""End to end: ``if:`` conditions through ``flows run`` and ``flows retry``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from test_flows_run import flows, status_json, write_flow

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client


@pytest.fixture
def cli(
    server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    return CliRunner()


COND_FLOW = """
    version: 1
    name: cond
    queue: cond
    defaults: {retry: {attempts: 1, delay: 0}}
    params:
      publish: {type: bool, default: true}
    steps:
      list: {job: flowtasks.list_files, outputs: [files]}
      publish:
        needs: [list]
        if: "${{ params.publish && steps.list.outputs.files != [] }}"
        job: flowtasks.record
        with: {name: publish}
      announce: {needs: [publish], job: flowtasks.record, with: {name: announce}}
      cleanup:
        needs: [publish]
        trigger_rule: none_failed
        job: flowtasks.record
        with: {name: cleanup}
"""

COND_TASKS = """
    import os
    from pathlib import Path

    LOG = Path(os.environ["FLOWS_TEST_LOG"])

    def record(job):
        with LOG.open("a") as log:
            log.write(job.data["name"] + "\\n")
        return {"ok": True}

    def list_files(job):
        if not (LOG.parent / "fixed").exists():
            raise RuntimeError("listing is broken")
        return {"files": ["a.csv"]}
"""


def statuses(cli: CliRunner, run_id: str | None = None) -> dict[str, str]:
    steps = status_json(cli, run_id)["steps"]
    return {s["step"]: s["status"] for s in steps}  # type: ignore[attr-defined]


def test_a_false_condition_skips_the_step_and_its_all_success_dependents(
    cli: CliRunner, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ran.log"
    monkeypatch.setenv("FLOWS_TEST_LOG", str(log))
    (tmp_path / "fixed").touch()
    path = write_flow(tmp_path, COND_FLOW, COND_TASKS)
    result = flows(cli, "run", str(path), "-p", "publish=false")
    assert result.exit_code == 0, result.output
    assert statuses(cli) == {
        "list": "success",
        "publish": "skipped",
        "announce": "skipped",
        "cleanup": "success",
    }
    assert log.read_text().splitlines() == ["cleanup"]
    run_id = str(status_json(cli)["id"])
    job = client.jobs[f"{run_id}:publish"]
    assert job is not None
    assert job.history[-1]["what"] == "skipped"
    assert job.history[-1]["why"] == "its if: condition is false"

    log.unlink()
    result = flows(cli, "run", str(path))  # publish=true and a file listed: it runs
    assert result.exit_code == 0, result.output
    assert set(statuses(cli).values()) == {"success"}
    assert sorted(log.read_text().splitlines()) == ["announce", "cleanup", "publish"]


def test_retry_resumes_a_run_whose_condition_reads_a_failed_step(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ran.log"
    monkeypatch.setenv("FLOWS_TEST_LOG", str(log))
    path = write_flow(tmp_path, COND_FLOW, COND_TASKS)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    run_id = str(status_json(cli)["id"])
    assert statuses(cli, run_id)["list"] == "failed"
    assert statuses(cli, run_id)["publish"] == "upstream_failed"

    (tmp_path / "fixed").touch()
    result = flows(cli, "retry", run_id)
    assert result.exit_code == 0, result.output
    assert set(statuses(cli, run_id).values()) == {"success"}
    assert sorted(log.read_text().splitlines()) == ["announce", "cleanup", "publish"]


def test_a_condition_that_cannot_be_evaluated_fails_the_step(
    cli: CliRunner, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_TEST_LOG", str(tmp_path / "ran.log"))
    (tmp_path / "fixed").touch()
    text = COND_FLOW.replace(
        "params.publish && steps.list.outputs.files != []", "steps.list.outputs.files > 1"
    )
    path = write_flow(tmp_path, text, COND_TASKS)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    run_id = str(status_json(cli)["id"])
    assert statuses(cli, run_id)["publish"] == "failed"
    job = client.jobs[f"{run_id}:publish"]
    assert job is not None and job.failure is not None
    assert job.failure["group"] == "flows-condition"
    assert "'>' compares two numbers or two texts, not list and number" in json.dumps(job.failure)
