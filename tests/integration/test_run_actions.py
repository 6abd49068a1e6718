"""End to end: one answer everywhere for a run's status and its allowed actions. A refused
retry (of a completed job, of an awaiting one) changes nothing and exits 1, `flows approve`
still works after it; `flows rerun --downstream` runs a step and its dependents again with
earlier attempts' logs kept; `flows status --json` and the API return one document; the run
page draws the run's graph with its flow file deleted; every state a user meets (running,
waiting, a retry's delay, failed, retried, awaiting, approved, rejected, cached, skipped,
canceled, a failed child run or fan-out item, a timed-out wait, buried) shows the same statuses
and actions on the command line, the API and the run page, and each action does what it says
or is refused by both in the same words."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged
from test_flows_run import flows, status_json, write_flow
from ui_support import TOKEN, Api, serve

from flows.runs import statuses
from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.errors import without_command

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
    assert unknown.status == 404, unknown.body
    assert unknown.body["detail"] == "run f1 has no step 'eech' (did you mean 'each'?)"
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


# -- every state a user meets, on every surface ---------------------------------------------------
#
# Each state is built on the real engine (a worker of its own queue, `flows` commands, the
# engine's own sweep of timed-out waits); the run's and each step's status and actions are read
# from `flows status --json`, the API and the run page, and every action is tried from the
# command line and the API: one not offered is refused by both in the same words, changing
# nothing, and one offered does what it says (each surface on a fresh copy of the state).

HEAD = "version: 1\nname: {name}\nqueue: {queue}\ndefaults: {{retry: {{attempts: 1, delay: 0}}}}\n"
STATE_FLOWS = {
    "two": "steps:\n  a: {run: 'true'}\n  b: {run: 'true', needs: [a]}\n",
    "delay": "steps:\n  a: {run: 'false', retry: {attempts: 3, delay: 3600}}\n",
    "fail": (
        "steps:\n  a: {run: 'true'}\n  b: {run: 'false', needs: [a]}\n"
        "  c: {run: 'true', needs: [b]}\n"
    ),
    "wait": (
        "steps:\n  a: {run: 'true'}\n  gate: {needs: [a], wait: {signal: ok, timeout: 1h}}\n"
        "  c: {run: 'true', needs: [gate]}\n"
    ),
    # awaiting beside a failed step: a retry puts the failure back, never the approval
    "side": (
        "steps:\n  a: {run: 'false'}\n  gate: {wait: {signal: ok}}\n"
        "  c: {run: 'true', needs: [a, gate]}\n"
    ),
    # rejected: signaled with a decision that its next step's `if:` turns down
    "decide": (
        "steps:\n  gate: {wait: {signal: ok}, outputs: [decision]}\n"
        "  c: {run: 'true', needs: [gate], if: \"${{ steps.gate.outputs.decision == 'go' }}\"}\n"
    ),
    "cache": "steps:\n  a: {run: 'echo hi', cache: {key: k1, ttl: 1d}}\n"
    "  b: {run: 'true', needs: [a]}\n",
    "skip": "steps:\n  a: {run: 'true', if: \"${{ 1 == 2 }}\"}\n  b: {run: 'true', needs: [a]}\n",
    "fan": (
        "steps:\n  each:\n    foreach: {items: [1, 2, 3], as: n}\n"
        "    run: test \"${{ n }}\" != 2\n  after: {run: 'true', needs: [each]}\n"
    ),
    "parent": "steps:\n  kid: {flow: child.yaml}\n  after: {run: 'true', needs: [kid]}\n",
    "child": "steps:\n  x: {run: 'false'}\n",
}


class States:
    """Builds each state as run ``run_id`` of a flow on a queue of its own."""

    def __init__(self, cli: CliRunner, client: Client, folder: Path) -> None:
        self.cli, self.client, self.folder = cli, client, folder

    def submit(self, flow: str, run_id: str) -> None:
        for name in (flow, "child"):
            text = HEAD.format(name=name, queue=f"q-{run_id}") + STATE_FLOWS[name]
            (self.folder / f"{name}.yaml").write_text(text)
        done = flows(self.cli, "run", "--detach", "--run-id", run_id, f"{self.folder}/{flow}.yaml")
        assert done.exit_code == 0, done.output

    def work(self, run_id: str) -> None:
        args = ("-q", f"q-{run_id}", "--burst", "--processes", "0", "--path", str(self.folder))
        done = flows(self.cli, "worker", *args)
        assert done.exit_code == 0, done.output

    def worked(self, flow: str, run_id: str) -> None:
        self.submit(flow, run_id)
        self.work(run_id)

    def command(self, *args: str) -> None:
        done = flows(self.cli, *args)
        assert done.exit_code == 0, done.output

    def build(self, state: str, run_id: str) -> None:
        getattr(self, state.replace(" ", "_").replace("-", "_"))(run_id)

    def running(self, run_id: str) -> None:
        self.submit("two", run_id)
        self.client.queues[f"q-{run_id}"].pop()

    def retry_delay(self, run_id: str) -> None:
        self.worked("delay", run_id)

    def failed(self, run_id: str) -> None:
        self.worked("fail", run_id)

    def retried(self, run_id: str) -> None:
        self.failed(run_id)
        self.command("retry", "--detach", run_id)

    def awaiting(self, run_id: str) -> None:
        self.worked("wait", run_id)

    def approved(self, run_id: str) -> None:
        self.awaiting(run_id)
        self.command("approve", run_id, "gate", "--note", "fine")
        self.work(run_id)

    def awaiting_beside_a_failure(self, run_id: str) -> None:
        self.worked("side", run_id)

    def awaiting_a_decision(self, run_id: str) -> None:
        self.submit("decide", run_id)  # its gate needs nothing: it awaits at once

    def rejected(self, run_id: str) -> None:
        self.submit("decide", run_id)
        self.command("signal", run_id, "gate", "--data", DECISION)
        self.work(run_id)

    def cached(self, run_id: str) -> None:
        self.worked("cache", f"{run_id}-first")
        self.worked("cache", run_id)

    def skipped(self, run_id: str) -> None:
        self.worked("skip", run_id)

    def canceled(self, run_id: str) -> None:
        self.submit("two", run_id)
        [first] = self.client.queues[f"q-{run_id}"].pop()
        first.complete()
        self.command("cancel", run_id)

    def canceled_awaiting(self, run_id: str) -> None:
        self.awaiting(run_id)
        self.command("cancel", run_id)

    def child_failed(self, run_id: str) -> None:
        self.submit("parent", run_id)
        self.work(run_id)  # the step starts its child run, which fails,
        self.work(run_id)  # and then the step fails

    def fan_out_item_failed(self, run_id: str) -> None:
        self.worked("fan", run_id)

    def timed_out_wait(self, run_id: str) -> None:
        self.awaiting(run_id)
        self.client.engine.call("wait.sweep", 100, now=time.time() + 7200)

    def buried(self, run_id: str) -> None:
        self.submit("two", run_id)
        self.client.engine.call("bury", f"{run_id}:a", "ops")


Steps = dict[str, tuple[str, list[str]]]

# state -> (the run's status and actions, each step's status and actions)
MATRIX: dict[str, tuple[str, list[str], Steps]] = {
    "running": ("running", ["cancel"], {"a": ("running", []), "b": ("waiting", [])}),
    "retry-delay": ("running", ["cancel"], {"a": ("waiting", [])}),
    "failed": (
        "failed",
        ["retry", "rerun", "cancel"],
        {
            "a": ("success", ["rerun"]),
            "b": ("failed", ["retry", "rerun"]),
            "c": ("upstream_failed", []),
        },
    ),
    "retried": (
        "running",
        ["cancel"],
        {"a": ("success", []), "b": ("waiting", []), "c": ("waiting", [])},
    ),
    "awaiting": (
        "running",
        ["cancel"],
        {"a": ("success", []), "gate": ("awaiting", ["signal", "approve"]), "c": ("waiting", [])},
    ),
    "approved": (
        "succeeded",
        ["rerun"],
        {"a": ("success", ["rerun"]), "gate": ("success", ["rerun"]), "c": ("success", ["rerun"])},
    ),
    "awaiting-beside-a-failure": (
        "running",
        ["retry", "cancel"],
        {
            "a": ("failed", ["retry"]),
            "gate": ("awaiting", ["signal", "approve"]),
            "c": ("upstream_failed", []),
        },
    ),
    # its wait declares an output an approval does not give: it is signaled, never approved
    "awaiting-a-decision": (
        "running",
        ["cancel"],
        {"gate": ("awaiting", ["signal"]), "c": ("waiting", [])},
    ),
    "rejected": (
        "succeeded",
        ["rerun"],
        {"gate": ("success", ["rerun"]), "c": ("skipped", ["rerun"])},
    ),
    "cached": ("succeeded", ["rerun"], {"a": ("cached", ["rerun"]), "b": ("success", ["rerun"])}),
    "skipped": ("succeeded", ["rerun"], {"a": ("skipped", ["rerun"]), "b": ("skipped", ["rerun"])}),
    "canceled": (
        "canceled",
        ["retry", "rerun"],
        {"a": ("success", ["rerun"]), "b": ("canceled", ["retry"])},
    ),
    "canceled-awaiting": (
        "canceled",
        ["retry", "rerun"],
        {
            "a": ("success", ["rerun"]),
            "gate": ("canceled", ["retry"]),
            "c": ("canceled", ["retry"]),
        },
    ),
    "child-failed": (
        "failed",
        ["retry", "rerun", "cancel"],
        {"kid": ("failed", ["retry", "rerun"]), "after": ("upstream_failed", [])},
    ),
    "fan-out-item-failed": (
        "failed",
        ["retry", "rerun", "cancel"],
        {"each": ("failed", ["retry", "rerun"]), "after": ("upstream_failed", [])},
    ),
    "timed-out-wait": (
        "failed",
        ["retry", "rerun", "cancel"],
        {
            "a": ("success", ["rerun"]),
            "gate": ("failed", ["retry", "rerun"]),
            "c": ("upstream_failed", []),
        },
    ),
    "buried": (
        "blocked",
        ["rerun", "cancel"],
        {"a": ("buried", ["kick"]), "b": ("upstream_failed", [])},
    ),
}

# What each offered action leaves (state, action, step) -> the run's status and each step's:
# a retry never runs what completed nor touches an approval, a cancel keeps what completed.
DONE: dict[tuple[str, str, str], tuple[str, dict[str, str]]] = {
    ("running", "cancel", ""): ("canceled", {"a": "canceled", "b": "canceled"}),
    ("retry-delay", "cancel", ""): ("canceled", {"a": "canceled"}),
    ("failed", "retry", ""): ("running", {"a": "success", "b": "waiting", "c": "waiting"}),
    ("failed", "retry", "b"): ("running", {"a": "success", "b": "waiting", "c": "waiting"}),
    ("failed", "rerun", "a"): ("running", {"a": "waiting", "b": "failed", "c": "upstream_failed"}),
    ("failed", "rerun", "b"): ("running", {"a": "success", "b": "waiting", "c": "waiting"}),
    ("failed", "cancel", ""): ("canceled", {"a": "success", "b": "failed", "c": "canceled"}),
    ("retried", "cancel", ""): ("canceled", {"a": "success", "b": "canceled", "c": "canceled"}),
    ("awaiting", "cancel", ""): ("canceled", {"a": "success", "gate": "canceled", "c": "canceled"}),
    ("awaiting", "signal", "gate"): (
        "running",
        {"a": "success", "gate": "success", "c": "waiting"},
    ),
    ("awaiting", "approve", "gate"): (
        "running",
        {"a": "success", "gate": "success", "c": "waiting"},
    ),
    ("approved", "rerun", "a"): ("running", {"a": "waiting", "gate": "success", "c": "success"}),
    ("approved", "rerun", "gate"): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "success"},
    ),
    ("approved", "rerun", "c"): ("running", {"a": "success", "gate": "success", "c": "waiting"}),
    ("awaiting-beside-a-failure", "retry", ""): (
        "running",
        {"a": "waiting", "gate": "awaiting", "c": "waiting"},
    ),
    ("awaiting-beside-a-failure", "retry", "a"): (
        "running",
        {"a": "waiting", "gate": "awaiting", "c": "waiting"},
    ),
    ("awaiting-beside-a-failure", "cancel", ""): (
        "canceled",
        {"a": "failed", "gate": "canceled", "c": "canceled"},
    ),
    ("awaiting-beside-a-failure", "signal", "gate"): (
        "failed",
        {"a": "failed", "gate": "success", "c": "upstream_failed"},
    ),
    ("awaiting-beside-a-failure", "approve", "gate"): (
        "failed",
        {"a": "failed", "gate": "success", "c": "upstream_failed"},
    ),
    ("rejected", "rerun", "gate"): ("running", {"gate": "awaiting", "c": "skipped"}),
    ("rejected", "rerun", "c"): ("running", {"gate": "success", "c": "waiting"}),
    ("cached", "rerun", "a"): ("running", {"a": "waiting", "b": "success"}),
    ("cached", "rerun", "b"): ("running", {"a": "cached", "b": "waiting"}),
    ("skipped", "rerun", "a"): ("running", {"a": "waiting", "b": "skipped"}),
    ("skipped", "rerun", "b"): ("running", {"a": "skipped", "b": "waiting"}),
    ("canceled", "retry", ""): ("running", {"a": "success", "b": "waiting"}),
    ("canceled", "retry", "b"): ("running", {"a": "success", "b": "waiting"}),
    ("canceled", "rerun", "a"): ("running", {"a": "waiting", "b": "canceled"}),
    ("canceled-awaiting", "retry", ""): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "waiting"},
    ),
    ("canceled-awaiting", "retry", "gate"): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "canceled"},
    ),
    ("canceled-awaiting", "retry", "c"): (  # with the approval it needs
        "running",
        {"a": "success", "gate": "awaiting", "c": "waiting"},
    ),
    ("canceled-awaiting", "rerun", "a"): (
        "running",
        {"a": "waiting", "gate": "canceled", "c": "canceled"},
    ),
    ("child-failed", "retry", ""): ("running", {"kid": "waiting", "after": "waiting"}),
    ("child-failed", "retry", "kid"): ("running", {"kid": "waiting", "after": "waiting"}),
    ("child-failed", "rerun", "kid"): ("running", {"kid": "waiting", "after": "waiting"}),
    ("child-failed", "cancel", ""): ("canceled", {"kid": "failed", "after": "canceled"}),
    ("fan-out-item-failed", "retry", ""): ("running", {"each": "waiting", "after": "waiting"}),
    ("fan-out-item-failed", "retry", "each"): ("running", {"each": "waiting", "after": "waiting"}),
    ("fan-out-item-failed", "rerun", "each"): ("running", {"each": "waiting", "after": "waiting"}),
    ("fan-out-item-failed", "cancel", ""): ("canceled", {"each": "failed", "after": "canceled"}),
    ("timed-out-wait", "retry", ""): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "waiting"},
    ),
    ("timed-out-wait", "retry", "gate"): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "waiting"},
    ),
    ("timed-out-wait", "rerun", "a"): (
        "running",
        {"a": "waiting", "gate": "failed", "c": "upstream_failed"},
    ),
    ("timed-out-wait", "rerun", "gate"): (
        "running",
        {"a": "success", "gate": "awaiting", "c": "waiting"},
    ),
    ("timed-out-wait", "cancel", ""): (
        "canceled",
        {"a": "success", "gate": "failed", "c": "canceled"},
    ),
    ("awaiting-a-decision", "cancel", ""): ("canceled", {"gate": "canceled", "c": "canceled"}),
    ("awaiting-a-decision", "signal", "gate"): ("running", {"gate": "success", "c": "waiting"}),
    ("buried", "cancel", ""): ("canceled", {"a": "canceled", "b": "canceled"}),
    ("buried", "kick", "a"): ("running", {"a": "waiting", "b": "waiting"}),
}

RUN_ACTIONS = ("retry", "cancel")  # a run's re-run is its steps'
DECISION = '{"decision": "no"}'  # what every signal gives: the one output a wait here declares
STEP_ACTIONS = ("retry", "rerun", "signal", "approve", "kick")


def cli_action(cli: CliRunner, action: str, run_id: str, step: str) -> tuple[bool, str]:
    """The action from the command line: whether it was done, and the line it said."""
    args = {
        ("retry", False): ("retry", "--detach", run_id),
        ("retry", True): ("retry", f"{run_id}:{step}"),
        ("cancel", False): ("cancel", run_id),
        ("rerun", True): ("rerun", "--detach", run_id, step),
        ("signal", True): ("signal", run_id, step, "--data", DECISION),
        ("approve", True): ("approve", run_id, step),
        ("kick", True): ("kick", "--step", f"{run_id}:{step}"),
    }[action, bool(step)]
    done = flows(cli, *args)
    assert "Traceback" not in done.output and done.exit_code in (0, 1), done.output
    return done.exit_code == 0, done.output.strip().removeprefix("Error: ")


def api_action(api: Api, action: str, run_id: str, step: str) -> tuple[bool, str]:
    """The action through the API (as the page's button posts it): done, or its refusal."""
    path = {
        ("retry", False): f"/api/v1/runs/{run_id}/retry",
        ("retry", True): f"/api/v1/jobs/{run_id}:{step}/retry",
        ("cancel", False): f"/api/v1/runs/{run_id}/cancel",
    }.get((action, bool(step)), f"/api/v1/runs/{run_id}/steps/{step}/{action}")
    reply = api.post(path, {"data": json.loads(DECISION)} if action == "signal" else None)
    assert reply.status in (200, 409, 422), reply.body
    return reply.status == 200, "" if reply.status == 200 else without_command(reply.body["detail"])


def page_actions(api: Api, run_id: str, steps: list[str]) -> tuple[str, list[str], Steps]:
    """The run page's status and its shown run buttons; each step's panel badge and buttons
    (Approve, and the `flows signal` command a signal is given with)."""
    html = str(api.get(f"/runs/{run_id}").body)
    status = re.search(r'id="run" data-run="[^"]*" data-status="(\w+)"', html)
    assert status is not None
    shown = [
        a for a, hidden in re.findall(r'data-run-action="(\w+)"( hidden)?', html) if not hidden
    ]
    words = {
        "Retry step": "retry",
        "Re-run step": "rerun",
        "Kick step": "kick",
        "Approve": "approve",
    }
    panels: Steps = {}
    for step in steps:
        panel = str(api.get(f"/runs/{run_id}/steps/{step}").body)
        badge = re.search(r"<h2>[^<]*<span class=\"badge st-(\w+)\"", panel)
        assert badge is not None, panel
        own = panel.split('id="step-actions">', 1)[1].split("</p>", 1)[0]  # not an item's
        labels = re.findall(r">([^<]+)</button>", own) + re.findall(r">(Approve)</button>", panel)
        buttons = [words[label] for label in labels]
        if "flows signal" in panel:
            buttons.append("signal")
        order = ("retry", "rerun", "cancel", "signal", "approve", "kick")
        panels[step] = (badge.group(1), sorted(buttons, key=order.index))
    return status.group(1), shown, panels


def decided(document: dict[str, Any]) -> tuple[str, list[str], Steps]:
    steps = {s["step"]: (s["status"], list(s["actions"])) for s in document["steps"]}
    return document["status"], list(document["actions"]), steps


@pytest.mark.parametrize("state", list(MATRIX))
def test_every_surface_shows_and_does_what_the_engine_decides(
    state: str, cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis, tmp_path: Path
) -> None:
    states = States(cli, client, tmp_path)
    states.build(state, "m")
    document = status_json(cli, "m")
    assert api.get("/api/v1/runs/m").body == document
    status, actions, steps = MATRIX[state]
    assert decided(document) == (status, actions, steps)
    # the page: the run's badge and buttons (its re-run is a step's), each step's panel
    page_status, shown, panels = page_actions(api, "m", list(steps))
    assert (page_status, shown) == (status, [a for a in actions if a in RUN_ACTIONS])
    assert panels == steps
    # each job: `flows job --json`, the API's job and the run's read say the same actions
    for step in document["steps"]:
        for job in step["jobs"]:
            if job["state"] is None:
                continue  # canceled with its run: no job left to read
            shown_job = json.loads(flows(cli, "job", job["jid"], "--json").stdout)
            assert shown_job["actions"] == api.get(f"/api/v1/jobs/{job['jid']}").body["actions"]
            assert shown_job["actions"] == job["actions"]

    tried = [(a, "") for a in RUN_ACTIONS] + [(a, s) for s in steps for a in STEP_ACTIONS]
    for action, step in tried:
        offered = action in (steps[step][1] if step else actions)
        if not offered:
            with assert_unchanged(redis_client):
                by_cli = cli_action(cli, action, "m", step)
                by_api = api_action(api, action, "m", step)
            assert by_cli == by_api == (False, by_cli[1]), (action, step)
            continue
        for surface in ("cli", "api"):
            run_id = f"m-{action}-{step}-{surface}"
            states.build(state, run_id)
            if surface == "cli":
                done = cli_action(cli, action, run_id, step)
            else:
                done = api_action(api, action, run_id, step)
            assert done[0], (surface, action, step, done)
            after = decided(status_json(cli, run_id))
            words = {name: word for name, (word, _) in after[2].items()}
            assert (after[0], words) == DONE[state, action, step], (surface, action, step)


def test_a_job_of_a_run_is_offered_its_cancel_where_the_engine_takes_it(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """`flows cancel RUN:STEP` and the API's job cancel take a job of a run alone until it
    ends, unless a job needs it: its actions (`flows job --json`, the API's job) and its page
    (Cancel job) say so, and a cancel not offered is refused by both in the same words."""
    text = "version: 1\nname: jc\nqueue: jc\ndefaults: {retry: {attempts: 1, delay: 0}}\nsteps:\n"
    path = tmp_path / "jc.yaml"
    path.write_text(
        text + "  a: {run: 'false'}\n  b: {run: 'true'}\n  c: {run: 'true', needs: [b]}\n"
    )
    assert flows(cli, "run", "--detach", "--run-id", "jc", str(path)).exit_code == 0
    [failed] = [job for job in client.queues["jc"].pop(2) if job.jid == "jc:a"]
    failed.fail("boom", "it broke")

    def offered(jid: str) -> tuple[list[str], list[str], bool]:
        shown = json.loads(flows(cli, "job", jid, "--json").stdout)["actions"]
        return (
            shown,
            api.get(f"/api/v1/jobs/{jid}").body["actions"],
            ">Cancel job<" in str(api.get(f"/jobs/{jid}").body),
        )

    assert offered("jc:a") == (["retry"], ["retry"], False)  # it ended: a retry puts it back
    assert offered("jc:b") == ([], [], False)  # running, but jc:c needs it
    assert offered("jc:c") == (["cancel"], ["cancel"], True)
    for jid, words in (
        ("jc:a", "job jc:a of run jc has failed: cancel stops what has not ended"),
        ("jc:b", "jc:c is a dependent of jc:b but is not mentioned to be canceled"),
    ):
        with assert_unchanged(redis_client):
            by_cli = flows(cli, "cancel", jid)
            by_api = api.post(f"/api/v1/jobs/{jid}/cancel")
        assert by_cli.exit_code == 1 and by_api.status == 409, (by_cli.output, by_api.body)
        assert words in by_cli.output and words in by_api.body["detail"]
        assert by_cli.output.strip() == "Error: " + without_command(by_api.body["detail"])
    assert api.post("/api/v1/jobs/jc:c/cancel").body == {"canceled": ["jc:c"]}
    assert steps(cli, "jc")["c"]["status"] == "canceled"
