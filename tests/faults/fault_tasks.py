"""Jobs the fault tier's workers run (importable: the tests put this folder on PYTHONPATH)."""

from __future__ import annotations

from typing import Any


def noop(job: Any) -> dict[str, bool]:
    return {"ok": True}
