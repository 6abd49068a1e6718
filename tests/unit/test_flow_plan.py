"""flows.expand.jobs.FlowPlan: what every run of a flow file shares is worked out once per
file (FlowFile.plan), and the runs built with it are, byte for byte, the runs built from a
fresh read of the file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from flows.expand.jobs import expand_run
from flows.runs.build import FlowFile, build_run, read_flow_file

CHILD = """\
version: 1
name: report
queue: reports
params:
  day: {type: date}
steps:
  count:
    run: echo "total=3" >> "$FLOWS_OUTPUT"
    outputs: [total]
outputs:
  total: "${{ steps.count.outputs.total }}"
"""

FLOW = """\
version: 1
name: shared
queue: work
defaults:
  retry: {attempts: 3, delay: 10s}
  timeout: 5m
params:
  region: {type: string, default: eu}
  sizes: {type: array, items: {type: int}, default: [1, 2]}
notify:
  - on: [failure]
    webhook: {url: "https://hooks.example.com/flows"}
steps:
  list:
    run: echo "files=[\\"a\\", \\"b\\"]" >> "$FLOWS_OUTPUT"
    outputs: [files]
    tags: [io]
  each:
    needs: [list]
    foreach: {items: "${{ steps.list.outputs.files }}", as: file, max_parallel: 2}
    run: echo "${{ file }} ${{ run.id }}"
  sized:
    foreach: {items: "${{ params.sizes }}", as: size}
    run: echo "${{ size }} ${{ params.region }} ${{ run.logical_date }}"
    retry: {attempts: 1}
  grid:
    matrix: {kind: [full, delta], zone: ["${{ params.region }}", us]}
    run: echo "${{ matrix.kind }}-${{ matrix.zone }}"
    priority: 5
  gated:
    needs: [list]
    if: "${{ params.region == 'eu' && steps.list.status == 'success' }}"
    run: echo "${{ run.logical_time }}"
    heartbeat: 30s
  child:
    flow: report.yaml
    with: {day: "${{ run.logical_date }}"}
    needs: [gated]
hooks:
  on_failure:
    run: echo failed
  finally:
    run: echo done
outputs:
  total: "${{ steps.child.outputs.total }}"
"""


def _file(tmp_path: Path) -> FlowFile:
    (tmp_path / "report.yaml").write_text(dedent(CHILD))
    path = tmp_path / "shared.yaml"
    path.write_text(dedent(FLOW))
    return read_flow_file(path)


RUNS: list[tuple[str, datetime, dict[str, Any]]] = [
    ("shared@1", datetime(2026, 3, 29, 0, 30, tzinfo=UTC), {}),
    ("shared@2", datetime(2026, 3, 29, 1, 30, tzinfo=UTC), {"region": "ap"}),
    ("shared@a-much-longer-run-id", datetime(2026, 12, 31, 23, 59, tzinfo=UTC), {"sizes": []}),
    ("shared@3", datetime(2027, 1, 1, tzinfo=UTC) + timedelta(seconds=1), {"sizes": [3, 4, 5]}),
]


@pytest.mark.parametrize(("trigger", "delay"), [("manual", 0.0), ("schedule", 12.5)])
def test_runs_built_with_the_files_plan_are_the_runs_of_a_fresh_read(
    tmp_path: Path, trigger: str, delay: float
) -> None:
    kept = _file(tmp_path)
    for run_id, moment, params in RUNS:  # the same FlowFile, its plan made by the first run
        built = build_run(
            kept, run_id=run_id, logical_time=moment, params=params, trigger=trigger, delay=delay
        )
        fresh = build_run(
            _file(tmp_path),
            run_id=run_id,
            logical_time=moment,
            params=params,
            trigger=trigger,
            delay=delay,
        )
        assert built.request.jobs_json() == fresh.request.jobs_json()
        assert built.request.run_json() == fresh.request.run_json()
        assert built.queues == fresh.queues


def test_an_expansion_with_the_plan_is_the_one_without(tmp_path: Path) -> None:
    source = _file(tmp_path)
    for run_id, moment, params in RUNS:
        planned = expand_run(
            source.flow, run_id=run_id, logical_time=moment, params=params, plan=source.plan
        )
        alone = expand_run(source.flow, run_id=run_id, logical_time=moment, params=params)
        assert planned == alone
    assert source.plan is source.plan  # made once for the file
