"""``flows cancel`` of a run whose sub-flow step waits for its child run: the summary counts the
child run's jobs it cancels too, through click's runner against the session's real server."""

from __future__ import annotations

import json

from cli_support import flows

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
    assert canceled.stdout == (
        f"run {PARENT}: canceled 5 job(s): 2 of its own, 3 of child run {CHILD}\n"
    )
    assert client.jobs.get(f"{CHILD}:a") is None


def test_the_json_of_a_canceled_parent_run_counts_its_child_runs_jobs(
    url: str, client: Client
) -> None:
    _parent_waiting_for_its_child(client)
    canceled = flows("cancel", PARENT, "--redis", url, "--json")
    assert canceled.exit_code == 0, canceled.output
    assert json.loads(canceled.stdout) == {
        "runs": {PARENT: 5},
        "child_runs": {CHILD: 3},
        "jobs": [],
    }
