"""The reserved key of a job's data, ``_flows``: the run options the worker reads there, and
what they must be.

The engine keeps data as opaque JSON. The worker reads ``data["_flows"]`` for the job's
timeout, retry policy and import path (:mod:`scheduler.worker.envelope`; flows keeps its own
facts of a step there too, which are not checked here). The Python API checks the key where
data enters (``put``, ``put_many``, ``requeue``, ``recur``), so a malformed one is refused then,
naming the key, rather than failing the job when a worker pops it; the worker checks it again
for a job put otherwise (a qless client, a job kept from before this check).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from scheduler.engine.errors import InvalidArgument
from scheduler.engine.limits import display, json_place

ENVELOPE_KEY: Final = "_flows"

_SECONDS = "seconds, a number >= 0 or null"
_RETRY_NUMBERS = ("delay", "max_delay", "jitter")


def check_envelope(command: str, data: Any) -> None:
    """Refuse ``data`` (a job's data, about to be sent by ``command``) whose ``_flows`` the
    worker could not read, naming the key."""
    if type(data) is not dict and not isinstance(data, Mapping):  # a dict skips the ABC's check
        return
    if data.get(ENVELOPE_KEY) is None:
        return
    fault = envelope_fault(data[ENVELOPE_KEY])
    if fault is not None:
        raise InvalidArgument(f'{display(command)}(): Arg "data" has {fault}', command=command)


def envelope_fault(envelope: Any) -> str | None:
    """What keeps the worker from reading ``envelope`` (a job's ``data._flows``), in words that
    name the key, its value and what it must be; None when nothing does."""
    if envelope is None:
        return None
    if not isinstance(envelope, Mapping):
        return _fault([], envelope, "the worker's run options, an object or null")
    timeout = envelope.get("timeout")
    if timeout is not None and not _seconds(timeout):
        return _fault(["timeout"], timeout, _SECONDS)
    return _retry_fault(envelope.get("retry")) or _folders_fault(envelope)


def _retry_fault(retry: Any) -> str | None:
    if retry is None:
        return None
    if not isinstance(retry, Mapping):
        return _fault(["retry"], retry, "an object (backoff, delay, max_delay, jitter) or null")
    for name in _RETRY_NUMBERS:
        value = retry.get(name)
        if value is not None and not _seconds(value):
            return _fault(["retry", name], value, _SECONDS)
    return None


def _folders_fault(envelope: Mapping[str, Any]) -> str | None:
    paths = envelope.get("pythonpath")
    if paths is not None and not isinstance(paths, list):
        return _fault(["pythonpath"], paths, "a list of folders (text) or null")
    for index, path in enumerate(paths or ()):
        if not isinstance(path, str):
            return _fault(["pythonpath", index], path, "a folder, as text")
    flow_dir = envelope.get("flow_dir")
    if flow_dir is not None and not isinstance(flow_dir, str):
        return _fault(["flow_dir"], flow_dir, "a folder, as text, or null")
    return None


def _seconds(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value >= 0 and (isinstance(value, int) or math.isfinite(value))


def _fault(place: list[str | int], value: Any, wanted: str) -> str:
    return (
        f"{json_place([ENVELOPE_KEY, *place])} {_shown(value)} ({type(value).__name__}): {wanted}"
    )


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


__all__ = ["ENVELOPE_KEY", "check_envelope", "envelope_fault"]
