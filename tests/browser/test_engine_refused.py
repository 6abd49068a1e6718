"""The dashboard in a real headless Chromium over a Functions library swapped while ``flows ui``
runs (not this release's engine): a page opened or reloaded then is the dashboard's error page
saying what an operator does, as text, with no script error; and the pages come back once the
engine is loaded again."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from engine_library_support import another_release
from ui_support import TOKEN, Api

from scheduler.engine import scripts
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine, library_name


def test_a_page_over_a_swapped_library_says_what_to_do(
    functions: redis.Redis, page: Any, base: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scripts, "LIBRARY_CHECK_EVERY", 0.0)  # each request looks
    client.queues["q"].put("tasks.work", {})
    page.goto(base + "/queues")
    assert page.locator("h1").inner_text() == "Queues"
    functions.execute_command("FUNCTION", "LOAD", "REPLACE", another_release())
    page.reload()
    assert page.title() == "The engine cannot be used · flows ui"
    shown = page.locator("#refusal").inner_text()
    assert shown == Api(base, TOKEN).get("/api/v1/queues").body["detail"]
    assert f"FUNCTION DELETE {library_name()}) and runs `flows engine load`" in shown
    assert page.locator("nav a").count() > 5  # the dashboard's own page: its links lead on
    assert page.errors == []
    functions.function_delete(library_name())
    Engine(functions).load()
    page.reload()
    assert page.locator("h1").inner_text() == "Queues" and page.errors == []
