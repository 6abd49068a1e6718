"""The dashboard in a real headless Chromium against a real ``flows ui`` and the embedded
server: live status without reload, the log panel following a running step, run and job
actions with the token (and refused without it), schedules paused and triggered, values from
users and jobs shown as text, and every page at desktop and phone width."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from helpers import assert_unchanged
from ui_support import TOKEN, register_flow

from flows.expand.run_specs import job_objects
from flows.flowfile.job_data import META_KEY
from flows.runs.explain import NO_ITEMS, NO_ITEMS_YET
from flows.runs.read import load_run
from flows.runs.service_source import FlowsSource
from flows.runs.trigger import trigger_run
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument
from scheduler.engine.job import Job
from scheduler.service.schedules import Schedules

FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
params:
  who: {{type: string, default: nobody}}
  count: {{type: int, default: 1}}
  loud: {{type: bool, default: false}}
steps:
  extract:
    job: tasks.extract
    with: {{who: "${{{{ params.who }}}}"}}
  load:
    needs: [extract]
    foreach: {{items: [a, b, c]}}
    job: tasks.load
  report:
    needs: [load]
    job: tasks.report
"""
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
# Markup without white space or '/': a jid may hold no white space, a URL path no '/'.
STEP_XSS = '"><script>window.__xss=1<i>'


@dataclass
class Watched:
    """A page's dialogs, answered as ``accept`` says when they open, and its POSTs' URLs."""

    accept: bool
    dialogs: list[str] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)


def watch(page: Any, accept: bool) -> Watched:
    """Record the page's dialogs (accepted or dismissed as ``Watched.accept`` says) and POSTs."""
    watched = Watched(accept)

    def confirm(dialog: Any) -> None:
        watched.dialogs.append(dialog.message)
        dialog.accept() if watched.accept else dialog.dismiss()

    page.on("dialog", confirm)
    page.on(
        "request", lambda sent: watched.posts.append(sent.url) if sent.method == "POST" else None
    )
    return watched


def register(client: Client, tmp_path: Path, flow: str = FLOW) -> dict[str, str]:
    return register_flow(client, tmp_path, flow, "web")


def pop(client: Client, queue: str) -> Job:
    [job] = client.queues[queue].pop()
    return job


def node(page: Any, step: str) -> Any:
    return page.locator(f'g.node[data-step="{step}"]')


def set_token(page: Any, token: str) -> None:
    page.fill("#token", token)


def test_a_step_turns_running_then_success_live_and_its_log_follows(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"], {"who": "ada"}).run_id
    extract = pop(client, flow["queue"])
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.__same_page = true")
    assert "running" in node(page, "extract").text_content()
    assert "waiting" in node(page, "load").text_content()

    node(page, "extract").click()
    page.wait_for_selector("#log-panel:not([hidden])")
    client.engine.call(
        "log.append",
        extract.jid,
        1,
        0,
        2,
        time.time(),
        "stdout",
        "",
        "first line",
        time.time(),
        "stderr",
        "",
        "second line",
    )
    page.wait_for_function("document.querySelectorAll('#log .line').length === 2")
    assert page.inner_text("#log").splitlines() == ["first line", "second line"]
    shoot(page, "run-running")

    extract.complete()
    page.wait_for_selector('g.node[data-step="extract"].st-success')
    assert "success" in node(page, "extract").text_content()
    page.wait_for_function("document.getElementById('log-state').textContent === 'ended'")
    # the foreach step is one node with its items' progress, now ready to run
    assert "0/3" in node(page, "load").text_content()
    assert page.evaluate("window.__same_page") is True  # no reload happened
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")
    assert page.locator("#step-detail table.items tbody tr").count() == 3
    assert page.errors == []


LATE_FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
deadline: 30m
steps:
  slow: {{job: tasks.slow, deadline: 5m}}
  then: {{needs: [slow], foreach: {{items: [a, b]}}, job: tasks.then}}
"""


def drawn(page: Any) -> dict[str, str]:
    """What the run page shows of the run and of each step: its heading, its graph's nodes (but
    the durations static/timeline.js adds, which grow as time goes by)."""
    shown: dict[str, str] = page.evaluate(
        """() => Object.fromEntries([
            ["heading", document.querySelector("#run h1").innerHTML],
            ...[...document.querySelectorAll("g.node")].map((node) => {
                const copy = node.cloneNode(true);
                copy.querySelectorAll("text.dur").forEach((d) => d.remove());
                return [node.dataset.step, copy.outerHTML];
            }),
        ])"""
    )
    return shown


def test_a_deadline_missed_while_the_page_is_open_shows_as_a_reload_would(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path, LATE_FLOW)
    run_id = trigger_run(client, flow["name"]).run_id
    submitted = float(json.loads(client.engine.call("run.get", run_id))["submitted"])
    pop(client, flow["queue"])  # slow runs, and runs on past both deadlines
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.__same_page = true")
    assert page.locator("#deadline-missed").count() == 0
    assert node(page, "slow").get_attribute("aria-label") == "step slow: running"
    assert node(page, "slow").locator(".missed").count() == 0
    node(page, "slow").click()
    page.wait_for_selector("#step-detail h2")
    assert page.locator("#step-deadline-missed").count() == 0

    # The scheduler's housekeeping, at a moment past both deadlines.
    swept = json.loads(client.engine.call("deadline.sweep", now=submitted + 1801))
    assert swept["missed"] == 2
    # The page's poll (the run is running) draws both misses, and the open step's badge.
    page.wait_for_selector("#run-deadline #deadline-missed")
    page.wait_for_selector('g.node[data-step="slow"] .missed')
    page.wait_for_selector("#step-detail #step-deadline-missed")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(submitted + 1801))
    badge = page.locator("#deadline-missed")
    assert badge.inner_text().strip() == "◷ deadline missed"
    assert badge.get_attribute("title") == f"deadline 30m missed at {when} UTC"
    assert node(page, "slow").get_attribute("aria-label") == "step slow: running, deadline missed"
    assert node(page, "slow").locator("text.state").text_content() == "▶ running ◷"
    assert node(page, "then").get_attribute("aria-label") == "step then: waiting"
    assert page.evaluate("window.__same_page") is True  # no reload happened
    shoot(page, "run-deadline-missed")

    # Exactly what the server draws for a page opened now.
    live = drawn(page)
    fresh = page.context.new_page()
    fresh.goto(f"{base}/runs/{run_id}")
    assert drawn(fresh) == live
    fresh.close()
    assert page.errors == []


def test_a_failed_run_retried_and_a_run_canceled_from_the_buttons(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    pop(client, flow["queue"]).fail("boom", "extract broke")
    page.goto(f"{base}/runs/{run_id}")
    assert "failed" in page.inner_text("#run-status")
    node(page, "extract").click()
    page.wait_for_selector("#step-detail .failure")
    assert "extract broke" in page.inner_text("#step-detail .failure")
    shoot(page, "run-failed")

    set_token(page, TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Retry run").click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == "Done: retry the run: 1 job put back."
    page.wait_for_selector('g.node[data-step="extract"].st-waiting')
    assert client.jobs[f"{run_id}:extract"].state == "waiting"
    assert "running" in page.inner_text("#run-status")
    # nothing failed any more: the engine allows no retry, and the button goes with it
    page.wait_for_selector('#run-actions [data-run-action="retry"]', state="hidden")

    page.get_by_role("button", name="Cancel run").click()
    page.wait_for_selector("#run-status .st-canceled")
    assert client.jobs.get(f"{run_id}:extract") is None
    # The engine's one count, as the API and `flows cancel` say it: extract, load's three
    # items and report.
    assert page.inner_text("#flash") == "Done: cancel the run: 5 jobs canceled."
    assert page.errors == []


def test_an_action_without_the_token_or_with_a_wrong_one_is_refused_and_changes_nothing(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    page.goto(f"{base}/runs/{run_id}")
    page.on("dialog", lambda dialog: dialog.accept())
    with assert_unchanged(redis_client):
        page.get_by_role("button", name="Cancel run").click()
        page.wait_for_selector("#flash.error")
        assert "bearer token is needed" in page.inner_text("#flash")
        set_token(page, "not-the-token-of-this-server")
        page.get_by_role("button", name="Cancel run").click()
        page.wait_for_function(
            "document.getElementById('flash').textContent.includes('not this server')"
        )
    # no cookie was set that could carry authority
    assert page.context.cookies() == []
    assert client.jobs[f"{run_id}:extract"].state == "waiting"


def test_a_schedule_paused_resumed_and_triggered_with_typed_params(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    page.goto(f"{base}/flows")
    set_token(page, TOKEN)
    section = page.locator(f'section[data-schedule="{flow["name"]}"]')
    section.get_by_role("button", name="Pause").click()
    page.wait_for_selector(f'section[data-schedule="{flow["name"]}"] button:has-text("Resume")')
    registration = Schedules(client).get(flow["name"], skips=0)
    assert registration is not None and registration.is_paused
    shoot(page, "flows")

    section = page.locator(f'section[data-schedule="{flow["name"]}"]')
    section.locator('input[name="who"]').fill("grace")
    section.locator('input[name="count"]').fill("7")
    section.locator('input[name="loud"]').check()
    section.get_by_role("button", name="Trigger run").click()
    page.wait_for_selector("#flash.ok a")
    run_id = page.inner_text("#flash a")
    record = json.loads(client.engine.call("run.get", run_id))
    assert json.loads(record["params"]) == {"who": "grace", "count": 7, "loud": True}

    section.get_by_role("button", name="Resume").click()
    page.wait_for_selector(f'section[data-schedule="{flow["name"]}"] button:has-text("Pause")')
    registration = Schedules(client).get(flow["name"], skips=0)
    assert registration is not None and not registration.is_paused
    # the strip shows the triggered run
    assert page.locator(f'section[data-schedule="{flow["name"]}"] .strip a').count() == 1


def test_values_from_users_and_jobs_are_shown_as_text_never_run(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    flow = register(client, tmp_path)
    definition = Schedules(client).get(flow["name"], skips=0)
    assert definition is not None
    request = FlowsSource().build(
        definition.definition, f"{flow['name']}@xss", time.time(), "manual", 0.0
    )
    # a step named with markup, as a hand-made run could name it (a step is its jid's name)
    renamed = {f"{request.run_id}:extract": f"{request.run_id}:{STEP_XSS}"}
    jobs = job_objects(request.jobs_json())
    for job in jobs:
        data = json.loads(job["data"])
        if data[META_KEY]["step"] == "extract":
            data[META_KEY]["step"] = STEP_XSS
            data["who"] = XSS
            job["data"] = json.dumps(data)
        job["jid"] = renamed.get(job["jid"], job["jid"])
        job["depends"] = [renamed.get(jid, jid) for jid in job.get("depends") or []]
    request = dataclasses.replace(request, jobs_text=json.dumps(jobs))  # as changed, not as built
    Schedules(client).trigger(flow["name"], request)
    extract = pop(client, flow["queue"])
    client.engine.call("log.append", extract.jid, 1, 0, 1, time.time(), "stdout", "", XSS)
    extract.fail("<b>bold</b>", XSS)
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))

    page.goto(f"{base}/runs/{request.run_id}")
    step = page.locator("g.node").first
    assert step.get_attribute("data-step") == STEP_XSS
    # a failed run opens at its failed step by itself
    page.wait_for_url(lambda url: "?step=" in url)
    page.wait_for_selector("#step-detail .failure")
    page.wait_for_function("document.querySelectorAll('#log .line').length === 1")
    assert page.inner_text("#log") == XSS
    assert XSS in page.inner_text("#step-detail")  # data and failure, as text
    assert page.locator("#timeline .tl-row[data-step] .tl-name").first.inner_text() == STEP_XSS
    # its Retry step carries the step's name as text: in its question, and encoded in its URL
    retry = page.get_by_role("button", name="Retry step")
    assert retry.get_attribute("data-confirm") == (
        f"Retry step {STEP_XSS}? Its failed jobs run again; completed ones do not."
    )
    target = quote(f"{request.run_id}:{STEP_XSS}", safe="")
    assert retry.get_attribute("data-action") == f"/api/v1/jobs/{target}/retry"
    assert page.evaluate("window.__xss") is None
    for path in (
        f"/jobs/{extract.jid}",
        "/failures",
        "/failures?group=<b>bold</b>",
        "/runs",
        "/queues",
        "/",
    ):
        page.goto(base + path)
    assert page.evaluate("window.__xss") is None
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("b", has_text="bold").count() == 0  # the group name, as text
    assert alerts == [] and page.errors == []


LINK_XSS = '<a href="javascript:window.__xss=3">open</a>'


def test_params_and_outputs_with_markup_show_as_text_and_run_nothing(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """What a user passes (a param) and what a job returns (its outputs) are shown as they
    are, on the run's page, its step's panel and the job's page: no element, handler or
    `javascript:` link of theirs reaches the page."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"], {"who": XSS + LINK_XSS}).run_id
    pop(client, flow["queue"]).complete(result={"out": XSS, "link": LINK_XSS})
    alerts: list[str] = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    injected = """() => [...document.querySelectorAll('main *')].filter(e =>
        e.tagName === 'IMG' || e.tagName === 'SCRIPT' && e.type !== 'application/json'
            && !e.getAttribute('src')?.startsWith('/static/')
        || [...e.attributes].some(a => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value))
    ).map(e => e.outerHTML)"""
    for path in (f"/runs/{quote(run_id, safe='')}?step=extract", f"/jobs/{run_id}:extract"):
        page.goto(base + path)
        page.wait_for_function("document.body.innerText.includes('window.__xss = 2')")
        assert "javascript:window.__xss=3" in page.inner_text("main")  # as text
        assert page.evaluate(injected) == []
    assert page.evaluate("window.__xss") is None
    assert alerts == [] and page.errors == []


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: the text after it reads backwards


def test_bidirectional_and_control_characters_show_as_marks_and_reorder_nothing(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    flow = register(client, tmp_path)
    definition = Schedules(client).get(flow["name"], skips=0)
    assert definition is not None
    # An id holds no bidirectional control (it would display as another): refused at submit.
    with pytest.raises(InvalidArgument, match="control character"):
        FlowsSource().build(definition.definition, f"{flow['name']}@{RLO}x", time.time(), "", 0)
    run_id = f"{flow['name']}@live"
    request = FlowsSource().build(definition.definition, run_id, time.time(), "manual", 0.0)
    Schedules(client).trigger(flow["name"], request)
    extract = pop(client, flow["queue"])
    extract.fail("boom", f"bad{RLO}news \x1b[2J")

    page.goto(f"{base}/runs/{quote(run_id, safe='')}")
    page.wait_for_url(lambda url: "?step=" in url)
    page.wait_for_selector("#step-detail .failure")
    # a failure message may hold them: shown as marks, reordering nothing around them
    assert "bad<U+202E>news \u241b[2J" in page.inner_text("#step-detail .failure")
    assert page.inner_text("h1").startswith(f"{run_id} ✗ failed")
    assert RLO not in page.inner_text("body") and RLO not in page.title()
    page.goto(f"{base}/jobs/{quote(extract.jid, safe='')}")
    assert RLO not in page.inner_text("body")
    assert "bad<U+202E>news" in page.inner_text("body")
    assert page.errors == []


# Elements reaching past the screen's right edge, outside a scrolling box.
WIDER_THAN_SCREEN = """[...document.querySelectorAll('body *')]
  .filter(e => !e.closest('.scroll, .grid2 > section')
               && e.getBoundingClientRect().right > window.innerWidth + 1)
  .map(e => e.tagName + '.' + e.className)"""

PAGES = {
    "overview": "/",
    "runs": "/runs",
    "flows": "/flows",
    "queues": "/queues",
    "workers": "/workers",
    "failures": "/failures?group=boom",
}


def test_every_page_opens_at_desktop_and_phone_width_with_reachable_buttons(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    flow = register(client, tmp_path)
    done = trigger_run(client, flow["name"]).run_id
    extract = pop(client, flow["queue"])
    extract.complete()
    while jobs := client.queues[flow["queue"]].pop(3):
        for job in jobs:
            job.complete()
    running = trigger_run(client, flow["name"]).run_id
    client.queues["side"].put("tasks.side", {})
    [broken] = client.queues["side"].pop()
    broken.fail("boom", "it broke")
    client.engine.call("worker.register", "w-1", '{"queues": ["side"], "pid": 42, "host": "h"}')

    pages = {
        **PAGES,
        "run": f"/runs/{done}",
        "job": f"/jobs/{extract.jid}",
        "flow": f"/flows/{flow['name']}",
    }
    for name, path in pages.items():
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(base + path)
        assert page.title().endswith("flows ui")
        shoot(page, name)
        page.set_viewport_size({"width": 390, "height": 844})
        # nothing wider than the phone's screen but the tables and the graph, which scroll
        wide = page.evaluate(WIDER_THAN_SCREEN)
        assert wide == [], f"{name}: {wide}"
        shoot(page, f"{name}-phone")
    # the filter form: by flow and status, then any status
    page.goto(base + "/runs")
    page.fill('input[name="flow"]', flow["name"])
    page.select_option('select[name="status"]', "succeeded")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=succeeded$"))
    assert page.locator("table.runs tbody tr").all_text_contents()[0].startswith(done)
    assert page.locator("table.runs tbody tr").count() == 1
    page.select_option('select[name="status"]', "")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r"status=$"))
    assert page.locator("table.runs tbody tr").count() == 2
    # every status carries its word and symbol, not only its colour
    badges = page.locator("td .badge").all_text_contents()
    assert sorted({b.split()[-1] for b in badges}) == ["running", "succeeded"]
    assert all(b.split()[0] in ("✓", "▶") for b in badges)
    # a finished run offers no run button the engine would refuse
    page.goto(f"{base}/runs/{done}")
    assert page.locator("#run-actions button:visible").count() == 0
    # the run's buttons are reachable with the keyboard
    page.goto(f"{base}/runs/{running}")
    page.locator("#token").focus()
    focused = []
    for _ in range(2):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert focused[:2] == [flow["name"], "Cancel run"]  # the run's flow page first
    assert page.errors == []


def test_a_step_canceled_with_its_run_offers_the_retry_the_engine_allows(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """Its job no longer exists (canceled), yet the engine allows its retry: the panel offers
    it, and the button puts the run back."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    client.engine.call("run.cancel", run_id)
    page.goto(f"{base}/runs/{run_id}")
    node(page, "extract").click()
    page.wait_for_selector("#step-detail h2 .st-canceled")
    read = json.loads(client.engine.call("run.job", run_id, f"{run_id}:extract"))
    assert read["actions"] == ["retry"]
    set_token(page, TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Retry step").click()
    page.wait_for_selector("#flash.ok")
    page.wait_for_selector('g.node[data-step="extract"].st-waiting')
    assert client.jobs[f"{run_id}:extract"].state == "waiting"
    assert page.errors == []


GATE_FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
steps:
  gate:
    wait: {{signal: approve}}
  ship:
    needs: [gate]
    job: tasks.ship
"""


def test_retry_step_after_an_approval_canceled_brings_the_approval_back_first(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """A run canceled while its gate awaited approval: ship's Retry step puts ship back
    waiting for the gate, which awaits its approval again (its panel's Approve), never ship
    running unapproved."""
    flow = register(client, tmp_path, GATE_FLOW)
    run_id = trigger_run(client, flow["name"]).run_id
    client.engine.call("run.cancel", run_id)
    page.goto(f"{base}/runs/{run_id}")
    node(page, "ship").click()
    page.wait_for_selector("#step-detail h2 .st-canceled")
    set_token(page, TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Retry step").click()
    page.wait_for_selector("#flash.ok")
    page.wait_for_selector('g.node[data-step="gate"].st-awaiting')
    page.wait_for_selector('g.node[data-step="ship"].st-waiting')
    assert client.queues[flow["queue"]].pop() == []  # ship waits for the approval
    node(page, "gate").click()
    page.wait_for_selector("#step-detail h2 .st-awaiting")
    assert page.get_by_role("button", name="Approve").count() == 1
    assert page.errors == []


def test_a_buried_step_offers_kick_and_the_button_puts_it_back(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """A run's job buried by its worker: the step is buried, its panel offers Kick step (the
    engine allows the step kick; a step of one job has no Kick job besides), and the button
    makes the step waiting again, live."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    pop(client, flow["queue"]).bury("bad input file")
    page.goto(f"{base}/runs/{run_id}")
    node(page, "extract").click()
    page.wait_for_selector("#step-detail h2 .st-buried")
    assert page.get_by_role("button", name="Kick job").count() == 0
    kick = page.get_by_role("button", name="Kick step")
    assert kick.get_attribute("data-action") == f"/api/v1/runs/{quote(run_id)}/steps/extract/kick"
    set_token(page, TOKEN)
    page.on("dialog", lambda dialog: dialog.accept())
    kick.click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == "Done: kick step extract: 1 job put back."
    page.wait_for_selector('g.node[data-step="extract"].st-waiting')
    page.wait_for_selector("#step-detail h2 .st-waiting")
    assert page.get_by_role("button", name="Kick step").count() == 0
    job = client.jobs[f"{run_id}:extract"]
    assert job.state == "waiting" and job.history[-1]["what"] == "kicked"
    assert page.errors == []


def test_a_fan_out_step_with_buried_items_offers_kick_step_which_asks_and_needs_the_token(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """load's items: two buried, one running. Kick step shows exactly while the engine allows
    the step kick, asks first (a no sends nothing), is refused without the token or with a
    wrong one (nothing changes), and with it puts both buried items back in one POST; the open
    panel then drops the button without a reload."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    pop(client, flow["queue"]).complete()  # extract
    first, second, third = sorted(client.queues[flow["queue"]].pop(3), key=lambda j: j.jid)
    first.bury("bad input")
    third.bury("bad input")
    watched = watch(page, accept=True)
    dialogs, posts = watched.dialogs, watched.posts
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.__same_page = true")
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")
    buttons = page.evaluate(PANEL_BUTTONS)
    assert buttons == decided(client, run_id, "load")
    assert buttons == {
        "step": ["Kick step"], "load[0]": ["kick"], "load[1]": [], "load[2]": ["kick"]
    }  # fmt: skip
    kick = page.get_by_role("button", name="Kick step")
    assert kick.get_attribute("data-action") == f"/api/v1/runs/{quote(run_id)}/steps/load/kick"
    with assert_unchanged(redis_client):
        for token in ("", "not-the-token-of-this-server"):
            set_token(page, token)
            page.evaluate("document.getElementById('flash').className = ''")
            kick.click()
            page.wait_for_selector("#flash.error")
        watched.accept = False
        set_token(page, TOKEN)
        kick.click()
    assert dialogs == ["Kick step load? Its buried jobs go back into their queues."] * 3
    assert len(posts) == 2  # the question answered no sent nothing

    watched.accept = True
    page.evaluate("document.getElementById('flash').className = ''")
    kick.click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == "Done: kick step load: 2 jobs put back."
    assert posts[-1] == f"{base}/api/v1/runs/{quote(run_id)}/steps/load/kick"
    assert [client.jobs[j.jid].state for j in (first, second, third)] == [
        "waiting", "running", "waiting"
    ]  # fmt: skip
    page.wait_for_function("!document.querySelector('#step-actions button')")
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load")
    assert page.evaluate("window.__same_page") is True
    assert page.errors == []


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
  later:
    needs: [list]
    foreach: {{items: "${{{{ params.files }}}}", as: f}}
    job: tasks.process
  after:
    needs: [process, each, later]
    job: tasks.report
"""


def test_a_step_with_no_items_says_0_on_the_run_page(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """A fan-out whose producer output no items and a foreach over an empty list: their graph
    nodes say success 0/0, at load and live, and their panels say they had no items (no item
    table, no job), as does their "why?". One waiting for its need says 0/0 too, and why it
    waits."""
    flow = register(client, tmp_path, EMPTY_FLOW)
    run_id = trigger_run(client, flow["name"]).run_id
    page.goto(f"{base}/runs/{run_id}")
    assert node(page, "each").locator(".progress").text_content() == "0/0"  # drawn at load
    assert node(page, "later").locator(".progress").text_content() == "0/0"  # waiting
    node(page, "later").click()
    page.wait_for_selector("#step-detail h2:has-text('later')")
    assert page.inner_text("#no-items") == NO_ITEMS_YET
    page.get_by_role("button", name="why?").click()
    page.wait_for_function("document.querySelectorAll('.why-text div').length === 2")
    said = page.locator(".why-text div").all_text_contents()
    assert said[0] == NO_ITEMS_YET and "list" in said[1]  # it waits for list
    # its producer has not run yet: one job, the fan-out's template, and no count drawn
    assert node(page, "process").locator(".progress").count() == 0
    pop(client, flow["queue"]).complete(result={"files": []})  # list
    page.wait_for_selector('g.node[data-step="process"].st-success')  # redrawn live
    assert node(page, "process").locator(".progress").text_content() == "0/0"
    assert node(page, "list").locator(".progress").count() == 0  # a plain step has no count
    page.wait_for_selector('g.node[data-step="later"].st-success')
    for step in ("process", "each", "later"):
        node(page, step).click()
        page.wait_for_selector(f"#step-detail h2:has-text('{step}')")
        page.wait_for_selector("#no-items")
        detail = page.inner_text("#step-detail")
        assert "0 jobs · 0/0 done" in detail
        assert page.inner_text("#no-items") == NO_ITEMS
        assert page.locator("#step-detail table.items").count() == 0
        assert page.locator("#step-actions button").count() == 0  # the run is still running
        page.get_by_role("button", name="why?").click()
        page.wait_for_function(f"document.querySelector('.why-text').textContent === {NO_ITEMS!r}")
    assert page.errors == []


def test_an_open_step_panel_follows_its_actions_when_only_the_run_changes(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """extract succeeded; its status stays success while the engine's actions for it change
    with the run's: none while the run runs, a re-run once it is canceled, none once it is
    retried. The open panel shows each as a reload would, without one."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    pop(client, flow["queue"]).complete()
    page.goto(f"{base}/runs/{run_id}")
    node(page, "extract").click()
    page.wait_for_selector("#step-detail h2 .st-success")
    with page.expect_response(lambda reply: reply.url.endswith("/live")):
        pass  # the page redrew once from what it shows now
    assert page.locator("#step-actions button").count() == 0

    page.on("dialog", lambda dialog: dialog.accept())
    set_token(page, TOKEN)
    page.get_by_role("button", name="Cancel run").click()
    page.wait_for_selector("#run-status .st-canceled")
    page.wait_for_selector("#step-actions button")
    assert page.inner_text("#step-actions") == "Re-run step"

    page.get_by_role("button", name="Retry run").click()
    page.wait_for_selector("#run-status .st-running")
    page.wait_for_function("!document.querySelector('#step-actions button')")
    steps = {s["step"]: s for s in json.loads(client.engine.call("run.read", run_id))["steps"]}
    assert steps["extract"]["status"] == "success" and not steps["extract"]["actions"]
    assert page.errors == []


# Each action's button in the step panel: the step's own, and a foreach item's.
STEP_BUTTONS = {"retry": "Retry step", "rerun": "Re-run step", "kick": "Kick step"}
ITEM_BUTTONS = {"retry": "retry", "rerun": "re-run", "kick": "kick"}
# The panel's action buttons: the step's (under "step"), then each item row's by its jid.
PANEL_BUTTONS = """() => {
  const out = {step: [...document.querySelectorAll('#step-actions button[data-action]')]
    .map(b => b.textContent)};
  for (const row of document.querySelectorAll('#step-detail table.items tbody tr')) {
    out[row.querySelector('a').textContent] = [...row.querySelectorAll('button[data-action]')]
      .map(b => b.textContent);
  }
  return out;
}"""


def decided(client: Client, run_id: str, step: str) -> dict[str, list[str]]:
    """The buttons the engine's decider allows for ``step`` and its items (a foreach step's),
    as PANEL_BUTTONS reads them from the page."""
    view = load_run(client, run_id, 100)
    assert view is not None
    found = view.step(step)
    assert found is not None
    out = {"step": [STEP_BUTTONS[a] for a in STEP_BUTTONS if a in found.actions]}
    for job in found.jobs if found.total > 1 else []:  # a step of one job lists no items
        out[job.jid[len(run_id) + 1 :]] = [
            ITEM_BUTTONS[a] for a in ITEM_BUTTONS if a in job.actions
        ]
    return out


def test_a_fan_out_step_offers_its_retry_and_each_item_its_rerun_as_the_engine_allows(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path, shoot: Any
) -> None:
    """Retry step and each item's re-run show exactly where the engine's decider lists them,
    ask first, need the token, and change the engine's state. The run id holds quotes and
    markup, which every attribute the buttons carry keeps as text."""
    flow = register(client, tmp_path)
    definition = Schedules(client).get(flow["name"], skips=0)
    assert definition is not None
    run_id = f"{flow['name']}@'\"<i>&x"
    request = FlowsSource().build(definition.definition, run_id, time.time(), "manual", 0.0)
    Schedules(client).trigger(flow["name"], request)
    pop(client, flow["queue"]).complete()  # extract
    first, second, third = sorted(client.queues[flow["queue"]].pop(3), key=lambda j: j.jid)
    watched = watch(page, accept=True)
    dialogs, posts = watched.dialogs, watched.posts
    page.goto(f"{base}/runs/{quote(run_id, safe='')}")
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")
    # running items: nothing to retry or re-run
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load")
    assert page.evaluate(PANEL_BUTTONS) == {
        "step": [], "load[0]": [], "load[1]": [], "load[2]": []
    }  # fmt: skip

    first.complete()
    second.fail("boom", "item b broke")
    third.complete()
    # the run has failed (report waits for load): the open panel follows without a reload
    page.wait_for_selector("#step-actions button:has-text('Retry step')")
    buttons = page.evaluate(PANEL_BUTTONS)
    assert buttons == decided(client, run_id, "load")
    assert buttons == {
        "step": ["Retry step", "Re-run step"],
        "load[0]": ["re-run"],
        "load[1]": ["retry", "re-run"],
        "load[2]": ["re-run"],
    }
    shoot(page, "run-fan-out-actions")
    # a step that completed offers no retry, only its re-run
    node(page, "extract").click()
    page.wait_for_selector("#step-detail h2 .st-success")
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "extract")
    assert page.evaluate(PANEL_BUTTONS) == {"step": ["Re-run step"]}
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")

    # an open viewer without the token, then a wrong one, and a dismissed question: nothing
    retry = page.get_by_role("button", name="Retry step")
    rerun = page.locator("#step-detail tbody tr").first.get_by_role("button", name="re-run")
    with assert_unchanged(redis_client):
        for token in ("", "not-the-token-of-this-server"):
            set_token(page, token)
            for button in (retry, rerun):
                page.evaluate("document.getElementById('flash').className = ''")
                button.click()
                page.wait_for_selector("#flash.error")
        watched.accept = False
        set_token(page, TOKEN)
        for button in (retry, rerun):
            button.click()
    assert dialogs[:2] == [
        "Retry step load? Its failed jobs run again; completed ones do not.",
        f"Run {first.jid} again?",
    ]
    assert len(dialogs) == 6 and len(posts) == 4  # the questions answered no sent nothing

    # with the token and a yes: one item runs again, its earlier attempt kept
    watched.accept = True
    rerun.click()
    page.wait_for_selector("#flash.ok")
    # counted as `flows rerun` counts it: the jobs put back to run again
    assert page.inner_text("#flash") == f"Done: re-run {first.jid}: 1 job put back to run again."
    assert len(posts) == 5
    assert client.jobs[first.jid].state == "waiting"
    assert client.jobs[second.jid].state == "failed"
    assert client.jobs[third.jid].state == "complete"
    page.wait_for_selector("#run-status .st-running")
    # the run runs again: no re-run now, the failed item's retry still
    page.wait_for_function("!document.querySelector('#step-detail button[data-body]')")
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load")
    assert page.evaluate(PANEL_BUTTONS)["step"] == ["Retry step"]

    page.evaluate("document.getElementById('flash').className = ''")
    page.get_by_role("button", name="Retry step").click()
    page.wait_for_selector("#flash.ok")
    assert client.jobs[second.jid].state == "waiting"
    assert client.jobs[third.jid].state == "complete"  # completed: not run again
    page.wait_for_function("!document.querySelector('#step-actions button')")
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load")
    assert page.locator("#step-detail i").count() == 0  # the run id's markup, as text
    assert page.errors == []


SIDE_FLOW = """\
version: 1
name: {name}
queue: {queue}
schedule: {{cron: "0 0 1 1 *"}}
steps:
  load:
    foreach: {{items: [a, b, c]}}
    job: tasks.load
  side:
    job: tasks.side
"""


def test_an_open_fan_out_panel_offers_its_items_reruns_once_another_step_ends_the_run(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """load's items: failed, buried, succeeded; its status and its own actions stay the same
    when side, the last job running, completes and the run ends, but its ended items can be
    re-run from then on: the open panel shows them without a reload."""
    flow = register(client, tmp_path, SIDE_FLOW)
    run_id = trigger_run(client, flow["name"]).run_id
    jobs = {job.jid[len(run_id) + 1 :]: job for job in client.queues[flow["queue"]].pop(4)}
    jobs["load[0]"].fail("boom", "a broke")
    jobs["load[1]"].bury("bad input")
    jobs["load[2]"].complete()
    page.goto(f"{base}/runs/{run_id}")
    page.evaluate("window.__same_page = true")
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")
    before = {
        "step": ["Retry step", "Kick step"],
        "load[0]": ["retry"],
        "load[1]": ["kick"],
        "load[2]": [],
    }
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load") == before
    with page.expect_response(lambda reply: "/steps/load?" in reply.url):
        pass  # the page's first redraw draws the open panel again, from what it shows now

    jobs["side"].complete()
    page.wait_for_selector("#run-status .st-failed")
    page.wait_for_selector("#step-detail button[data-body]")
    after = {
        "step": ["Retry step", "Kick step"],
        "load[0]": ["retry", "re-run"],
        "load[1]": ["kick"],
        "load[2]": ["re-run"],
    }
    assert page.evaluate(PANEL_BUTTONS) == decided(client, run_id, "load") == after
    assert page.evaluate("window.__same_page") is True  # no reload happened
    assert page.errors == []


# Every button of the page that posts an action, with the question it asks (null: none).
ACTION_QUESTIONS = """() => [...document.querySelectorAll('button[data-action]')]
  .filter((b) => !b.hidden).map((b) => [b.textContent, question(b)])"""


def test_every_action_that_changes_a_run_asks_first_and_a_no_sends_nothing(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """load's items: failed, buried, succeeded; the run has failed. Every button that posts an
    action asks (the one rule of static/app.js, with the page's own words): Retry run, Cancel
    run, Retry step, the items' retry, re-run and kick. A no sends nothing and changes
    nothing, a yes does the action."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    pop(client, flow["queue"]).complete()  # extract
    first, second, third = sorted(client.queues[flow["queue"]].pop(3), key=lambda j: j.jid)
    first.fail("boom", "item a broke")
    second.bury("bad input")
    third.complete()
    watched = watch(page, accept=False)
    dialogs, posts = watched.dialogs, watched.posts
    page.goto(f"{base}/runs/{run_id}")
    set_token(page, TOKEN)
    node(page, "load").click()
    page.wait_for_selector("#step-detail table.items")
    buttons = page.evaluate(ACTION_QUESTIONS)
    assert buttons == [
        [
            "Retry run",
            f"Retry run {run_id}? Its failed, expired and canceled jobs run again; completed"
            " ones do not.",
        ],
        ["Cancel run", "Cancel every job of this run that has not ended?"],
        ["Retry step", "Retry step load? Its failed jobs run again; completed ones do not."],
        ["Kick step", "Kick step load? Its buried jobs go back into their queues."],
        ["retry", f"Retry {first.jid}? It runs again."],
        ["re-run", f"Run {first.jid} again?"],
        ["kick", f"Put {second.jid} back into its queue?"],
        ["re-run", f"Run {third.jid} again?"],
    ]
    rows = page.locator("#step-detail tbody tr")
    clicks = [
        page.get_by_role("button", name="Retry run"),
        page.get_by_role("button", name="Cancel run"),
        page.get_by_role("button", name="Retry step"),
        page.get_by_role("button", name="Kick step"),
        rows.nth(0).get_by_role("button", name="retry", exact=True),
        rows.nth(0).get_by_role("button", name="re-run"),
        rows.nth(1).get_by_role("button", name="kick"),
        rows.nth(2).get_by_role("button", name="re-run"),
    ]
    with assert_unchanged(redis_client):
        for button in clicks:
            button.click()
    assert dialogs == [question for _, question in buttons]
    assert posts == []  # and still none before the two below: they are all it sent

    watched.accept = True
    rows.nth(1).get_by_role("button", name="kick").click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == f"Done: kick {second.jid}: 1 job put back."
    assert client.jobs[second.jid].state == "waiting"
    page.evaluate("document.getElementById('flash').className = ''")
    page.get_by_role("button", name="Retry run").click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == "Done: retry the run: 1 job put back."
    assert client.jobs[first.jid].state == "waiting"
    assert client.jobs[third.jid].state == "complete"
    assert len(dialogs) == 10 and len(posts) == 2
    assert page.errors == []


def test_the_job_pages_actions_ask_first_too(
    page: Any, base: str, client: Client, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A job's page changes its run as the run page does: its Retry job asks, a no sends
    nothing, a yes puts the job back."""
    flow = register(client, tmp_path)
    trigger_run(client, flow["name"])
    extract = pop(client, flow["queue"])
    extract.fail("boom", "extract broke")
    watched = watch(page, accept=False)
    dialogs, posts = watched.dialogs, watched.posts
    page.goto(f"{base}/jobs/{quote(extract.jid, safe='')}")
    set_token(page, TOKEN)
    with assert_unchanged(redis_client):
        page.get_by_role("button", name="Retry job").click()
    assert dialogs == [f"Retry job {extract.jid}? It runs again."]
    watched.accept = True
    page.get_by_role("button", name="Retry job").click()
    page.wait_for_selector("#flash.ok")
    assert len(dialogs) == 2 and len(posts) == 1  # the no sent nothing
    assert client.jobs[extract.jid].state == "waiting"
    assert page.errors == []


def test_a_gone_worker_is_forgotten_from_the_workers_page_and_a_live_one_offers_nothing(
    page: Any, base: str, client: Client, redis_client: redis.Redis
) -> None:
    """`flows workers --forget` on the workers page: a Forget button only where the engine
    would take it (a silent worker holding no job), asking first, needing the token; a no or a
    missing token changes nothing, a yes forgets it."""
    info = {"host": "node-7", "pid": 4242, "queues": ["q"], "started": 1.0}
    seconds, _ = client.redis.time()
    client.engine.call("worker.register", "killed", json.dumps(info), now=float(seconds) - 120)
    client.engine.call("worker.register", "alive", json.dumps(info))
    client.queues["q"].put("K", {}, jid="held")
    holder = Client.from_engine(client.engine, worker_name="holder")
    holder.queues["q"].pop(now=float(seconds) - 120)
    watched = watch(page, accept=False)
    page.goto(f"{base}/workers")
    forget = page.get_by_role("button", name="Forget")
    assert forget.count() == 1  # neither the live worker nor the one holding a job
    assert forget.get_attribute("data-action") == "/api/v1/workers/killed/forget"
    row = page.locator("tr", has=forget)
    assert row.locator("td").first.inner_text() == "killed"
    with assert_unchanged(redis_client):
        forget.click()  # asked, and answered no
        watched.accept = True
        forget.click()  # yes, but without the token: refused
        page.wait_for_selector("#flash.error")
    assert (
        watched.dialogs
        == ["Forget worker killed? It is gone: killed, it never said it stopped."] * 2
    )
    assert watched.posts == [f"{base}/api/v1/workers/killed/forget"]
    set_token(page, TOKEN)
    forget.click()
    page.wait_for_selector("#flash.ok")
    assert page.inner_text("#flash") == "Done: forget worker killed."
    assert sorted(w["name"] for w in client.workers.documents()) == ["alive", "holder"]
    page.wait_for_timeout(500)  # the page reloads itself after a change: let it
    page.goto(f"{base}/workers")
    assert "killed" not in page.inner_text("main")
    assert page.get_by_role("button", name="Forget").count() == 0
    assert page.errors == []
