"""Jobs the fault tier's workers run (importable: the tests put this folder on PYTHONPATH)."""

from __future__ import annotations

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
