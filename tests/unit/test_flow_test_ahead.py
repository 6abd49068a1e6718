"""flows.testing.ahead: a schedule's next run built while the engine fires this one is the
run the service would build on time, and only a run built alike ahead is taken."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from flows.expand.run_ids import run_id_for
from flows.runs.build import FlowFile, parse_flow_text
from flows.runs.service_source import FlowsSource, definition_of
from flows.testing.ahead import AheadSource, builds_alike_ahead
from scheduler.cron import missed_ticks
from scheduler.service.planning import start_delay
from scheduler.service.records import Definition

FLOW = """\
version: 1
name: nightly
schedule:
  cron: "30 2 * * *"
  timezone: Europe/Berlin
  jitter: 30s
params:
  region: {type: string, default: eu}
steps:
  extract:
    run: echo "{{ params.region }} {{ logical_date }}"
  load:
    needs: [extract]
    run: echo load
"""
NIGHT = 1774648800.0  # 2026-03-27T22:00:00Z


def _flow(tmp_path: Path, extra: str = "") -> tuple[FlowFile, Definition]:
    path = tmp_path / "nightly.yaml"
    path.write_text(FLOW + extra)
    flow_file = parse_flow_text(path.read_text(), str(path))
    return flow_file, definition_of(flow_file)


def test_the_run_built_ahead_is_the_run_built_on_time_and_is_taken_once(tmp_path: Path) -> None:
    flow_file, definition = _flow(tmp_path)
    assert builds_alike_ahead(flow_file.flow)
    source = AheadSource(definition)
    # Across the spring-forward night: 02:30 Berlin does not exist on 2026-03-29.
    ticks = missed_ticks(definition.schedule, NIGHT, NIGHT + 3 * 86400, limit=5)
    for before, tick in pairwise(ticks):
        source.build_after(before)
        run_id = run_id_for("nightly", tick)
        delay = start_delay(definition, tick, tick)
        assert 0 < delay < 30  # the jitter is part of what is compared
        taken = source.build(definition, run_id, tick, "schedule", delay)
        fresh = FlowsSource().build(definition, run_id, tick, "schedule", delay)
        assert taken == fresh
        assert taken.run_json() == fresh.run_json()
        # Taken once: the same call again builds anew (an equal run, not the kept one).
        again = source.build(definition, run_id, tick, "schedule", delay)
        assert again == fresh and again is not taken


def test_a_run_the_guess_does_not_match_is_built_as_asked(tmp_path: Path) -> None:
    _, definition = _flow(tmp_path)
    source = AheadSource(definition)
    first, second = missed_ticks(definition.schedule, NIGHT, NIGHT + 3 * 86400, limit=2)
    source.build_after(first)
    # A catch-up of the same tick: another trigger, no jitter left.
    run = source.build(definition, run_id_for("nightly", second), second, "catch-up", 0.0)
    assert run.run["trigger"] == "catch-up"


def test_a_flow_whose_build_reads_files_a_step_may_change_is_not_built_ahead(
    tmp_path: Path,
) -> None:
    cached = (
        "  report:\n    needs: [load]\n    run: echo r\n"
        "    cache: {key: report, ttl: 1d, files: [data.csv]}\n"
    )
    flow_file, _ = _flow(tmp_path, extra=cached)
    assert not builds_alike_ahead(flow_file.flow)
