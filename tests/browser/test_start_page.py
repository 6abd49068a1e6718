"""The dashboard's Run page in a real browser: a flow that is not scheduled is started with a
form built from its params (a list for a param's choices) by a user with the operator role (a
viewer's click is refused and starts nothing), and the Audit and Notifications pages show what
happened."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import uvicorn
from helpers import assert_unchanged

from flows.access.users import Users
from flows.ui.app import create_app
from flows.ui.roles import RoleAuth
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: reload
params:
  day: {type: string, description: the day to load}
  rows: {type: int, default: 10}
  full: {type: bool, default: false}
  tables: {type: array, default: [a, b]}
  target: {type: string, choices: [staging, prod], default: staging}
  workers: {type: int, choices: [1, 2, 4], default: 1}
steps:
  load: {run: "true"}
"""


@pytest.fixture
def base(client: Client, tmp_path: Path) -> Iterator[str]:
    (tmp_path / "reload.yaml").write_text(FLOW)
    (tmp_path / "broken.yaml").write_text("version: 1\nname: broken\nsteps: {}\n")
    app = create_app(client, RoleAuth(None, reads_open=True, users=Users(client)), tmp_path)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def test_an_operator_starts_an_unscheduled_flow_from_its_form(
    page: Any, base: str, client: Client, redis_client: redis.Redis, shoot: Any
) -> None:
    users = Users(client)
    viewer, operator = users.add("vera", "viewer"), users.add("otto", "operator")
    page.goto(f"{base}/start")
    section = page.locator('section[data-flow-file="reload.yaml"]')
    assert "the day to load" in section.inner_text()
    assert "steps" in page.locator('section[data-flow-file="broken.yaml"]').inner_text()
    section.locator('input[name="day"]').fill("2026-11-28")
    section.locator('input[name="rows"]').fill("25")
    section.locator('input[name="full"]').check()
    # a param with choices is a list to pick from, its default picked
    target = section.locator('select[name="target"]')
    assert target.input_value() == "staging"
    assert target.locator("option").all_inner_texts() == ["staging", "prod"]
    target.select_option("prod")
    section.locator('select[name="workers"]').select_option("4")
    page.fill("#token", viewer)
    with assert_unchanged(redis_client):
        section.get_by_role("button", name="Run").click()
        page.wait_for_selector("#flash.error")
    assert "vera is a viewer" in page.inner_text("#flash")
    page.fill("#token", operator)
    section.get_by_role("button", name="Run").click()
    page.wait_for_selector("#flash.ok a")
    run_id = page.inner_text("#flash a")
    record = json.loads(client.engine.call("run.get", run_id))
    assert json.loads(record["params"]) == {
        "day": "2026-11-28", "rows": 25, "full": True, "tables": ["a", "b"],
        "target": "prod", "workers": 4,
    }  # fmt: skip
    shoot(page, "start")
    page.goto(f"{base}/audit")
    row = page.locator("table#audit tbody tr").first.inner_text()
    assert "otto" in row and "start_flow" in row and "flow=reload" in row
    page.goto(f"{base}/notifications")
    assert "Every notification was delivered." in page.inner_text("main")
    assert page.errors == []


def test_a_flow_that_became_invalid_is_refused_in_readable_words(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    operator = Users(client).add("otto", "operator")
    page.goto(f"{base}/start")
    section = page.locator('section[data-flow-file="reload.yaml"]')
    section.locator('input[name="day"]').fill("2026-11-28")
    page.fill("#token", operator)
    # the file goes bad after the page was built: the API's 422 carries its findings
    (tmp_path / "reload.yaml").write_text("version: 1\nname: reload\nsteps: {}\n")
    with assert_unchanged(redis_client):
        section.get_by_role("button", name="Run").click()
        page.wait_for_selector("#flash.error")
    said = page.inner_text("#flash")
    assert "[object Object]" not in said
    assert "Could not run reload: flow 'reload' does not validate: findings: " in said
    assert "reload.yaml:3:" in said and "steps" in said
    assert page.errors == []


def test_every_shape_of_a_refusal_reads_as_text(page: Any, base: str) -> None:
    page.goto(f"{base}/start")
    shapes = {
        "text": "no flow named 'x'",
        "validation": [
            {"loc": ["body", "params"], "msg": "Input should be a valid dictionary"},
            {"loc": ["query", "limit"], "msg": "too big"},
        ],
        "object": {"message": "it failed", "reason": {"queue": "q1"}, "count": 2},
        "markup": "<img src=x onerror=alert(1)>",
        "nothing": None,
    }
    shown = page.evaluate(
        "(shapes) => Object.fromEntries(Object.entries(shapes).map("
        "([k, v]) => [k, detailText(v)]))",
        shapes,
    )
    assert shown == {
        "text": "no flow named 'x'",
        "validation": "body.params: Input should be a valid dictionary; query.limit: too big",
        "object": "it failed: reason: queue: q1; count: 2",
        "markup": "<img src=x onerror=alert(1)>",
        "nothing": "",
    }
    # shown as text: markup in a refusal is its characters, never elements
    page.evaluate("() => flash(detailText('<img src=x onerror=alert(1)>'), false)")
    assert page.locator("#flash img").count() == 0
    assert page.inner_text("#flash") == "<img src=x onerror=alert(1)>"
