"""``python -m benchmarks.peers`` still runs: huey's figures next to ours, or advice without huey.

Benchmarks are not tests: this only keeps the script working (a few hundred jobs, seconds).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# huey hidden from the import system, as where it is not installed
WITHOUT_HUEY = (
    "import sys; sys.modules['huey'] = None; from benchmarks import peers; sys.exit(peers.main())"
)


def test_without_huey_it_says_how_to_install_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_HUEY],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install huey" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("huey") is None, reason="huey is not installed")
def test_every_figure_has_ours_huey_and_the_baseline(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    command = [sys.executable, "-m", "benchmarks.peers", "--samples", "30", "--puts", "300"]
    command += ["--memory", "300"]
    done = subprocess.run(
        [*command, "--rounds", "1", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    assert document["huey"]["version"]
    figures = {figure["key"]: figure for figure in document["figures"]}
    assert sorted(figures) == ["latency_p50", "latency_p99", "memory_waiting", "put"]
    for key, figure in figures.items():
        for side in ("value", "baseline"):
            assert figure[side] > 0, (key, side)
        assert figure["extra"]["huey"] > 0, key
    assert "| put, one call per job, one process |" in done.stdout
