"""A sub-flow step and its child run in the REST API and on the run pages: linked both ways."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from ui_support import Api, serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

PARENT = "parent@20261126T020000Z-abcdef"
CHILD = f"{PARENT}.child"


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="subflow-test")


def waiting_step(client: Client) -> None:
    """A parent run whose sub-flow step waits for its child run (as a worker leaves it)."""
    jobs = [
        {"jid": f"{PARENT}:child", "queue": "q", "klass": "flows.runtime.subflow.run", "data": "{}"}
    ]
    client.engine.call("flow.submit", PARENT, json.dumps({"flow": "parent"}), json.dumps(jobs))
    [job] = client.queues["q"].pop()
    record = {"flow": "report", "parent_run": PARENT, "parent_step": "child", "depth": 1}
    child_jobs = [{"jid": f"{CHILD}:count", "queue": "reports", "klass": "K", "data": "{}"}]
    reply = client.engine.call(
        "subflow.wait", job.jid, "subflow-test", "q", CHILD, json.dumps(record),
        json.dumps(child_jobs),
    )  # fmt: skip
    assert reply == "waiting"


def test_the_api_and_the_pages_link_parent_and_child(client: Client) -> None:
    waiting_step(client)
    with serve(client, Auth(None, reads_open=True)) as base:
        api = Api(base, token=None)
        parent = api.get(f"/api/v1/runs/{quote(PARENT)}").body
        assert parent["status"] == "running"
        [step] = parent["steps"]
        assert (step["step"], step["status"], step["child"]) == ("child", "running", CHILD)
        child = api.get(f"/api/v1/runs/{quote(CHILD)}").body
        assert (child["parent_run"], child["parent_step"], child["depth"]) == (PARENT, "child", 1)

        page = api.get(f"/runs/{quote(PARENT)}").body
        assert f'<a href="/runs/{quote(CHILD, safe="")}">{CHILD}</a>' in page
        page = api.get(f"/runs/{quote(CHILD)}").body
        assert f'Child run of <a href="/runs/{quote(PARENT, safe="")}">{PARENT}</a>' in page
        # Retrying the child alone leaves a failed parent step failed: the page says so.
        note = page.split('id="parent-run"', 1)[1].split("</p>", 1)[0]
        assert "stays failed until the parent run is retried" in note, note
        assert f"<code>flows retry {PARENT}</code>" in note, note

        # the run list counts the child under its parent, and lists it only with `all`
        listed = api.get("/api/v1/runs").body["items"]
        assert [(r["id"], r["children"]) for r in listed] == [(PARENT, 1)]
        everything = api.get("/api/v1/runs?all=true").body["items"]
        assert {r["id"] for r in everything} == {PARENT, CHILD}
        assert CHILD not in api.get("/runs").body and CHILD in api.get("/runs?all=true").body
