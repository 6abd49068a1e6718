"""What a run is made of, as the engine takes it, with no I/O: each job's spec for
``flow.submit``, the checks of the engine's limits before any round trip, and the run ids.

:mod:`flows.runs.submit` sends a run; validation (:mod:`flows.validation.run_checks`) uses the same
checks, so a file `flows validate` passes is one `flows run` can submit.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from flows.expand.jobs import PutRequest
from scheduler.engine import limits
from scheduler.engine.errors import EngineError
from scheduler.service.records import run_id_for

# As json.dumps(..., separators=(",", ":")), made once: a run encodes every job's data (and
# then the list of its jobs).
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def manual_run_id(flow: str, now: float | None = None) -> str:
    """``<flow>@<UTC time>-<random>``: the one run id format (a tick's run is
    ``<flow>@<UTC fire time>``, :func:`scheduler.service.schedules.run_id_for`), made unique for a
    run
    that no tick stands for."""
    return f"{run_id_for(flow, time.time() if now is None else now)}-{secrets.token_hex(3)}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_spec(request: PutRequest) -> dict[str, Any]:
    """What ``flow.submit`` takes for one job (data as JSON text: the engine keeps it verbatim).

    A step's ``heartbeat`` becomes the job's ``ttr`` (its lock time); a foreach step's
    ``max_parallel`` its ``concurrency_key``/``concurrency_limit``; ``ttl`` and ``throttle`` pass
    as they are; a ``wait:`` step's spec is its ``wait`` (``lua/include/waits.lua``); a fan-out
    step's template has ``fanout`` ``{from, output}`` (:mod:`flows.spec.fanout`). Unset ones (and a
    heartbeat or ttl of 0) are left out.
    """
    spec: dict[str, Any] = {
        "jid": request.jid,
        "queue": request.queue,
        "klass": request.klass,
        "data": _COMPACT_JSON.encode(request.data),
        "priority": request.priority,
        "tags": list(request.tags),
        "retries": request.retries,
        "depends": list(request.depends),
        "delay": request.delay,
        "trigger": request.trigger_rule,
    }
    if request.heartbeat:  # 0: the queue's heartbeat
        spec["ttr"] = request.heartbeat
    if request.concurrency_key is not None:
        spec["concurrency_key"] = request.concurrency_key
        spec["concurrency_limit"] = request.concurrency_limit or 1
    if request.ttl:
        spec["ttl"] = request.ttl
    if request.throttle is not None:
        spec["throttle"] = request.throttle
    if request.wait is not None:
        spec["wait"] = dict(request.wait)
    if request.fanout is not None:
        spec["fanout"] = {"from": request.fanout[0], "output": request.fanout[1]}
    return spec


def check_limits(run_id: str, specs: Sequence[dict[str, Any]]) -> str:
    """The jobs as JSON text, once every job and the whole run are within the engine's limits
    (:mod:`scheduler.engine.limits`); raises the engine's error class naming the job otherwise."""
    command = "flow.submit"
    limits.check_name(command, "run_id", run_id)
    for spec in specs:
        jid = limits.check_jid(command, "jid", spec["jid"])
        try:
            limits.check_text(command, "data", spec["data"])
            if spec["tags"]:  # most jobs have none
                limits.check_tags(command, spec["tags"])
        except EngineError as error:
            raise type(error)(f"job {jid}: {error}", command=command) from None
    # Compact: a large run's text is a few percent smaller, to send and for the engine to decode.
    jobs_text = _COMPACT_JSON.encode(specs)
    limits.check_flow_submission(command, len(specs), jobs_text)
    return jobs_text
