"""Prometheus metrics at /metrics (flows ui) and from flows worker --metrics-port, checked against
a known workload; a scrape's engine calls grow with queues and schedules, never with jobs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scheduler_support import MIN, T, make_service, write_flow
from ui_support import TOKEN, Api, serve

from flows.ui import metrics
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.queue import NewJob
from scheduler.engine.scripts import Engine

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="metrics-test")


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        yield Api(base)


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def scrape(api: Api) -> Samples:
    reply = api.get("/metrics")
    assert reply.status == 200
    return parse(reply.body)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def workload(client: Client) -> None:
    """In queue m: 2 completed (one ran 2 s, one 90 s), 1 failed, 1 running, 3 waiting, and
    1 scheduled; in queue n: 1 waiting. Times are the server's, moved forward for run times."""
    m = client.queues["m"]
    for _ in range(7):
        m.put("K", {})
    m.put("K", {}, delay=3600)
    client.queues["n"].put("K", {})
    seconds, _ = client.redis.time()
    now = float(seconds)
    popped = m.pop(4, now=now)
    popped[0].complete(now=now + 2)
    popped[1].heartbeat(now=now + 45)
    popped[1].complete(now=now + 90)
    popped[2].fail("boom", "it broke", now=now + 3)
    client.engine.call("worker.register", "w-m", '{"queues": ["m", "n"], "pid": 1}')
    client.engine.call("worker.register", "w-n", '{"queues": ["n"], "pid": 2}')
    # Not heard from for ten minutes (worker-silent-after is 60 s): most likely dead, not live.
    silent = time.time() - 600
    client.engine.call("worker.register", "w-gone", '{"queues": ["n"], "pid": 3}', now=silent)


def test_metrics_show_a_known_workload(api: Api, client: Client) -> None:
    workload(client)
    samples = scrape(api)
    assert value(samples, "flows_jobs", queue="m", state="waiting") == 3
    assert value(samples, "flows_jobs", queue="m", state="running") == 1
    assert value(samples, "flows_jobs", queue="m", state="scheduled") == 1
    assert value(samples, "flows_jobs", queue="n", state="waiting") == 1
    assert value(samples, "flows_jobs_completed_total", queue="m") == 2
    assert value(samples, "flows_jobs_failed_total", queue="m") == 1
    assert value(samples, "flows_jobs_completed_total", queue="n") == 0
    assert value(samples, "flows_job_run_seconds_count", queue="m") == 2
    assert value(samples, "flows_job_run_seconds_bucket", queue="m", le="5.0") == 1
    assert value(samples, "flows_job_run_seconds_bucket", queue="m", le="60.0") == 1
    assert value(samples, "flows_job_run_seconds_bucket", queue="m", le="300.0") == 2
    assert value(samples, "flows_job_run_seconds_sum", queue="m") == pytest.approx(92, abs=0.1)
    assert value(samples, "flows_job_wait_seconds_count", queue="m") == 4
    assert value(samples, "flows_workers", queue="n") == 2
    assert value(samples, "flows_workers", queue="m") == 1


def test_runs_schedules_and_the_scheduler_tick(api: Api, client: Client) -> None:
    client.engine.call(
        "flow.submit",
        "f-1",
        json.dumps({"flow": "f"}),
        json.dumps([{"jid": "f-1:a", "queue": "r", "klass": "K", "data": "{}"}]),
    )
    client.engine.call(
        "flow.submit",
        "g-1",
        json.dumps({"flow": "g"}),
        json.dumps([{"jid": "g-1:a", "queue": "r", "klass": "K", "data": "{}"}]),
    )
    [job] = client.queues["r"].pop()
    job.complete()
    seconds, _ = client.redis.time()
    now = float(seconds)
    # Two sources: "nightly"'s only service died 10 minutes ago while "hourly"'s still ticks.
    # One number for all (the newest tick) hid the dead source from the alert.
    client.engine.call("scheduler.ping", "svc", '{"source": "hourly"}', now=now - 30)
    client.engine.call("scheduler.ping", "old", '{"source": "hourly"}', now=now - 300)
    client.engine.call("scheduler.ping", "gone", '{"source": "nightly"}', now=now - 600)
    samples = scrape(api)
    statuses = {labels: v for (name, labels), v in samples.items() if name == "flows_runs"}
    # f-1's job was put first, so popped and completed first
    assert statuses == {
        (("flow", "f"), ("status", "succeeded")): 1.0,
        (("flow", "g"), ("status", "running")): 1.0,
    }
    ages = {
        labels: v
        for (name, labels), v in samples.items()
        if name == "flows_scheduler_last_tick_age_seconds"
    }
    assert set(ages) == {(("source", "hourly"),), (("source", "nightly"),)}, ages
    assert 29 <= ages[(("source", "hourly"),)] < 40
    assert 599 <= ages[(("source", "nightly"),)] < 610


def test_a_scrape_costs_calls_in_queues_not_jobs(client: Client) -> None:
    client.queues["a"].put("K", {})
    small = metrics.read(client)
    client.queues["a"].put_many([NewJob("K", {}) for _ in range(2000)])
    client.queues["b"].put("K", {})
    large = metrics.read(client)
    # one more queue: one more `stats` call (its counts share one queue.counts call)
    assert large.calls == small.calls + 1
    assert small.calls == 1 + 1 + 1 + 5  # names, counts, stats of a, the five fixed calls


def _engine_calls(client: Client) -> int:
    """Engine calls the server has run so far, by its own count (each is one FCALL)."""
    stats = client.redis.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("fcall", "fcall_ro")
    )


def test_a_scrape_says_the_engine_calls_it_made(api: Api, client: Client) -> None:
    workload(client)
    scrape(api)  # the engine's library looked at, once
    before = _engine_calls(client)
    said = value(scrape(api), "flows_scrape_engine_calls")
    assert said == _engine_calls(client) - before


def test_a_scrape_costs_the_same_calls_for_1_and_40_schedules(
    client: Client, tmp_path: Path
) -> None:
    write_flow(tmp_path, "s0", overlap="skip")
    service = make_service(client, tmp_path)
    service.scan(T - 1)
    one = metrics.read(client)
    for i in range(1, 40):
        write_flow(tmp_path, f"s{i}", overlap="skip")
    service.scan(T)
    many = metrics.read(client)
    assert len(many.schedules) == 40
    assert many.calls == one.calls <= 10


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_worker_serves_its_queues_metrics(server: EmbeddedServer, client: Client) -> None:
    client.queues["wq"].put("K", {})
    client.queues["other"].put("K", {})
    port = free_port()
    env = dict(os.environ, FLOWS_REDIS_URL=server.url)
    flows = str(Path(sys.executable).parent / "flows")
    worker = subprocess.Popen(
        [flows, "worker", "-q", "wq-empty,wq", "--processes", "0", "--metrics-port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    samples = parse(r.read().decode())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        queues = {dict(labels)["queue"] for (name, labels) in samples if name == "flows_jobs"}
        assert queues == {"wq", "wq-empty"}
    finally:
        worker.terminate()
        worker.wait(30)


def test_schedule_fires_and_skips_by_reason(api: Api, client: Client, tmp_path: Path) -> None:
    write_flow(tmp_path, overlap="skip")
    service = make_service(client, tmp_path)
    service.scan(T - 1)
    service.tick(T)  # fires
    client.queues["q"].pop()  # the run is running: the next two ticks are skipped
    service.tick(T + 5 * MIN)
    service.tick(T + 10 * MIN)
    samples = scrape(api)
    assert value(samples, "flows_schedule_fires_total", schedule="f") == 1
    reasons = {
        dict(labels)["reason"]: v
        for (name, labels), v in samples.items()
        if name == "flows_schedule_skips_total"
    }
    assert reasons == {"overlap skip: previous run still active": 2}
