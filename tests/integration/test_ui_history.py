"""A run's timeline and a flow's history grid over real HTTP (a real ``flows ui`` on the
embedded server): times from the jobs' histories, statuses as the run page says them, and the
grid read in a few engine round trips whatever the number of jobs."""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, register_flow, serve

from flows.runs.build import build_run, read_flow_file
from flows.runs.submit import submit
from flows.runs.trigger import trigger_run
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
  extract:
    job: tasks.extract
    retry: {{attempts: 2}}
  load:
    needs: [extract]
    foreach: {{items: [a, b, c]}}
    job: tasks.load
  report:
    needs: [load]
    job: tasks.report
"""


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="history-test")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


@pytest.fixture
def flow(client: Client, tmp_path: Path) -> dict[str, str]:
    return register_flow(client, tmp_path, FLOW, "hist")


def work(client: Client, queue: str, at: float, took: float, fail: str | None = None) -> float:
    """Pops what is ready at ``at`` and ends each job ``took`` seconds later; the end time."""
    jobs = client.queues[queue].pop(10, now=at)
    assert jobs
    for job in jobs:
        if fail and job.jid.endswith(":" + fail):
            job.fail("exit-code-4", "it broke", now=at + took)
        else:
            job.complete(now=at + took)
    return at + took


def fcalls(redis_client: redis.Redis) -> int:
    stats = redis_client.info("commandstats")
    return sum(
        int(v["calls"])
        for k, v in stats.items()
        if k.startswith(("cmdstat_fcall", "cmdstat_evalsha"))
    )


def test_the_timeline_says_when_each_step_waited_and_ran(
    api: Api, client: Client, flow: dict[str, str]
) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    base = client.engine.server_time() + 10
    ended = work(client, flow["queue"], base, 5.0)  # extract: 5 s
    ended = work(client, flow["queue"], ended + 2, 3.0)  # load's 3 items, 2 s after
    line = api.get(f"/api/v1/runs/{run_id}/timeline").body
    steps = {row["step"]: row for row in line["steps"]}
    assert [row["step"] for row in line["steps"]] == ["extract", "load", "report"]
    assert line["status"] == "running"
    extract, load, report = steps["extract"], steps["load"], steps["report"]
    assert extract["status"] == "success" and extract["items"] == 1
    assert extract["started"] == pytest.approx(base)
    assert extract["finished"] == pytest.approx(base + 5)
    assert extract["ready"] <= base  # put at submission
    assert extract["attempts"] == [[pytest.approx(base), pytest.approx(base + 5)]]
    # load could start when extract ended, and started 2 s later
    assert load["ready"] == pytest.approx(base + 5)
    assert load["started"] == pytest.approx(base + 7)
    assert load["finished"] == pytest.approx(base + 10) and load["duration"] == pytest.approx(3)
    assert load["items"] == 3 and load["attempts"] == []  # a foreach step: one span
    # report is ready (its need ended) and waits to be popped
    assert report["status"] == "waiting" and report["ready"] == pytest.approx(base + 10)
    assert report["started"] is None and report["finished"] is None


def test_a_retried_job_shows_each_attempt(api: Api, client: Client, flow: dict[str, str]) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    base = client.engine.server_time() + 10
    [job] = client.queues[flow["queue"]].pop(now=base)
    job.retry(0, "flaky", "try again", now=base + 1)
    [job] = client.queues[flow["queue"]].pop(now=base + 2)
    running = api.get(f"/api/v1/runs/{run_id}/timeline").body["steps"][0]
    assert running["status"] == "running"
    assert running["attempts"] == [
        [pytest.approx(base), pytest.approx(base + 1)],
        [pytest.approx(base + 2), None],
    ]
    job.complete(now=base + 4)
    done = api.get(f"/api/v1/runs/{run_id}/timeline").body["steps"][0]
    assert done["attempts"][-1] == [pytest.approx(base + 2), pytest.approx(base + 4)]


def test_the_history_grid_has_runs_as_columns_and_steps_as_rows_in_few_engine_calls(
    api: Api, client: Client, flow: dict[str, str], redis_client: redis.Redis, tmp_path: Path
) -> None:
    base = client.engine.server_time() + 10
    first = trigger_run(client, flow["name"]).run_id
    at = work(client, flow["queue"], base, 1.0)
    at = work(client, flow["queue"], at, 2.0)
    at = work(client, flow["queue"], at, 3.0)  # first: succeeded in 6 s
    second = trigger_run(client, flow["name"]).run_id
    work(client, flow["queue"], at + 1, 4.0, fail="extract")  # second: failed at extract
    third = trigger_run(client, flow["name"]).run_id  # third: waiting to start
    before = fcalls(redis_client)
    grid = api.get(f"/api/v1/flows/{flow['name']}/history").body
    calls = fcalls(redis_client) - before
    assert calls <= 2 + 3  # the runs, one run.get each (one round trip), one multiget
    assert grid["flow"] == flow["name"]
    assert grid["steps"] == ["extract", "load", "report"]
    assert [r["id"] for r in grid["runs"]] == [first, second, third]  # oldest first
    assert [r["status"] for r in grid["runs"]] == ["succeeded", "failed", "running"]
    assert grid["runs"][0]["duration"] == pytest.approx(6)
    assert grid["runs"][1]["duration"] == pytest.approx(4)
    assert grid["runs"][2]["duration"] is None
    assert {s: v["status"] for s, v in grid["runs"][1]["steps"].items()} == {
        "extract": "failed",
        "load": "upstream_failed",
        "report": "upstream_failed",
    }
    assert grid["runs"][0]["steps"]["load"] == {
        "status": "success",
        "duration": pytest.approx(2),
        "items": 3,
    }
    # the newest two only
    two = api.get(f"/api/v1/flows/{flow['name']}/history?count=2").body
    assert [r["id"] for r in two["runs"]] == [second, third]
    # a registered flow with no runs has an empty grid
    other = register_flow(client, tmp_path, FLOW, "none")
    assert api.get(f"/api/v1/flows/{other['name']}/history").body == {
        "flow": other["name"],
        "steps": [],
        "runs": [],
    }


def test_the_flow_page_draws_the_grid_with_links_to_each_step(
    api: Api, client: Client, flow: dict[str, str]
) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    work(client, flow["queue"], client.engine.server_time() + 1, 2.0, fail="extract")
    page = api.get(f"/flows/{flow['name']}")
    assert page.status == 200
    html = page.body
    assert 'class="history"' in html
    assert f'href="/runs/{run_id.replace("@", "%40")}?step=extract"' in html
    assert 'class="gcell st-failed"' in html and "0 0 1 1 *" in html


def test_every_page_gives_the_next_fire_in_the_schedules_zone_as_the_cli_does(
    api: Api, client: Client, tmp_path: Path
) -> None:
    # The overview gave it in UTC without saying so, the flow page in UTC saying so, while
    # `flows schedules` says "03:15 CET": one wording, the schedule's own zone, everywhere.
    zoned = FLOW.replace('"0 0 1 1 *"}', '"15 3 * * *", timezone: Europe/Paris}')
    flow = register_flow(client, tmp_path, zoned, "zoned")
    registration = Schedules(client).get(flow["name"])
    assert registration is not None and registration.next is not None
    local = registration.local(registration.next)
    assert local.endswith(("03:15 CET", "03:15 CEST")), local
    for path in ("/", "/flows", f"/flows/{flow['name']}"):
        page = api.get(path)
        assert page.status == 200, path
        assert local in page.body, (path, page.body)


def test_a_flow_neither_registered_nor_run_is_a_404_naming_it(
    api: Api, client: Client, tmp_path: Path, redis_client: redis.Redis
) -> None:
    with assert_unchanged(redis_client):
        for name in ("NOSUCH", "<b>x"):
            quoted = urllib.parse.quote(name, safe="")
            reply = api.get(f"/api/v1/flows/{quoted}/history")
            assert reply.status == 404 and reply.body == {"detail": f"no flow named {name!r}"}
            page = api.get(f"/flows/{quoted}")  # the dashboard's error page, the same words
            assert page.status == 404 and "<h1>Not found</h1>" in page.body
            assert f"no flow named {name!r}" in html.unescape(page.body), page.body
            assert "'<b>x'" not in page.body  # escaped
    # registered and never run: its page says so
    registered = register_flow(client, tmp_path, FLOW, "idle")
    page = api.get(f"/flows/{registered['name']}")
    assert page.status == 200 and "No runs of this flow yet." in page.body
    # run with `flows run`, never registered: its page draws its runs
    path = tmp_path / "adhoc.yaml"
    path.write_text("version: 1\nname: adhoc\nsteps:\n  only: {run: 'true'}\n")
    built = build_run(
        read_flow_file(path),
        run_id="adhoc@1",
        logical_time=datetime.now(UTC),
        params={},
        trigger="manual",
    )
    submit(client, built)
    page = api.get("/flows/adhoc")
    assert page.status == 200 and "Not registered with a scheduler service" in page.body
    assert 'href="/runs/adhoc%401?step=only"' in page.body
    assert [r["id"] for r in api.get("/api/v1/flows/adhoc/history").body["runs"]] == ["adhoc@1"]


def test_bad_requests_are_refused_and_change_nothing(
    api: Api, flow: dict[str, str], redis_client: redis.Redis
) -> None:
    with assert_unchanged(redis_client):
        assert api.get("/api/v1/runs/nope@1/timeline").status == 404
        for count in ("0", "101", "x"):
            reply = api.get(f"/api/v1/flows/{flow['name']}/history?count={count}")
            assert reply.status == 422 and "query.count" in reply.body["detail"]


def test_reads_of_the_new_routes_need_the_token_when_reads_are_not_open(
    client: Client, flow: dict[str, str]
) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    paths = [
        f"/api/v1/runs/{run_id}/timeline",
        f"/api/v1/flows/{flow['name']}/history",
        f"/api/v1/jobs/{run_id}:extract/logs/raw",
        f"/flows/{flow['name']}",
    ]
    with serve(client, Auth(TOKEN, reads_open=False)) as base:
        closed = Api(base)
        for path in paths:
            assert closed.get(path, token=None).status == 401, path
            assert closed.get(path).status == 200, path


def test_the_raw_log_of_a_missing_job_or_attempt_is_refused(
    api: Api, client: Client, flow: dict[str, str], redis_client: redis.Redis
) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    with assert_unchanged(redis_client):
        assert api.get("/api/v1/jobs/nope/logs/raw").status == 404
        for attempt in ("0", "x", "100001"):
            reply = api.get(f"/api/v1/jobs/{run_id}:extract/logs/raw?attempt={attempt}")
            assert reply.status == 422 and "query.attempt" in reply.body["detail"]
    # a job with no lines yet: an empty text
    reply = api.get(f"/api/v1/jobs/{run_id}:extract/logs/raw")
    assert reply.status == 200 and reply.body == ""


def test_a_log_attempt_the_job_never_had_is_a_404_saying_how_many_it_has(
    api: Api, client: Client, flow: dict[str, str], redis_client: redis.Redis
) -> None:
    run_id = trigger_run(client, flow["name"]).run_id
    jid = f"{run_id}:extract"
    quoted = urllib.parse.quote(jid, safe="")
    base = client.engine.server_time() + 10
    [job] = client.queues[flow["queue"]].pop(now=base)
    client.engine.call("log.append", jid, 1, 0, 1, base, "stdout", "", "first try")
    job.retry(0, "flaky", "try again", now=base + 1)
    client.queues[flow["queue"]].pop(now=base + 2)  # attempt 2 runs, no line yet
    with assert_unchanged(redis_client):
        for route in ("logs", "logs/raw"):
            made = api.get(f"/api/v1/jobs/{quoted}/{route}?attempt=2")
            assert made.status == 200, (route, made.body)  # made, nothing written yet
            missing = api.get(f"/api/v1/jobs/{quoted}/{route}?attempt=999")
            assert missing.status == 404, route
            assert missing.body == {
                "detail": f"job {jid!r} has no attempt 999 (it has 2 attempts)"
            }, route
            # a job that is not there: said in plain words, no engine function named
            gone = api.get(f"/api/v1/jobs/nope/{route}")
            assert gone.status == 404 and gone.body == {"detail": "no job 'nope'"}, route
            gone = api.get(f"/api/v1/jobs/nope/{route}?attempt=1")
            assert gone.status == 404 and gone.body == {"detail": "no job 'nope'"}, route
    assert api.get(f"/api/v1/jobs/{quoted}/logs?attempt=2").body["items"] == []
    first = api.get(f"/api/v1/jobs/{quoted}/logs?attempt=1").body
    assert [line["text"] for line in first["items"]] == ["first try"]
    # a job that has not started: no attempt yet
    waiting = client.queues["idle"].put("K", {}, jid="idle-1")
    reply = api.get(f"/api/v1/jobs/{waiting}/logs?attempt=1")
    assert reply.status == 404
    assert reply.body == {"detail": "job 'idle-1' has no attempt 1 (it has no log yet)"}
    assert api.get(f"/api/v1/jobs/{waiting}/logs").status == 200  # the latest: none yet
