"""Bad flow files in the scheduler service's folder: each is reported as invalid by the scan,
nothing is registered, and not one key changes (a file that was registered before keeps its
registration: the service never unregisters a schedule because its file went bad)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import assert_unchanged
from test_bad_flow_files import CASES

from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.service.loop import SchedulerService
from scheduler.service.schedules import Schedules

SCHEDULE = "schedule: {cron: '0 2 * * *', timezone: Europe/Berlin}\n"


def scheduled(text: str | bytes) -> bytes:
    """The bad file with a valid schedule block added where it has none (so the scan must
    refuse it for its other fault)."""
    raw = text.encode() if isinstance(text, str) else text
    if b"schedule:" in raw or not raw.startswith(b"version: 1\nname: bad\n"):
        return raw
    return raw.replace(b"queue: q\n", b"queue: q\n" + SCHEDULE.encode(), 1)


@pytest.mark.parametrize("name", list(CASES))
def test_the_scan_reports_a_bad_file_and_registers_nothing(
    name: str, populated: Client, tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    path = folder / "bad.yaml"
    path.write_bytes(scheduled(CASES[name][0]))
    service = SchedulerService(populated, FlowsSource(), folder, service_id="bad-input")
    with assert_unchanged(populated.redis):
        report = service.scan(time.time())
    assert not report.registered and not report.updated
    assert str(path) in report.invalid or not scheduled(CASES[name][0]).count(b"schedule:")


def test_a_registered_schedule_survives_its_file_going_bad(
    populated: Client, tmp_path: Path
) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    path = folder / "daily.yaml"
    path.write_text("version: 1\nname: daily\nqueue: q\n" + SCHEDULE + "steps:\n  a: {job: t.a}\n")
    service = SchedulerService(populated, FlowsSource(), folder, service_id="bad-input")
    assert service.scan(time.time()).registered == ["daily"]
    for text in (
        "version: 1\nname: daily\nqueue: q\nschedule: {cron: '0 25 * * *'}\n"
        "steps:\n  a: {job: t.a}\n",
        "version: 1\nname: daily\nqueue: q\nschedule: {cron: '0 2 * * *', timezone: Nowhere/Land}\n"
        "steps:\n  a: {job: t.a}\n",
        "not: [valid\n",
    ):
        path.write_text(text)
        with assert_unchanged(populated.redis):
            report = service.scan(time.time())
        assert str(path) in report.invalid, report
    registration = Schedules(populated).get("daily")
    assert registration is not None and registration.definition.cron == ("0 2 * * *",)
