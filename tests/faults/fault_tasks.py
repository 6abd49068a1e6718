"""Jobs the fault tier's workers run (importable: the tests put this folder on PYTHONPATH)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any


def noop(job: Any) -> dict[str, bool]:
    return {"ok": True}


def gated(job: Any) -> dict[str, bool]:
    """Run until the file ``gate`` exists (the test opens it), then say so on stdout."""
    gate = Path(job.data["gate"])
    while not gate.exists():
        time.sleep(0.01)
    print("through the gate")
    return {"ok": True}


# For a worker thread in the test's own process: each run of `gated_in_process` is noted, and
# it returns only once the test opens the gate (or after a minute).
runs: list[str] = []
gate = threading.Event()


def gated_in_process(job: Any) -> dict[str, bool]:
    runs.append(job.jid)
    gate.wait(60)
    if job.data.get("fail"):
        raise RuntimeError("failed past the gate")
    return {"ok": True}
