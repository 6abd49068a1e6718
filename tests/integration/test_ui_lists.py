"""Every list of the dashboard pages, and says where it is: the flows page, the overview's
short lists, queues, workers and a failure group; ids in links are encoded whole."""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ui_support import Api, serve

from flows.runs.build import build_run, read_flow_file
from flows.runs.service_source import FlowsSource
from flows.runs.submit import submit
from flows.ui import api as api_module
from flows.ui import pages
from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.service.schedules import Schedules

FLOW = """\
version: 1
name: {name}
schedule: {{cron: "0 0 1 1 *"}}
steps:
  only:
    run: "true"
"""


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="ui-lists")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(None, reads_open=True)) as base:
        yield Api(base, token=None)


def _register(client: Client, tmp_path: Path, count: int) -> list[str]:
    names = [f"flow-{i:03d}" for i in range(count)]
    now = time.time()
    for name in names:
        path = tmp_path / f"{name}.yaml"
        text = FLOW.format(name=name)
        path.write_text(text)
        definition = FlowsSource().load(path, text, now)
        assert definition is not None
        Schedules(client).register(definition, now)
    return names


def _shown(page: str, pattern: str) -> list[str]:
    return re.findall(pattern, page)


def test_the_flows_page_pages_through_every_schedule(
    api: Api, client: Client, tmp_path: Path
) -> None:
    names = _register(client, tmp_path, pages.FLOWS_PAGE + 5)
    first = api.get("/flows").body
    shown = _shown(first, r'data-schedule="([^"]+)"')
    assert shown == names[: pages.FLOWS_PAGE]
    assert f"1\u2013{pages.FLOWS_PAGE}, more on the next page" in first
    assert f'href="/flows?offset={pages.FLOWS_PAGE}"' in first
    second = api.get(f"/flows?offset={pages.FLOWS_PAGE}").body
    assert _shown(second, r'data-schedule="([^"]+)"') == names[pages.FLOWS_PAGE :]
    assert f"{pages.FLOWS_PAGE + 1}\u2013{len(names)} of {len(names)}" in second
    assert 'href="/flows?offset=0"' in second  # back
    overview = api.get("/").body
    assert f"The first {pages.OVERVIEW_LIST} schedules by name" in overview
    assert 'href="/flows"' in overview


def test_queues_and_workers_pages_page(api: Api, client: Client) -> None:
    for i in range(pages.LIST_PAGE + 3):
        client.queues[f"q{i:03d}"].put("K", {})
    first = api.get("/queues").body
    assert "more on the next page" in first
    assert f'href="/queues?offset={pages.LIST_PAGE}"' in first
    second = api.get(f"/queues?offset={pages.LIST_PAGE}").body
    assert f"of {pages.LIST_PAGE + 3}" in second
    workers = api.get("/workers").body
    assert "data-pager" in workers


def test_links_encode_every_reserved_character(api: Api, client: Client) -> None:
    jid = "odd?#%&;=+id"
    client.queues["enc"].put("K", {}, jid=jid)
    encoded = "odd%3F%23%25%26%3B%3D%2Bid"
    page = api.get(f"/jobs/{encoded}").body
    assert f'data-action="/api/v1/jobs/{encoded}/cancel"' in page  # waiting: cancel only
    assert api.get(f"/api/v1/jobs/{encoded}").body["jid"] == jid


def test_the_templates_url_filter_encodes_slashes_too() -> None:
    assert pages.urlencode("a/../b c") == "a%2F..%2Fb%20c"
    rendered = pages.templates.env.from_string('<a href="/runs/{{ id | urlencode }}">').render(
        id="x/../../runs/other"
    )
    assert rendered == '<a href="/runs/x%2F..%2F..%2Fruns%2Fother">'


def _runs(client: Client, tmp_path: Path, count: int, prefix: str) -> list[str]:
    """``count`` runs of a one-step flow, oldest first (each submitted a moment later)."""
    path = tmp_path / "one.yaml"
    path.write_text("version: 1\nname: one\nsteps:\n  only: {run: 'true'}\n")
    source = read_flow_file(path)
    ids = []
    for i in range(count):
        run_id = f"one@{prefix}{i:04d}"
        built = build_run(
            source,
            run_id=run_id,
            logical_time=datetime.now(UTC),
            params={},
            trigger="manual",
        )
        submit(client, built)
        ids.append(run_id)
    return ids


def _run_ids(page: str) -> list[str]:
    return [urllib.parse.unquote(i) for i in re.findall(r'href="/runs/([^"?]+)"', page)]


def test_the_runs_page_filtered_pages_through_matches_a_bounded_scan_at_a_time(
    api: Api, client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Smaller bounds, the same rules: a page of 10, at most 100 runs looked at per request.
    monkeypatch.setattr(pages, "RUNS_PAGE", 10)
    monkeypatch.setattr(api_module, "MAX_RUNS_SCANNED", 100)
    old = _runs(client, tmp_path, 25, "a")
    for run_id in old:
        client.engine.call("run.cancel", run_id)
    _runs(client, tmp_path, 150, "b")  # newer, still running
    newest_first = list(reversed(old))  # index positions 150..174
    # the newest 100 hold no canceled run: the page says how far it looked, not "No runs."
    first = api.get("/runs?status=canceled").body
    assert _run_ids(first) == []
    assert "No runs." not in first
    assert "None of runs 1\u2013100 matched." in first
    assert 'href="/runs?status=canceled&amp;offset=100">look further' in first
    assert "\u2190 newer" not in first
    # further: the first 10 matches; newer goes back to the start
    second = api.get("/runs?status=canceled&offset=100").body
    assert _run_ids(second) == newest_first[:10]
    assert 'href="/runs?status=canceled&amp;offset=0">\u2190 newer' in second
    assert 'href="/runs?status=canceled&amp;offset=160">older \u2192' in second
    # the next 10; newer is the page before, not 10 runs of the unfiltered list back
    third = api.get("/runs?status=canceled&offset=160").body
    assert _run_ids(third) == newest_first[10:20]
    assert 'href="/runs?status=canceled&amp;offset=150">\u2190 newer' in third
    assert _run_ids(api.get("/runs?status=canceled&offset=150").body) == newest_first[:10]
    last = api.get("/runs?status=canceled&offset=170").body
    assert _run_ids(last) == newest_first[20:]
    assert "older \u2192" not in last and "look further" not in last
    # a status no run has: bounded, honest, then "No runs." once the end is reached
    failed = api.get("/runs?status=failed").body
    assert "None of runs 1\u2013100 matched." in failed
    end = api.get("/runs?status=failed&offset=100").body
    assert "No runs." in end and "look further" not in end
    # the filters stay in every link, the flow's encoded whole
    named = api.get("/runs?flow=%3Cb%3Eone&status=canceled&all=true&offset=5").body
    assert "<b>one" not in named
    assert 'href="/runs?flow=%3Cb%3Eone&amp;status=canceled&amp;all=true&amp;offset=0">' in named
    # unfiltered (child runs too, any status): newer steps back a page of the list itself
    plain = api.get("/runs?all=true&offset=30").body
    assert 'href="/runs?all=true&amp;offset=20">\u2190 newer' in plain
