"""The step panel's "why?" in a real headless Chromium: the engine's reason, shown as text."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent
from typing import Any

import redis
from helpers import assert_unchanged
from ui_support import TOKEN

from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.validation.validate import validate_text
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: why
queue: {queue}
steps:
  build:
    run: echo built
  approve:
    needs: [build]
    wait: {{signal: approve}}
"""


def _build_panel_of_a_new_run(page: Any, base: str, client: Client) -> tuple[str, str]:
    """A run of FLOW on a queue of its own, its page open on the build step's panel: the run
    id and the queue."""
    queue = f"q{uuid.uuid4().hex[:6]}"
    text = dedent(FLOW.format(queue=queue))
    result = validate_text(text, file="why.yaml", flow_dir=Path("."))
    assert result.flow is not None
    run_id = f"why@{uuid.uuid4().hex[:6]}"
    requests = expand(result.flow, run_id=run_id, logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run(run_id, "why", requests, params={}))
    page.goto(f"{base}/runs/{run_id}")
    page.locator('g.node[data-step="build"]').click()
    page.wait_for_selector("#step-detail button[data-why-run]")
    return run_id, queue


def test_why_says_what_holds_a_step_back(page: Any, base: str, client: Client) -> None:
    run_id, queue = _build_panel_of_a_new_run(page, base, client)
    page.get_by_role("button", name="why?").click()
    page.wait_for_function(
        "document.querySelector('#step-detail .why-text').textContent.includes('worker')"
    )
    assert page.inner_text("#step-detail .why-text") == (
        f"No live worker listens on its queue {queue}; none has ever registered for it "
        f"(start one: flows worker -q {queue})."
    )
    page.locator('g.node[data-step="approve"]').click()
    page.wait_for_selector("#step-detail button[data-why-step='approve']")
    page.get_by_role("button", name="why?").click()
    page.wait_for_function(
        "document.querySelector('#step-detail .why-text').textContent.includes('dependencies')"
    )
    assert page.inner_text("#step-detail .why-text") == (
        f"It waits for its dependencies (trigger rule all_success): {run_id}:build (waiting)."
    )


def test_approve_on_the_panel_gives_what_flows_approve_gives(
    page: Any, base: str, client: Client, redis_client: redis.Redis
) -> None:
    """The panel's Approve posts the approval (a note and who approved), the CLI's data: a wait
    that declares `outputs: [note]` is approved from the dashboard too."""
    text = dedent(
        """\
        version: 1
        name: gate
        queue: qgate
        steps:
          gate:
            wait: {signal: go}
            outputs: [note]
        """
    )
    result = validate_text(text, file="gate.yaml", flow_dir=Path("."))
    assert result.flow is not None
    run_id = f"gate@{uuid.uuid4().hex[:6]}"
    requests = expand(result.flow, run_id=run_id, logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    submit(client, assemble_run(run_id, "gate", requests, params={}))
    page.goto(f"{base}/runs/{run_id}")
    page.fill("#token", TOKEN)
    page.locator('g.node[data-step="gate"]').click()
    answers = [False, True]  # asked first: a no sends nothing, a yes approves
    dialogs: list[str] = []

    def confirm(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.accept() if answers.pop(0) else dialog.dismiss()

    page.on("dialog", confirm)
    posts: list[str] = []
    page.on("request", lambda sent: posts.append(sent.url) if sent.method == "POST" else None)
    with assert_unchanged(redis_client):
        page.get_by_role("button", name="Approve").click()
    assert dialogs == ["Approve step gate? It completes and the steps that need it run."]
    page.get_by_role("button", name="Approve").click()
    page.wait_for_function("document.querySelector('#flash').textContent.includes('Done')")
    assert len(dialogs) == 2 and len(posts) == 1  # the no sent nothing
    job = client.jobs[f"{run_id}:gate"]
    assert job is not None and job.state == "complete"
    assert job.result == {"note": "", "approved_by": "api"}


def test_why_refused_by_the_api_says_what_the_api_said_as_text(
    page: Any, base: str, client: Client
) -> None:
    run_id, _ = _build_panel_of_a_new_run(page, base, client)
    # A step the run does not have (markup in its name, no "/": that would name a child
    # run's step): the API's 404 names it.
    page.eval_on_selector(
        "#step-detail button[data-why-run]", "b => { b.dataset.whyStep = '<b>bild'; }"
    )
    page.get_by_role("button", name="why?").click()
    page.wait_for_function(
        "document.querySelector('#step-detail .why-text').textContent.startsWith('Could not')"
    )
    assert page.inner_text("#step-detail .why-text") == (
        f"Could not ask why: run {run_id} has no step '<b>bild' (did you mean 'build'?)."
    )
    assert page.locator("#step-detail .why-text b").count() == 0
