"""The REST API of ``flows ui`` over real HTTP: a real uvicorn server on a free loopback port,
the embedded Redis server, real workers. A run is started, followed, retried and canceled
through the API alone; auth and bad requests are refused and change nothing."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from helpers import assert_unchanged, digest, register_legacy_cron
from ui_support import TOKEN, Api, register_flow, serve

from flows.access import audit
from flows.access.users import Users
from flows.cli import main
from flows.runs.explain import NO_ITEMS, NO_ITEMS_YET
from flows.runs.service_source import FlowsSource
from flows.runs.trigger import trigger_run
from flows.runtime.worker_hook import prepare
from flows.ui.auth import Auth
from flows.ui.roles import RoleAuth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.service.schedules import Schedules
from scheduler.worker import Worker

FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
params:
  who: {{type: string, default: nobody}}
  flag: {{type: string, default: ""}}
steps:
  greet:
    job: {module}.greet
    with: {{who: "${{{{ params.who }}}}"}}
  flaky:
    needs: [greet]
    job: {module}.flaky
    retry: {{attempts: 1}}
    with: {{flag: "${{{{ params.flag }}}}"}}
"""

TASKS = """\
import os

def greet(job):
    print("greeting", job.data["who"])
    return {"greeting": "hello " + job.data["who"]}

def flaky(job):
    if not os.path.exists(job.data["flag"]):
        raise RuntimeError("no flag yet")
    print("flag found")
"""


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-test")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


@pytest.fixture
def flow(client: Client, tmp_path: Path) -> dict[str, str]:
    """A registered flow (as the scheduler service registers it) and its tasks module."""
    module = f"uitasks_{uuid.uuid4().hex[:8]}"
    name = f"ui-{uuid.uuid4().hex[:6]}"
    queue = f"ui-{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{module}.py").write_text(TASKS)
    path = tmp_path / "flow.yaml"
    text = FLOW.format(name=name, queue=queue, module=module)
    path.write_text(text)
    now = time.time()
    definition = FlowsSource().load(path, text, now)
    assert definition is not None
    Schedules(client).register(definition, now)
    return {"name": name, "queue": queue, "flag": str(tmp_path / "flag")}


def wait_for(condition: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("gave up waiting")
        time.sleep(0.05)


def run_status(api: Api, run_id: str) -> str:
    reply = api.get(f"/api/v1/runs/{run_id}")
    assert reply.status == 200, reply.body
    return str(reply.body["status"])


def working(engine: Engine, queue: str) -> Any:
    """A worker on ``queue`` in a thread, until the block ends."""
    worker = Worker(
        Client.from_engine(engine, worker_name=f"w-{queue}"),
        [queue],
        prepare=prepare,
        poll_interval=0.1,
        shutdown_grace=1.0,
    )
    thread = threading.Thread(target=worker.run, daemon=True)

    class Running:
        def __enter__(self) -> Worker:
            thread.start()
            return worker

        def __exit__(self, *_: object) -> None:
            worker.stop()
            thread.join(15)

    return Running()


def test_a_run_started_followed_retried_and_canceled_through_the_api(
    api: Api, engine: Engine, flow: dict[str, str]
) -> None:
    started = api.post(
        "/api/v1/runs",
        {"flow": flow["name"], "params": {"who": "ada; rm -rf /", "flag": flow["flag"]}},
    )
    assert started.status == 201, started.body
    run_id = started.body["id"]
    assert started.body["jobs"] == 2
    [listed] = api.get("/api/v1/runs").body["items"]  # real JSON, never JSON inside a string
    assert listed["id"] == run_id
    assert listed["params"] == {"who": "ada; rm -rf /", "flag": flow["flag"]}
    assert isinstance(listed["queues"], list) and isinstance(listed["jobs"], int)
    with working(engine, flow["queue"]):
        wait_for(lambda: run_status(api, run_id) == "failed")
        run = api.get(f"/api/v1/runs/{run_id}").body
        steps = {step["step"]: step for step in run["steps"]}
        assert steps["greet"]["status"] == "success"
        [greet] = steps["greet"]["jobs"]
        # the param reached the job as data, exactly as given
        assert greet["outputs"] == {"greeting": "hello ada; rm -rf /"}
        assert greet["attempts"] == 1 and steps["greet"]["duration"] is not None
        [flaky] = steps["flaky"]["jobs"]
        assert flaky["state"] == "failed" and flaky["failure"]["group"] == "RuntimeError"

        # the step logs of the greeting, as JSON and live
        logs = api.get(f"/api/v1/jobs/{greet['jid']}/logs").body
        assert [item["text"] for item in logs["items"]] == ["greeting ada; rm -rf /"]
        streamed = list(api.events(f"/api/v1/jobs/{greet['jid']}/logs/stream"))
        assert streamed == [
            ("line", {**logs["items"][0], "attempt": 1}),
            ("end", {"jid": greet["jid"]}),
        ]

        Path(flow["flag"]).touch()
        retried = api.post(f"/api/v1/runs/{run_id}/retry")
        assert retried.status == 200 and retried.body["retried"] == 1
        wait_for(lambda: run_status(api, run_id) == "succeeded")
        job = api.get(f"/api/v1/jobs/{flaky['jid']}").body
        assert job["state"] == "complete"

    # a run nobody works on, canceled
    second = api.post("/api/v1/runs", {"flow": flow["name"]}).body["id"]
    assert run_status(api, second) == "running"
    canceled = api.post(f"/api/v1/runs/{second}/cancel")
    assert canceled.status == 200 and canceled.body["canceled"] == 2
    assert run_status(api, second) == "canceled"

    listed = api.get(f"/api/v1/runs?flow={flow['name']}&limit=1").body
    assert [r["id"] for r in listed["items"]] == [second] and listed["next"] == 1
    failed = api.get(f"/api/v1/runs?flow={flow['name']}&status=succeeded").body
    assert [r["id"] for r in failed["items"]] == [run_id] and failed["next"] is None
    later = api.get(f"/api/v1/runs?flow={flow['name']}&since={time.time() + 60}").body
    assert later["items"] == []


def test_queues_workers_schedules_and_failures(
    api: Api, client: Client, flow: dict[str, str]
) -> None:
    queue = client.queues["side"]
    for _ in range(3):
        queue.put("K", {})
    [job] = queue.pop()
    job.fail("boom", "it broke")
    queues = {q["name"]: q for q in api.get("/api/v1/queues").body["items"]}
    assert queues["side"]["waiting"] == 2
    assert api.post("/api/v1/queues/side/pause").status == 200
    assert api.get("/api/v1/queues").body["items"][0]["paused"] is True
    assert queue.paused()
    assert api.post("/api/v1/queues/side/unpause").status == 200
    assert not queue.paused()

    groups = api.get("/api/v1/failures").body["items"]
    assert groups == [{"group": "boom", "total": 1, "dropped": 0}]
    failures = api.get("/api/v1/failures/boom").body
    assert [j["jid"] for j in failures["items"]] == [job.jid] and failures["total"] == 1
    moved = api.post("/api/v1/failures/boom/unfail", {"queue": "side", "count": 5})
    assert moved.body["moved"] == 1
    retried_job = api.post(f"/api/v1/jobs/{job.jid}/cancel")
    assert retried_job.status == 200 and retried_job.body["canceled"] == [job.jid]

    client.engine.call("worker.register", "w-api", '{"queues": ["side"], "pid": 1}')
    workers = api.get("/api/v1/workers?queue=side").body["items"]
    assert [w["name"] for w in workers] == ["w-api"]

    schedules = api.get("/api/v1/schedules").body["items"]
    assert [s["name"] for s in schedules] == [flow["name"]]
    assert api.post(f"/api/v1/schedules/{flow['name']}/pause", {"note": "db work"}).status == 200
    assert api.get("/api/v1/schedules").body["items"][0]["paused"] is True
    assert api.post(f"/api/v1/schedules/{flow['name']}/resume").body["paused"] is False
    triggered = api.post(f"/api/v1/schedules/{flow['name']}/trigger")
    assert triggered.status == 201 and run_status(api, triggered.body["id"]) == "running"


def test_a_stored_definition_the_cron_checks_now_refuse_is_listed_never_a_500(
    api: Api, client: Client, flow: dict[str, str]
) -> None:
    # Registered by a version that let a backwards range through, due long ago: resuming it
    # computes its next tick.
    name = flow["name"]
    register_legacy_cron(client, name, "1-0 * * * *", next_at=1.0)
    [listed] = api.get("/api/v1/schedules").body["items"]
    assert listed["cron"] == ["1-0 * * * *"]
    for page in ("/flows", "/backfills", "/"):
        assert api.get(page).status == 200, page
    assert api.post(f"/api/v1/schedules/{name}/pause").status == 200
    resumed = api.post(f"/api/v1/schedules/{name}/resume")
    assert resumed.status == 409, resumed.body
    assert resumed.body["detail"] == (
        f"schedule {name}: '1-0 * * * *': minute field: the range 1-0 runs backwards (a range "
        "does not wrap around); fix its file (the scheduler service registers it again at its "
        "next scan)"
    )
    assert api.get("/api/v1/schedules").body["items"][0]["paused"] is True
    triggered = api.post(f"/api/v1/schedules/{name}/trigger")
    assert triggered.status < 500, triggered.body


def test_a_failure_group_with_a_slash_is_listed_and_unfailed(api: Api, client: Client) -> None:
    # A group is an id, not a name (lua/README.md): a step's exception may set one such as
    # "http/503". Its URL segment arrives decoded, so the route takes the rest of the path.
    queue = client.queues["side"]
    queue.put("K", {})
    [job] = queue.pop()
    job.fail("http/503", "the service was down")
    listed = api.get("/api/v1/failures/http%2F503")
    assert listed.status == 200 and [j["jid"] for j in listed.body["items"]] == [job.jid]
    moved = api.post("/api/v1/failures/http%2F503/unfail", {"queue": "side", "count": 5})
    assert moved.status == 200 and moved.body == {"group": "http/503", "queue": "side", "moved": 1}


@pytest.mark.parametrize("action", ["pause", "unpause"])
def test_a_queue_the_namespace_never_saw_is_refused_naming_the_likely_one(
    api: Api, client: Client, redis_client: redis.Redis, action: str
) -> None:
    # as `flows queue pause` refuses it: a misspelt name would be paused (or not) for good
    client.queues["invoices"].put("K", {})
    with assert_unchanged(redis_client):
        reply = api.post(f"/api/v1/queues/invoces/{action}")
    assert reply.status == 404, reply.body
    assert reply.body["detail"] == "no queue 'invoces' (did you mean 'invoices'?)"


def test_unfailing_a_group_with_no_failed_jobs_is_refused_naming_the_likely_one(
    api: Api, client: Client, redis_client: redis.Redis
) -> None:
    # as `flows unfail` refuses it, rather than a 200 that moved nothing
    queue = client.queues["side"]
    queue.put("K", {})
    [job] = queue.pop()
    job.fail("timeout", "too slow")
    with assert_unchanged(redis_client):
        reply = api.post("/api/v1/failures/timeuot/unfail", {"queue": "side"})
    assert reply.status == 404, reply.body
    assert reply.body["detail"] == (
        "no failed jobs in group 'timeuot' (did you mean 'timeout'?; GET /api/v1/failures "
        "lists the groups); nothing moved"
    )


def test_listings_are_paged(api: Api, client: Client) -> None:
    for i in range(5):
        client.queues[f"p{i}"].put("K", {})
    first = api.get("/api/v1/queues?limit=2").body
    second = api.get(f"/api/v1/queues?limit=2&offset={first['next']}").body
    third = api.get(f"/api/v1/queues?limit=2&offset={second['next']}").body
    names = [q["name"] for page in (first, second, third) for q in page["items"]]
    assert sorted(names) == [f"p{i}" for i in range(5)] and third["next"] is None
    assert api.get("/api/v1/queues?limit=100000").status == 422


def test_engine_events_stream_as_server_sent_events(api: Api, client: Client) -> None:
    found: list[Any] = []

    def listen() -> None:
        for _, data in api.events("/api/v1/events"):
            if data.get("jid") == "evented":
                found.append(data)
                return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    # the stream is open once the server subscribed: put until the listener sees one
    wait_for(lambda: (client.queues["ev"].put("K", {}, jid="evented"), found)[1], timeout=10)
    listener.join(5)
    assert found[0]["event"] == "put" and found[0]["queue"] == "ev"


def test_the_openapi_document_names_every_endpoint(api: Api) -> None:
    document = api.get("/api/v1/openapi.json").body
    paths = set(document["paths"])
    assert {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/retry",
        "/api/v1/runs/{run_id}/cancel",
        "/api/v1/jobs/{jid}",
        "/api/v1/jobs/{jid}/retry",
        "/api/v1/jobs/{jid}/kick",
        "/api/v1/jobs/{jid}/cancel",
        "/api/v1/jobs/{jid}/logs",
        "/api/v1/jobs/{jid}/logs/stream",
        "/api/v1/queues",
        "/api/v1/queues/{queue}/pause",
        "/api/v1/queues/{queue}/unpause",
        "/api/v1/workers",
        "/api/v1/schedules",
        "/api/v1/schedules/{name}/pause",
        "/api/v1/schedules/{name}/resume",
        "/api/v1/schedules/{name}/trigger",
        "/api/v1/failures",
        "/api/v1/failures/{group}",
        "/api/v1/failures/{group}/unfail",
        "/api/v1/runs/{run_id}/steps/{step}/rerun",
        "/api/v1/runs/{run_id}/steps/{step}/approve",
        "/api/v1/runs/{run_id}/steps/{step}/kick",
        "/api/v1/backfills",
        "/api/v1/backfills/{backfill_id}",
        "/api/v1/backfills/{backfill_id}/cancel",
        "/api/v1/events",
    } <= paths


# -- auth and bad input: refused, and nothing changes -------------------------------------------

WRITES = [
    ("/api/v1/runs", {"flow": "FLOW"}),
    ("/api/v1/runs/RUN/retry", None),
    ("/api/v1/runs/RUN/cancel", None),
    ("/api/v1/runs/RUN/steps/approve/signal", None),
    ("/api/v1/runs/RUN/steps/approve/approve", None),
    ("/api/v1/jobs/JID/retry", None),
    ("/api/v1/jobs/BURIED/kick", None),
    ("/api/v1/runs/RUN/steps/STEP/kick", None),
    ("/api/v1/jobs/JID/cancel", None),
    ("/api/v1/queues/q/pause", None),
    ("/api/v1/queues/q/unpause", None),
    ("/api/v1/schedules/FLOW/pause", None),
    ("/api/v1/schedules/FLOW/resume", None),
    ("/api/v1/schedules/FLOW/trigger", None),
    ("/api/v1/failures/boom/unfail", {"queue": "q"}),
]


@pytest.fixture
def busy(client: Client, flow: dict[str, str]) -> dict[str, str]:
    """A namespace where every write above would change something."""
    client.queues["q"].put("K", {})
    [job] = client.queues["q"].pop()
    job.fail("boom", "x")
    client.queues["q"].put("K", {}, jid="other")
    client.queues["q"].put("K", {}, jid="kept")
    client.jobs["kept"].bury("aside")
    return {"FLOW": flow["name"], "JID": "other", "RUN": "none", "BURIED": "kept"}


def _path(path: str, names: dict[str, str]) -> str:
    for key, value in names.items():
        path = path.replace(key, value)
    return path


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("wrong-token-0123456789", 403)])
def test_writes_without_the_token_are_refused_and_change_nothing(
    api: Api, busy: dict[str, str], redis_client: redis.Redis, token: str | None, status: int
) -> None:
    before = digest(redis_client)
    for path, body in WRITES:
        if isinstance(body, dict):
            body = {k: _path(v, busy) for k, v in body.items()}
        reply = api.post(_path(path, busy), body, token=token)
        assert reply.status == status, (path, reply.body)
        assert "token" in reply.body["detail"]
    assert digest(redis_client) == before
    # reads need no token on loopback
    assert api.get("/api/v1/queues", token=None).status == 200


def test_a_bearer_header_of_another_scheme_is_refused(api: Api) -> None:
    reply = api.post("/api/v1/queues/q/pause", token=None, headers={"Authorization": "Basic eA=="})
    assert reply.status == 401 and "Bearer" in reply.body["detail"]
    assert reply.headers.get("www-authenticate") == "Bearer"


def test_a_server_without_a_token_takes_no_writes(client: Client) -> None:
    with serve(client, Auth(None, reads_open=True)) as base:
        reply = Api(base).post("/api/v1/queues/q/pause")
    assert reply.status == 403 and "takes no writes" in reply.body["detail"]
    assert not client.queues["q"].paused()


def test_reads_need_the_token_when_not_open(client: Client) -> None:
    with serve(client, Auth(TOKEN, reads_open=False)) as base:
        api = Api(base)
        assert api.get("/api/v1/queues", token=None).status == 401
        assert api.get("/api/v1/queues", token="not-the-token-0000000").status == 403
        assert api.get("/metrics", token=None).status == 401
        assert api.get("/api/v1/queues").status == 200


@pytest.mark.parametrize(
    ("raw", "status", "message"),
    [
        (b"{not json", 422, "JSON"),
        (b'{"flow": "FLOW", "params": {"who": 5}}', 422, "who"),
        (b'{"flow": "FLOW", "params": {"nope": "x"}}', 422, "nope"),
        # a lone surrogate, named back in the answer: UTF-8 holds none, JSON's escape does
        (b'{"flow": "FLOW", "params": {"\\ud800": "x"}}', 422, "unknown param '\ud800'"),
        (b'{"flow": "FLOW", "params": {"who": "\\udfff"}}', 422, "lone surrogate"),
        (b'{"flow": "FLOW", "extra": 1}', 422, "extra"),
        (b'{"flow": ""}', 422, "flow"),
        (b'{"flow": "no-such-flow"}', 404, "no registered flow"),
        (b'{"flow": "FLOW", "params": {"who": "' + b"x" * 70_000 + b'"}}', 413, "larger than"),
    ],
)
def test_bad_bodies_get_a_4xx_with_a_message_and_change_nothing(
    api: Api,
    busy: dict[str, str],
    redis_client: redis.Redis,
    raw: bytes,
    status: int,
    message: str,
) -> None:
    before = digest(redis_client)
    reply = api.post("/api/v1/runs", raw=raw.replace(b"FLOW", busy["FLOW"].encode()))
    assert reply.status == status, reply.body
    assert message in reply.body["detail"]
    assert "Traceback" not in str(reply.body)
    assert digest(redis_client) == before


def test_unknown_things_are_404s(api: Api) -> None:
    for path in ("/api/v1/runs/nope", "/api/v1/jobs/nope", "/api/v1/jobs/nope/logs"):
        reply = api.get(path)
        assert reply.status == 404 and "nope" in reply.body["detail"]
    assert api.post("/api/v1/runs/nope/retry").status == 404
    assert api.post("/api/v1/schedules/nope/trigger").status == 404


def test_a_schedule_has_one_json_shape_in_the_cli_and_the_api(
    api: Api, flow: dict[str, str], server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    result = CliRunner().invoke(main, ["schedules", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    listed = api.get("/api/v1/schedules").body["items"]
    assert json.loads(result.stdout) == listed
    assert listed[0]["name"] == flow["name"]


def test_the_job_page_offers_only_what_the_job_allows(api: Api, client: Client) -> None:
    """A plain job: retry once it failed, cancel until it completed. A job of a run: what its
    run's decider allows (the API's job says the same), and a link to the run."""
    queue = client.queues["side"]
    done, broken = queue.put("K", {}), queue.put("K", {})
    for job in queue.pop(2):
        if job.jid == done:
            job.complete()
        else:
            job.fail("boom", "it broke")
    waiting = queue.put("K", {})

    def buttons(jid: str) -> tuple[bool, bool]:
        page = str(api.get(f"/jobs/{jid}").body)
        return ">Retry job</button>" in page, ">Cancel job</button>" in page

    assert buttons(done) == (False, False)
    assert buttons(broken) == (True, True)
    assert buttons(waiting) == (False, True)
    assert api.get(f"/api/v1/jobs/{broken}").body["actions"] == ["retry", "cancel"]

    jobs = [{"jid": f"jr:{step}", "queue": "jr", "klass": "K", "data": "{}"} for step in "ab"]
    client.engine.call("flow.submit", "jr", json.dumps({"flow": "f"}), json.dumps(jobs))
    for job in client.queues["jr"].pop(2):
        if job.jid == "jr:a":
            job.complete()
        else:
            job.fail("boom", "it broke")
    assert buttons("jr:a") == (False, False)  # a run's job is canceled with its run
    assert buttons("jr:b") == (True, False)
    assert '<a href="/runs/jr">jr</a>' in str(api.get("/jobs/jr:a").body)
    doc = api.get("/api/v1/jobs/jr:b").body
    assert (doc["run"], doc["actions"]) == ("jr", ["retry", "rerun"])


def test_a_buried_job_is_kicked_over_http_by_the_engines_rules(
    api: Api, client: Client, redis_client: redis.Redis
) -> None:
    """A plain buried job: its actions and its page offer kick; the kick puts it back, and
    a second one is refused with the engine's words, changing nothing. A run's buried job:
    its step's panel offers it, and the kick makes the step waiting again."""
    queue = client.queues["side"]
    jid = queue.put("K", {}, priority=2)
    client.jobs[jid].bury("bad input")
    assert api.get(f"/api/v1/jobs/{jid}").body["actions"] == ["cancel", "kick"]
    page = str(api.get(f"/jobs/{jid}").body)
    assert f'data-action="/api/v1/jobs/{jid}/kick"' in page and ">Kick job</button>" in page
    kicked = api.post(f"/api/v1/jobs/{jid}/kick")
    assert kicked.status == 200 and kicked.body == {"jid": jid, "queue": "side", "kicked": 1}
    assert client.jobs[jid].state == "waiting"
    assert ">Kick job</button>" not in str(api.get(f"/jobs/{jid}").body)
    with assert_unchanged(redis_client):
        again = api.post(f"/api/v1/jobs/{jid}/kick")
        assert again.status == 409
        assert again.body["detail"] == f"Job {jid} is not buried: waiting"
        missing = api.post("/api/v1/jobs/nope/kick")
        assert missing.status == 404 and "nope" in missing.body["detail"]
        bad = api.post("/api/v1/jobs/x-history/kick")
        assert bad.status == 400 and "jid" in bad.body["detail"]
    entry = api.get("/api/v1/audit?limit=1").body["items"][0]
    assert (entry["action"], entry["target"]) == ("kick_job", f"jid={jid}")

    jobs = [{"jid": f"kr:{step}", "queue": "kr", "klass": "K", "data": "{}"} for step in "ab"]
    client.engine.call("flow.submit", "kr", json.dumps({"flow": "f"}), json.dumps(jobs))
    client.jobs["kr:a"].bury("later")
    panel = str(api.get("/runs/kr/steps/a").body)
    # a step of one job: its panel offers the step's kick, not the job's besides
    assert 'data-action="/api/v1/runs/kr/steps/a/kick"' in panel and ">Kick step</button>" in panel
    assert ">Kick job</button>" not in panel
    assert api.get("/api/v1/jobs/kr:a").body["actions"] == ["cancel", "kick"]  # none needs it
    assert api.post("/api/v1/jobs/kr:a/kick").status == 200
    steps = {s["step"]: s for s in api.get("/api/v1/runs/kr").body["steps"]}
    assert steps["a"]["status"] == "waiting" and not steps["a"]["actions"]
    assert ">Kick step</button>" not in str(api.get("/runs/kr/steps/a").body)


def test_an_engine_refusal_reads_over_http_as_the_command_line_says_it(
    api: Api, client: Client, redis_client: redis.Redis, server: Any
) -> None:
    """The engine's refusal of the same mistake, through the API and `flows`: one message,
    without the engine's own name for its command (`Retry(): ...`)."""
    jid = client.queues["side"].put("K", {})
    with assert_unchanged(redis_client):
        said = CliRunner().invoke(main, ["retry", jid, "--redis", server.url])
        refused = api.post(f"/api/v1/jobs/{jid}/retry")
    assert said.exit_code == 1 and refused.status == 409
    assert said.output.strip() == f"Error: {refused.body['detail']}"
    assert "():" not in refused.body["detail"]


def test_a_steps_buried_items_are_kicked_over_http_by_the_engines_rules(
    api: Api, client: Client, redis_client: redis.Redis
) -> None:
    """A foreach step with two of its three items buried: the step's actions and its panel
    offer kick, and one POST puts both back. Refused, changing nothing: without a token, for
    a step with nothing buried, an unknown run or step."""
    jobs = [{"jid": f"ks:load[{i}]", "queue": "ks", "klass": "K", "data": "{}"} for i in range(3)]
    jobs.append({"jid": "ks:side", "queue": "ks", "klass": "K", "data": "{}"})
    client.engine.call("flow.submit", "ks", json.dumps({"flow": "f"}), json.dumps(jobs))
    client.jobs["ks:load[0]"].bury("bad input")
    client.jobs["ks:load[2]"].bury("bad input")
    steps = {s["step"]: s for s in api.get("/api/v1/runs/ks").body["steps"]}
    assert steps["load"]["counts"] == {"buried": 2, "waiting": 1}
    assert steps["load"]["actions"] == ["kick"]
    panel = str(api.get("/runs/ks/steps/load").body)
    assert 'data-action="/api/v1/runs/ks/steps/load/kick"' in panel
    assert 'data-confirm="Kick step load? Its buried jobs go back into their queues."' in panel
    with assert_unchanged(redis_client):
        anonymous = api.post("/api/v1/runs/ks/steps/load/kick", token=None)
        assert anonymous.status == 401
        waiting = api.post("/api/v1/runs/ks/steps/side/kick")
        assert waiting.status == 409
        assert waiting.body["detail"] == (
            "step side of run ks has status waiting: kick is not allowed (allowed: none)"
        )
        assert api.post("/api/v1/runs/nope/steps/load/kick").status == 404
        unknown = api.post("/api/v1/runs/ks/steps/nope/kick")
        assert unknown.status == 404 and unknown.body["detail"] == (
            "run ks has no step 'nope' (its steps: load, side)"
        )
    kicked = api.post("/api/v1/runs/ks/steps/load/kick")
    assert kicked.status == 200
    assert kicked.body == {
        "id": "ks", "step": "load", "kicked": 2, "jobs": ["ks:load[0]", "ks:load[2]"]
    }  # fmt: skip
    assert [client.jobs[f"ks:load[{i}]"].state for i in range(3)] == ["waiting"] * 3
    entry = api.get("/api/v1/audit?limit=1").body["items"][0]
    assert entry["action"] == "kick_step"
    with assert_unchanged(redis_client):
        assert api.post("/api/v1/runs/ks/steps/load/kick").status == 409
    assert ">Kick step</button>" not in str(api.get("/runs/ks/steps/load").body)


def test_a_kick_needs_an_operator(client: Client, redis_client: redis.Redis) -> None:
    users = Users(client)
    viewer, operator = users.add("vic", "viewer"), users.add("opal", "operator")
    jid = client.queues["side"].put("K", {})
    client.jobs[jid].bury()
    with serve(client, RoleAuth(None, reads_open=True, users=users)) as base:
        with assert_unchanged(redis_client):
            refused = Api(base, viewer).post(f"/api/v1/jobs/{jid}/kick")
        assert refused.status == 403
        assert refused.body["detail"] == (
            f"user vic is a viewer: POST /api/v1/jobs/{jid}/kick needs operator"
        )
        assert Api(base, operator).post(f"/api/v1/jobs/{jid}/kick").status == 200
    assert client.jobs[jid].state == "waiting"
    entry = audit.recent(client, 1)[0]
    assert (entry["who"], entry["role"], entry["action"]) == ("opal", "operator", "kick_job")


EMPTY_FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
params:
  files: {{type: array, default: []}}
steps:
  list:
    job: tasks.list
    outputs: [files]
  process:
    needs: [list]
    foreach: {{items: "${{{{ steps.list.outputs.files }}}}", as: f}}
    job: tasks.process
  each:
    foreach: {{items: "${{{{ params.files }}}}", as: f}}
    job: tasks.process
  after:
    needs: [process, each]
    job: tasks.report
"""


def test_the_run_document_says_a_step_with_no_items_had_0(
    api: Api, client: Client, tmp_path: Path
) -> None:
    """A fan-out whose producer output no items and a foreach over an empty list: the run's
    document says each had 0 items (its total, counts, page of jobs and graph entry), and
    explain says so; each succeeded and released the step after them."""
    flow = register_flow(client, tmp_path, EMPTY_FLOW, "none")
    run_id = trigger_run(client, flow["name"]).run_id
    [listing] = client.queues[flow["queue"]].pop()
    listing.complete(result={"files": []})
    [after] = client.queues[flow["queue"]].pop()
    assert after.jid == f"{run_id}:after"
    after.complete()
    doc = api.get(f"/api/v1/runs/{run_id}").body
    assert doc["status"] == "succeeded" and doc["counts"] == {"success": 2}
    steps = {s["step"]: s for s in doc["steps"]}
    for name in ("process", "each"):
        seen = (steps[name]["status"], steps[name]["total"], steps[name]["counts"])
        assert seen == ("success", 0, {}) and steps[name]["jobs"] == []
        assert doc["graph"]["steps"][name]["items"] == 0
        explained = api.get(f"/api/v1/runs/{run_id}/explain?step={name}").body["steps"]
        assert explained == [
            {
                "step": name,
                "status": "success",
                "items": 0,
                "no_items": NO_ITEMS,
                "jobs": [],
                "more": 0,
            }
        ]
    assert (steps["list"]["total"], doc["graph"]["steps"]["list"]["items"]) == (1, 1)
    assert client.jobs[f"{run_id}:process"].result == []


WAITING_EMPTY_FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
params:
  files: {{type: array, default: []}}
steps:
  list:
    job: tasks.list
    outputs: [files]
  slow:
    job: tasks.slow
  process:
    needs: [list, slow]
    foreach: {{items: "${{{{ steps.list.outputs.files }}}}", as: f}}
    job: tasks.process
  later:
    needs: [list]
    foreach: {{items: "${{{{ params.files }}}}", as: f}}
    job: tasks.process
  after:
    needs: [process, later]
    job: tasks.report
"""


def _surfaces(api: Api, server: Any, run_id: str, step: str) -> dict[str, Any]:
    """What each surface says of a step: `flows status RUN` (its table's row and its JSON),
    the API's run (the step and its graph entry) and explain, the run page's graph node and
    the step's panel."""
    table = CliRunner().invoke(main, ["status", run_id, "--redis", server.url])
    assert table.exit_code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if f" {step} " in line]
    as_json = CliRunner().invoke(main, ["status", run_id, "--json", "--redis", server.url])
    [cli_step] = [s for s in json.loads(as_json.stdout)["steps"] if s["step"] == step]
    doc = api.get(f"/api/v1/runs/{run_id}").body
    [api_step] = [s for s in doc["steps"] if s["step"] == step]
    [explained] = api.get(f"/api/v1/runs/{run_id}/explain?step={step}").body["steps"]
    page = str(api.get(f"/runs/{run_id}").body)
    node = re.search(rf'data-step="{step}".*?</g>', page, re.S)
    assert node is not None
    progress = re.search(r'class="progress">([^<]*)<', node.group(0))
    panel = str(api.get(f"/runs/{run_id}/steps/{step}").body)
    said = re.search(r'<p id="no-items">([^<]*)</p>', panel)
    return {
        "table": [cell.strip() for cell in row.split("│") if cell.strip()][:3],
        "cli": (cli_step["status"], cli_step["total"], cli_step["counts"], cli_step["jobs"]),
        "api": (api_step["status"], api_step["total"], api_step["counts"], api_step["jobs"]),
        "graph": doc["graph"]["steps"][step]["items"],
        "explain": (explained["status"], explained["items"], explained["no_items"]),
        "node": progress.group(1) if progress else None,
        "panel": ("0 jobs · 0/0 done" in panel, said.group(1) if said else None),
    }


def _zero(step: str, status: str, said: str) -> dict[str, Any]:
    """A step of 0 items in ``status`` as every surface says it."""
    return {
        "table": [step, status, "0/0"],
        "cli": (status, 0, {}, []),
        "api": (status, 0, {}, []),
        "graph": 0,
        "explain": (status, 0, said),
        "node": "0/0",
        "panel": (True, said),
    }


def test_a_step_with_no_items_says_0_on_every_surface_before_and_after_it_completes(
    api: Api, client: Client, server: Any, tmp_path: Path
) -> None:
    """A foreach over an empty list waiting for its need, and a fan-out whose producer output
    no items waiting for its other need: each says 0 items and its status (waiting) on every
    surface, as it says 0 items and success once it completed. Before, a waiting one said one
    job, none done (`0/1`), and its run page node no count."""
    flow = register_flow(client, tmp_path, WAITING_EMPTY_FLOW, "waiting")
    run_id = trigger_run(client, flow["name"]).run_id
    waiting, done = NO_ITEMS_YET, NO_ITEMS

    assert _surfaces(api, server, run_id, "later") == _zero("later", "waiting", waiting)
    [explained] = api.get(f"/api/v1/runs/{run_id}/explain?step=later").body["steps"]
    assert [job["jid"] for job in explained["jobs"]] == [f"{run_id}:later"]  # why it waits
    jobs = {job.jid: job for job in client.queues[flow["queue"]].pop(2)}
    jobs[f"{run_id}:list"].complete(result={"files": []})
    assert _surfaces(api, server, run_id, "later") == _zero("later", "success", done)
    assert _surfaces(api, server, run_id, "process") == _zero("process", "waiting", waiting)
    jobs[f"{run_id}:slow"].complete()
    assert _surfaces(api, server, run_id, "process") == _zero("process", "success", done)
    doc = api.get(f"/api/v1/runs/{run_id}").body
    assert doc["counts"] == {"success": 2, "waiting": 1}  # list, slow; after: none for the two
