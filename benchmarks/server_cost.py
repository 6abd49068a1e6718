"""What a job costs the server: time per lifecycle (put + pop + complete) and memory.

Server time comes from INFO commandstats (reset before each phase): the ``usec`` of ``fcall``
(or ``evalsha`` when the engine runs as the EVALSHA bundle) per call. The figure is the lifecycle
as our worker calls it (``pop.lean``; complete without the data); the same lifecycle as a qless
client calls it (full ``pop``; complete with the data) is reported next to it, and also run
through the EVALSHA bundle, for comparison. Memory is the growth of ``used_memory`` per job, as
:mod:`benchmarks.server_memory` reads it.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from benchmarks import flowgen, server_memory
from benchmarks.context import Bench
from benchmarks.figures import Figure, Target, median
from benchmarks.measure import Sample, measured
from benchmarks.throughput import KLASS, put_pipelined
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from scheduler.engine.client import Client
from scheduler.engine.job import Job
from scheduler.engine.scripts import Engine

LIFECYCLE_QUEUE = "bench-lifecycle"
MEMORY_QUEUE = "bench-memory"
SCRIPT_COMMANDS = ("fcall", "evalsha", "eval", "fcall_ro")
#: ``P j:<jid>`` and ``P j:<jid>-history`` (lua/README.md, key layout).
JOB_KEY, HISTORY_SUFFIX = "j:", "-history"
#: Jobs per pop and per complete call of the batched lifecycle: a worker's default prefetch.
DRAIN_BATCH = 64


def script_usec(sample: Sample) -> tuple[str, float]:
    """(the script command used, its server microseconds per job) in ``sample``."""
    for name in SCRIPT_COMMANDS:
        stat = sample.commands.get(name)
        if stat and stat["calls"]:
            return name, stat["usec"] / sample.count
    raise RuntimeError("no engine calls in commandstats")


def lifecycle(bench: Bench, client: Client, *, lean: bool = True, batch: int = 1) -> dict[str, Any]:
    """Put ``sizes.lifecycle`` jobs one call at a time, then pop them, then complete them.

    ``lean``: as our worker does it (``pop.lean``, and complete without sending the data back);
    else as a qless client does (``pop`` with the full job, complete with the data). ``batch``
    (lean only): jobs per ``pop.lean`` and per ``complete.many`` call (1: one ``complete`` each).
    """
    bench.fresh()
    count = bench.sizes.lifecycle
    queue = client.queues[LIFECYCLE_QUEUE]
    worker = client.worker_name
    jobs: list[Job] = []
    jids: list[str] = []

    def put() -> None:
        for index in range(count):
            queue.put(KLASS, {"i": index})

    def pop() -> None:
        for _ in range(count):
            if lean:
                reply = client.engine.call("pop.lean", LIFECYCLE_QUEUE, worker, batch)
                jids.extend(job["jid"] for job in json.loads(reply))
                if len(jids) >= count:
                    break
            else:
                jobs.extend(queue.pop())

    def complete() -> None:
        if batch > 1:
            for first in range(0, len(jids), batch):
                args = [(jid, LIFECYCLE_QUEUE, "") for jid in jids[first : first + batch]]
                client.engine.call("complete.many", worker, *(a for job in args for a in job))
            return
        for jid in jids:
            client.engine.call("complete", jid, worker, LIFECYCLE_QUEUE, "")
        for job in jobs:
            job.complete()

    phases = {
        name: measured(bench, count, work)
        for name, work in (("put", put), ("pop", pop), ("complete", complete))
    }
    usec = {name: script_usec(sample)[1] for name, sample in phases.items()}
    cpu = {name: 1e6 * sample.server_cpu / count for name, sample in phases.items()}
    return {
        "command": script_usec(phases["put"])[0],
        "usec": usec,
        "total_usec": sum(usec.values()),
        "server_cpu_us": cpu,
        "total_server_cpu_us": sum(cpu.values()),
    }


def pop_reply_bytes(bench: Bench) -> int:
    """Size of the JSON a pop of one freshly put job returns."""
    queue = bench.client.queues[LIFECYCLE_QUEUE]
    queue.put(KLASS, {"i": 0})
    reply = bench.client.engine.call("pop", LIFECYCLE_QUEUE, bench.client.worker_name, 1)
    return len(str(reply).encode())


def lifecycle_figures(bench: Bench) -> list[Figure]:
    evalsha = Client.from_engine(
        Engine(bench.redis, bench.client.engine.prefix, use_functions=False),
        worker_name=bench.client.worker_name,
    )
    ours = [lifecycle(bench, bench.client) for _ in range(bench.rounds)]
    batched = [lifecycle(bench, bench.client, batch=DRAIN_BATCH) for _ in range(bench.rounds)]
    batched_totals = [r["total_usec"] for r in batched]
    qless = [lifecycle(bench, bench.client, lean=False) for _ in range(bench.rounds)]
    bundle = [lifecycle(bench, evalsha, lean=False) for _ in range(bench.rounds)]
    totals = [r["total_usec"] for r in ours]
    return [
        Figure(
            key="lifecycle_server_us",
            label=(
                "server time per job lifecycle, put + pop.lean + complete, as our worker calls "
                f"them ({ours[0]['command']})"
            ),
            unit="µs",
            value=median(totals),
            better="lower",
            target=Target("max", 150),
            rounds=totals,
            note=(
                f"INFO commandstats; {median([r['total_usec'] for r in qless]):.0f} µs with a "
                "qless client's pop and complete"
            ),
            extra={
                "rounds": ours,
                "qless_rounds": qless,
                "qless_total_usec": median([r["total_usec"] for r in qless]),
                "evalsha_rounds": bundle,
                "evalsha_total_usec": median([r["total_usec"] for r in bundle]),
                "pop_reply_bytes": pop_reply_bytes(bench),
            },
        ),
        Figure(
            key="lifecycle_batched_server_us",
            label=(
                f"server time per job lifecycle, put + pop.lean + complete.many, {DRAIN_BATCH} "
                "jobs per pop and per complete call (as a busy worker drains)"
            ),
            unit="µs",
            value=median(batched_totals),
            better="lower",
            target=Target("max", 150),
            rounds=batched_totals,
            note="INFO commandstats; the put one call per job",
            extra={"rounds": batched},
        ),
    ]


def key_bytes(bench: Bench, jid: str) -> dict[str, int]:
    """MEMORY USAGE of one job's hash and history list."""
    key = bench.client.prefix + JOB_KEY + jid
    return {
        "job_hash": int(bench.redis.memory_usage(key, samples=0) or 0),
        "history": int(bench.redis.memory_usage(key + HISTORY_SUFFIX, samples=0) or 0),
    }


def memory_round(bench: Bench) -> dict[str, Any]:
    bench.fresh()
    count = bench.sizes.memory
    queue = bench.client.queues[MEMORY_QUEUE]
    with server_memory.untracked(bench.redis):
        before = server_memory.used_memory(bench.redis)
        put_pipelined(bench, MEMORY_QUEUE, count)
        waiting = server_memory.used_memory(bench.redis)
        sample_jid = queue.peek()[0].jid
        waiting_keys = key_bytes(bench, sample_jid)
        done = 0
        while done < count:
            jobs = queue.pop(bench.sizes.batch)
            for job in jobs:
                job.complete()
            done += len(jobs)
            if not jobs:
                raise RuntimeError("memory: the queue ran dry early")
        finished = server_memory.used_memory(bench.redis)
    return {
        "waiting": (waiting - before) / count,
        "completed": (finished - before) / count,
        "waiting_keys": waiting_keys,
        "completed_keys": key_bytes(bench, sample_jid),
    }


def flow_memory_round(bench: Bench) -> dict[str, Any]:
    """Memory per waiting job of a submitted layered flow (``sizes.memory`` steps): each job
    carries its flow's few hundred bytes of data, its dependencies and its place in its run."""
    bench.fresh()
    steps = bench.sizes.memory
    flow = flowgen.validated(flowgen.layered_flow("bench-memory-flow", steps, MEMORY_QUEUE))
    run_id = "bench-memory-flow-1"
    built = assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={})
    grown = server_memory.growth(bench.redis, lambda: submit(bench.client, built))
    sample = f"{run_id}:s{steps - 1}"
    key = bench.client.prefix + JOB_KEY + sample
    return {
        "waiting": grown / steps,
        "job_hash": int(bench.redis.memory_usage(key, samples=0) or 0),
        "encoding": str(bench.redis.object("encoding", key)),
    }


def _bytes_figure(key: str, label: str, values: list[float], extra: dict[str, Any]) -> Figure:
    """A memory figure: the median of its rounds' bytes per job, lower is better."""
    return Figure(
        key=key,
        label=label,
        unit="bytes",
        value=statistics.median(values),
        better="lower",
        rounds=values,
        note="growth of INFO used_memory (less connections, the AOF buffer, latency histograms)",
        extra=extra,
    )


def memory_figures(bench: Bench) -> list[Figure]:
    rounds = [memory_round(bench) for _ in range(bench.rounds)]
    # After the plain rounds: what a large submit leaves in the server's allocations for a while
    # (its arguments, its replies) would be given back during their puts, below their zero.
    flow_rounds = [flow_memory_round(bench) for _ in range(bench.rounds)]
    data = '`{"i": n}`'
    figures = [
        _bytes_figure(
            f"memory_{state}",
            f"memory in Redis per {state} job (data {data})",
            [r[state] for r in rounds],
            {"keys": rounds[0][f"{state}_keys"]},
        )
        for state in ("waiting", "completed")
    ]
    figures.append(
        _bytes_figure(
            "memory_flow_waiting",
            f"memory in Redis per waiting job of a {bench.sizes.memory:,}-step flow run",
            [r["waiting"] for r in flow_rounds],
            {"job_hash": flow_rounds[0]["job_hash"], "encoding": flow_rounds[0]["encoding"]},
        )
    )
    return figures
