"""End to end: a ``matrix`` step through ``flows run`` and ``flows retry``."""

from __future__ import annotations

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


MATRIX_FLOW = """
    version: 1
    name: grid
    queue: grid
    defaults: {retry: {attempts: 1, delay: 0}}
    params:
      regions: {type: array, default: [de, at]}
    steps:
      grid:
        matrix: {region: "${{ params.regions }}", kind: [full, delta]}
        if: "!(matrix.region == 'at' && matrix.kind == 'delta')"
        job: flowtasks.load
        with: {region: "${{ matrix.region }}", kind: "${{ matrix.kind }}"}
      report:
        needs: [grid]
        trigger_rule: none_failed
        job: flowtasks.report
        with: {loaded: "${{ steps.grid.outputs.loaded }}"}
"""

MATRIX_TASKS = """
    import os
    from pathlib import Path

    LOG = Path(os.environ["FLOWS_TEST_LOG"])

    def load(job):
        name = job.data["region"] + "-" + job.data["kind"]
        if name == "de-delta" and not (LOG.parent / "fixed").exists():
            raise RuntimeError("delta of de is broken")
        with LOG.open("a") as log:
            log.write(name + "\\n")
        return {"loaded": name}

    def report(job):
        with LOG.open("a") as log:
            log.write("report " + ",".join(str(x) for x in job.data["loaded"]) + "\\n")
"""


def test_a_matrix_runs_each_combination_and_retry_resumes_only_the_failed_one(
    cli: CliRunner, server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ran.log"
    monkeypatch.setenv("FLOWS_TEST_LOG", str(log))
    path = write_flow(tmp_path, MATRIX_FLOW, MATRIX_TASKS)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    status = status_json(cli)
    run_id = str(status["id"])
    client = Client(server.url)
    jobs = {
        combination: client.jobs[f"{run_id}:grid[region={combination}]"]
        for combination in ("de,kind=full", "de,kind=delta", "at,kind=full", "at,kind=delta")
    }
    states = {name: job.state if job else None for name, job in jobs.items()}
    assert states == {
        "de,kind=full": "complete",
        "de,kind=delta": "failed",
        "at,kind=full": "complete",
        "at,kind=delta": "complete",  # skipped by its condition
    }
    assert sorted(log.read_text().splitlines()) == ["at-full", "de-full"]

    (tmp_path / "fixed").touch()
    result = flows(cli, "retry", run_id)
    assert result.exit_code == 0, result.output
    # Only the failed combination ran again; the report reads every combination, in order.
    assert log.read_text().splitlines()[2:] == ["de-delta", "report de-full,de-delta,at-full,None"]
    steps = {s["step"]: s["status"] for s in status_json(cli, run_id)["steps"]}  # type: ignore[attr-defined]
    assert steps == {"grid": "success", "report": "success"}
