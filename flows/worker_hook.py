"""The worker's ``prepare`` hook for flow jobs: resolve upstream outputs when a job starts.

Passed to :class:`scheduler.worker.Worker` (``prepare=flows.worker_hook:prepare`` for worker
processes). Jobs that were not put by a flow are left alone.
"""

from __future__ import annotations

from flows.conditions import ConditionError
from flows.outputs import (
    FlowsMeta,
    UnresolvedReference,
    UpstreamJob,
    condition_holds,
    resolve_payload,
    was_skipped,
)
from scheduler.worker import FailJob, JobContext, SkipJob
from scheduler.worker.imports import add_paths


def prepare(ctx: JobContext) -> None:
    meta = FlowsMeta.from_data(ctx.job.data)
    if meta is None:
        return
    add_paths([meta.flow_dir])
    jids = meta.upstream_jids()
    upstream = (
        {
            job.jid: UpstreamJob(job.state, job.result, was_skipped(job.history))
            for job in ctx.job.client.jobs.multiget(*jids)
        }
        if jids
        else {}
    )
    try:
        if not condition_holds(meta, upstream):
            raise SkipJob("its if: condition is false")
        ctx.data = resolve_payload(ctx.job.data, upstream)
    except ConditionError as error:
        raise FailJob("flows-condition", f"if: {error}") from error
    except UnresolvedReference as error:
        raise FailJob("flows-reference", str(error)) from error
