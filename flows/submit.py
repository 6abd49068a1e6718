"""Submitting a run: a flow's put requests written in one engine call (``flow.submit``).

Nothing of a run is visible until all of it is: the run record and every job are written by one
Lua call. Every run id is ``<flow>@<UTC time>``: a tick's run is named by its fire time (one id
per tick), a manual run by the time it was started plus ``-<random>`` (:func:`manual_run_id`).
Submitting an existing run id changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flows.expand import PutRequest
from flows.run_specs import check_limits, job_spec
from scheduler.engine.client import Client

Trigger = Literal["manual", "schedule", "catch-up", "retry"]


@dataclass(frozen=True)
class Submission:
    run_id: str
    created: bool
    jobs: int


def submit(
    client: Client,
    run_id: str,
    flow: str,
    requests: Sequence[PutRequest],
    *,
    params: Mapping[str, Any],
    trigger: Trigger = "manual",
    file_hash: str = "",
    file: str = "",
) -> Submission:
    """Write the run atomically; ``created`` is False when the run id existed (nothing written)."""
    run = {
        "flow": flow,
        "params": json.dumps(dict(params), default=str),
        "trigger": trigger,
        "hash": file_hash,
        "file": file,
        "queues": json.dumps(sorted({r.queue for r in requests})),
    }
    specs = [job_spec(r) for r in requests]
    jobs_text = check_limits(run_id, specs)
    reply = client.engine.call("flow.submit", run_id, json.dumps(run), jobs_text)
    return Submission(run_id, reply == "submitted", len(requests))
