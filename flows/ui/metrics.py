"""Prometheus metrics of a namespace, read from the engine at each scrape.

Served at ``/metrics`` by ``flows ui`` and by ``flows worker --metrics-port`` (the worker's
queues only). A scrape makes a bounded number of engine calls, in the number of queues and
never in the number of jobs or schedules, sent in two round trips: the queue names (1 call per
1,000 queues, unless given), then per 100 queues one ``queue.counts``, per queue one ``stats``
of today, and ``worker.list``, ``runs.statuses``, ``schedule.list`` (each schedule with its
skipped ticks counted by reason), ``schedulers`` and ``deadline.count``.
``flows_scrape_engine_calls`` says how many it took, every one of them.

The per-queue counters and histograms are today's (UTC) figures of the engine's statistics
(``stats``): they start again from 0 at midnight UTC, which Prometheus reads as a counter reset,
so ``rate()`` and ``increase()`` stay right across it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from flows.ui.state import CheckedRoute, reader
from scheduler.engine.client import Client
from scheduler.engine.replies import as_dict, as_list
from scheduler.service.records import ServiceHealth

# Job states counted per queue (the fields of queue.counts).
STATES = ("waiting", "running", "stalled", "scheduled", "depends")
# Histogram bounds in seconds; each is the upper end of one of the engine's buckets.
BOUNDS = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 21600, 86400)
# Runs whose status is counted (the newest), and schedules whose skips are read, at most.
MAX_RUNS = 100
MAX_SCHEDULES = 1000
PAGE = 1000


def _uppers() -> list[float]:
    """The upper end of each of the engine's histogram buckets (include/stats.lua), in order:
    s0..s59, m1..m59, h1..h23, d1..d6 (the last one holding everything longer)."""
    out = [float(i + 1) for i in range(60)]
    out += [float((i + 1) * 60) for i in range(1, 60)]
    out += [float((i + 1) * 3600) for i in range(1, 24)]
    out += [float((i + 1) * 86400) for i in range(1, 6)] + [math.inf]
    return out


UPPERS = _uppers()


def buckets(histogram: Sequence[int]) -> list[tuple[str, float]]:
    """The engine's histogram as Prometheus's cumulative ``(le, count)`` pairs."""
    out: list[tuple[str, float]] = []
    for bound in BOUNDS:
        out.append(
            (
                str(float(bound)),
                float(
                    sum(n for n, upper in zip(histogram, UPPERS, strict=False) if upper <= bound)
                ),
            )
        )
    out.append(("+Inf", float(sum(histogram))))
    return out


@dataclass
class Snapshot:
    """What one scrape read."""

    counts: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    workers: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)
    deadlines_missed: int = 0
    now: float = 0.0
    calls: int = 0
    seconds: float = 0.0


def read(client: Client, queues: Sequence[str] | None = None) -> Snapshot:
    """Read everything the metrics show, in three round trips (see the module's docstring)."""
    started = time.perf_counter()
    engine = client.engine
    snap = Snapshot()
    names = list(queues) if queues else []
    if not queues:
        offset = 0
        while True:
            page = as_list(engine.call("doctor.names", "queues", offset, PAGE))
            snap.calls += 1
            names += [str(n) for n in page]
            offset += len(page)
            if len(page) < PAGE:
                break
    snap.now = engine.server_time()
    pipe = engine.pipeline()
    for first in range(0, len(names), 100):
        pipe.call("queue.counts", *names[first : first + 100])
    for name in names:
        pipe.call("stats", name, snap.now)
    pipe.call("worker.list")
    pipe.call("runs.statuses", "", 0, MAX_RUNS)
    pipe.call("schedule.list", 0, MAX_SCHEDULES)
    pipe.call("schedulers", 1000)
    pipe.call("deadline.count")
    snap.calls += len(pipe)
    replies = pipe.execute()
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    chunks = (len(names) + 99) // 100
    for reply in replies[:chunks]:
        snap.counts += as_list(reply)
    for name, reply in zip(names, replies[chunks : chunks + len(names)], strict=True):
        snap.stats[name] = as_dict(reply)
    workers, runs, schedules, services, missed = replies[chunks + len(names) :]
    snap.workers = as_list(workers)
    snap.runs = as_list(runs)
    snap.schedules = [as_dict(s) for s in as_list(schedules)]
    snap.services = as_list(services)
    snap.deadlines_missed = int(missed)
    snap.seconds = time.perf_counter() - started
    return snap


def families(snap: Snapshot) -> Iterator[Metric]:
    """The metric families of a snapshot."""
    yield from _queue_families(snap)
    yield from _run_families(snap)
    yield from _schedule_families(snap)
    yield from _worker_families(snap)
    missed = CounterMetricFamily(
        "flows_deadlines_missed",
        "Deadlines of runs and steps missed (each once), since the namespace began.",
    )
    missed.add_metric([], float(snap.deadlines_missed))
    yield missed
    yield GaugeMetricFamily(
        "flows_scrape_engine_calls", "Engine calls this scrape made.", value=float(snap.calls)
    )
    yield GaugeMetricFamily(
        "flows_scrape_seconds", "Seconds this scrape spent reading the engine.", value=snap.seconds
    )


def _queue_families(snap: Snapshot) -> Iterator[Metric]:
    jobs = GaugeMetricFamily("flows_jobs", "Jobs by queue and state.", labels=["queue", "state"])
    for counts in snap.counts:
        for state in STATES:
            jobs.add_metric([str(counts["name"]), state], float(counts.get(state) or 0))
    yield jobs

    completed = CounterMetricFamily(
        "flows_jobs_completed", "Jobs completed today (UTC), by queue.", labels=["queue"]
    )
    failed = CounterMetricFamily(
        "flows_jobs_failed", "Jobs failed today (UTC), by queue.", labels=["queue"]
    )
    run = HistogramMetricFamily(
        "flows_job_run_seconds", "Run times (pop to complete) today (UTC).", labels=["queue"]
    )
    wait = HistogramMetricFamily(
        "flows_job_wait_seconds", "Wait times (ready to pop) today (UTC).", labels=["queue"]
    )
    for queue, stats in snap.stats.items():
        run_stats, wait_stats = as_dict(stats.get("run")), as_dict(stats.get("wait"))
        completed.add_metric([queue], float(run_stats.get("count") or 0))
        failed.add_metric([queue], float(stats.get("failed") or 0))
        for family, part in ((run, run_stats), (wait, wait_stats)):
            count = float(part.get("count") or 0)
            family.add_metric(
                [queue],
                buckets(as_list(part.get("histogram"))),
                sum_value=count * float(part.get("mean") or 0),
            )
    yield from (completed, failed, run, wait)


def _run_families(snap: Snapshot) -> Iterator[Metric]:
    runs = GaugeMetricFamily(
        "flows_runs", f"The newest {MAX_RUNS} runs by flow and status.", labels=["flow", "status"]
    )
    for (flow, status), n in sorted(
        Counter((str(r["flow"]), str(r["status"])) for r in snap.runs).items()
    ):
        runs.add_metric([flow, status], float(n))
    yield runs


SKIPS = "skips:"
"""A schedule's field counting its skipped ticks of one reason (lua/include/schedules.lua)."""


def _schedule_families(snap: Snapshot) -> Iterator[Metric]:
    fires = CounterMetricFamily(
        "flows_schedule_fires", "Ticks fired, by schedule.", labels=["schedule"]
    )
    skips = CounterMetricFamily(
        "flows_schedule_skips",
        "Ticks skipped, by schedule and reason.",
        labels=["schedule", "reason"],
    )
    for schedule in snap.schedules:
        name = str(schedule.get("name"))
        fires.add_metric([name], float(schedule.get("fired") or 0))
        # the engine counts each schedule's skipped ticks by reason: fields `skips:<reason>`
        reasons = {
            key[len(SKIPS) :]: float(value)
            for key, value in schedule.items()
            if key.startswith(SKIPS)
        }
        for reason, n in sorted(reasons.items()):
            skips.add_metric([name, reason], n)
    yield from (fires, skips)
    if snap.services:
        yield _tick_ages(snap)


def _tick_ages(snap: Snapshot) -> Metric:
    """The age of each source's newest tick: a source whose services all died shows, however
    well another source's services tick. A service whose ping names no source counts as ''."""
    newest: dict[str, float] = {}
    for raw in snap.services:
        service = ServiceHealth(str(raw["id"]), float(raw["last_tick"]), as_dict(raw.get("info")))
        source = service.source or ""
        newest[source] = max(newest.get(source, -math.inf), service.last_tick)
    ages = GaugeMetricFamily(
        "flows_scheduler_last_tick_age_seconds",
        "Seconds since a scheduler service of the source last ticked (absent: no service).",
        labels=["source"],
    )
    for source, last_tick in sorted(newest.items()):
        ages.add_metric([source], max(0.0, snap.now - last_tick))
    return ages


def _worker_families(snap: Snapshot) -> Iterator[Metric]:
    workers = GaugeMetricFamily(
        "flows_workers", "Live workers by queue they listen on.", labels=["queue"]
    )
    per_queue: Counter[str] = Counter()
    for worker in snap.workers:
        if worker.get("silent"):  # not heard from for worker-silent-after: most likely dead
            continue
        info = as_dict(worker.get("info"))
        for queue in as_list(info.get("queues")):
            per_queue[str(queue)] += 1
    for queue, n in sorted(per_queue.items()):
        workers.add_metric([queue], float(n))
    yield workers


class EngineCollector(Collector):
    """Reads the engine at each scrape (``queues``: only these; default every known queue)."""

    def __init__(self, client: Client, queues: Iterable[str] | None = None) -> None:
        self.client = client
        self.queues = list(queues) if queues else None

    def collect(self) -> Iterator[Metric]:
        yield from families(read(self.client, self.queues))


def registry(client: Client, queues: Iterable[str] | None = None) -> CollectorRegistry:
    out = CollectorRegistry(auto_describe=False)
    out.register(EngineCollector(client, queues))
    return out


router = APIRouter(route_class=CheckedRoute)


@router.get("/metrics", dependencies=[Depends(reader)], include_in_schema=False)
def metrics(request: Request) -> Response:
    """The Prometheus text exposition of the namespace's metrics."""
    state = request.app.state
    if getattr(state, "metrics", None) is None:
        state.metrics = registry(state.ui.client)
    return Response(generate_latest(state.metrics), media_type=CONTENT_TYPE_LATEST)
