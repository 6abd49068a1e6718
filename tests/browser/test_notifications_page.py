"""The dashboard's Notifications page in a real headless Chromium against a real ``flows ui``:
the channels a scheduler service cannot send are listed there as ``flows notifications`` and the
API list them, every value shown as text. A real service loads the flow file and pings."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.notify.outbox import Deliverer
from scheduler.secrets import Secrets
from scheduler.service.loop import SchedulerService

# A file name may hold markup (no '/'): the page shows it as text.
NAME = '<img src=x onerror="window.__xss=1">.yaml'
FLOW = """\
version: 1
name: nightly
schedule: {cron: "0 3 * * *"}
notify:
  - on: [failure]
    webhook: {url: "https://hooks.example.com/flows", secret: HOOK_SECRET}
steps:
  load: {run: "true"}
"""


def test_a_channel_the_service_cannot_send_is_listed_on_the_page_as_text(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    page.goto(f"{base}/notifications")
    assert page.locator("#notify-unsendable").count() == 0  # nothing to say: no table
    folder = tmp_path / "pipelines"
    folder.mkdir()
    path = folder / NAME
    path.write_text(FLOW)
    secrets = Secrets({}, environ={}, dirs=())
    deliverer = Deliverer(client, secrets=secrets, consumer="host-a:pipelines")
    service = SchedulerService(
        client, FlowsSource(), folder, service_id="host-a", deliverer=deliverer
    )
    now = time.time()
    service.scan(now)
    service.tick(now)  # its health ping carries what it cannot send

    page.goto(f"{base}/notifications")
    rows = page.locator("#notify-unsendable tbody tr")
    assert rows.count() == 1
    cells = [rows.first.locator("td").nth(i).inner_text() for i in range(4)]
    assert cells[:3] == ["host-a", str(path), "webhook https://hooks.example.com/flows"]
    assert cells[3].startswith("secret HOOK_SECRET not found"), cells[3]
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img").count() == 0
    assert page.errors == []
