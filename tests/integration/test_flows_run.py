"""End to end: flow files submitted and run to completion on the embedded server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows, status_json
from helpers import Reap, assert_unchanged, read_until

from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.read import list_runs, load_run
from flows.runs.submit import submit
from flows.validation.validate import load_flow
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# `flows run` on Redis 7.0 as well (tests/conftest.py, pytest_generate_tests), except Ctrl-C: the
# process's own handling, whose engine calls the other tests make too.
pytestmark = pytest.mark.system_server
ONLY_ON_THE_SUITE_SERVER = pytest.mark.system_server(False)


@pytest.fixture
def cli(
    server: EmbeddedServer,
    redis_client: redis.Redis,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> CliRunner:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.setenv("FLOWS_EXAMPLE_OUT", str(tmp_path / "out"))
    return CliRunner()


def write_flow(folder: Path, yaml_text: str, tasks: str) -> Path:
    """A flow file and its tasks module, named uniquely: workers cache imported modules."""
    module = f"flowtasks_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(dedent(tasks))
    path = folder / "flow.yaml"
    path.write_text(dedent(yaml_text).replace("flowtasks.", f"{module}."))
    return path


def test_example_etl_runs_to_completion(cli: CliRunner, client: Client) -> None:
    result = flows(cli, "run", str(EXAMPLES / "etl.yaml"))
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.output
    status = status_json(cli)
    steps = {s["step"]: s for s in status["steps"]}  # type: ignore[attr-defined]
    assert status["status"] == "succeeded"
    assert set(steps) == {
        "extract_orders",
        "extract_customers",
        "extract_prices",
        "transform",
        "load",
        "notify",
    }
    assert len(steps["load"]["jobs"]) == 3
    transform = client.jobs[steps["transform"]["jobs"][0]["jid"]]
    # The job keeps its references; the worker resolved them when the job started, so the
    # transform could read the three extracts' files and write totals the loads then read.
    assert transform.data["prices"] == "${{ steps.extract_prices.outputs.uri }}"
    assert transform.result["uri"].endswith("totals.json")
    loads = [client.jobs[job["jid"]].result for job in steps["load"]["jobs"]]
    assert [r["region"] for r in loads] == ["de", "at", "ch"]
    assert sum(r["rows"] for r in loads) > 0


def test_example_fanout_of_100_items(cli: CliRunner, client: Client) -> None:
    result = flows(cli, "run", str(EXAMPLES / "fanout.yaml"))
    assert result.exit_code == 0, result.output
    status = status_json(cli)
    steps = {s["step"]: s for s in status["steps"]}  # type: ignore[attr-defined]
    assert len(steps["square"]["jobs"]) == 100
    total = client.jobs[steps["total"]["jobs"][0]["jid"]]
    assert total.result["total"] == sum(i * i for i in range(100))


def test_diamond_passes_outputs_down_both_sides(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = write_flow(
        tmp_path,
        """
        version: 1
        name: diamond
        queue: diamond
        steps:
          top: {job: flowtasks.number, with: {n: 1}}
          left: {job: flowtasks.add, needs: [top], with: {n: "${{ steps.top.outputs.n }}", k: 10}}
          right: {job: flowtasks.add, needs: [top], with: {n: "${{ steps.top.outputs.n }}", k: 100}}
          bottom:
            job: flowtasks.both
            needs: [left, right]
            with: {a: "${{ steps.left.outputs.n }}", b: "${{ steps.right.outputs.n }}"}
    """,
        """
        def number(job): return {"n": job.data["n"]}
        def add(job): return {"n": job.data["n"] + job.data["k"]}
        def both(job): return {"sum": job.data["a"] + job.data["b"]}
    """,
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    status = status_json(cli)
    bottom = next(s for s in status["steps"] if s["step"] == "bottom")  # type: ignore[attr-defined]
    assert client.jobs[bottom["jobs"][0]["jid"]].result == {"sum": 11 + 101}


def test_a_failing_step_fails_the_run_with_exit_code_1(cli: CliRunner, tmp_path: Path) -> None:
    path = write_flow(
        tmp_path,
        """
        version: 1
        name: broken
        queue: broken
        defaults: {retry: {attempts: 1, delay: 0}}
        steps:
          first: {job: flowtasks.boom}
          second: {job: flowtasks.boom, needs: [first]}
    """,
        """
        def boom(job): raise ValueError("no good")
    """,
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    assert "ValueError" in result.output
    status = status_json(cli)
    assert status["status"] == "failed"
    statuses = {s["step"]: s["status"] for s in status["steps"]}  # type: ignore[attr-defined]
    assert statuses == {"first": "failed", "second": "upstream_failed"}


def test_detach_submits_and_prints_the_run_id(cli: CliRunner, client: Client) -> None:
    result = flows(cli, "run", "--detach", str(EXAMPLES / "etl.yaml"))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    view = load_run(client, run_id)
    assert view is not None and view.status == "running"
    listing = json.loads(flows(cli, "runs", "--json").stdout)
    assert [r["id"] for r in listing] == [run_id]
    # An empty listing says so, and a --flow that matches nothing names the flows that do.
    typo = flows(cli, "runs", "--flow", "sales-elt")
    assert (typo.exit_code, typo.stdout) == (0, "")
    assert typo.stderr.strip() == "no runs of flow 'sales-elt' (did you mean 'sales-etl'?)"
    assert json.loads(flows(cli, "runs", "--flow", "sales-elt", "--json").stdout) == []


def test_a_run_of_5000_layered_steps_is_submitted_whole(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    # The run record carries the run's graph, which grows with the steps: well past the size
    # of an ordinary JSON argument at this many, and still one submission.
    lines = ["version: 1", "name: wide", "queue: wide", "steps:"]
    for index in range(5000):
        needs = f", needs: [s{index - 10}]" if index >= 10 else ""
        lines.append(f"  s{index}: {{run: echo {index}{needs}}}")
    path = tmp_path / "wide.yaml"
    path.write_text("\n".join(lines) + "\n")
    result = flows(cli, "run", "--detach", str(path))
    assert result.exit_code == 0, result.output
    view = load_run(client, result.stdout.strip())
    assert view is not None and view.status == "running"
    assert view.jobs == 5000
    assert view.graph is not None and len(view.graph["steps"]) == 5000
    # Kept without the defaults of its entries, read back whole.
    stored = json.loads(client.engine.redis.hget(f"{client.prefix}run:{view.id}", "graph"))
    assert stored["steps"]["s0"] == {"kind": "run"}
    assert stored["steps"]["s10"] == {"needs": ["s0"], "kind": "run"}
    assert view.graph["steps"]["s10"]["trigger_rule"] == "all_success"
    assert view.graph["steps"]["s10"]["hook"] is False


def test_an_invalid_file_exits_1_and_writes_nothing(
    cli: CliRunner, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("version: 1\nname: bad\nsteps:\n  a: {job: x.y, need: [b]}\n")
    with assert_unchanged(redis_client):
        result = flows(cli, "run", str(path))
    assert result.exit_code == 1
    assert "bad.yaml:4" in result.output and "needs" in result.output


def test_resubmitting_a_run_id_changes_nothing(client: Client, redis_client: redis.Redis) -> None:
    flow = load_flow(EXAMPLES / "etl.yaml")
    requests = expand(
        flow, run_id="etl-1", logical_time=datetime(2026, 11, 1, tzinfo=UTC), flow_dir=EXAMPLES
    )
    first = submit(client, assemble_run("etl-1", flow.name, requests, params={}))
    assert first.created
    with assert_unchanged(redis_client):
        again = submit(client, assemble_run("etl-1", flow.name, requests, params={}))
    assert not again.created


def test_a_submission_that_fails_half_way_leaves_nothing(
    client: Client, redis_client: redis.Redis
) -> None:
    good = {"jid": "r:a", "queue": "q", "klass": "k", "data": "{}"}
    bad = {"jid": "r:b", "queue": "q", "klass": "k", "data": "not json", "depends": ["r:a"]}
    with assert_unchanged(redis_client), pytest.raises(InvalidArgument, match="jobs\\[2\\]"):
        client.engine.call("flow.submit", "r", json.dumps({"flow": "f"}), json.dumps([good, bad]))


def test_status_of_an_unknown_run_is_an_error(cli: CliRunner) -> None:
    result = flows(cli, "status", "nope")
    assert result.exit_code == 1
    assert "no run 'nope'" in result.output


FLAKY_FLOW = """
    version: 1
    name: flaky
    queue: flaky
    defaults: {retry: {attempts: 1, delay: 0}}
    steps:
      first: {job: flowtasks.record, with: {name: first}}
      second: {job: flowtasks.flaky, needs: [first]}
      notify:
        job: flowtasks.record
        needs: [second]
        trigger_rule: all_done
        with: {name: notify, status: "${{ steps.second.status }}"}
    hooks:
      on_failure: {job: flowtasks.record, with: {name: on_failure}}
      on_success: {job: flowtasks.record, with: {name: on_success}}
"""

FLAKY_TASKS = """
    import os
    from pathlib import Path

    LOG = Path(os.environ["FLOWS_TEST_LOG"])

    def record(job):
        with LOG.open("a") as log:
            log.write((job.data["name"] + " " + str(job.data.get("status", ""))).strip() + "\\n")
        return {"ok": True}

    def flaky(job):
        if not (LOG.parent / "fixed").exists():
            raise RuntimeError("not fixed yet")
        return record(type("J", (), {"data": {"name": "second"}})())
"""


def test_trigger_rules_hooks_and_retry_of_a_run(
    cli: CliRunner, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ran.log"
    monkeypatch.setenv("FLOWS_TEST_LOG", str(log))
    path = write_flow(tmp_path, FLAKY_FLOW, FLAKY_TASKS)
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    status = status_json(cli)
    run_id = str(status["id"])
    statuses = {s["step"]: s["status"] for s in status["steps"]}  # type: ignore[attr-defined]
    assert statuses == {
        "first": "success",
        "second": "failed",
        "notify": "success",
        "on_failure": "success",
        "on_success": "upstream_failed",
    }
    assert sorted(log.read_text().splitlines()) == ["first", "notify failed", "on_failure"]

    (tmp_path / "fixed").touch()
    detached = flows(cli, "retry", run_id, "--detach")
    assert detached.exit_code == 0 and "1 failed or canceled job(s) put back" in detached.output
    assert status_json(cli, run_id)["status"] == "running"  # put back, not worked
    result = flows(cli, "retry", run_id)  # works the run here, as `flows run` does
    assert result.exit_code == 0, result.output
    assert f"run {run_id} succeeded" in result.output
    status = status_json(cli, run_id)
    assert status["status"] == "succeeded"
    # `first` did not run again; the all_done step ran again once `second` had ended.
    assert log.read_text().splitlines()[3:] == ["second", "notify success", "on_success"]


def test_retry_of_a_run_that_fails_again_exits_1(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_TEST_LOG", str(tmp_path / "ran.log"))
    path = write_flow(tmp_path, FLAKY_FLOW, FLAKY_TASKS)
    assert flows(cli, "run", str(path)).exit_code == 1
    run_id = str(status_json(cli)["id"])
    again = flows(cli, "retry", run_id)
    assert again.exit_code == 1
    assert "not fixed yet" in again.output and f"run {run_id} failed" in again.output


@ONLY_ON_THE_SUITE_SERVER
def test_ctrl_c_says_what_state_the_run_is_in_and_how_to_go_on(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path, reap: Reap
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(
        "version: 1\nname: slow\nqueue: slow\nsteps:\n"
        "  first: {run: 'true'}\n  wait: {run: sleep 60, needs: [first]}\n"
    )
    process = reap(_flows_run(server, path))
    client = Client(server.url)
    deadline = time.monotonic() + 60
    seen: list[str] = []
    while time.monotonic() < deadline:
        runs = list_runs(client, "slow")  # this test's run, whatever other runs the server has
        view = load_run(client, str(runs[0]["id"])) if runs else None
        seen = [s.status for s in view.steps] if view is not None else []
        if "running" in seen:
            break
        time.sleep(0.1)  # waiting for another process to start a job; no time to pass in
    assert "running" in seen, f"no step of the run seen running within 60 s: {seen}"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    # piped, the one table printed is the run as Ctrl-C left it, not a frame before it
    assert out.count("Run slow@") == 1 and out.startswith("Run slow@"), out
    last_wait_row = [line for line in out.splitlines() if "│ wait " in line][-1]
    assert "waiting" in last_wait_row and "running" not in last_wait_row, out
    run_id = str(list_runs(client, "slow")[0]["id"])
    assert f"interrupted: run {run_id} is running (1 of 2 steps done" in err
    assert f"flows retry {run_id}" in err and f"flows cancel {run_id}" in err
    assert "Traceback" not in err
    view = load_run(client, run_id)
    assert view is not None
    assert {s.step: s.status for s in view.steps} == {"first": "success", "wait": "waiting"}


@pytest.mark.parametrize("mode", [(), ("--logs",), ("--json",)], ids=["table", "logs", "json"])
def test_a_run_worked_here_says_how_to_give_the_signal_a_step_awaits(
    cli: CliRunner, server: EmbeddedServer, client: Client, tmp_path: Path, mode: tuple[str, ...]
) -> None:
    """`flows run` works a run until it ends: a step awaiting a signal would keep it there with
    no word of what to do. It says so once on stderr, as `flows status` does, with the command
    that gives the signal: in every mode (--logs read the run by a path of its own, and said
    nothing)."""
    path = tmp_path / "gate.yaml"
    path.write_text(
        "version: 1\nname: gate\nqueue: gate\nsteps:\n"
        "  approve: {wait: {signal: approve}}\n  ship: {run: 'true', needs: [approve]}\n"
    )
    process = _flows_run(server, path, *mode)
    try:
        said = read_until(process, "--data JSON)\n", stream="stderr")
        run_id = str(list_runs(client)[0]["id"])
        assert said.splitlines()[-2:] == [
            "approve: awaiting signal 'approve'",
            f"  flows approve {run_id} approve --note TEXT   (or: flows signal {run_id} approve "
            "--data JSON)",
        ], said
        assert flows(cli, "approve", run_id, "approve").exit_code == 0
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "flows approve" not in err and f"run {run_id} succeeded" in err  # said once
    assert "flows approve" not in out  # stdout is the run's (its JSON, its lines)
    if mode != ("--json",):
        assert f"Run {run_id} succeeded" in out
    else:
        assert json.loads(out)["status"] == "succeeded"


def test_a_run_submitted_detached_says_how_to_give_the_signal_its_first_step_awaits(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    """No worker of this command will get to it: a wait with nothing before it awaits from
    the submit on, and `--detach` says so as the other modes do (on stderr, its stdout the
    run id alone, for scripts)."""
    path = tmp_path / "gate.yaml"
    path.write_text(
        "version: 1\nname: gate\nqueue: gate\nsteps:\n"
        "  approve: {wait: {signal: approve}}\n  ship: {run: 'true', needs: [approve]}\n"
    )
    result = flows(cli, "run", "--detach", str(path))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.strip()
    assert result.stderr.splitlines()[-2:] == [
        "approve: awaiting signal 'approve'",
        f"  flows approve {run_id} approve --note TEXT   (or: flows signal {run_id} approve "
        "--data JSON)",
    ], result.stderr
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text("version: 1\nname: quiet\nqueue: gate\nsteps:\n  a: {run: 'true'}\n")
    plain = flows(cli, "run", "--detach", str(quiet))
    assert "flows approve" not in plain.output and "awaiting" not in plain.output


@pytest.mark.parametrize("mode", [(), ("--logs",)], ids=["table", "logs"])
def test_a_run_worked_here_says_how_to_approve_a_step_of_its_child_run(
    cli: CliRunner, server: EmbeddedServer, client: Client, tmp_path: Path, mode: tuple[str, ...]
) -> None:
    """An approval gate in a child run holds its parent's step: `flows run PARENT` and
    `flows status PARENT` say what it awaits and how to give it, labelled step/child-step,
    rather than show the step running with no word of the wait."""
    (tmp_path / "deploy.yaml").write_text(
        "version: 1\nname: deploy\nqueue: gate\nsteps:\n"
        "  approve: {wait: {signal: approve}}\n  push: {run: 'true', needs: [approve]}\n"
    )
    path = tmp_path / "release.yaml"
    path.write_text(
        "version: 1\nname: release\nqueue: gate\nsteps:\n  deploy: {flow: deploy.yaml}\n"
    )
    process = _flows_run(server, path, *mode)
    try:
        said = read_until(process, "--data JSON)\n", stream="stderr")
        run_id = str(list_runs(client, "release")[0]["id"])
        child = f"{run_id}.deploy"
        told = [
            "deploy/approve: awaiting signal 'approve'",
            f"  flows approve {child} approve --note TEXT   (or: flows signal {child} approve "
            "--data JSON)",
        ]
        assert said.splitlines()[-2:] == told, said
        status = flows(cli, "status", run_id)
        assert status.stdout.splitlines()[-2:] == told, status.stdout
        assert flows(cli, "approve", child, "approve").exit_code == 0
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "flows approve" not in err and f"run {run_id} succeeded" in err  # said once


def _flows_run(server: EmbeddedServer, path: Path, *args: str) -> subprocess.Popen[str]:
    """`flows run [ARGS] PATH` as a process of its own on ``server``, its output piped."""
    env = {**os.environ, "FLOWS_REDIS_URL": server.url}
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "flows"), "run", *args, str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cancel_a_run(cli: CliRunner, client: Client) -> None:
    run_id = flows(cli, "run", "--detach", str(EXAMPLES / "etl.yaml")).stdout.strip()
    result = flows(cli, "cancel", run_id)
    assert result.exit_code == 0 and "canceled 8 job(s)" in result.output
    assert status_json(cli, run_id)["status"] == "canceled"


RUN_ID = re.compile(r"^sales-etl@\d{8}T\d{6}Z-[0-9a-f]{6}$")


def test_runs_json_holds_json_values_and_run_ids_have_one_format(cli: CliRunner) -> None:
    etl = str(EXAMPLES / "etl.yaml")
    given = ("-p", "regions=de,at", "--logical-time", "2026-11-01")
    run_id = flows(cli, "run", "--detach", etl, *given).stdout.strip()
    assert RUN_ID.match(run_id), run_id
    [record] = json.loads(flows(cli, "runs", "--json").stdout)
    assert record["id"] == run_id
    # the params as bound: the list typed, the date's default filled
    assert record["params"] == {"date": "2026-11-01", "regions": ["de", "at"]}
    assert record["queues"] == ["etl"]
    assert isinstance(record["submitted"], float) and record["jobs"] == 7
    assert status_json(cli, run_id)["queues"] == ["etl"]  # type: ignore[index]

    planned = json.loads(
        flows(
            cli, "plan", str(EXAMPLES / "etl.yaml"), "--logical-time", "2026-11-01", "--json"
        ).stdout
    )
    assert planned["run_id"] == "sales-etl@20261101T000000Z"  # a tick's run id at that time
    chosen = flows(
        cli,
        "run",
        "--detach",
        str(EXAMPLES / "etl.yaml"),
        "--run-id",
        "sales-etl@mine",
        "--logical-time",
        "2026-11-01",
    )
    assert chosen.stdout.strip() == "sales-etl@mine"
    again = flows(cli, "run", "--detach", str(EXAMPLES / "etl.yaml"), "--run-id", "sales-etl@mine")
    assert "run sales-etl@mine exists already" in again.output


def test_a_misspelled_output_fails_its_step_and_holds_back_its_dependents(
    cli: CliRunner, tmp_path: Path
) -> None:
    path = write_flow(
        tmp_path,
        """
        version: 1
        name: misspelled
        queue: misspelled
        steps:
          make: {job: flowtasks.make}
          read: {job: flowtasks.read, needs: [make], with: {csv: "${{ steps.make.outputs.cvs }}"}}
          after: {job: flowtasks.read, needs: [read]}
        """,
        """
        def make(job):
            return {"csv": "a,b"}

        def read(job):
            return {}
        """,
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 1, result.output
    assert "flows-reference" in result.output
    statuses = {s["step"]: s["status"] for s in status_json(cli)["steps"]}  # type: ignore[attr-defined]
    assert statuses == {"make": "success", "read": "failed", "after": "upstream_failed"}
    # Declared outputs catch it before any run.
    text = path.read_text().replace(".make}", ".make, outputs: [csv]}")
    path.write_text(text)
    invalid = flows(cli, "validate", str(path))
    assert invalid.exit_code == 1
    assert "step 'make' declares no output 'cvs'" in invalid.output
    assert "did you mean 'csv'?" in invalid.output


def test_a_step_reads_the_status_words_of_flows_status(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "ran.log"
    monkeypatch.setenv("FLOWS_TEST_LOG", str(log))
    path = write_flow(
        tmp_path,
        """
        version: 1
        name: words
        queue: words
        steps:
          first: {job: flowtasks.record, with: {name: first}}
          alarm: {job: flowtasks.record, needs: [first], trigger_rule: one_failed, with: {name: x}}
          report:
            job: flowtasks.record
            needs: [alarm]
            trigger_rule: all_done
            with: {name: report, status: "${{ steps.alarm.status }}"}
        """,
        FLAKY_TASKS,
    )
    result = flows(cli, "run", str(path))
    assert result.exit_code == 0, result.output
    assert log.read_text().splitlines() == ["first", "report skipped"]
