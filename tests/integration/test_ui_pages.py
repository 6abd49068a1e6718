"""The dashboard's pages over real HTTP (no browser): reads follow the API's rule, assets are
served from the package, bad queries are refused in one line, and values are escaped."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ui_support import TOKEN, Api, serve

from flows.expand.jobs import expand
from flows.expand.run_specs import content_hash
from flows.runs.build import assemble_run, read_flow_file
from flows.runs.submit import submit
from flows.ui import api, graph
from flows.ui.auth import Auth
from flows.validation.validate import load_flow
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.service.schedules import Schedules


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="pages-test")


def test_pages_need_the_token_when_reads_are_not_open(client: Client) -> None:
    with serve(client, Auth(TOKEN, reads_open=False)) as base:
        api = Api(base)
        for path in ("/", "/runs", "/flows", "/queues", "/workers", "/failures"):
            refused = api.get(path, token=None)
            assert refused.status == 401, path
            assert api.get(path).status == 200, path


def test_assets_bad_queries_and_escaping(client: Client) -> None:
    Schedules(client).ping("svc-<u>1</u>", {"host": "h"}, time.time())
    queue = client.queues["<b>q<i>"]  # a queue name is one path segment: no '/'
    jid = queue.put("<i>klass</i>", {"note": "<script>alert(1)</script>"})
    with serve(client, Auth(None, reads_open=True)) as base:
        api = Api(base, token=None)
        script = api.get("/static/app.js")
        assert script.status == 200 and "EventSource" in script.body
        assert api.get("/runs?status=bogus").status == 422
        # a page that cannot be answered is the dashboard's error page, with the API's words
        gone = api.get("/runs/no-such-run")
        assert gone.status == 404 and "<h1>Not found</h1>" in gone.body, gone.body
        assert "no run &#39;no-such-run&#39;" in gone.body and 'href="/runs"' in gone.body
        # the API's words, with no pointer to a command
        logs = api.get("/api/v1/runs/no-such-run/logs")
        assert (logs.status, logs.body) == (404, {"detail": "no run 'no-such-run'"})
        page = api.get(f"/jobs/{jid}").body
        assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
        assert "<i>klass</i>" not in page and "&lt;i&gt;klass&lt;/i&gt;" in page
        overview = api.get("/").body
        assert "svc-&lt;u&gt;1&lt;/u&gt; " in overview and "last tick" in overview
        queues = api.get("/queues").body
        assert "<b>q<i>" not in queues and "&lt;b&gt;q&lt;i&gt;" in queues


def test_every_title_is_text_and_the_job_page_loads_its_log_viewer_once(client: Client) -> None:
    jid = client.queues["titles"].put("Klass", {})
    with serve(client, Auth(None, reads_open=True)) as base:
        api = Api(base, token=None)
        for path in ("/", "/runs", "/flows", "/queues", "/workers", "/failures", f"/jobs/{jid}"):
            page = api.get(path)
            assert page.status == 200, path
            titles = re.findall(r"<title>(.*?)</title>", page.body, re.DOTALL)
            assert len(titles) == 1 and "<" not in titles[0], (path, titles)
        page = api.get(f"/jobs/{jid}").body
    assert re.findall(r"<title>(.*?)</title>", page, re.DOTALL) == [f"{jid} · flows ui"]
    viewer = '<script src="/static/logview.js" defer></script>'
    assert page.count(viewer) == 1 and page.index(viewer) > page.index("</title>")


def test_a_run_of_an_unregistered_flow_is_drawn_from_its_own_file(
    client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "two.yaml"
    text = (
        "version: 1\nname: two\nsteps:\n"
        "  first:\n    run: 'true'\n  second:\n    run: 'true'\n    needs: [first]\n"
    )
    path.write_text(text)
    flow = load_flow(path)
    requests = expand(
        flow, run_id="two@1", logical_time=datetime.now(UTC), params={}, flow_dir=tmp_path
    )
    submit(
        client,
        assemble_run(
            "two@1",
            flow.name,
            requests,
            params={},
            file_hash=content_hash(text),
            file=str(path),
        ),
    )
    record = api._load_run(client, "two@1").record
    assert graph.run_needs(client, record) == {"first": (), "second": ("first",)}
    with serve(client, Auth(None, reads_open=True)) as base:
        page = Api(base, token=None).get("/runs/two@1").body
    assert "<line" in page  # the edge first -> second
    path.write_text(text.replace("needs: [first]", "needs: []"))  # changed since the run
    assert graph.run_needs(client, record) is None  # not the run's flow any more


def test_a_file_with_a_byte_order_mark_is_read_as_its_run_read_it(
    client: Client, tmp_path: Path
) -> None:
    """The run's hash is of the text without the mark: so is the one compared with it."""
    path = tmp_path / "bom.yaml"
    text = "version: 1\nname: bom\nsteps:\n  a: {run: 'true'}\n  b: {run: 'true', needs: [a]}\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    source = read_flow_file(path)
    requests = expand(
        source.flow, run_id="bom@1", logical_time=datetime.now(UTC), params={}, flow_dir=tmp_path
    )
    submit(
        client,
        assemble_run("bom@1", "bom", requests, params={}, file_hash=source.hash, file=str(path)),
    )
    record = api._load_run(client, "bom@1").record
    assert graph.run_needs(client, record) == {"a": (), "b": ("a",)}
