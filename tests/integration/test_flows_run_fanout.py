"""`flows run` of a fan-out from a step's output: one job per item, made when the producer
completes; Python and shell steps, no items, outputs that are not a list, resume after a failed
item. Real server, real worker."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from textwrap import dedent

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows, status_json
from helpers import assert_unchanged

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def cli(
    server: EmbeddedServer,
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.setenv("FLOWS_TEST_DIR", str(tmp_path))
    return CliRunner()


def steps_of(status: dict[str, object]) -> dict[str, dict[str, object]]:
    return {s["step"]: s for s in status["steps"]}  # type: ignore[attr-defined]


FLOW = """
    version: 1
    name: files
    queue: files
    defaults: {retry: {attempts: 1, delay: 0}}
    steps:
      list:
        job: flowtasks.list_files
        outputs: [files]
      process:
        needs: [list]
        foreach: {items: "${{ steps.list.outputs.files }}", as: f, max_parallel: 4}
        job: flowtasks.process
        with: {name: "${{ f }}"}
      report:
        needs: [process]
        job: flowtasks.report
        with: {names: "${{ steps.process.outputs.name }}", status: "${{ steps.process.status }}"}
"""

TASKS = """
    import json
    import os
    from pathlib import Path

    DIR = Path(os.environ["FLOWS_TEST_DIR"])

    def list_files(job):
        return {"files": json.loads((DIR / "files.json").read_text())}

    def process(job):
        name = job.data["name"]
        with (DIR / "ran.log").open("a") as log:
            log.write(f"{name}\\n")
        if name == "b.csv" and not (DIR / "fixed").exists():
            raise RuntimeError("b.csv is broken")
        return {"name": name.upper()}

    def report(job):
        return {"names": job.data["names"], "status": job.data["status"]}
"""


def write_flow(folder: Path, files: object, flow: str = FLOW, tasks: str = TASKS) -> Path:
    """The flow with its tasks module, named uniquely (workers cache imported modules)."""
    module = f"flowtasks_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(dedent(tasks))
    (folder / "files.json").write_text(json.dumps(files))
    path = folder / "flow.yaml"
    path.write_text(dedent(flow).replace("flowtasks.", f"{module}."))
    return path


def test_the_example_runs_one_job_per_file_and_fans_in(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "fixed").touch()
    path = write_flow(tmp_path, ["a.csv", "b.csv", "c.csv"])
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    status = status_json(cli)
    run_id = status["id"]
    steps = steps_of(status)
    assert [j["jid"] for j in steps["process"]["jobs"]] == [
        f"{run_id}:process[{i}]" for i in range(3)
    ]
    assert {s: steps[s]["status"] for s in steps} == {
        "list": "success",
        "process": "success",
        "report": "success",
    }
    report = client.jobs[f"{run_id}:report"]
    assert report.result == {"names": ["A.CSV", "B.CSV", "C.CSV"], "status": "success"}
    # The items keep their template; the worker resolved it when each started.
    assert client.jobs[f"{run_id}:process[1]"].data["name"] == "${{ f }}"


def test_a_failed_item_is_resumed_alone_by_flows_retry(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, ["a.csv", "b.csv", "c.csv"])
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    assert "b.csv is broken" in result.output
    status = status_json(cli)
    run_id = str(status["id"])
    steps = steps_of(status)
    assert {s: steps[s]["status"] for s in steps} == {
        "list": "success",
        "process": "failed",
        "report": "upstream_failed",
    }
    assert sorted((tmp_path / "ran.log").read_text().split()) == ["a.csv", "b.csv", "c.csv"]

    (tmp_path / "fixed").touch()
    result = flows(cli, "retry", run_id)
    assert result.exit_code == 0, result.output
    assert f"run {run_id} succeeded" in result.output
    # Only the failed item ran again; the items were not made again.
    assert (tmp_path / "ran.log").read_text().split()[3:] == ["b.csv"]
    assert [j["jid"] for j in steps_of(status_json(cli, run_id))["process"]["jobs"]] == [
        f"{run_id}:process[{i}]" for i in range(3)
    ]
    assert client.jobs[f"{run_id}:report"].result["names"] == ["A.CSV", "B.CSV", "C.CSV"]


def test_no_items_succeed_with_an_empty_list(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, [])
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    status = status_json(cli)
    steps = steps_of(status)
    assert steps["process"]["status"] == "success"
    # no items: the step's one job (completed with the empty list) is not an item of it
    assert (steps["process"]["total"], steps["process"]["counts"]) == (0, {})
    assert steps["process"]["jobs"] == []
    assert status["graph"]["steps"]["process"]["items"] == 0  # type: ignore[index]
    assert status["counts"] == {"success": 2}  # list and report: no job counted for process
    assert client.jobs[f"{status['id']}:process"].result == []
    assert client.jobs[f"{status['id']}:report"].result == {"names": [], "status": "success"}


STATIC_FLOW = FLOW.replace('"${{ steps.list.outputs.files }}"', '"${{ params.files }}"').replace(
    "    steps:\n", "    params:\n      files: {type: array, default: []}\n    steps:\n"
)

TRIGGERED = """
      when_one_failed:
        needs: [process]
        trigger_rule: one_failed
        job: flowtasks.report
        with: {names: [], status: "${{ steps.process.status }}"}
      when_done:
        needs: [process]
        trigger_rule: all_done
        job: flowtasks.report
        with: {names: "${{ steps.process.outputs.name }}", status: "${{ steps.process.status }}"}
"""


def _cells(row: str) -> list[str]:
    """The cells of a row of a table `flows status` printed."""
    return [cell.strip() for cell in row.split("│") if cell.strip()]


def _seen_by_a_user(cli: CliRunner, client: Client) -> dict[str, object]:
    """What `flows status`, `flows explain` and the dependents say of a run of the flow."""
    status = status_json(cli)
    run_id = str(status["id"])
    steps = steps_of(status)
    process = steps["process"]
    explained = flows(cli, "explain", run_id, "process")
    assert explained.exit_code == 0, explained.output
    return {
        "run": status["status"],
        "steps": {s: steps[s]["status"] for s in steps},
        "process": (
            [j["jid"].removeprefix(run_id) for j in process["jobs"]],  # type: ignore[index]
            process["total"],
            process["counts"],
            process["attempts"],
        ),
        "graph": {
            key: status["graph"]["steps"]["process"][key]  # type: ignore[index]
            for key in ("foreach", "items")
        },
        "table": [
            line for line in flows(cli, "status", run_id).stdout.splitlines() if "process" in line
        ],
        "explained": explained.stdout.replace(run_id, "RUN"),
        "history": [e["what"] for e in client.jobs[f"{run_id}:process"].history][1:],
        "results": {
            step: client.jobs[f"{run_id}:{step}"].result
            for step in ("report", "when_done")
            if step in steps
        },
    }


def test_an_empty_static_foreach_is_seen_as_an_empty_fan_out_is(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    """A list param that is empty and an output that is an empty list: the same step, the same
    words on every surface, the same trigger rules downstream."""
    path = write_flow(tmp_path, [], FLOW + TRIGGERED)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    from_output = _seen_by_a_user(cli, client)
    path = write_flow(tmp_path, [], STATIC_FLOW + TRIGGERED)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    from_param = _seen_by_a_user(cli, client)
    assert from_param == from_output
    # 0 items on every surface: the status's step and graph, the table, explain
    assert from_param["process"] == ([], 0, {}, 0)
    assert from_param["graph"] == {"foreach": True, "items": 0}
    assert "It had no items" in str(from_param["explained"])
    assert [_cells(line)[:3] for line in from_param["table"]] == [["process", "success", "0/0"]]
    assert from_param["steps"] == {
        "list": "success",
        "process": "success",
        "report": "success",
        "when_one_failed": "skipped",
        "when_done": "success",
    }
    assert from_param["results"] == {
        "report": {"names": [], "status": "success"},
        "when_done": {"names": [], "status": "success"},
    }


def test_a_flow_whose_only_step_has_no_items_runs(cli: CliRunner, tmp_path: Path) -> None:
    only = """
    version: 1
    name: only
    params:
      files: {type: array, default: []}
      regions: {type: array, default: []}
    steps:
      each:
        foreach: {items: "${{ params.files }}", as: f}
        run: echo "${{ f }}"
      per_region:
        matrix: {region: "${{ params.regions }}"}
        run: echo "${{ matrix.region }}"
    """
    path = tmp_path / "only.yaml"
    path.write_text(dedent(only))
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    assert "at least one job" not in result.output
    status = status_json(cli)
    steps = steps_of(status)
    assert {s: (steps[s]["status"], steps[s]["total"]) for s in steps} == {
        "each": ("success", 0),
        "per_region": ("success", 0),
    }
    table = flows(cli, "status", str(status["id"])).stdout
    assert [_cells(line)[:3] for line in table.splitlines() if "success" in line] == [
        ["each", "success", "0/0"],
        ["per_region", "success", "0/0"],
    ]
    assert status["status"] == "succeeded"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a": 1}, 'output "files" is an object, not a list'),
        ("a.csv", 'output "files" is text that is not a JSON array'),
        (list(range(10_001)), 'output "files" has 10001 items, more than the limit of 10000'),
    ],
    ids=["object", "text", "too-many"],
)
def test_an_output_that_is_not_a_list_fails_the_step_not_the_producer(
    cli: CliRunner, client: Client, tmp_path: Path, files: object, message: str
) -> None:
    path = write_flow(tmp_path, files)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())  # wrapped to the terminal's width
    assert "Traceback" not in result.output
    status = status_json(cli)
    steps = steps_of(status)
    assert {s: steps[s]["status"] for s in steps} == {
        "list": "success",
        "process": "failed",
        "report": "upstream_failed",
    }
    failure = client.jobs[f"{status['id']}:process"].failure
    assert failure is not None and failure["group"] == "fanout-invalid"


def test_a_retry_of_a_step_whose_items_are_still_refused_says_nothing_was_put_back(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, {"a": 1})
    assert flows(cli, "run", str(path)).exit_code == 1
    run_id = str(status_json(cli)["id"])
    with assert_unchanged(redis_client):
        retried = flows(cli, "retry", run_id, "--detach")
    assert retried.exit_code == 1
    said = " ".join(retried.output.split())
    assert f"nothing put back: job {run_id}:process would fail again: " in said
    assert 'output "files" is an object, not a list' in said
    assert "job(s) put back" not in said and "Traceback" not in said


def test_a_million_items_cannot_even_be_an_output(cli: CliRunner, tmp_path: Path) -> None:
    """1,000,001 items are far beyond a result's size limit (512 KiB): the producer fails."""
    path = write_flow(tmp_path, list(range(1_000_001)))
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    steps = steps_of(status_json(cli))
    assert {s: steps[s]["status"] for s in steps} == {
        "list": "failed",
        "process": "upstream_failed",
        "report": "upstream_failed",
    }


SHELL_FLOW = """
    version: 1
    name: shellfiles
    queue: shellfiles
    steps:
      list:
        run: echo 'files=["a b.csv", "$(touch PWNED)"]' >> "$FLOWS_OUTPUT"
        outputs: [files]
      process:
        needs: [list]
        foreach: {items: "${{ steps.list.outputs.files }}", as: f}
        run: |
          printf '%s' ${{ f }} > "item-${FLOWS_JID##*[}"
          echo "name=${{ f }}" >> "$FLOWS_OUTPUT"
      report:
        needs: [process]
        run: printf '%s' '${{ steps.process.outputs.name }}' > report.out
"""


def test_shell_steps_fan_out_from_a_json_list_output(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(dedent(SHELL_FLOW))
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "PWNED").exists()
    assert (tmp_path / "item-0]").read_text() == "a b.csv"
    assert (tmp_path / "item-1]").read_text() == "$(touch PWNED)"
    assert json.loads((tmp_path / "report.out").read_text()) == ["a b.csv", "$(touch PWNED)"]


def test_example_files_counts_every_file_of_the_day(
    cli: CliRunner, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_EXAMPLE_OUT", str(tmp_path / "out"))
    result = flows(cli, "run", str(EXAMPLES / "files.yaml"), "-p", "day=2025-01-31")
    assert result.exit_code == 0, result.output
    status = status_json(cli)
    steps = steps_of(status)
    files = sorted((tmp_path / "out" / "2025-01-31" / "files").iterdir())
    assert len(steps["count"]["jobs"]) == len(files) >= 3  # type: ignore[arg-type]
    rows = sum(len(path.read_text().splitlines()) - 1 for path in files)
    assert client.jobs[f"{status['id']}:total"].result == {"files": len(files), "rows": rows}


def test_a_flow_test_sees_a_step_with_no_items_output_the_empty_list(
    cli: CliRunner, tmp_path: Path
) -> None:
    """`flows test`: a foreach over an empty list (0 items) has the empty list as its outputs,
    as a fan-out's items' outputs are a list."""
    (tmp_path / "none.yaml").write_text(
        dedent(
            """
            version: 1
            name: none
            params:
              files: {type: array, default: []}
            steps:
              each:
                foreach: {items: "${{ params.files }}", as: f}
                run: echo "${{ f }}"
              after:
                needs: [each]
                run: echo done
            """
        )
    )
    (tmp_path / "none.test.yaml").write_text(
        dedent(
            """
            flow: none.yaml
            cases:
              - name: no items
                mock: all
                expect:
                  status: succeeded
                  steps:
                    each: {status: success, outputs: []}
                    after: success
            """
        )
    )
    result = flows(cli, "test", str(tmp_path / "none.test.yaml"))
    assert result.exit_code == 0, result.output
    assert "1 passed, 0 failed" in result.output
