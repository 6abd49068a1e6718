"""The one run id format: ``<flow>@<UTC time>``, e.g. ``nightly@20261123T021500Z``.

A schedule's tick names its run by its fire time (one id per tick, so firing a tick twice
changes nothing), a run no tick stands for by the time it was started plus ``-<random>``.
The flows side names every run: the scheduler service asks its flow source
(:meth:`~scheduler.service.records.FlowSource.run_id`) for a tick's. No I/O.
"""

from __future__ import annotations

import secrets
import time
from typing import Final

RUN_ID_TIME: Final = "%Y%m%dT%H%M%SZ"


def run_id_for(flow: str, tick: float) -> str:
    """The deterministic id of a tick's run: ``<flow>@<UTC fire time>``."""
    return f"{flow}@{time.strftime(RUN_ID_TIME, time.gmtime(tick))}"


def manual_run_id(flow: str, now: float | None = None) -> str:
    """``<flow>@<UTC time>-<random>``: the id of a run that no tick stands for."""
    return f"{run_id_for(flow, time.time() if now is None else now)}-{secrets.token_hex(3)}"


__all__ = ["RUN_ID_TIME", "manual_run_id", "run_id_for"]
