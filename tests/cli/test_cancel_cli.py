"""``flows cancel`` of a run whose sub-flow step waits for its child run: the summary counts the
child run's jobs it cancels too (the engine's one count, at every surface), through click's
runner and a real ``flows ui`` against the session's real server."""

from __future__ import annotations

import json

from cli_support import flows
from ui_support import TOKEN, Api, serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client

PARENT = "p@1"
STEP = f"{PARENT}:child"
CHILD = f"{PARENT}.child"


def _parent_waiting_for_its_child(client: Client) -> None:
    """A parent run of a sub-flow step and a step after it; the sub-flow step waits for its
    child run of three jobs, the first of which is running."""
    jobs = [
        {"jid": STEP, "queue": "q", "klass": "flows.runtime.subflow.run", "data": "{}"},
        {"jid": f"{PARENT}:after", "queue": "q", "klass": "K", "data": "{}", "depends": [STEP]},
    ]
    client.engine.call("flow.submit", PARENT, json.dumps({"flow": "p"}), json.dumps(jobs))
    [step] = client.queues["q"].pop()
    assert step.jid == STEP
    child = [
        {"jid": f"{CHILD}:{name}", "queue": "c", "klass": "K", "data": "{}"}
        for name in ("a", "b", "c")
    ]
    record = {"flow": "c", "parent_run": PARENT, "parent_step": "child"}
    reply = client.engine.call(
        "subflow.wait", STEP, client.worker_name, "q", CHILD, json.dumps(record), json.dumps(child)
    )
    assert reply == "waiting"
    client.queues["c"].pop()


def test_canceling_a_parent_run_counts_its_child_runs_jobs(url: str, client: Client) -> None:
    _parent_waiting_for_its_child(client)
    canceled = flows("cancel", PARENT, "--redis", url)
    assert canceled.exit_code == 0, canceled.output
    # The engine's one count: the run's two jobs and its child run's three.
    assert canceled.stdout == f"run {PARENT}: canceled 5 job(s)\n"
    assert client.jobs.get(f"{CHILD}:a") is None


def test_the_json_of_a_canceled_parent_run_counts_its_child_runs_jobs(
    url: str, client: Client
) -> None:
    _parent_waiting_for_its_child(client)
    canceled = flows("cancel", PARENT, "--redis", url, "--json")
    assert canceled.exit_code == 0, canceled.output
    assert json.loads(canceled.stdout) == {"runs": {PARENT: 5}, "jobs": []}


def test_the_api_gives_the_same_one_count_of_a_parent_run_and_its_child(client: Client) -> None:
    _parent_waiting_for_its_child(client)
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        canceled = Api(base).post(f"/api/v1/runs/{PARENT}/cancel")
    assert canceled.status == 200, canceled.body
    assert canceled.body == {"id": PARENT, "canceled": 5}
    assert client.jobs.get(f"{CHILD}:a") is None
