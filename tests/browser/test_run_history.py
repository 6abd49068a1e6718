"""A run's timeline and the durations on its graph, and a flow's history grid, in a real
Chromium against a real ``flows ui``: bars where the steps waited and ran, a cell per step and
run that opens that step's log."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from test_dashboard import FLOW, node, register
from test_log_viewer import append, wait_drawn, wait_step

from flows.runs.trigger import trigger_run
from scheduler.engine.client import Client


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


def test_the_timeline_and_the_graph_show_how_long_each_step_waited_and_ran(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    start = client.engine.server_time() + 1
    ended = work(client, flow["queue"], start, 5.0)  # extract: 5 s
    ended = work(client, flow["queue"], ended + 3, 2.0)  # load: 3 s waiting, 2 s running
    page.goto(f"{base}/runs/{run_id}")
    page.wait_for_selector('#timeline .tl-row[data-step="report"]')
    rows = page.locator("#timeline .tl-row[data-step]")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.step)") == [
        "extract",
        "load",
        "report",
    ]
    extract = page.locator('#timeline .tl-row[data-step="extract"]')
    assert extract.locator(".tl-dur").inner_text() == "5.0 s"
    assert extract.locator(".tl-run").count() == 1
    load = page.locator('#timeline .tl-row[data-step="load"]')
    assert load.locator(".tl-dur").inner_text() == "2.0 s"
    assert "waited 3.0 s" in (load.locator(".tl-wait").get_attribute("title") or "")
    # bars in time order: load's run starts after extract's ended
    extract_box = extract.locator(".tl-run").bounding_box()
    load_box = load.locator(".tl-run").bounding_box()
    assert load_box["x"] > extract_box["x"] + extract_box["width"]
    assert "waiting" in page.locator('#timeline .tl-row[data-step="report"] .tl-dur').inner_text()
    # the graph's nodes carry the durations
    page.wait_for_function(
        "document.querySelector('g.node[data-step=\"extract\"] text.dur')?.textContent === '5.0 s'"
    )
    assert node(page, "load").locator("text.dur").text_content() == "2.0 s"
    assert node(page, "report").locator("text.dur").text_content() == ""
    shoot(page, "run-timeline")
    # a step's name on the timeline opens it
    load.locator(".tl-name").click()
    page.wait_for_url(lambda url: url.endswith("?step=load"))
    wait_step(page, "load")
    assert page.errors == []


def test_a_retried_step_shows_each_attempt_on_the_timeline(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    retried = FLOW.replace(
        "    job: tasks.extract\n", "    job: tasks.extract\n    retry: {{attempts: 2}}\n"
    )
    flow = register(client, tmp_path, retried)
    run_id = trigger_run(client, flow["name"]).run_id
    at = client.engine.server_time() + 1
    [job] = client.queues[flow["queue"]].pop(now=at)
    job.retry(0, "flaky", "try again", now=at + 1)
    [job] = client.queues[flow["queue"]].pop(now=at + 2)
    job.complete(now=at + 4)
    page.goto(f"{base}/runs/{run_id}")
    page.wait_for_selector('#timeline .tl-row[data-step="extract"] .tl-run')
    runs = page.locator('#timeline .tl-row[data-step="extract"] .tl-run')
    assert runs.evaluate_all("bars => bars.map(b => b.className)") == [
        "tl-run tl-try",
        "tl-run",
    ]
    assert "attempt 2, 2.0 s" in (runs.nth(1).get_attribute("title") or "")
    assert page.errors == []


def test_the_flow_page_shows_its_runs_as_a_grid_whose_cells_open_the_steps_log(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    at = client.engine.server_time() + 1
    runs = []
    for fails in (None, "extract", None):  # the middle run fails at extract
        runs.append(trigger_run(client, flow["name"]).run_id)
        [extract] = client.queues[flow["queue"]].pop(now=at)
        append(client, extract, [f"extract of run {len(runs)}", "done"])
        if fails:
            extract.fail("exit-code-4", "it broke", now=at + 2)
            at += 3
            continue
        extract.complete(now=at + 1)
        at = work(client, flow["queue"], at + 1, 2.0)
        at = work(client, flow["queue"], at, 1.0) + 1
    page.goto(f"{base}/flows")
    page.get_by_role("link", name=flow["name"], exact=True).click()
    page.wait_for_selector("table.history")
    assert page.locator("table.history tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.step)"
    ) == ["extract", "load", "report"]
    cells = page.locator('table.history tbody tr[data-step="extract"] a.gcell')
    assert cells.count() == 3
    classes = cells.evaluate_all("cells => cells.map(c => c.className)")
    assert classes == ["gcell st-success", "gcell st-failed", "gcell st-success"]
    reports = page.locator('table.history tbody tr[data-step="report"] a.gcell')
    assert reports.nth(1).get_attribute("class") == "gcell st-upstream_failed"
    durations = page.locator("table.history tr.durations .dur").all_inner_texts()
    assert durations == ["4.0s", "2.0s", "4.0s"]  # the failed one ended when extract failed
    assert page.locator("table.history tr.statuses a.gcell").evaluate_all(
        "cells => cells.map(c => c.className)"
    ) == ["gcell st-succeeded", "gcell st-failed", "gcell st-succeeded"]
    shoot(page, "flow-history")
    # a cell opens that step of that run, its log shown
    cells.nth(1).click()
    page.wait_for_url(lambda url: "?step=extract" in url)
    assert urllib.parse.unquote(page.url.split("/runs/")[1]).startswith(runs[1])
    wait_step(page, "extract")
    wait_drawn(page, 2)
    assert page.locator("#log .line").all_inner_texts() == ["extract of run 2", "done"]
    assert page.errors == []
    # the run page names its flow, and links back to this page
    page.get_by_role("link", name=flow["name"], exact=True).click()
    page.wait_for_selector("table.history")
