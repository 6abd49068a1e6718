"""The API docs page in a real browser, offline: Swagger UI from this server's own files runs
under the Content-Security-Policy every page carries, and the browser asks no other origin."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def test_the_api_docs_render_offline_under_the_policy(page: Any, base: str, shoot: Any) -> None:
    asked: list[str] = []
    violations: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    # no network but this server: any other origin fails
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if urlsplit(route.request.url).netloc == urlsplit(base).netloc
            else route.abort()
        ),
    )
    page.goto(base + "/api/v1/docs")
    page.locator(".opblock-summary-path", has_text="/api/v1/runs").first.wait_for()
    shoot(page, "api-docs")
    assert page.locator(".opblock").count() > 10
    assert not page.errors
    assert not violations, violations
    foreign = [url for url in asked if urlsplit(url).netloc != urlsplit(base).netloc]
    assert not foreign, foreign
