"""Keys of the shared step cache (a step's ``cache: {key, ttl, files}``), computed where the run
is built.

The key is a SHA-256 of what decides the step's result: its callable (or shell command), its
arguments with upstream outputs resolved, the rendered ``key`` text and the contents of the
declared files. :mod:`flows.runtime.step_cache` uses it when the step's job starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.flowfile.fanout import FANOUT_KEY
from flows.flowfile.job_data import CACHE_KEY, META_KEY

if TYPE_CHECKING:
    from flows.expand.jobs import JobSpec

_CHUNK = 1 << 20


def cache_key(klass: str, data: Any, spec: dict[str, Any]) -> str:
    """The hex digest of a step's own work: its callable, its arguments, the rendered ``key``
    and the declared files' contents (the engine adds the upstream results)."""
    digest = hashlib.sha256()
    head = {"klass": klass, "data": data, "key": spec.get("key", "")}
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name in spec.get("files") or []:
        digest.update(b"\0file\0" + str(name).encode() + b"\0")
        path = Path(str(name))
        if not path.is_file():
            digest.update(b"<missing>")
            continue
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def stable_data(data: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What of a job decides its own work (not its run): its arguments, step, item, ``if:``."""
    return {
        "data": data,
        "step": meta.get("step"),
        "index": meta.get("index"),
        "if": meta.get("if"),
    }


def seal(jobs: Sequence[JobSpec]) -> None:
    """Write each cached step's own key (``base``) into its cache spec when the run is built,
    the declared files read then: the engine can then hash in the upstream results itself and
    complete a chain of cached steps in one call (lua/commands/cache.lua). A step reading a
    fan-out's items gets none (its inputs are known only when it starts)."""
    for job in jobs:
        meta = job.data.get(META_KEY)
        if not isinstance(meta, dict) or not isinstance(meta.get(CACHE_KEY), dict):
            continue
        if any(entry.get(FANOUT_KEY) for entry in (meta.get("upstream") or {}).values()):
            continue
        data = {k: v for k, v in job.data.items() if k != META_KEY}
        spec = meta[CACHE_KEY]
        spec["base"] = cache_key(job.klass, stable_data(data, meta), spec)
