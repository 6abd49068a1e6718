"""Submitting a run: a flow's put requests written in one engine call (``flow.submit``).

Nothing of a run is visible until all of it is: the run record and every job are written by one
Lua call. Run ids are unique per manual run (:func:`manual_run_id`) and deterministic per
scheduled tick (``<flow>@<fire time>``), and submitting an existing run id changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flows.expand import PutRequest
from scheduler.client import Client

Trigger = Literal["manual", "schedule", "catch-up", "retry"]


@dataclass(frozen=True)
class Submission:
    run_id: str
    created: bool
    jobs: int


def manual_run_id(flow: str, now: float | None = None) -> str:
    """``<flow>-<UTC time>-<random>``: unique, sortable, readable."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{flow}-{stamp}-{secrets.token_hex(3)}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_spec(request: PutRequest) -> dict[str, Any]:
    """What ``flow.submit`` takes for one job (data as JSON text: the engine keeps it verbatim)."""
    return {
        "jid": request.jid,
        "queue": request.queue,
        "klass": request.klass,
        "data": json.dumps(request.data, separators=(",", ":")),
        "priority": request.priority,
        "tags": list(request.tags),
        "retries": request.retries,
        "depends": list(request.depends),
        "delay": request.delay,
        "trigger": request.trigger_rule,
    }


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
    reply = client.engine.call(
        "flow.submit", run_id, json.dumps(run), json.dumps([job_spec(r) for r in requests])
    )
    return Submission(run_id, reply == "submitted", len(requests))
