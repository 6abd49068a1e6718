"""The worker's ``prepare`` hook for flow jobs: resolve the flow's secrets and upstream outputs
when a job starts.

Passed to :class:`scheduler.worker.Worker` (``prepare=flows.runtime.worker_hook:prepare`` for worker
processes). Jobs that were not put by a flow are left alone.
"""

from __future__ import annotations

from flows.expand.cache_keys import stable_data
from flows.flowfile.conditions import ConditionError
from flows.flowfile.job_data import (
    CACHE_KEY,
    META_KEY,
    FlowsMeta,
    UnresolvedReference,
    UpstreamJob,
    condition_holds,
    resolve_payload,
    was_skipped,
)
from flows.runtime.step_cache import use_cache
from scheduler import secrets
from scheduler.secrets import MissingSecret
from scheduler.worker import FailJob, JobContext, SkipJob
from scheduler.worker.imports import add_paths


def prepare(ctx: JobContext) -> None:
    meta = FlowsMeta.from_data(ctx.job.data)
    if meta is None:
        return
    add_paths([meta.flow_dir], "the flow's folder")
    if meta.secrets:  # resolved before anything runs, so a missing one fails the job here
        try:
            secrets.resolve(meta.secrets)
        except MissingSecret as error:
            raise FailJob("flows-secret", str(error)) from None
    cache = ctx.job.data[META_KEY].get(CACHE_KEY)
    # A cached step's key is its own arguments plus its upstream jobs' results, which the
    # engine hashes in: a hit costs one call, before any upstream read. A step reading a
    # fan-out's items hashes its resolved arguments instead (the items are known only then).
    early = bool(cache) and not any(entry.fanout for entry in meta.upstream.values())
    if early:
        stable = stable_data(ctx.data, ctx.job.data[META_KEY])
        use_cache(ctx, cache, stable, meta.upstream_jids())
    upstream = _fetch(ctx, meta.upstream_jids())
    # A fan-out step read upstream: its items, known once its producer completed.
    upstream.update(_fetch(ctx, meta.items_to_fetch(upstream)))
    try:
        item = meta.item(ctx.job.jid, upstream)
        expanded = meta.expanded(upstream)
        if not condition_holds(expanded, upstream, item):
            raise SkipJob("its if: condition is false")
        data = ctx.job.data
        if expanded is not meta:
            data = {**data, META_KEY: expanded.to_json()}
        ctx.data = resolve_payload(data, upstream, item, expanded)
        if cache and not early:
            use_cache(ctx, cache, ctx.data)
    except ConditionError as error:
        raise FailJob("flows-condition", f"if: {error}") from error
    except UnresolvedReference as error:
        raise FailJob("flows-reference", str(error)) from error


def _fetch(ctx: JobContext, jids: list[str]) -> dict[str, UpstreamJob]:
    if not jids:
        return {}
    return {
        job.jid: UpstreamJob(job.state, job.result, was_skipped(job.history))
        for job in ctx.job.client.jobs.multiget(*jids)
    }
