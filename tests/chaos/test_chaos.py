"""Fault-injection scenarios (``pytest -m chaos``): the short version of each in CI, the full
size with ``FLOWS_CHAOS=long``. Each prints its report table and fails on any broken reliability
property (:mod:`chaos_harness` lists them and how each is checked).

``python tests/chaos/run_chaos.py [--long] [scenario...]`` runs them outside pytest and prints
one table for all.
"""

from __future__ import annotations

import os

import pytest
from chaos_harness import table
from chaos_scenarios import SCENARIOS, run_scenario

MODE = os.environ.get("FLOWS_CHAOS", "short") or "short"

pytestmark = [
    pytest.mark.chaos,
    # A short scenario takes about 20 s; the timeout only catches a hang.
    pytest.mark.timeout(1800 if MODE == "long" else 300),
]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_keeps_every_invariant(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = run_scenario(name, MODE)
    shown = f"[{MODE}] {SCENARIOS[name].what}\n{table([report])}"
    # Under xdist (the CI step runs two at a time) only a failure's message reaches the log.
    with capsys.disabled():
        print(f"\n{shown}")
    assert report.ok, shown + "\n" + "\n".join(report.violations)
    assert report.lost == 0 and report.ticks_duplicated == 0, shown
    assert report.accepted > 0 and report.completed > 0, shown
    # Every scenario runs scheduler services: its tick checks (8) must have had ticks to check.
    assert report.ticks_expected > 0 and report.ticks_fired > 0, shown
