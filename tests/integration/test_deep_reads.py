"""A value stored nested deeper than any reader handles (written before the nesting limits, or
around them) reads on every surface, cut where every reader cuts it: the API over HTTP, the
command line's JSON and text, and the pages answer a job, a run, its data, result, outputs,
history, logs and workers, each showing the same marker where the value nests too deeply
(``scheduler.engine.limits.read_json``). The values are written straight into Redis, as an
older version left them (lua/README.md's key layout)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from flows_cli_support import flows
from ui_support import TOKEN, Api, serve

from flows.expand.jobs import expand
from flows.expand.run_specs import content_hash
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.ui.auth import Auth
from flows.validation.validate import load_flow
from scheduler.engine.client import Client
from scheduler.engine.limits import MAX_SHOWN_DEPTH, json_depth, nested_too_deep

MARKER = nested_too_deep()
SAID = f"nested deeper than {MAX_SHOWN_DEPTH} levels"
# Deeper than the engine's cjson (1,000 levels) and Python's decoder go.
LEVELS = 5_000


def deep(levels: int = LEVELS) -> str:
    """JSON text of a list ``levels`` levels deep."""
    return "[" * levels + "]" * levels


def cut(value: Any) -> bool:
    """Whether ``value`` holds the marker, its whole nesting within what a reader shows."""
    text = json.dumps(value)
    return json.dumps(MARKER)[1:-1] in text and json_depth(value, 2 * MAX_SHOWN_DEPTH) <= (
        MAX_SHOWN_DEPTH + 8
    )


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        yield Api(url, token=None)


def read_everywhere(cli: CliRunner, api: Api, path: str, *command: str) -> Any:
    """The API's document at ``path`` (asserted 200), after checking that ``flows COMMAND
    --json`` prints the same one (a listing: its items) and ``flows COMMAND`` answers without
    a traceback."""
    reply = api.get(path)
    assert reply.status == 200, reply.body
    shown = flows(cli, *command, "--json")
    assert shown.exit_code == 0, shown.output
    printed = json.loads(shown.stdout)
    assert printed == (reply.body["items"] if isinstance(printed, list) else reply.body)
    text = flows(cli, *command)
    assert text.exit_code == 0, text.output
    assert "Traceback" not in text.output
    return reply.body


def page(api: Api, path: str) -> str:
    reply = api.get(path)
    assert reply.status == 200, reply.body
    assert isinstance(reply.body, str)
    return reply.body


def test_a_job_stored_too_deep_reads_cut_on_every_surface(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis
) -> None:
    client.queues["plain"].put("tasks.t", {"a": 1}, jid="old")
    now = time.time()
    redis_client.hset("ql:j:old", mapping={"data": f'{{"v":{deep()}}}', "result": deep()})
    redis_client.rpush(
        "ql:j:old-history",
        json.dumps({"when": now, "what": "put", "q": "plain"}),
        f'{{"when":{now},"what":"note","detail":{deep()}}}',
    )
    redis_client.rpush("ql:log:1:old", f'{{"t":{now},"s":"stdout","m":{deep()}}}')
    redis_client.hset("ql:j:old", mapping={"log-attempts": 1, "log:1": "1 0 0 0"})

    job = read_everywhere(cli, api, "/api/v1/jobs/old", "job", "old")
    assert cut(job["data"]) and cut(job["result"]) and cut(job["history"][1])
    assert job["history"][1]["what"] == "note"
    text = flows(cli, "job", "old")
    assert SAID in text.output
    assert SAID in page(api, "/jobs/old")

    logs = api.get("/api/v1/jobs/old/logs")
    assert logs.status == 200, logs.body
    (line,) = logs.body["items"]
    assert SAID in line["text"]
    shown = flows(cli, "logs", "--job", "old")
    assert shown.exit_code == 0, shown.output
    assert SAID in shown.output


def _submit(client: Client, folder: Path, run_id: str) -> None:
    path = folder / "two.yaml"
    text = (
        "version: 1\nname: two\nparams:\n  p: {type: array, default: []}\n"
        "outputs:\n  o: '${{ steps.first.outputs.v }}'\n"
        "steps:\n  first: {run: 'true'}\n  second: {run: 'true', needs: [first]}\n"
    )
    path.write_text(text)
    flow = load_flow(path)
    requests = expand(
        flow, run_id=run_id, logical_time=datetime.now(UTC), params={}, flow_dir=folder
    )
    submit(
        client,
        assemble_run(run_id, flow.name, requests, params={}, file_hash=content_hash(text)),
    )


def test_a_run_stored_too_deep_reads_cut_on_every_surface(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _submit(client, tmp_path, "old")
    redis_client.hset("ql:j:old:first", "result", f'{{"v":{deep()}}}')
    redis_client.hset("ql:run:old", "params", f'{{"p":{deep()}}}')

    run = read_everywhere(cli, api, "/api/v1/runs/old", "status", "old")
    (first,) = [step for step in run["steps"] if step["step"] == "first"]
    assert cut(first["jobs"][0]["outputs"])
    assert cut(run["params"])
    listing = api.get("/api/v1/runs")
    assert listing.status == 200, listing.body
    assert cut(listing.body["items"][0]["params"])
    assert flows(cli, "runs").exit_code == 0
    page(api, "/runs/old")
    page(api, "/runs")
    assert SAID in page(api, "/jobs/old:first")
    for command in (("logs", "old"), ("explain", "old"), ("explain", "old:second")):
        shown = flows(cli, *command)
        assert shown.exit_code == 0, shown.output
        assert "Traceback" not in shown.output
    assert api.get("/api/v1/runs/old/logs").status == 200


def test_a_worker_registered_too_deep_reads_cut_on_every_surface(
    cli: CliRunner, client: Client, api: Api, redis_client: redis.Redis
) -> None:
    # As deep as the engine's cjson still decodes (it lists a deeper registration as none).
    redis_client.set("ql:w:old:info", f'{{"host":"h","pid":1,"x":{deep(900)}}}')
    redis_client.zadd("ql:workers", {"old": time.time()})
    workers = read_everywhere(cli, api, "/api/v1/workers", "workers")
    (worker,) = workers["items"]
    assert worker["name"] == "old" and worker["host"] == "h" and cut(worker["x"])
    page(api, "/workers")


def test_metrics_and_sources_read_workers_and_services_registered_too_deep(
    cli: CliRunner, api: Api, redis_client: redis.Redis
) -> None:
    # As deep as the engine's cjson still decodes and encodes again: with the frames of a
    # request below it, deeper than Python's decoder goes.
    now = time.time()
    redis_client.set("ql:w:old:info", f'{{"host":"h","pid":1,"x":{deep(990)}}}')
    redis_client.zadd("ql:workers", {"old": now})
    redis_client.set("ql:scheduler:svc", f'{{"host":"h","source":"s","x":{deep(990)}}}')
    redis_client.zadd("ql:schedulers", {"svc": now})

    metrics = page(api, "/metrics")
    assert "flows_workers" in metrics and "Traceback" not in metrics
    sources = api.get("/api/v1/sources")
    assert sources.status == 200, sources.body
    shown = flows(cli, "sources")
    assert shown.exit_code == 0, shown.output
    assert "Traceback" not in shown.output
