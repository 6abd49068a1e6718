"""Helpers of the scheduler service tests: flow files, services, and what fired."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.service.loop import SchedulerService
from scheduler.service.records import Registration
from scheduler.service.schedules import Schedules

# Monday 2026-01-05 12:00 UTC: a tick of every expression used here.
T = datetime(2026, 1, 5, 12, 0, tzinfo=UTC).timestamp()
MIN = 60.0


def flow_text(
    name: str = "f",
    cron: str = "*/5 * * * *",
    *,
    timezone: str = "UTC",
    catchup: str = "latest",
    window: str = "1h",
    max_runs: int | None = None,
    overlap: str = "allow",
    jitter: str | None = None,
    start: str | None = None,
    end: str | None = None,
    paused: bool = False,
    queue: str = "q",
    steps: int = 1,
) -> str:
    """A scheduled flow whose steps are shell steps ``s0``, ``s1``... each needing the last."""
    lines = [
        "version: 1",
        f"name: {name}",
        f"queue: {queue}",
        "schedule:",
        f'  cron: "{cron}"',
        f"  timezone: {timezone}",
        f"  catchup: {{policy: {catchup}, window: {window}"
        + (f", max_runs: {max_runs}" if max_runs else "")
        + "}",
        f"  overlap: {overlap}",
    ]
    if jitter:
        lines.append(f"  jitter: {jitter}")
    if start:
        lines.append(f'  start: "{start}"')
    if end:
        lines.append(f'  end: "{end}"')
    if paused:
        lines.append("  paused: true")
    lines.append("steps:")
    for i in range(steps):
        needs = f", needs: [s{i - 1}]" if i else ""
        lines.append(f"  s{i}: {{run: echo {i}{needs}}}")
    return "\n".join(lines) + "\n"


def write_flow(folder: Path, name: str = "f", file: str | None = None, **options: Any) -> Path:
    path = folder / (file or f"{name}.yaml")
    path.write_text(flow_text(name, **options))
    return path


def make_service(client: Client, folder: Path, **options: Any) -> SchedulerService:
    options.setdefault("service_id", "test-service")
    return SchedulerService(client, FlowsSource(), folder, **options)


def run_ids(client: Client, flow: str = "f") -> list[str]:
    """Every run of ``flow``, oldest first."""
    records = json.loads(client.engine.call("runs", flow, 0, 100_000))
    return sorted(str(r["id"]) for r in records) if isinstance(records, list) else []


def registration(client: Client, name: str = "f", skips: int = 100) -> Registration:
    found = Schedules(client).get(name, skips=skips)
    assert found is not None, f"schedule {name} is not registered"
    return found


def skipped_ticks(reg: Registration) -> int:
    return sum(s.count or 0 for s in reg.skips)
