"""Throughput: put one call per job, bulk put (pipelines, a flow submission), drain by workers."""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any

from benchmarks import baseline, flowgen
from benchmarks.context import Bench, wait_until
from benchmarks.figures import Figure, Target, compared
from benchmarks.measure import Sample, completed, measured
from benchmarks.processes import cpu_seconds, worker_pool
from flows.expand.jobs import JobSpec
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from scheduler.engine.client import Client
from scheduler.engine.queue import NewJob
from scheduler.engine.replies import dumps

PUT_QUEUE = "bench-put"
DRAIN_QUEUE = "bench-drain"
FLOW_QUEUE = "bench-submit"
KLASS = baseline.KLASS


# -- put, one call per job -----------------------------------------------------------------------


def put_each(bench: Bench, count: int) -> None:
    queue = bench.client.queues[PUT_QUEUE]
    for index in range(count):
        queue.put(KLASS, {"i": index})


def put_figures(bench: Bench) -> list[Figure]:
    count = bench.sizes.put
    ours: list[Sample] = []
    base: list[float] = []
    for _ in range(bench.rounds):
        bench.fresh()
        base.append(baseline.lpush_each(bench.redis, count))
        bench.fresh()
        ours.append(measured(bench, count, lambda: put_each(bench, count)))
    return [
        compared(
            "put",
            "put, one call per job, one process",
            "jobs/s",
            [s.rate for s in ours],
            base,
            "LPUSH, one round trip per job",
            Target("ratio-min", 0.8),
            extra=_per_job(ours),
        )
    ]


# -- bulk put --------------------------------------------------------------------------------------


def put_pipelined(bench: Bench, queue: str, count: int) -> None:
    """``count`` puts through the engine's pipeline, ``sizes.batch`` calls per round trip."""
    worker = bench.client.worker_name
    for first in range(0, count, bench.sizes.batch):
        pipe = bench.client.engine.pipeline()
        for index in range(first, min(count, first + bench.sizes.batch)):
            pipe.call("put", worker, queue, uuid.uuid4().hex, KLASS, dumps({"i": index}), 0)
        for reply in pipe.execute():
            if isinstance(reply, Exception):
                raise reply


def put_many(bench: Bench, queue: str, count: int) -> None:
    """``count`` puts through ``Queue.put_many``: one engine call per 1,000 jobs."""
    jobs = [NewJob(KLASS, {"i": index}) for index in range(count)]
    bench.client.queues[queue].put_many(jobs)


def bulk_figures(bench: Bench) -> list[Figure]:
    count, steps = bench.sizes.bulk, bench.sizes.submit
    flow = flowgen.validated(flowgen.independent_flow("bench-submit", steps, FLOW_QUEUE))
    ours: list[Sample] = []
    many: list[Sample] = []
    flows: list[Sample] = []
    base: list[float] = []
    for index in range(bench.rounds):
        bench.fresh()
        base.append(baseline.lpush_pipelined(bench.redis, count, bench.sizes.batch))
        bench.fresh()
        ours.append(measured(bench, count, lambda: put_pipelined(bench, PUT_QUEUE, count)))
        bench.fresh()
        many.append(measured(bench, count, lambda: put_many(bench, PUT_QUEUE, count)))
        bench.fresh()
        run_id = f"bench-submit-{index}"
        puts = flowgen.expanded(flow, run_id)
        flows.append(
            measured(
                bench,
                steps,
                functools.partial(submit_expanded, bench.client, run_id, flow.name, puts),
            )
        )
    label = f"LPUSH pipelined, {bench.sizes.batch:,} per batch"
    target = Target("ratio-min", 0.35)
    return [
        compared(
            "bulk_put",
            f"bulk put, pipelined puts ({bench.sizes.batch:,} per batch)",
            "jobs/s",
            [s.rate for s in ours],
            base,
            label,
            target,
            extra=_per_job(ours),
        ),
        compared(
            "bulk_put_many",
            "bulk put, put_many (1,000 per call)",
            "jobs/s",
            [s.rate for s in many],
            base,
            label,
            target,
            extra=_per_job(many),
        ),
        compared(
            "flow_submit",
            f"bulk put, flow submission of {steps:,} independent steps",
            "jobs/s",
            [s.rate for s in flows],
            base,
            label,
            target,
            extra=_per_job(flows),
        ),
    ]


# -- drain -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drain:
    sample: Sample
    worker_cpu: float


def engine_drain(bench: Bench, count: int, processes: int) -> Drain:
    """``count`` no-op jobs drained by a WorkerPool of ``processes`` workers.

    The jobs wait in a paused queue while the workers start; the clock starts at the unpause
    (one engine call, which wakes the idle workers) and stops when every job is complete.
    """
    bench.fresh()
    queue = bench.client.queues[DRAIN_QUEUE]
    queue.pause()
    put_pipelined(bench, DRAIN_QUEUE, count)
    with worker_pool(bench, DRAIN_QUEUE, processes) as pids:
        cpu_before = sum(cpu_seconds(pid) for pid in pids)

        def drain() -> None:
            queue.unpause()
            wait_until(lambda: completed(bench) >= count, 600, "the jobs to drain", pause=0.01)

        sample = measured(bench, count, drain)
        worker_cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    if queue.length():
        raise RuntimeError("drain: jobs left in the queue")
    return Drain(sample, worker_cpu)


def drain_figures(bench: Bench) -> list[Figure]:
    count = bench.sizes.drain
    figures = []
    for processes in (1, 2):
        ours: list[Drain] = []
        base: list[baseline.DrainResult] = []
        for _ in range(bench.rounds):
            base.append(baseline.reliable_drain(bench, count, processes))
            ours.append(engine_drain(bench, count, processes))
        extra = _per_job([d.sample for d in ours])
        extra["worker_cpu_us"] = [1e6 * d.worker_cpu / count for d in ours]
        extra["baseline_server_cpu_us"] = [1e6 * b.server_cpu / count for b in base]
        extra["baseline_consumer_cpu_us"] = [1e6 * b.consumer_cpu / count for b in base]
        plural = "es" if processes > 1 else ""
        figures.append(
            compared(
                f"drain_{processes}",
                f"drain of no-op jobs, {processes} worker process{plural}",
                "jobs/s",
                [d.sample.rate for d in ours],
                [b.rate for b in base],
                f"reliable list queue (BLMOVE + LREM), {processes} consumer process{plural}",
                Target("ratio-min", 1.0),
                extra=extra,
            )
        )
    return figures


def _per_job(samples: list[Sample]) -> dict[str, Any]:
    """Each round's per-job costs (wall, client CPU, server CPU, commands)."""
    return {"per_job": [s.per_job() for s in samples]}


def submit_expanded(client: Client, run_id: str, flow: str, puts: list[JobSpec]) -> None:
    """A run's submission as `flows run` makes it once expanded: specs, limit checks, one call."""
    submit(client, assemble_run(run_id, flow, puts, params={}))
