"""Submitting a run: a built run (:mod:`flows.runs.build`) written in one engine call
(``flow.submit``).

Nothing of a run is visible until all of it is: the run record and every job are written by one
Lua call. Every run id is ``<flow>@<UTC time>``: a tick's run is named by its fire time (one id
per tick), a manual run by the time it was started plus ``-<random>``
(:mod:`flows.expand.run_ids`). Submitting an existing run id changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from flows.runs.build import BuiltRun
from scheduler.engine.client import Client


@dataclass(frozen=True)
class Submission:
    run_id: str
    created: bool
    jobs: int


def submit(client: Client, run: BuiltRun) -> Submission:
    """Write the run atomically; ``created`` is False when the run id existed (nothing written)."""
    request = run.request
    reply = client.engine.call(
        "flow.submit", request.run_id, request.run_json(), request.jobs_json()
    )
    return Submission(request.run_id, reply == "submitted", request.job_count)
