"""``flows`` as a user runs it, for the cluster tests (a module of its own, not conftest:
any subset of tiers must collect)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def flows_command(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``flows ARGS`` as a user runs it: a process of its own, output captured."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
