"""The API's OpenAPI document against the live server, over real HTTP: every operation it lists,
asked with the mistakes a client makes (no token, a wrong one, ids that are not there, a bad or
unknown query parameter, a body of the wrong type, too large or not JSON, a foreign ``Host``),
answers only statuses the document gives that operation, each body in the shape the document
says, and none of the refusals changes anything."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, Reply, mismatch, register_flow, serve

from flows.ui.api import PREFIX
from flows.ui.auth import Auth
from flows.ui.refusals import MAX_BODY
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

FLOW = "version: 1\nname: hello\nsteps:\n  greet: {run: echo hi}\n"
REGISTERED = (
    'version: 1\nname: {name}\nqueue: {queue}\nschedule: {{cron: "0 0 1 1 *"}}\n'
    "steps:\n  a: {{run: echo a}}\n"
)
BROKEN = "version: 1\nname: broken\nsteps:\n  greet: {run: echo hi, needs: [nothing]}\n"


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-openapi")


@pytest.fixture
def api(client: Client, tmp_path: Path) -> Iterator[Api]:
    (tmp_path / "hello.yaml").write_text(FLOW)
    (tmp_path / "broken.yaml").write_text(BROKEN)
    # reads need the token here too, so that every read can be asked without one
    with serve(client, Auth(TOKEN, reads_open=False), flows_dir=tmp_path) as base:
        yield Api(base)


def _asks(
    path: str, method: str, operation: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """What a client gets wrong with ``operation``, as the request options of each mistake."""
    body = {} if "requestBody" in operation else None
    yield "no token", {"body": body, "token": None}
    yield "a wrong token", {"body": body, "token": "not-the-token-0123456789"}
    yield "ids that are not there", {"body": body}
    yield "a foreign Host", {"body": body, "headers": {"Host": "evil.example"}}
    yield "an unknown query parameter", {"body": body, "query": "nonesuch=1"}
    for parameter in operation.get("parameters", ()):
        if parameter["in"] == "query":
            yield (
                f"query {parameter['name']}=-x",
                {"body": body, "query": f"{parameter['name']}=-x"},
            )
    if body is not None:
        yield "a body sent as text", {"raw": b"{}", "headers": {"Content-Type": "text/plain"}}
        yield "a body that is not JSON", {"raw": b"{not json"}
        yield "a body that is not UTF-8", {"raw": b'{"flow": "caf\xe9"}'}
        yield "a body too large", {"raw": b" " * (MAX_BODY + 1)}


def _ask(api: Api, method: str, path: str, options: dict[str, Any]) -> Reply:
    query = options.pop("query", None)
    if query is not None:
        path = f"{path}?{query}"
    if options.get("body") is None:
        options.pop("body", None)
    if path.endswith(("/events", "/stream")):  # an event stream: its status and headers, then ends
        method = "HEAD"
    return api.request(method.upper(), path, **options)


def test_every_operation_answers_only_as_its_document_says(
    api: Api, redis_client: redis.Redis
) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    components = document["components"]["schemas"]
    wrong: list[str] = []
    with assert_unchanged(redis_client):
        for template, operations in document["paths"].items():
            path = re.sub(r"\{[^}]+\}", "nope", template)
            for method, operation in operations.items():
                for mistake, options in _asks(path, method, operation):
                    reply = _ask(api, method, path, dict(options))
                    problem = mismatch(reply, operation["responses"], components)
                    if problem is not None:
                        wrong.append(f"{method.upper()} {template}, {mistake}: {problem}")
    assert not wrong, "\n".join(wrong)


def test_every_refusal_is_documented_in_one_shape(api: Api) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    schemas = {
        response["content"]["application/json"]["schema"].get("$ref")
        for operations in document["paths"].values()
        for operation in operations.values()
        for status, response in operation["responses"].items()
        if int(status) >= 400
    }
    assert schemas == {"#/components/schemas/Refusal"}
    assert "HTTPValidationError" not in document["components"]["schemas"]


def _json_schema(response: dict[str, Any]) -> dict[str, Any]:
    """The schema of a documented answer's JSON (a `$ref` for one that is not JSON)."""
    content = response.get("content", {})
    return content["application/json"]["schema"] if "application/json" in content else {"$ref": ""}


def test_every_json_answer_names_its_shape(api: Api) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    unnamed = [
        f"{method.upper()} {path} {status}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if "$ref" not in _json_schema(response)
    ]
    assert not unnamed, unnamed


@pytest.mark.parametrize("path", [f"{PREFIX}/events", f"{PREFIX}/jobs/{{jid}}/logs/stream"])
def test_an_event_stream_is_documented_as_one(api: Api, path: str) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    assert set(document["paths"][path]["get"]["responses"]["200"]["content"]) == {
        "text/event-stream"
    }


def test_a_flow_file_that_does_not_validate_is_refused_as_documented(
    api: Api, redis_client: redis.Redis
) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    operation = document["paths"][f"{PREFIX}/flows/{{flow}}/runs"]["post"]
    with assert_unchanged(redis_client):
        reply = api.post(f"{PREFIX}/flows/broken/runs", {"params": {}})
    assert reply.status == 422
    assert reply.body["detail"]["findings"][0]["code"] == "unknown-need"
    assert mismatch(reply, operation["responses"], document["components"]["schemas"]) is None


# What a client reads most, each answered with what it lists: the document gives each its shape.
READS = {
    "/runs": "/runs",
    "/queues": "/queues",
    "/workers": "/workers",
    "/schedules": "/schedules",
    "/failures": "/failures",
    "/failures/{group}": "/failures/boom",
    "/backfills": "/backfills",
    "/flows": "/flows",
    "/sources": "/sources",
    "/audit": "/audit",
    "/jobs/{jid}/logs": "/jobs/{jid}/logs",
    "/jobs/{jid}": "/jobs/{jid}",
    "/jobs/{jid}/explain": "/jobs/{jid}/explain",
    "/runs/{run_id}/timeline": "/runs/{run}/timeline",
    "/runs/{run_id}/explain": "/runs/{run}/explain",
    "/flows/{flow}/history": "/flows/hello/history",
    "/notifications": "/notifications",
}


def test_the_answers_have_the_shapes_the_document_gives(
    api: Api, client: Client, tmp_path: Path
) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    (tmp_path / "registered").mkdir()
    registered = register_flow(client, tmp_path / "registered", REGISTERED, "nightly")
    triggered = api.post(f"{PREFIX}/runs", {"flow": registered["name"]})
    started = api.post(f"{PREFIX}/flows/hello/runs", {"params": {}})
    assert started.status == 201, started.body
    run = api.get(f"{PREFIX}/runs/{quote(started.body['id'], safe='')}").body
    [job] = client.queues[run["queues"][0]].pop()
    lines = (1.0, "stdout", "", "a line", 2.0, "log", "info/3", "a record cut short")
    client.engine.call("log.append", job.jid, 1, 0, 2, *lines)
    job.fail("boom", "it broke")
    asked = {("post", "/flows/{flow}/runs"): started, ("post", "/runs"): triggered}
    for template, path in READS.items():
        ids = {"jid": quote(job.jid, safe=""), "run": quote(run["id"], safe="")}
        asked["get", template] = api.get(PREFIX + path.format(**ids))
    wrong: list[str] = []
    for (method, template), reply in asked.items():
        assert 200 <= reply.status < 300, (template, reply)
        problem = _unlike_its_shape(document, method, template, reply)
        if problem is not None:
            wrong.append(f"{method.upper()} {template}: {problem}")
    assert not wrong, "\n".join(wrong)


def _unlike_its_shape(
    document: dict[str, Any], method: str, template: str, reply: Reply
) -> str | None:
    """How ``reply`` to ``method`` on ``template`` departs from the named shape the document
    gives its status (an inline schema names none); None when it is that shape."""
    answers = document["paths"][PREFIX + template][method]["responses"]
    schema = answers[str(reply.status)]["content"]["application/json"]["schema"]
    problem = mismatch(reply, answers, document["components"]["schemas"])
    if problem is None and "$ref" not in schema:
        return f"documented as {schema}"
    return problem


ACTS = """\
version: 1
name: acts
queue: acts
steps:
  work: {run: echo hi}
  gate: {wait: {signal: go, timeout: 1h}}
  later: {wait: {signal: go, timeout: 1h}}
"""


def test_the_actions_answer_the_shapes_the_document_gives(
    api: Api, client: Client, tmp_path: Path
) -> None:
    document = api.get(f"{PREFIX}/openapi.json").body
    (tmp_path / "acts.yaml").write_text(ACTS)
    (tmp_path / "registered").mkdir()
    schedule = register_flow(client, tmp_path / "registered", REGISTERED, "nightly")["name"]
    run = api.post(f"{PREFIX}/flows/acts/runs", {"params": {}}).body["id"]
    [work] = client.queues["acts"].pop()
    work.fail("boom", "it broke")
    plain = client.queues["plain"].put("K", {})
    client.queues["plain"].pop()[0].fail("boom", "it broke")
    buried = client.queues["plain"].put("K", {})
    client.engine.call("bury", buried, "ops")
    on_run, on_job = f"{PREFIX}/runs/{quote(run, safe='')}", f"{PREFIX}/jobs/"
    asked = [  # in an order each is allowed in
        ("/runs/{run_id}/steps/{step}/approve", f"{on_run}/steps/gate/approve", {"note": "ok"}),
        ("/runs/{run_id}/steps/{step}/signal", f"{on_run}/steps/later/signal", {"data": {}}),
        ("/runs/{run_id}/logs", f"{on_run}/logs", None),
        ("/runs/{run_id}/retry", f"{on_run}/retry", None),
        ("/runs/{run_id}/steps/{step}/kick", f"{on_run}/steps/work/kick", None),
        ("/runs/{run_id}/cancel", f"{on_run}/cancel", None),
        ("/runs/{run_id}/steps/{step}/rerun", f"{on_run}/steps/gate/rerun", {}),
        ("/jobs/{jid}/retry", on_job + plain + "/retry", None),
        ("/jobs/{jid}/kick", on_job + buried + "/kick", None),
        ("/jobs/{jid}/cancel", on_job + buried + "/cancel", None),
        ("/queues/{queue}/pause", f"{PREFIX}/queues/plain/pause", None),
        ("/queues/{queue}/unpause", f"{PREFIX}/queues/plain/unpause", None),
        ("/schedules/{name}/pause", f"{PREFIX}/schedules/{schedule}/pause", {"note": "x"}),
        ("/schedules/{name}/resume", f"{PREFIX}/schedules/{schedule}/resume", None),
        ("/schedules/{name}/trigger", f"{PREFIX}/schedules/{schedule}/trigger", None),
    ]
    wrong: list[str] = []
    for template, path, body in asked:
        if template.endswith("/kick") and "steps" in template:  # the retried job, buried again
            client.engine.call("bury", work.jid, "ops")
        method = "get" if template.endswith("/logs") else "post"
        reply = api.request(method.upper(), path, body)
        assert 200 <= reply.status < 300, (path, reply.status, reply.body)
        problem = _unlike_its_shape(document, method, template, reply)
        if problem is not None:
            wrong.append(f"{method.upper()} {template}: {problem}")
    assert not wrong, "\n".join(wrong)


MANY = """\
version: 1
name: many
queue: many
params:
  files: {type: array, default: []}
steps:
  first: {run: echo hi}
  each:
    foreach: {items: "${{ params.files }}", as: f}
    run: echo hi
  last: {run: echo hi, needs: [each]}
"""


def _follow(api: Api, path: str, limit: int) -> tuple[list[dict[str, str]], int]:
    """Every job a paged listing of a run's jobs gives, following ``next``; and the pages."""
    jobs: list[dict[str, str]] = []
    pages, offset = 0, 0
    while offset is not None:
        sep = "&" if "?" in path else "?"
        reply = api.get(f"{path}{sep}offset={offset}&limit={limit}")
        assert reply.status == 200, reply
        assert set(reply.body) == {"id", "items", "offset", "limit", "next"}, reply.body
        assert len(reply.body["items"]) <= limit and reply.body["offset"] == offset
        jobs += reply.body["items"]
        offset, pages = reply.body["next"], pages + 1
    return jobs, pages


def test_a_runs_jobs_are_listed_a_bounded_page_at_a_time(api: Api, tmp_path: Path) -> None:
    (tmp_path / "many.yaml").write_text(MANY)
    files = [f"f{i}" for i in range(25)]
    started = api.post(f"{PREFIX}/flows/many/runs", {"params": {"files": files}})
    assert started.status == 201, started.body
    path = f"{PREFIX}/runs/{quote(started.body['id'], safe='')}/logs"
    default = api.get(path).body
    assert (default["offset"], default["limit"], default["next"]) == (0, 100, None)
    assert [j["step"] for j in default["items"]] == [
        "first",
        *(f"each[{i}]" for i in range(25)),
        "last",
    ]
    jobs, pages = _follow(api, path, 10)
    assert jobs == default["items"] and pages == 3
    each, _ = _follow(api, f"{path}?step=each", 7)
    assert [j["step"] for j in each] == [f"each[{i}]" for i in range(25)]
    assert api.get(f"{path}?limit=501").status == 422
    missing = api.get(f"{path}?step=eahc")
    assert missing.status == 404 and "each" in missing.body["detail"], missing.body
