"""A real headless Chromium (Debian's ``chromium``, driven by Playwright) against a real
``flows ui`` on the embedded server.

Without a browser these tests skip, except under ``CI=true``, where a missing browser fails
them (the test command installs it). ``--screenshots DIR`` keeps a picture of each page.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import TOKEN, serve

from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

BROWSERS = ("chromium", "chromium-browser")
# How long a page is waited for before the wait is taken as hung: a bound on a hang only, never
# on speed (a machine busy with other work took more than 10 s to load a run page).
HUNG_MS = 60_000


def _executable() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = _executable()
    if executable is None:
        message = "no chromium on PATH (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: under CI=true the browser tests must run")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, base: str) -> Iterator[Any]:
    """A fresh tab at 1280x800, closed before the server stops (its event streams end first);
    ``page.errors`` collects uncaught script errors and what the security policy blocked."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.set_default_timeout(HUNG_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    # anything the Content-Security-Policy blocked is an error of the page too
    opened.on(
        "console",
        lambda message: (
            errors.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    opened.errors = errors
    opened.wait_for_function = lambda expression, arg=None, **options: _wait_for(
        opened, expression, arg, options
    )
    yield opened
    context.close()


def _wait_for(page: Any, expression: str, arg: Any, options: dict[str, Any]) -> None:
    """``page.wait_for_function`` that works under the pages' Content-Security-Policy.

    Playwright polls a predicate given as text with ``eval`` inside the page, which the policy
    forbids (no 'unsafe-eval'); ``page.evaluate`` goes through the DevTools protocol, which it
    does not govern, so the predicate is polled from here instead (with its ``arg``, as
    Playwright passes it)."""
    deadline = time.monotonic() + float(options.get("timeout") or HUNG_MS) / 1000
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {expression}")
        page.wait_for_timeout(50)


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="browser-test")


@pytest.fixture
def base(client: Client) -> Iterator[str]:
    """A real ``flows ui`` (token :data:`TOKEN`) on a free loopback port."""
    with serve(client, Auth(TOKEN, reads_open=True)) as url:
        yield url


@pytest.fixture
def shoot(request: pytest.FixtureRequest) -> Any:
    """``shoot(page, name)``: a full-page screenshot into ``--screenshots DIR``, when given."""
    where = request.config.getoption("--screenshots")

    def take(page: Any, name: str) -> None:
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)

    return take
