"""Per-job run options that travel inside the job's data, under one reserved key.

The engine treats data as opaque JSON; the worker reads ``data["_flows"]`` (when present) for
the options below and hands the job function the data without that key::

    {"_flows": {"retry": {"backoff": "exponential", "delay": 30, "max_delay": 600, "jitter": 0.2},
                "timeout": 1800,
                "pythonpath": ["/repo/lib"], "flow_dir": "/repo/pipelines",
                ...anything else flows puts there (run id, step, output references)}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.worker.outcomes import RetryPolicy

ENVELOPE_KEY = "_flows"


class BrokenPayload(ValueError):
    """The job's data cannot be used: not a JSON object, or a malformed envelope."""


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
    if not isinstance(envelope, dict):
        raise BrokenPayload(f"data[{ENVELOPE_KEY!r}] is not an object")
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
