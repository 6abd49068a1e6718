"""``POST /api/v1/runs/{run}/steps/{step}/signal`` and ``.../approve``: a wait step signaled or
approved over real HTTP."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent
from urllib.parse import quote

import pytest
import redis
from helpers import assert_unchanged
from markupsafe import escape
from ui_support import TOKEN, Api, serve

from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.ui.auth import Auth
from flows.validation.validate import validate_text
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

FLOW = """\
version: 1
name: gate
queue: gate
steps:
  approve:
    wait: {signal: approve}
    outputs: [note]
  ship:
    needs: [approve]
    run: echo "${{ steps.approve.outputs.note }}"
  later:
    needs: [ship]
    wait: {signal: later}
  each:
    foreach: {items: [1, 2]}
    run: echo "${{ item }}"
  ticketed:
    wait: {signal: ticket}
    outputs: [ticket]
"""


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-test")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


@pytest.fixture
def run_id(client: Client) -> str:
    result = validate_text(dedent(FLOW), file="gate.yaml", flow_dir=Path("."))
    assert result.flow is not None
    requests = expand(result.flow, run_id="g1", logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run("g1", "gate", requests, params={}))
    return "g1"


def test_a_signal_through_the_api_completes_the_wait(
    api: Api, client: Client, redis_client: redis.Redis, run_id: str
) -> None:
    path = f"/api/v1/runs/{run_id}/steps/approve/signal"
    panel = api.get(f"/runs/{run_id}/steps/approve")
    assert panel.status == 200
    assert "Awaiting a signal" in panel.body and "flows signal g1 approve --data" in panel.body
    # Its one output is the note an approval gives: an approval is offered, as the CLI does.
    assert "flows approve g1 approve" in panel.body and ">Approve</button>" in panel.body
    ticketed = api.get(f"/runs/{run_id}/steps/ticketed").body
    assert "flows approve" not in ticketed and ">Approve</button>" not in ticketed
    assert "awaiting" in api.get(f"/runs/{run_id}").body  # the graph's node
    refused = [
        (f"/api/v1/runs/{run_id}/steps/later/signal", {}, 409, "state depends"),
        (f"/api/v1/runs/{run_id}/steps/ship/signal", {}, 409, "not a wait step (state depends)"),
        (f"/api/v1/runs/{run_id}/steps/each/signal", {}, 409, "a foreach or matrix step"),
        (f"/api/v1/runs/{run_id}/steps/nope/signal", {}, 404, "no step 'nope'"),
        ("/api/v1/runs/none/steps/approve/signal", {}, 404, "no run none"),
        (path, {"data": {"other": 1}}, 422, 'lacks "note"'),
    ]
    for where, body, status, words in refused:
        with assert_unchanged(redis_client):
            reply = api.post(where, body)
        assert reply.status == status, (where, reply.body)
        assert words in reply.body["detail"], (where, reply.body)

    reply = api.post(path, {"data": {"note": "go"}, "by": "ops"})
    assert reply.status == 200, reply.body
    assert reply.body == {
        "id": run_id,
        "step": "approve",
        "jid": "g1:approve",
        "data": {"note": "go"},
    }
    assert client.jobs["g1:ship"].state == "waiting"
    steps = {s["step"]: s["status"] for s in api.get(f"/api/v1/runs/{run_id}").body["steps"]}
    assert steps == {
        "approve": "success",
        "ship": "waiting",
        "later": "waiting",
        "each": "waiting",
        "ticketed": "awaiting",
    }

    with assert_unchanged(redis_client):
        again = api.post(path, {"data": {"note": "again"}})
    assert again.status == 409 and "already done" in again.body["detail"]


def test_an_approval_through_the_api_is_the_cli_s(
    api: Api, client: Client, redis_client: redis.Redis, run_id: str
) -> None:
    """The dashboard's Approve and `POST .../approve` give what `flows approve` gives: the note
    and who approved, as the step's outputs; a wait that declares another output refuses it."""
    with assert_unchanged(redis_client):
        refused = api.post(f"/api/v1/runs/{run_id}/steps/ticketed/approve", {"note": "x"})
    assert refused.status == 422 and 'lacks "ticket"' in refused.body["detail"]
    reply = api.post(f"/api/v1/runs/{run_id}/steps/approve/approve", {"note": "ok", "by": "ops"})
    assert reply.status == 200, reply.body
    assert reply.body["data"] == {"note": "ok", "approved_by": "ops"}
    [ship] = [s for s in api.get(f"/api/v1/runs/{run_id}").body["steps"] if s["step"] == "ship"]
    assert ship["status"] == "waiting"
    assert client.jobs["g1:approve"].result == {"note": "ok", "approved_by": "ops"}


def test_the_commands_shown_to_copy_quote_the_run_id_for_the_shell(
    api: Api, client: Client
) -> None:
    """A run id may hold ``$(...)``, ``;`` and quotes (no white space): the panel's `flows
    approve` and `flows signal` lines are quoted as the command line prints them, so pasting
    one runs nothing but flows."""
    hostile = "g@$(touch${IFS}pwned);'x'`id`"
    result = validate_text(dedent(FLOW), file="gate.yaml", flow_dir=Path("."))
    assert result.flow is not None
    requests = expand(result.flow, run_id=hostile, logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run(hostile, "gate", requests, params={}))
    panel = api.get(f"/runs/{quote(hostile, safe='')}/steps/approve")
    assert panel.status == 200, panel.body
    word = str(escape(shlex.quote(hostile)))  # as the template escapes it
    assert word.startswith("&#39;") and word != str(escape(hostile))
    assert f"flows approve {word} approve --note TEXT" in panel.body
    assert f"flows signal {word} approve --data JSON" in panel.body


def test_data_nested_deeper_than_every_reader_goes_is_refused(
    api: Api, client: Client, redis_client: redis.Redis, run_id: str
) -> None:
    """Data nested 300 deep would be the step's outputs, which the job's API document could
    no longer encode (a 500 after the signal was given): refused first, nothing changed."""
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    with assert_unchanged(redis_client):
        reply = api.post(f"/api/v1/runs/{run_id}/steps/approve/signal", {"data": {"note": deep}})
    assert reply.status == 422, reply.body
    assert reply.body["detail"] == (
        f"run {run_id}, step approve: the signal's data nest more than 64 deep"
    )
    given = api.post(f"/api/v1/runs/{run_id}/steps/approve/signal", {"data": {"note": [[1]]}})
    assert given.status == 200, given.body
    assert api.get("/api/v1/jobs/g1:approve").status == 200


def test_data_json_readers_cannot_hold_is_refused_naming_where(
    api: Api, redis_client: redis.Redis, run_id: str
) -> None:
    """A number past a double's range (1e999 or Infinity read by the API's JSON parser, an
    integer of 400 digits) and a lone surrogate get a 422 naming the data and the place, as
    `flows signal --data` does; nothing changed. Before, a lone surrogate got the engine's
    "invalid unicode escape" and a number past the range "not JSON compliant"."""
    signal = f"/api/v1/runs/{run_id}/steps/approve/signal"
    approve = f"/api/v1/runs/{run_id}/steps/approve/approve"
    where = f"run {run_id}, step approve: the signal's data"
    past = "past what JSON readers hold (a double: about 1.8e308 either way"
    refused = [
        (signal, b'{"data": {"note": 1e999}}', f"{where} at note: a number {past}"),
        (signal, b'{"data": {"note": [Infinity]}}', f"{where} at note[0]: a number {past}"),
        (signal, b'{"data": {"note": NaN}}', f"{where} at note: NaN, which is no JSON number"),
        (
            signal,
            b'{"data": {"note": ' + b"9" * 400 + b"}}",
            f"{where} at note: an integer of the order of 1e399, {past}",
        ),
        (
            signal,
            b'{"data": {"note": "\\ud800"}}',
            f'{where} at note: text with a lone surrogate ("\\ud800"), which is not UTF-8 text',
        ),
        (approve, b'{"note": "x\\udcff"}', "body.note: Input should be a valid string"),
    ]
    for path, body, words in refused:
        with assert_unchanged(redis_client):
            reply = api.request("POST", path, raw=body)
        assert reply.status == 422, (body, reply.body)
        assert reply.body["detail"].startswith(words), (body, reply.body)


@pytest.mark.parametrize("action", ["signal", "approve"])
@pytest.mark.parametrize(
    ("run", "words"),
    [
        ("..", 'Arg "run_id" may not hold "/" or "\\" nor be "." or ".."'),
        ("%00", 'Arg "run_id" contains white space or a control character'),
        ("r" * 300, 'Arg "run_id" is 300 bytes, more than the limit of 256'),
    ],
)
def test_a_run_id_the_engine_refuses_gets_a_400_not_a_500(
    api: Api, redis_client: redis.Redis, run_id: str, action: str, run: str, words: str
) -> None:
    with assert_unchanged(redis_client):
        reply = api.post(f"/api/v1/runs/{run}/steps/approve/{action}", {})
    assert reply.status == 400 and words in reply.body["detail"], reply.body


PARENT = """\
version: 1
name: parent
steps:
  child: {run: 'true'}
"""


def _submit(client: Client, run_id: str, text: str) -> None:
    result = validate_text(dedent(text), file="f.yaml", flow_dir=Path("."))
    assert result.flow is not None
    requests = expand(result.flow, run_id=run_id, logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run(run_id, result.flow.name, requests, params={}))


def test_every_step_route_takes_a_child_runs_step_by_its_label(
    api: Api, client: Client, redis_client: redis.Redis
) -> None:
    """``step/child-step``, as `flows status` labels a step of the child run a sub-flow step
    started (here p1.child), is that run's step on every route naming a step."""
    _submit(client, "p1", PARENT)
    _submit(client, "p1.child", FLOW)
    steps = "/api/v1/runs/p1/steps"
    refused = [
        (f"{steps}/chld/approve/signal", 404, "run p1 has no step 'chld' (did you mean 'child'?)"),
        (f"{steps}/child/aprove/approve", 404, "run p1.child has no step 'aprove' (did you mean"),
        (f"{steps}/child/aprove/kick", 404, "run p1.child has no step 'aprove' (did you mean"),
        (f"{steps}/child/ship/kick", 409, "step ship of run p1.child has status waiting: kick is"),
        (f"{steps}/child/ship/rerun", 409, "run p1.child has status running: rerun is not"),
    ]
    for where, status, words in refused:
        with assert_unchanged(redis_client):
            reply = api.post(where, {})
        assert reply.status == status, (where, reply.body)
        assert words in reply.body["detail"], (where, reply.body)
    panel = api.get("/runs/p1/steps/child/approve")
    assert panel.status == 200, panel.body
    assert "Awaiting a signal" in panel.body and "flows approve p1.child approve" in panel.body
    assert api.get("/runs/p1/steps/chld/approve").status == 404
    logs = api.get("/api/v1/runs/p1/logs?step=child/approve")
    assert logs.status == 200, logs.body
    assert logs.body["items"] == [{"step": "child/approve", "jid": "p1.child:approve"}]
    explained = api.get("/api/v1/runs/p1/explain?step=child/approve")
    assert explained.status == 200, explained.body
    assert explained.body["run"] == "p1.child"
    assert [s["step"] for s in explained.body["steps"]] == ["approve"]
    reply = api.post(f"{steps}/child/approve/approve", {"note": "ok", "by": "ops"})
    assert reply.status == 200, reply.body
    assert reply.body["id"] == "p1.child" and reply.body["jid"] == "p1.child:approve"
    assert client.jobs["p1.child:ship"].state == "waiting"
