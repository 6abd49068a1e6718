"""Reads of ``flows ui`` given values a client should not send, over real HTTP on a real
server: each is answered with a 4xx naming what is wrong (never a 500), and changes nothing."""

from __future__ import annotations

import html
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, Api, serve

from flows.access import audit
from flows.expand.jobs import expand
from flows.expand.run_specs import content_hash
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.ui.auth import Auth
from flows.validation.validate import load_flow
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-bad-reads")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        yield Api(url, token=None)


@pytest.mark.parametrize(
    "before",
    [
        "18446744073709551616-0",  # past a stream id's 64 bits
        "0-18446744073709551616",
        "99999999999999999999999-0",
        "%D9%A1-%D9%A1",  # Arabic-Indic digits: a regex's \d takes them, Redis does not
    ],
)
def test_an_audit_page_before_no_entry_id_is_a_422(
    api: Api, client: Client, redis_client: redis.Redis, before: str
) -> None:
    audit.record(client, who="ada", action="cancel", target="x", via="cli")
    with assert_unchanged(redis_client):
        reply = api.get(f"/api/v1/audit?before={before}")
    assert reply.status == 422, reply.body
    assert reply.body["detail"].startswith("query.before: "), reply.body


def test_an_audit_page_before_the_first_id_is_empty(api: Api, client: Client) -> None:
    first = audit.record(client, who="ada", action="cancel", target="x", via="cli")
    assert api.get(f"/api/v1/audit?before={first}").body == {"items": [], "next": None}
    assert api.get("/api/v1/audit?before=0-0").body == {"items": [], "next": None}
    newest = api.get("/api/v1/audit?before=18446744073709551615-18446744073709551615")
    assert [entry["id"] for entry in newest.body["items"]] == [first]


def _submit(client: Client, tmp_path: Path, run_id: str) -> None:
    path = tmp_path / "two.yaml"
    text = "version: 1\nname: two\nsteps:\n  first: {run: 'true'}\n  second: {run: 'true'}\n"
    path.write_text(text)
    flow = load_flow(path)
    requests = expand(
        flow, run_id=run_id, logical_time=datetime.now(UTC), params={}, flow_dir=tmp_path
    )
    run = assemble_run(run_id, flow.name, requests, params={}, file_hash=content_hash(text))
    submit(client, run)


def test_a_run_paged_at_a_step_it_does_not_have_is_a_404(
    api: Api, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _submit(client, tmp_path, "two@1")
    assert api.get("/api/v1/runs/two@1?step=second&offset=0").status == 200
    with assert_unchanged(redis_client):
        reply = api.get("/api/v1/runs/two@1?step=third&offset=5")
    assert reply.status == 404, reply.body
    assert reply.body == {"detail": "run two@1 has no step 'third' (its steps: first, second)"}


def test_a_step_panel_of_a_step_the_run_lacks_names_the_one_meant(
    api: Api, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    _submit(client, tmp_path, "two@1")
    with assert_unchanged(redis_client):
        reply = api.get("/runs/two@1/steps/secnd")
    assert reply.status == 404, reply.body
    assert "run two@1 has no step 'secnd' (did you mean 'second'?)" in html.unescape(reply.body)


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/v1/runs?flow=", "flow"),
        ("/api/v1/runs/two@1?step=", "step"),
        ("/api/v1/runs/two@1?step=&offset=5", "step"),
        ("/api/v1/runs/two@1/logs?step=", "step"),
        ("/api/v1/runs/two@1/explain?step=", "step"),
        ("/api/v1/workers?queue=", "queue"),
        ("/api/v1/audit?who=", "who"),
        ("/api/v1/runs?since=", "since"),
        ("/api/v1/runs?status=", "status"),
        ("/api/v1/audit?before=", "before"),
    ],
)
def test_an_empty_filter_is_refused_naming_it(
    api: Api,
    client: Client,
    redis_client: redis.Redis,
    tmp_path: Path,
    path: str,
    parameter: str,
) -> None:
    """An empty filter is a mistake (a form's field left blank, a variable unset), not "any":
    it is refused rather than answered with everything."""
    _submit(client, tmp_path, "two@1")
    with assert_unchanged(redis_client):
        reply = api.get(path)
    assert reply.status == 422, reply.body
    assert reply.body["detail"].startswith(f"query.{parameter}: "), reply.body


def test_an_explained_step_is_a_name_of_bounded_length(
    api: Api, client: Client, tmp_path: Path
) -> None:
    _submit(client, tmp_path, "two@1")
    reply = api.get(f"/api/v1/runs/two@1/explain?step={'s' * 257}")
    assert reply.status == 422, reply.body
    assert reply.body["detail"].startswith("query.step: "), reply.body


@pytest.mark.parametrize(
    ("path", "unknown", "takes"),
    [
        # a misspelled filter would otherwise answer everything
        ("/api/v1/runs?flows=two", "flows", "offset, limit, flow, status, since, all"),
        ("/api/v1/runs?stauts=failed&limit=5", "stauts", "offset, limit, flow, status, since, all"),
        ("/api/v1/runs/two@1?steps=a", "steps", "limit, step, offset"),
        ("/api/v1/jobs/two@1:a/logs?atempt=1", "atempt", "attempt, offset, limit"),
        ("/api/v1/sources?since=0", "since", "no query parameter"),
    ],
)
def test_an_unknown_query_parameter_is_refused_naming_it(
    api: Api,
    client: Client,
    redis_client: redis.Redis,
    tmp_path: Path,
    path: str,
    unknown: str,
    takes: str,
) -> None:
    _submit(client, tmp_path, "two@1")
    with assert_unchanged(redis_client):
        reply = api.get(path)
    assert reply.status == 422, reply.body
    assert reply.body["detail"].startswith(f"query.{unknown}: not a parameter of "), reply.body
    assert reply.body["detail"].endswith(f"({takes})"), reply.body


def test_the_dashboard_pages_keep_their_own_query_parameters(
    api: Api, client: Client, tmp_path: Path
) -> None:
    """A page's link names what it opens (`?step=a&attempt=2&line=4`), read by its scripts."""
    _submit(client, tmp_path, "two@1")
    assert api.get("/runs/two@1?step=a&attempt=2&line=4").status == 200
