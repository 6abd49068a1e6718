"""The pure modules load no redis and no engine client when imported on their own (the import
contracts in pyproject.toml check the same statically; this checks what Python really loads)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "flows.flowfile.model",
    "flows.validation.validate",
    "flows.expand.jobs",
    "flows.expand.run_specs",
    "scheduler.cron",
    "scheduler.service.planning",
    "scheduler.service.records",
    "scheduler.engine.limits",
    "scheduler.engine.errors",
]


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_loads_no_redis(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "loaded = [m for m in ('redis', 'scheduler.engine.client', 'scheduler.worker.worker') "
        "if m in sys.modules]\n"
        "print(','.join(loaded))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


def test_the_engine_client_loads_no_embedded_server() -> None:
    # Connecting to a URL is the engine's; the embedded server is decided above it.
    code = (
        "import sys, scheduler.engine.client, scheduler.engine.backoff\n"
        "assert 'scheduler.embedded' not in sys.modules\n"
        "assert 'scheduler.connect' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], timeout=60, check=True)
