"""The dashboard at scale: the runs page costs the server as many commands with 10,000 runs in
the namespace as with 1,000, and a run of 10,000 steps (one ``foreach``) opens in the browser as
a handful of nodes, its items a page at a time, in a page of a bounded number of elements.
Counted, never timed (how fast they are is ``benchmarks/run_reads.py``'s); the times measured
are printed (``-s``)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from redis import Redis
from ui_support import serve

from flows.runs.service_source import FlowsSource
from flows.runs.trigger import trigger_run
from flows.ui.api import MAX_RUNS_SCANNED
from flows.ui.auth import Auth
from flows.ui.pages import ITEMS_PAGE
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules

RUNS = 10_000
ITEMS = 10_000
FOREACH = """\
version: 1
name: wide
queue: wide
schedule: {cron: "0 0 1 1 *"}
params:
  items: {type: array, items: {type: string}, default: []}
steps:
  prepare:
    job: tasks.prepare
  fan:
    needs: [prepare]
    foreach: {items: "${{ params.items }}"}
    job: tasks.item
  collect:
    needs: [fan]
    job: tasks.collect
"""


def best_of(url: str, times: int = 5) -> float:
    """The fastest of ``times`` GETs of ``url``, in ms (loopback: the server's time, about)."""
    best = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            response.read()
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def submit_runs(client: Client, count: int, first: int = 0) -> None:
    """``count`` one-job runs (numbered from ``first``), as ``flow.submit`` writes them, in
    pipelined batches."""
    pipe = client.engine.pipeline()
    for i in range(first, first + count):
        run_id = f"many@20261126T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}Z-{i:05d}"
        job = {
            "jid": f"{run_id}:only",
            "queue": "many",
            "klass": "tasks.only",
            "data": "{}",
            "priority": 0,
            "tags": [],
            "retries": 0,
            "depends": [],
            "delay": 0,
        }
        record = {
            "flow": "many",
            "params": "{}",
            "trigger": "schedule",
            "hash": "",
            "file": "",
            "queues": '["many"]',
        }
        pipe.call("flow.submit", run_id, json.dumps(record), json.dumps([job]))
        if (i - first) % 1000 == 999:
            pipe.execute()
            pipe = client.engine.pipeline()
    pipe.execute()


# The engine checks now and then that its library is the one loaded: not a page's reads.
LIBRARY_CHECK = {"info", "function|list", "config|resetstat"}


def commands_of(redis: Redis, url: str) -> dict[str, int]:
    """The server's commands (scripts' included: INFO commandstats), and how many of each,
    while ``url`` is read."""
    redis.config_resetstat()
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        response.read()
    stats = redis.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(stat["calls"])
        for name, stat in stats.items()
        if name.removeprefix("cmdstat_") not in LIBRARY_CHECK
    }


def test_the_runs_page_costs_as_many_commands_with_10000_runs_as_with_1000(
    client: Client, redis_client: Redis
) -> None:
    """A page reads RUNS_PAGE runs, and a filter looks at MAX_RUNS_SCANNED runs at most: past
    that many runs, the namespace's size changes nothing a page asks of the server (a
    filter that matches none looks at the most)."""
    pages = ("/runs", "/runs?flow=many&status=running", "/runs?flow=many&status=failed")
    with serve(client, Auth(None, reads_open=True)) as base:
        submit_runs(client, MAX_RUNS_SCANNED)
        fewer = {page: commands_of(redis_client, base + page) for page in pages}
        submit_runs(client, RUNS - MAX_RUNS_SCANNED, first=MAX_RUNS_SCANNED)
        many = {page: commands_of(redis_client, base + page) for page in pages}
    print(f"\nthe server's commands for a runs page with {RUNS} runs: {many}")
    assert many == fewer


def test_a_run_of_10000_foreach_items_opens_without_freezing(
    client: Client, page: Any, base: str, tmp_path: Path, shoot: Any
) -> None:
    path = tmp_path / "wide.yaml"
    path.write_text(FOREACH)
    definition = FlowsSource().load(path, FOREACH, time.time())
    assert definition is not None
    Schedules(client).register(definition, time.time())
    run_id = trigger_run(client, "wide", {"items": [f"i{n}" for n in range(ITEMS)]}).run_id
    server = best_of(f"{base}/runs/{run_id}", times=1)
    live = best_of(f"{base}/runs/{run_id}/live", times=1)

    started = time.perf_counter()
    page.goto(f"{base}/runs/{run_id}")
    loaded = (time.perf_counter() - started) * 1000
    assert page.locator("g.node").count() == 3
    assert f"0/{ITEMS}" in page.locator('g.node[data-step="fan"]').text_content()
    started = time.perf_counter()
    page.locator('g.node[data-step="fan"]').click()
    page.wait_for_selector("#step-detail table.items")
    opened = (time.perf_counter() - started) * 1000
    assert page.locator("#step-detail table.items tbody tr").count() == ITEMS_PAGE
    page.get_by_role("button", name=f"next {ITEMS_PAGE}").click()
    page.wait_for_selector(f"#step-detail :text('items {ITEMS_PAGE + 1}\u2013{2 * ITEMS_PAGE}')")
    # what the page holds is bounded by its pages, not by the run's items
    elements = page.evaluate("document.getElementsByTagName('*').length")
    print(
        f"\nrun of {ITEMS} items: page {server:.0f} ms server, {loaded:.0f} ms to load in "
        f"the browser; live redraw {live:.0f} ms; items panel {opened:.0f} ms; "
        f"{elements} elements"
    )
    assert elements < 20 * ITEMS_PAGE
    shoot(page, "run-foreach")
