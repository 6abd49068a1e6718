"""What a run is made of, as the engine takes it, with no I/O: the checks of the engine's
limits before any round trip, the jobs' JSON text for ``flow.submit``, and the file's hash.

:mod:`flows.runs.submit` sends a run; validation (:mod:`flows.validation.run_checks`) uses the same
checks, so a file `flows validate` passes is one `flows run` can submit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from flows.expand.jobs import JobSpec
from scheduler.engine import limits
from scheduler.engine.errors import EngineError, TooLarge

# As json.dumps(..., separators=(",", ":")), made once: a run encodes every job's data (and
# then the list of its jobs).
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
# The C encoder behind it, made once too (JSONEncoder.encode makes one per call), without the
# check for circular data: job data is a tree built from YAML and JSON values.
_C_ENCODER: Callable[..., Any] | None = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_DATA = (
    _C_ENCODER(
        None,
        _COMPACT_JSON.default,
        json.encoder.encode_basestring_ascii,
        None,
        ":",
        ",",
        False,
        False,
        True,
    )
    if _C_ENCODER is not None
    else None
)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def compact_json(data: Any) -> str:
    """``data`` as compact JSON text: a job's data, as the engine keeps it."""
    if _ENCODE_DATA is None:  # a Python without the C accelerator
        return _COMPACT_JSON.encode(data)
    return "".join(_ENCODE_DATA(data, 0))


def _checked_jid(command: str, run_id: str, jid: str) -> str:
    """``jid`` as the engine takes it; one over the size limit only because the run's id is
    long (a run id given by hand) is refused as the run id's fault, the one to change."""
    try:
        return limits.check_jid(command, "jid", jid)
    except TooLarge:
        if not jid.startswith(run_id):
            raise
        shown = run_id if len(run_id) <= 40 else run_id[:40] + "…"
        raise TooLarge(
            f"{limits.display(command)}(): run id {shown!r} is too long for its jobs: the id"
            f" of job RUN{jid[len(run_id) :]} would be {len(jid.encode())} bytes, more than"
            f" the limit of {limits.MAX_ID_BYTES}; give a shorter run id",
            command=command,
        ) from None


#: Job fields ``flow.submit`` takes once for the whole run (``shared``) when every job has the
#: same value: sent and checked once instead of once a job (``concurrency_key`` and
#: ``concurrency_limit`` go together, the engine takes them as a pair).
_SHAREABLE = (
    "queue",
    "klass",
    "priority",
    "retries",
    "tags",
    "trigger",
    "ttl",
    "ttr",
    "throttle",
    "notify",
    "deadline",
)
_PAIR = ("concurrency_key", "concurrency_limit")
_MISSING = object()


def _shared_fields(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields every job of ``specs`` has with the same value, taken out of each job."""
    first = specs[0]
    shared: dict[str, Any] = {}
    for name in _SHAREABLE:
        value = first.get(name, _MISSING)
        if value is not _MISSING and all(spec.get(name, _MISSING) == value for spec in specs):
            shared[name] = value
    if _PAIR[0] in first and all(
        spec.get(_PAIR[0], _MISSING) == first[_PAIR[0]]
        and spec.get(_PAIR[1], _MISSING) == first[_PAIR[1]]
        for spec in specs
    ):
        shared.update((name, first[name]) for name in _PAIR)
    names = tuple(shared)
    for spec in specs:
        for name in names:
            del spec[name]
    return shared


def job_objects(jobs_text: str) -> list[dict[str, Any]]:
    """The job objects of ``flow.submit``'s ``jobs`` text, each with the fields they share."""
    decoded = json.loads(jobs_text)
    if isinstance(decoded, list):
        return decoded
    shared = decoded.get("shared") or {}
    return [{**shared, **job} for job in decoded["jobs"]]


def check_limits(run_id: str, jobs: Sequence[JobSpec]) -> str:
    """The jobs as the JSON text ``flow.submit`` takes (:meth:`JobSpec.to_engine`; the fields
    they all have alike as ``{"shared": {...}, "jobs": [...]}``), once every
    job and the whole run are within the engine's limits (:mod:`scheduler.engine.limits`);
    raises the engine's error class naming the job otherwise."""
    command = "flow.submit"
    limits.check_name(command, "run_id", run_id)
    specs: list[dict[str, Any]] = []
    checked = limits.all_jids([job.jid for job in jobs])  # else each on its own, which says why
    for job in jobs:
        spec = job.to_engine(compact_json)
        jid = job.jid if checked else _checked_jid(command, run_id, job.jid)
        try:
            limits.check_text(command, "data", spec["data"])
            if job.tags:  # most jobs have none
                limits.check_tags(command, job.tags)
        except EngineError as error:
            raise type(error)(f"job {jid}: {error}", command=command) from None
        specs.append(spec)
    # Compact: a large run's text is a few percent smaller, to send and for the engine to decode;
    # what every job has alike is sent once.
    shared = _shared_fields(specs) if specs else {}
    jobs_text = _COMPACT_JSON.encode({"shared": shared, "jobs": specs} if shared else specs)
    limits.check_flow_submission(command, len(specs), jobs_text)
    return jobs_text
