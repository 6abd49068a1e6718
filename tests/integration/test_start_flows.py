"""Starting any flow from `flows ui --flows-dir`: every file listed, a run started with params
checked as `flows validate` and `-p` check them, and signed webhook triggers; bad requests and
bad or replayed signatures start nothing."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import uvicorn
from click.testing import CliRunner
from engine_library_support import another_release
from flows_cli_support import flows, status_json
from helpers import assert_unchanged
from ui_support import TOKEN, Api, Reply, register_flow

from flows.ui.app import create_app
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine, library_name
from scheduler.notify.channels import sign

HOOK_SECRET = "hook-secret-for-tests"

FILES = {
    "scheduled.yaml": "version: 1\nname: nightly\nschedule: {cron: '0 3 * * *'}\n"
    "steps:\n  a: {run: 'true'}\n",
    "adhoc.yaml": "version: 1\nname: adhoc\nparams:\n  who: {type: string}\n"
    "  count: {type: int, default: 1}\n"
    "steps:\n  a: {run: 'echo $WHO', env: {WHO: '${{ params.who }}'}}\n",
    "sub/hook.yaml": "version: 1\nname: deploy\non:\n  webhook: {secret: HOOK_SECRET}\n"
    "params:\n  payload: {type: object, default: {}}\nsteps:\n  a: {run: 'true'}\n",
    "broken.yaml": "version: 1\nname: broken\nsteps:\n  a: {run: 'true', needs: nope}\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.fixture
def api(
    engine: Engine, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Api, Client]]:
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    client = Client.from_engine(engine)
    with serve_app(create_app(client, Auth(TOKEN, reads_open=True), folder)) as base:
        yield Api(base), client


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """``app`` on a free loopback port, in a thread, as `flows ui` serves it."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def run_record(client: Client, run_id: str) -> dict[str, object]:
    return json.loads(client.engine.call("run.get", run_id))


def test_every_flow_file_is_listed_and_any_can_be_started(
    api: tuple[Api, Client], redis_client: redis.Redis
) -> None:
    http, client = api
    listed = {f["file"]: f for f in http.get("/api/v1/flows").body["items"]}
    assert sorted(listed) == ["adhoc.yaml", "broken.yaml", "scheduled.yaml", "sub/hook.yaml"]
    assert listed["scheduled.yaml"]["scheduled"] and not listed["adhoc.yaml"]["scheduled"]
    assert listed["sub/hook.yaml"]["webhook"]
    assert (
        not listed["broken.yaml"]["valid"]
        and "nope" in listed["broken.yaml"]["errors"][0]["message"]
    )
    assert [(p["name"], p["type"], p["required"]) for p in listed["adhoc.yaml"]["params"]] == [
        ("who", "string", True), ("count", "int", False),
    ]  # fmt: skip
    started = http.post("/api/v1/flows/adhoc/runs", {"params": {"who": "ada", "count": 3}})
    assert started.status == 201, started.body
    record = run_record(client, started.body["id"])
    assert json.loads(str(record["params"])) == {"who": "ada", "count": 3}
    assert record["flow"] == "adhoc" and record["trigger"] == "manual"
    page = http.get("/start")
    assert page.status == 200 and 'data-flow="adhoc"' in page.body and "needs" in page.body


def test_a_run_keeps_its_params_as_bound_whichever_surface_started_it(
    api: tuple[Api, Client], folder: Path, server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    http, _ = api
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    cli = CliRunner()
    adhoc = str(folder / "adhoc.yaml")
    started = [
        flows(cli, "run", "--detach", adhoc, "-p", "who=ada", "-p", "count=3").stdout.strip(),
        http.post("/api/v1/flows/adhoc/runs", {"params": {"who": "ada", "count": 3}}).body["id"],
        http.post("/api/v1/flows/adhoc/runs", {"params": {"who": "ada", "count": "3"}}).body["id"],
    ]
    for run_id in started:
        # typed (`count=3` is 3), the same in the detail and the list of every surface
        assert status_json(cli, run_id)["params"] == {"who": "ada", "count": 3}
        assert http.get(f"/api/v1/runs/{run_id}").body["params"] == {"who": "ada", "count": 3}
    listed = [
        *json.loads(flows(cli, "runs", "--json").stdout),
        *http.get("/api/v1/runs").body["items"],
    ]
    assert [r["params"] for r in listed] == [{"who": "ada", "count": 3}] * 6
    # a default is what the run was bound to as well
    defaulted = http.post("/api/v1/flows/adhoc/runs", {"params": {"who": "bo"}}).body["id"]
    assert status_json(cli, defaulted)["params"] == {"who": "bo", "count": 1}


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        (
            "/api/v1/flows/adhoc/runs",
            {"params": {"who": "a", "colour": "red"}},
            422,
            "unknown param 'colour'",
        ),
        ("/api/v1/flows/adhoc/runs", {"params": {"who": "a", "count": "many"}}, 422, "count"),
        ("/api/v1/flows/adhoc/runs", {"params": {}}, 422, "who"),
        ("/api/v1/flows/adhoc/runs", {"parameters": {}}, 422, "parameters"),
        ("/api/v1/flows/broken/runs", {"params": {}}, 422, "nope"),
        ("/api/v1/flows/missing/runs", {"params": {}}, 404, "no flow named 'missing'"),
    ],
)
def test_bad_runs_are_refused_and_start_nothing(
    api: tuple[Api, Client],
    redis_client: redis.Redis,
    path: str,
    body: object,
    status: int,
    message: str,
) -> None:
    http, _ = api
    with assert_unchanged(redis_client):
        reply = http.post(path, body)
        assert Api(http.base, None).post("/api/v1/flows/adhoc/runs", {"params": {}}).status == 401
    assert reply.status == status and message in json.dumps(reply.body), reply.body


def hook(http: Api, body: bytes, *, secret: str = HOOK_SECRET, at: float | None = None,
         signature: str | None = None) -> Reply:  # fmt: skip
    stamp = str(int(time.time() if at is None else at))
    headers = {"X-Flows-Timestamp": stamp,
               "X-Flows-Signature": signature or sign(secret, stamp, body)}  # fmt: skip
    return http.request("POST", "/api/v1/hooks/deploy", raw=body, token=None, headers=headers)


def test_a_signed_webhook_starts_a_run_once(
    api: tuple[Api, Client], redis_client: redis.Redis
) -> None:
    http, client = api
    body = json.dumps({"ref": "main", "sha": "abc123"}).encode()
    stamp = time.time()
    started = hook(http, body, at=stamp)
    assert started.status == 201, started.body
    record = run_record(client, started.body["id"])
    assert json.loads(str(record["params"])) == {"payload": {"ref": "main", "sha": "abc123"}}
    assert record["trigger"] == "webhook"
    cases = [
        (lambda: hook(http, body, at=stamp), 409, "replay"),  # the same signed request again
        (lambda: hook(http, body, secret="not-the-secret"), 401, "does not match"),
        (lambda: hook(http, body, at=time.time() - 3600), 401, "away from now"),
        (lambda: hook(http, body, signature="sha256=" + "0" * 64), 401, "does not match"),
        (lambda: http.request("POST", "/api/v1/hooks/deploy", raw=body, token=None), 401,
         "required"),
        (lambda: hook(http, b"[1, 2]"), 422, "JSON object"),
        (lambda: http.request("POST", "/api/v1/hooks/adhoc", raw=body, token=None), 404,
         "no webhook trigger"),
    ]  # fmt: skip
    for send, status, message in cases:
        with assert_unchanged(redis_client):
            reply = send()
        assert reply.status == status and message in json.dumps(reply.body), reply.body


def test_a_webhook_tells_an_unsigned_caller_nothing_of_the_flows_files(
    engine: Engine, folder: Path, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook is the one route without a token: on a server whose reads need one, it must
    not read out a file's findings, its path or where secrets are looked for."""
    (folder / "copy").mkdir()
    (folder / "copy" / "adhoc.yaml").write_text(FILES["adhoc.yaml"])
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    client = Client.from_engine(engine)
    body = b"{}"
    with serve_app(create_app(client, Auth(TOKEN, reads_open=False), folder)) as base:
        http = Api(base, token=None)
        cases = [
            ("broken", 404, "has no webhook trigger here"),  # a file that does not validate
            ("missing", 404, "has no webhook trigger here"),
            ("nightly", 404, "has no webhook trigger here"),
            ("adhoc", 409, "several files define flow 'adhoc'"),
            ("deploy", 503, "secret is not set on this server"),
        ]
        for flow, status, message in cases:
            with assert_unchanged(redis_client):
                reply = http.request("POST", f"/api/v1/hooks/{flow}", raw=body, headers={
                    "X-Flows-Timestamp": "1", "X-Flows-Signature": "sha256=0"})  # fmt: skip
            assert reply.status == status and message in reply.body["detail"], reply.body
            for hidden in ("nope", "yaml", "copy", "HOOK_SECRET", "/run/secrets", "findings"):
                assert hidden not in json.dumps(reply.body), (flow, reply.body)
        # what the token's holder reads of the same flows
        assert Api(base).post("/api/v1/flows/broken/runs", {}).status == 422


def test_a_webhook_over_a_foreign_library_starts_nothing_and_says_so(
    functions: redis.Redis, api: tuple[Api, Client]
) -> None:
    """Signed, it is told the refusal (503, as the API's); unsigned, only that it is not signed;
    either way nothing is written, so the same request is taken once the engine is loaded."""
    http, _ = api
    functions.execute_command("FUNCTION", "LOAD", another_release())
    body = b"{}"
    stamp = time.time()
    with assert_unchanged(functions):
        refused = hook(http, body, at=stamp)
        unsigned = http.request("POST", "/api/v1/hooks/deploy", raw=body, token=None)
    assert refused.status == 503 and "`flows engine load`" in refused.body["detail"]
    assert unsigned.status == 401 and "engine" not in unsigned.body["detail"]
    functions.function_delete(library_name())
    Engine(functions).load()
    assert hook(http, body, at=stamp).status == 201


@pytest.mark.parametrize("stamp", ["nan", "NaN", "inf", "-infinity"])
def test_a_webhook_signed_with_no_time_is_refused(
    api: tuple[Api, Client], redis_client: redis.Redis, stamp: str
) -> None:
    """``float`` reads "nan": a stamp that is no time must not pass as never stale."""
    http, _ = api
    body = b"{}"
    headers = {"X-Flows-Timestamp": stamp, "X-Flows-Signature": sign(HOOK_SECRET, stamp, body)}
    with assert_unchanged(redis_client):
        reply = http.request("POST", "/api/v1/hooks/deploy", raw=body, token=None, headers=headers)
    assert reply.status == 401 and "must be epoch seconds" in reply.body["detail"], reply.body


@pytest.mark.parametrize(
    "signature",
    [
        "sha256=\xe9",  # one Latin-1 byte, as a client may send it
        "sha256=" + "é".encode().decode("latin-1"),  # UTF-8 bytes, read as the server reads them
        "sha256=" + "\xe9" * 64,  # as long as a real signature
    ],
)
def test_a_signature_of_non_ascii_text_is_a_wrong_one(
    api: tuple[Api, Client],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    signature: str,
) -> None:
    http, _ = api
    body = json.dumps({"ref": "main"}).encode()
    with caplog.at_level(logging.ERROR), assert_unchanged(redis_client):
        reply = hook(http, body, signature=signature)
    assert reply.status == 401 and "does not match" in reply.body["detail"], reply.body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_param_with_choices_is_a_list_in_the_run_form_and_other_values_are_refused(
    api: tuple[Api, Client], folder: Path, redis_client: redis.Redis
) -> None:
    (folder / "deploy.yaml").write_text(
        "version: 1\nname: release\nparams:\n"
        "  env: {type: string, choices: [dev, 'staging <b>', prod]}\n"
        "  workers: {type: int, choices: [1, 2, 4], default: 2}\n"
        "steps:\n  a: {run: 'true'}\n"
    )
    http, client = api
    listed = {f["file"]: f for f in http.get("/api/v1/flows").body["items"]}
    params = {p["name"]: p for p in listed["deploy.yaml"]["params"]}
    assert params["env"]["choices"] == ["dev", "staging <b>", "prod"]
    assert params["workers"]["choices"] == [1, 2, 4] and params["workers"]["default"] == 2
    assert params["env"]["required"] and listed["adhoc.yaml"]["params"][0]["choices"] is None
    page = http.get("/start").body
    assert '<select name="env" data-type="string" required>' in page
    assert '<option value="">choose one</option>' in page
    assert '<option value="staging &lt;b&gt;">staging &lt;b&gt;</option>' in page  # escaped
    assert '<option value="2" selected>2</option>' in page
    with assert_unchanged(redis_client):
        refused = http.post("/api/v1/flows/release/runs", {"params": {"env": "prdo"}})
    assert refused.status == 422
    assert "'prdo' is not one of its choices" in str(refused.body)
    assert "did you mean 'prod'?" in str(refused.body)
    started = http.post("/api/v1/flows/release/runs", {"params": {"env": "prod", "workers": 4}})
    assert started.status == 201, started.body
    record = run_record(client, started.body["id"])
    assert json.loads(str(record["params"])) == {"env": "prod", "workers": 4}


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"ratio": float("nan")}, "param 'ratio': NaN, which is no JSON number"),
        ({"ratio": "inf"}, "param 'ratio': a number past what JSON readers hold"),
        ({"ratio": "1e999"}, "param 'ratio': a number past what JSON readers hold"),
        ({"shape": {"a": [1, float("-inf")]}}, "param 'shape': at a[1], a number past"),
        ({"shape": '{"a": NaN}'}, "param 'shape': at a, NaN, which is no JSON number"),
    ],
)
def test_a_param_json_cannot_hold_is_refused_naming_it_and_starts_nothing(
    api: tuple[Api, Client],
    folder: Path,
    redis_client: redis.Redis,
    params: dict[str, Any],
    said: str,
) -> None:
    # Python reads NaN and 1e999 from a request's JSON (and from -p text) where the engine
    # stores only JSON numbers: the answer names the param, as for any other bad value.
    (folder / "measure.yaml").write_text(
        "version: 1\nname: measure\nparams:\n"
        "  ratio: {type: number, default: 1.5}\n  shape: {type: object, default: {}}\n"
        "steps:\n  a: {run: 'true'}\n"
    )
    http, _ = api
    with assert_unchanged(redis_client):
        refused = http.post("/api/v1/flows/measure/runs", {"params": params})
    assert refused.status == 422 and said in refused.body["detail"], refused.body


REGISTERED = (
    'version: 1\nname: {name}\nqueue: {queue}\nschedule: {{cron: "0 0 1 1 *"}}\n'
    "steps:\n  a: {{run: echo a}}\n"
)


def test_every_start_answers_one_documented_shape(api: tuple[Api, Client], tmp_path: Path) -> None:
    """A run started from a flow file, a webhook, a registered flow or its schedule: the same
    fields, documented as the one `RunStarted`."""
    http, client = api
    (tmp_path / "registered").mkdir()
    name = register_flow(client, tmp_path / "registered", REGISTERED, "nightly")["name"]
    document = http.get("/api/v1/openapi.json").body
    starts = {
        ("/runs", name): http.post("/api/v1/runs", {"flow": name}),
        ("/schedules/{name}/trigger", name): http.post(f"/api/v1/schedules/{name}/trigger"),
        ("/flows/{flow}/runs", "adhoc"): http.post(
            "/api/v1/flows/adhoc/runs", {"params": {"who": "ada"}}
        ),
        ("/hooks/{flow}", "deploy"): hook(http, b"{}"),
    }
    for (template, flow), reply in starts.items():
        assert reply.status == 201, (template, reply.body)
        assert reply.body == {**reply.body, "flow": flow, "existed": False}, template
        assert set(reply.body) == {"id", "jobs", "flow", "existed"}, template
        answer = document["paths"]["/api/v1" + template]["post"]["responses"]["201"]
        assert answer["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/RunStarted"
        }, template


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"ref": "caf\xe9"}', "body: not UTF-8 text: the byte at offset 12 (0xe9)"),
        ('{"ref": "main"}'.encode("utf-16"), "body: not UTF-8 text: the byte at offset 0"),
        (b"[" * 30_000 + b"]" * 30_000, "body: JSON nested too deeply"),
    ],
)
def test_a_signed_webhook_body_that_cannot_be_read_is_refused_saying_why(
    api: tuple[Api, Client], redis_client: redis.Redis, body: bytes, message: str
) -> None:
    http, _ = api
    with assert_unchanged(redis_client):
        reply = hook(http, body)
    assert reply.status == 422 and reply.body["detail"].startswith(message), reply


def test_every_401_of_a_webhook_says_how_to_authenticate(
    api: tuple[Api, Client], redis_client: redis.Redis
) -> None:
    """HTTP requires a 401 to carry `WWW-Authenticate`: the webhook's names its signature."""
    http, _ = api
    body = b"{}"
    unsigned = [
        http.request("POST", "/api/v1/hooks/deploy", raw=body, token=None),
        hook(http, body, secret="not-the-secret"),
        hook(http, body, at=time.time() - 3600),
    ]
    for reply in unsigned:
        assert reply.status == 401, reply
        assert reply.headers["www-authenticate"] == (
            'Flows-Signature headers="X-Flows-Timestamp X-Flows-Signature"'
        ), reply
