"""Per-job run options that travel inside the job's data, under one reserved key.

The engine treats data as opaque JSON; the worker reads ``data["_flows"]`` (when present) for
the options below and hands the job function the data without that key::

    {"_flows": {"retry": {"backoff": "exponential", "delay": 30, "max_delay": 600, "jitter": 0.2},
                "timeout": 1800,
                "pythonpath": ["/repo/lib"], "flow_dir": "/repo/pipelines",
                ...anything else flows puts there (run id, step, output references)}}
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from scheduler.engine.envelope import ENVELOPE_KEY, envelope_fault
from scheduler.engine.limits import MAX_JSON_DEPTH
from scheduler.worker.outcomes import RetryPolicy


class BrokenPayload(ValueError):
    """The job's data cannot be used: not a JSON object, nested too deeply to be read, or a
    malformed envelope."""


def decode(text: str) -> Any:
    """A popped job's data (JSON text), decoded whole: a task never gets part of its data cut.

    Raises ``ValueError`` for text that is not JSON, and :class:`BrokenPayload` for data nested
    deeper than Python's decoder goes (about ``sys.getrecursionlimit()`` levels): the engine
    refuses data that deep now, but a job kept from before its limits (or the recurring job
    that spawned it) may hold some."""
    try:
        return json.loads(text)
    except RecursionError:
        raise BrokenPayload(
            f"job data nests too deeply to be read (deeper than the worker's JSON decoder "
            f"goes: about {sys.getrecursionlimit():,} levels; data put now may nest at most "
            f"{MAX_JSON_DEPTH} levels)"
        ) from None


# Shared by every job without retry options (immutable; made once: it is on each job's path).
DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class JobOptions:
    retry: RetryPolicy = DEFAULT_RETRY
    timeout: float | None = None
    pythonpath: tuple[str, ...] = ()
    envelope: dict[str, Any] = field(default_factory=dict)


def split(data: Any) -> tuple[dict[str, Any], JobOptions]:
    """(user data without the envelope, the options). Raises BrokenPayload."""
    if not isinstance(data, dict):
        raise BrokenPayload(f"job data is not a JSON object: {type(data).__name__}")
    envelope = data.get(ENVELOPE_KEY)
    if envelope is None:
        return data, JobOptions()
    fault = envelope_fault(envelope)
    if fault is not None:  # a job put past the API's check (a qless client, an older put)
        raise BrokenPayload(f"job data has {fault}")
    user = {k: v for k, v in data.items() if k != ENVELOPE_KEY}
    try:
        timeout = envelope.get("timeout")
        # flow_dir: a flow's folder, so its `job:` modules import (see flows.flowfile.job_data).
        paths = [
            *(envelope.get("pythonpath") or ()),
            *([envelope["flow_dir"]] if envelope.get("flow_dir") else []),
        ]
        options = JobOptions(
            retry=RetryPolicy.from_dict(envelope.get("retry")),
            timeout=None if timeout in (None, 0) else float(timeout),
            pythonpath=tuple(str(p) for p in paths),
            envelope=envelope,
        )
    except (TypeError, ValueError, AttributeError) as error:
        raise BrokenPayload(f"data[{ENVELOPE_KEY!r}] is malformed: {error}") from error
    return user, options
