"""Every list of the dashboard pages, and says where it is: the flows page, the overview's
short lists, queues, workers and a failure group; ids in links are encoded whole."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import Api, serve

from flows.runs.service_source import FlowsSource
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
