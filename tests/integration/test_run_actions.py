"""End to end: one answer everywhere for a run's status and its allowed actions. A refused
retry (of a completed job, of an awaiting one) changes nothing and exits 1, `flows approve`
still works after it; `flows rerun --downstream` runs a step and its dependents again with
earlier attempts' logs kept; `flows status --json` and the API return one document; the run
page draws the run's graph with its flow file deleted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from test_flows_run import flows, status_json, write_flow
from ui_support import TOKEN, Api, serve

from flows.runs import statuses
from flows.ui.auth import Auth
from scheduler.engine.client import Client

FLOW = """
    version: 1
    name: acts
    queue: acts
    defaults: {retry: {attempts: 1, delay: 0}}
    steps:
      build: {job: flowtasks.build}
      check: {job: flowtasks.check, needs: [build]}
      gate:
        needs: [check]
        wait: {signal: approve}
      ship: {job: flowtasks.ship, needs: [gate]}
"""

TASKS = """
    def build(job):
        print("building")
        return {"artifact": "a1"}

    def check(job):
        print("checking")
        return {"ok": True}

    def ship(job):
        return {"shipped": True}
"""


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


def work(cli: CliRunner, folder: Path) -> None:
    result = flows(
        cli, "worker", "-q", "acts", "--burst", "--processes", "0", "--path", str(folder)
    )
    assert result.exit_code == 0, result.output


def steps(cli: CliRunner, run_id: str) -> dict[str, dict[str, object]]:
    return {s["step"]: s for s in status_json(cli, run_id)["steps"]}  # type: ignore[index]


def test_refused_retries_change_nothing_and_approve_still_works(
    cli: CliRunner, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, FLOW, TASKS)
    assert flows(cli, "run", "--detach", "--run-id", "a1", str(path)).exit_code == 0
    work(cli, tmp_path)
    shown = steps(cli, "a1")
    assert shown["build"]["status"] == "success" and shown["gate"]["status"] == "awaiting"
    assert shown["gate"]["actions"] == ["signal", "approve"]
    assert shown["build"]["actions"] == []  # the run is running: nothing to do to it

    for target, words in (
        ("a1:build", "job a1:build has status success"),
        ("a1:gate", "has status awaiting"),
    ):
        with assert_unchanged(redis_client):
            refused = flows(cli, "retry", target)
        assert refused.exit_code == 1, refused.output
        assert words in refused.output and "allowed:" in refused.output
        assert "Traceback" not in refused.output

    approved = flows(cli, "approve", "a1", "gate", "--note", "fine")
    assert approved.exit_code == 0, approved.output
    work(cli, tmp_path)
    assert status_json(cli, "a1")["status"] == "succeeded"
    with assert_unchanged(redis_client):
        assert flows(cli, "cancel", "a1").exit_code == 1  # nothing left to cancel


def test_rerun_downstream_counts_attempts_and_keeps_the_first_attempts_log(
    cli: CliRunner, client: Client, tmp_path: Path
) -> None:
    path = write_flow(
        tmp_path, FLOW.replace("wait: {signal: approve}", "job: flowtasks.ship"), TASKS
    )
    assert flows(cli, "run", "--run-id", "a2", str(path)).exit_code == 0
    assert status_json(cli, "a2")["status"] == "succeeded"

    again = flows(cli, "rerun", "a2", "check", "--downstream", "--detach")
    assert again.exit_code == 0, again.output
    assert "3 job(s) of check and the steps after it put back" in again.output
    shown = steps(cli, "a2")
    assert shown["build"]["status"] == "success" and shown["check"]["status"] == "waiting"
    work(cli, tmp_path)
    shown = steps(cli, "a2")
    assert status_json(cli, "a2")["status"] == "succeeded"
    assert [shown[s]["attempts"] for s in ("build", "check", "gate", "ship")] == [1, 2, 2, 2]
    [check] = shown["check"]["jobs"]  # type: ignore[index]
    assert [(e["attempt"], e["status"], e["result"]) for e in check["earlier"]] == [
        (1, "success", {"ok": True})
    ]
    first = flows(cli, "logs", "a2", "check", "--attempt", "1")
    assert first.exit_code == 0 and "checking" in first.output, first.output
    second = flows(cli, "logs", "a2", "check", "--attempt", "2")
    assert "checking" in second.output
    # still refused for a running run, with nothing changed
    flows(cli, "rerun", "a2", "build", "--detach")
    refused = flows(cli, "rerun", "a2", "build", "--detach")
    assert refused.exit_code == 1 and "run a2 has status running" in refused.output


def test_status_json_is_the_api_document_and_the_page_draws_the_graph_without_the_file(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, FLOW, TASKS)
    assert flows(cli, "run", "--detach", "--run-id", "a3", str(path)).exit_code == 0
    work(cli, tmp_path)
    path.unlink()
    cli_doc = status_json(cli, "a3")
    reply = api.get("/api/v1/runs/a3")
    assert reply.status == 200
    assert json.loads(json.dumps(reply.body)) == cli_doc
    assert cli_doc["graph"]["steps"]["gate"]["kind"] == "wait"  # type: ignore[index]
    assert cli_doc["graph"]["steps"]["ship"]["needs"] == ["gate"]  # type: ignore[index]
    page = api.get("/runs/a3")
    assert page.status == 200
    html = str(page.body)
    assert html.count('class="edge"') == 3  # build -> check -> gate -> ship
    assert 'data-run-action="retry" hidden' in html  # shown only once the engine allows it
    assert 'data-run-action="cancel" data-action' in html
    # an awaiting step offers its signal, never a retry; a completed one nothing while running
    gate = str(api.get("/runs/a3/steps/gate").body)
    assert ">Approve</button>" in gate and "Retry" not in gate and "Re-run" not in gate
    built = str(api.get("/runs/a3/steps/build").body)
    assert "Retry" not in built and "Re-run step" not in built

    # the API refuses what the engine refuses, with nothing changed
    with assert_unchanged(redis_client):
        refused = api.post("/api/v1/runs/a3/steps/build/rerun", {"downstream": True})
        assert refused.status == 409 and "run a3 has status running" in str(refused.body)
        assert api.post("/api/v1/jobs/a3:build/retry").status == 409
        assert api.post("/api/v1/jobs/a3:gate/retry").status == 409
        # a completed job is the run's result: no cancel removes it (delete does)
        assert api.post("/api/v1/jobs/a3:build/cancel").status == 409
        canceled = flows(cli, "cancel", "a3:build")
        assert canceled.exit_code == 1 and "a3:build of run a3 has completed" in canceled.output
    assert flows(cli, "approve", "a3", "gate", "--note", "ok").exit_code == 0
    work(cli, tmp_path)
    assert "Re-run step" in str(api.get("/runs/a3/steps/build").body)
    again = api.post("/api/v1/runs/a3/steps/check/rerun", {"downstream": True})
    assert again.status == 200 and again.body["rerun"] == 3, again.body
    assert status_json(cli, "a3")["status"] == "running"


def test_status_without_a_run_shows_the_latest_top_level_run(
    cli: CliRunner, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, FLOW, TASKS)
    assert flows(cli, "run", "--detach", "--run-id", "top", str(path)).exit_code == 0
    assert status_json(cli)["id"] == "top"  # type: ignore[index]


def test_the_openapi_schemas_come_from_the_one_vocabulary(api: Api) -> None:
    spec = api.get("/api/v1/openapi.json").body
    schemas = spec["components"]["schemas"]
    run = schemas["RunView"]["properties"]
    assert tuple(run["status"]["enum"]) == statuses.RUN_STATUSES
    assert tuple(schemas["StepView"]["properties"]["status"]["enum"]) == statuses.STEP_STATUSES
    assert tuple(schemas["JobView"]["properties"]["actions"]["items"]["enum"]) == statuses.ACTIONS
    listing = spec["paths"]["/api/v1/runs"]["get"]["parameters"]
    status = next(p for p in listing if p["name"] == "status")
    assert tuple(status["schema"]["anyOf"][0]["enum"]) == statuses.RUN_STATUSES


@pytest.mark.parametrize(("change", "word"), [("bury", "blocked"), ("delete", "canceled")])
def test_one_word_everywhere_for_a_buried_or_a_deleted_job(
    cli: CliRunner, client: Client, api: Api, tmp_path: Path, change: str, word: str
) -> None:
    two = "version: 1\nname: two\nqueue: two\nsteps:\n  a: {run: echo a}\n  b: {run: echo b}\n"
    path = tmp_path / "two.yaml"
    path.write_text(two)
    assert flows(cli, "run", "--detach", "--run-id", "w1", str(path)).exit_code == 0
    [a] = client.queues["two"].pop()
    a.complete()
    if change == "bury":
        client.engine.call("bury", "w1:b", "ops")
    else:
        assert flows(cli, "cancel", "w1:b").exit_code == 0  # alone, before it ran
    words = {
        "status --json": status_json(cli, "w1")["status"],
        "runs --json": json.loads(flows(cli, "runs", "--json").stdout)[0]["status"],
        "API run": api.get("/api/v1/runs/w1").body["status"],
        "API list": api.get("/api/v1/runs").body["items"][0]["status"],
    }
    assert set(words.values()) == {word}, words
    page = str(api.get("/runs/w1").body)
    assert f'data-status="{word}"' in page and f"st-{word}" in page


def test_retries_left_never_go_below_zero(cli: CliRunner, client: Client, api: Api) -> None:
    jid = client.queues["plain"].put("K", {}, retries=0)
    [job] = client.queues["plain"].pop()
    assert job.retry() < 0  # no retry left: the job failed, its remaining count below zero
    shown = flows(cli, "job", jid)
    assert "retries left │ 0 of 0" in shown.output
    assert "<dd>0 of 0</dd>" in str(api.get(f"/jobs/{jid}").body)
    # a plain job that did not fail is not put back by a retry
    done = client.queues["plain"].put("K", {})
    [running] = client.queues["plain"].pop()
    running.complete()
    refused = flows(cli, "retry", done)
    assert refused.exit_code == 1 and "is complete" in refused.output


def test_queues_and_workers_are_one_document_in_the_cli_and_the_api(
    cli: CliRunner, client: Client, api: Api, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, FLOW, TASKS)
    assert flows(cli, "run", "--detach", "--run-id", "q1", str(path)).exit_code == 0
    client.queues["acts"].pause()
    client.engine.call("worker.register", "w-doc", '{"queues": ["acts"], "pid": 7, "host": "h"}')
    for command, route in (("queues", "/api/v1/queues"), ("workers", "/api/v1/workers")):
        shown = flows(cli, command, "--json")
        assert shown.exit_code == 0, shown.output
        items = api.get(route).body["items"]
        assert items and json.loads(shown.output) == items  # one shape, decided once
    [queue] = api.get("/api/v1/queues").body["items"]
    assert queue["name"] == "acts" and queue["paused"] and queue["backlog"] == 1
    [worker] = api.get("/api/v1/workers").body["items"]
    assert (worker["name"], worker["host"], worker["pid"]) == ("w-doc", "h", 7)


def test_retry_and_cancel_of_an_unknown_target_name_it_and_change_nothing(
    cli: CliRunner, client: Client, redis_client: redis.Redis
) -> None:
    jid = client.queues["plain"].put("K", {})
    for args in (("retry", "no-such"), ("cancel", jid, "no-such", "nor-this")):
        with assert_unchanged(redis_client):
            refused = flows(cli, *args)
        assert refused.exit_code == 1, refused.output
        assert "no job or run 'no-such'" in refused.output, refused.output
        assert "Traceback" not in refused.output and "Get()" not in refused.output
    assert "'nor-this'" in refused.output
    assert client.jobs.get(jid) is not None  # named with the typos: not canceled


def test_a_run_has_one_shape_in_the_list_and_the_detail(
    cli: CliRunner, api: Api, tmp_path: Path
) -> None:
    path = write_flow(tmp_path, FLOW, TASKS)
    assert flows(cli, "run", "--detach", "--run-id", "a4", str(path)).exit_code == 0
    [cli_listed] = json.loads(flows(cli, "runs", "--json").stdout)
    [api_listed] = api.get("/api/v1/runs").body["items"]
    cli_doc, api_doc = status_json(cli, "a4"), api.get("/api/v1/runs/a4").body
    steps = cli_doc["graph"]["steps"]  # type: ignore[index]
    # an object, each step's needs a list: none is [], never the engine's {}
    assert steps["build"]["needs"] == [] and steps["check"]["needs"] == ["build"]
    for listed, document in ((cli_listed, cli_doc), (api_listed, api_doc)):
        # a listing is a summary: the graph comes with the run read whole
        assert "graph" not in listed
        shared = sorted(set(listed) & set(document))
        assert {"params", "queues", "status"} <= set(shared)
        assert {k: listed[k] for k in shared} == {k: document[k] for k in shared}
        assert document["graph"] == cli_doc["graph"]


EMPTY_LISTS = """
    version: 1
    name: lists
    queue: acts
    steps:
      make: {job: flowtasks.make}
"""

EMPTY_LISTS_TASKS = """
    def make(job):
        return {"items": [], "nested": {"seen": []}, "empty": {}}
"""


def test_a_steps_outputs_keep_their_empty_lists_now_and_after_a_rerun(
    cli: CliRunner, api: Api, tmp_path: Path
) -> None:
    """The engine keeps a result as its JSON text: read back through the run (status, the API,
    an earlier attempt's outcome) it is that JSON, empty lists included, not lists turned into
    the {} a Lua table encodes as."""
    path = write_flow(tmp_path, EMPTY_LISTS, EMPTY_LISTS_TASKS)
    assert flows(cli, "run", "--run-id", "e1", str(path)).exit_code == 0
    made = {"items": [], "nested": {"seen": []}, "empty": {}}
    [job] = steps(cli, "e1")["make"]["jobs"]  # type: ignore[misc]
    assert job["outputs"] == made
    assert flows(cli, "rerun", "e1", "make", "--detach").exit_code == 0
    work(cli, tmp_path)
    for document in (status_json(cli, "e1"), api.get("/api/v1/runs/e1").body):
        [step] = document["steps"]  # type: ignore[index]
        [job] = step["jobs"]
        assert job["outputs"] == made
        assert [(e["attempt"], e["status"], e["result"]) for e in job["earlier"]] == [
            (1, "success", made)
        ]


def test_the_api_retries_a_foreach_step_by_its_name(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """POST /api/v1/jobs/RUN:STEP/retry names a step as `flows retry RUN:STEP` does: a foreach
    step's failed items (RUN:STEP[i]) are put back."""
    flow = tmp_path / "fe.yaml"
    flow.write_text(
        "version: 1\nname: fe\nqueue: fe\ndefaults: {retry: {attempts: 1, delay: 0}}\n"
        "steps:\n  each:\n    foreach: {items: [1, 2, 3], as: n}\n"
        '    run: test "${{ n }}" != 2\n'
    )
    assert flows(cli, "run", "--run-id", "f1", str(flow)).exit_code == 1
    with assert_unchanged(redis_client):
        unknown = api.post("/api/v1/jobs/f1:eech/retry")
    assert unknown.status == 400 and "run f1 has no step or job eech" in str(unknown.body)
    retried = api.post("/api/v1/jobs/f1:each/retry")
    assert retried.status == 200, retried.body
    assert retried.body == {"jid": "f1:each", "run": "f1", "retried": 1}
    assert [client.jobs[f"f1:each[{i}]"].state for i in range(3)] == [
        "complete",
        "waiting",
        "complete",
    ]


def test_a_step_retried_alone_in_a_canceled_run_waits_for_the_approval_it_needs(
    cli: CliRunner, client: Client, api: Api, tmp_path: Path
) -> None:
    """A run canceled while its gate awaited approval: gate and ship are canceled, both
    offered a retry. Retrying ship alone (`flows retry RUN:ship`, the API, the page's Retry
    step) brings back the approval it needs too, so ship never runs unapproved."""
    path = write_flow(tmp_path, FLOW, TASKS)
    for run_id, retry in (
        ("g1", lambda: flows(cli, "retry", "g1:ship").exit_code == 0),
        ("g2", lambda: api.post("/api/v1/jobs/g2:ship/retry").status == 200),
    ):
        assert flows(cli, "run", "--detach", "--run-id", run_id, str(path)).exit_code == 0
        work(cli, tmp_path)
        assert flows(cli, "cancel", run_id).exit_code == 0
        shown = steps(cli, run_id)
        assert shown["ship"]["status"] == "canceled" and shown["ship"]["actions"] == ["retry"]
        assert retry()
        work(cli, tmp_path)
        shown = steps(cli, run_id)
        assert (shown["gate"]["status"], shown["ship"]["status"]) == ("awaiting", "waiting")
        assert shown["ship"]["attempts"] == 0  # not run
        assert flows(cli, "approve", run_id, "gate", "--note", "now").exit_code == 0
        work(cli, tmp_path)
        assert status_json(cli, run_id)["status"] == "succeeded"
