"""The shared step cache when a step's job starts (its key: :mod:`flows.expand.cache_keys`).

The worker's prepare hook hands the key to the engine's ``cache.use`` (one atomic call,
lua/commands/cache.lua): on a hit the job is completed there with the producing job's
result (status ``cached``) and the worker runs nothing; on a miss the job runs and becomes the
entry others hit once it completes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flows.expand.cache_keys import cache_key
from scheduler.worker import HandedOver, JobContext


def use_cache(
    ctx: JobContext, spec: dict[str, Any], data: Any, upstream: Sequence[str] = ()
) -> None:
    """Complete the job from the cache, or claim the entry; a hit raises :class:`HandedOver`
    (the engine completed the job: the worker reports nothing).

    ``data`` is the step's own arguments; ``upstream`` the jobs whose results are its inputs,
    which the engine hashes in (so a hit needs no read of them first)."""
    key = str(spec.get("base") or cache_key(ctx.klass, data, spec))
    job = ctx.job
    reply = json.loads(
        job.client.engine.call(
            "cache.use",
            job.jid,
            job.client.worker_name,
            job.queue,
            key,
            spec["ttl"],
            ctx.attempt,
            *upstream,
        )
    )
    if reply.get("hit"):
        raise HandedOver(f"cached: the result of {reply['from']}")
