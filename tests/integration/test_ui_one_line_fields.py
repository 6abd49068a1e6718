"""Short one-line fields of the API's bodies (who signals or approves: ``by``; a schedule
pause's ``note``) refuse control characters other than tab with 422 naming the field, over
real HTTP on a real server, and change nothing; a tab is taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, register_flow, serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.service.schedules import Schedules

FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
steps:
  only: {{run: "true"}}
"""

EXPECTED = "one line of text is expected (a tab is allowed)"


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-one-line")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("ada\nadmin", "\\n"),
        ("ada\r", "\\r"),
        ("\x1b[31mada", "\\x1b"),
        ("ada\x00", "\\x00"),
        ("ada\x7f", "\\x7f"),
        ("ada\x85", "\\x85"),
        ("ada\u2029", "\\u2029"),
    ],
)
@pytest.mark.parametrize("action", ["signal", "approve"])
def test_who_signals_is_one_line(
    api: Api, redis_client: redis.Redis, action: str, value: str, shown: str
) -> None:
    with assert_unchanged(redis_client):
        reply = api.post(f"/api/v1/runs/r1/steps/gate/{action}", {"by": value})
    assert reply.status == 422, reply.body
    assert reply.body == {"detail": f"body.by: holds a control character ({shown}): {EXPECTED}"}


def test_who_signals_may_hold_a_tab(api: Api) -> None:
    # taken: refused only for the run that is not there
    reply = api.post("/api/v1/runs/r1/steps/gate/signal", {"by": "ada\tops"})
    assert reply.status == 404, reply.body


def test_a_pause_note_is_one_line(
    api: Api, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    name = register_flow(client, tmp_path, FLOW, "pause")["name"]
    with assert_unchanged(redis_client):
        reply = api.post(f"/api/v1/schedules/{name}/pause", {"note": "db\nmigration"})
    assert reply.status == 422, reply.body
    assert reply.body == {"detail": f"body.note: holds a control character (\\n): {EXPECTED}"}
    reply = api.post(f"/api/v1/schedules/{name}/pause", {"note": "db\tmigration"})
    assert reply.status == 200, reply.body
    registration = Schedules(client).get(name, skips=0)
    assert registration is not None and registration.pause_note == "db\tmigration"
