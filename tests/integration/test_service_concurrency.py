"""Several scheduler services at once fire each tick exactly once; and the real-time service
(APScheduler) smoke test."""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from scheduler_support import MIN, T, make_service, registration, run_ids, write_flow

from flows.expand.run_ids import RUN_ID_TIME
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.service.loop import SchedulerService, TickReport

FLOWS = 4


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    for i in range(FLOWS):
        # max_runs spares validation its look for the busiest catch-up window (slow for a
        # minutely cron) and never binds here.
        write_flow(path, f"f{i}", cron="* * * * *", overlap="allow", catchup="all", max_runs=500)
    return path


def _services(server: EmbeddedServer, folder: Path, count: int) -> list[SchedulerService]:
    """Services with their own connections, as separate processes would have."""
    return [
        make_service(Client(redis=connect(server.url)), folder, service_id=f"s{i}", batch=3)
        for i in range(count)
    ]


def _run_together(services: list[SchedulerService], nows: list[list[float]]) -> list[TickReport]:
    """Each service ticks through its own list of times; all start each round together."""
    barrier = threading.Barrier(len(services))
    reports: list[list[TickReport]] = [[] for _ in services]
    failures: list[BaseException] = []

    def loop(index: int) -> None:
        try:
            for now in nows[index]:
                barrier.wait(timeout=30)
                reports[index].append(services[index].tick(now))
        except BaseException as error:  # surfaced by the assertion below
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(services))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    return [report for per_service in reports for report in per_service]


def test_two_services_fire_each_tick_exactly_once(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    services = _services(server, folder, 2)
    for service in services:
        service.scan(T - 1)
    minutes = 150
    times = [T + m * MIN + 1 for m in range(minutes)]
    reports = _run_together(services, [times, times])
    fired = Counter(f.run_id for report in reports for f in report.fired)
    assert all(count == 1 for count in fired.values()), fired.most_common(3)
    assert {f.outcome for report in reports for f in report.fired} == {"fired"}
    client = Client(redis=redis_client)
    for i in range(FLOWS):
        expected = [f"f{i}@20260105T{12 + m // 60:02d}{m % 60:02d}00Z" for m in range(minutes)]
        assert run_ids(client, f"f{i}") == expected
        assert registration(client, f"f{i}").skips == ()
    assert sum(len(r.fired) for r in reports) == FLOWS * minutes
    assert not any(r.errors for r in reports)


def test_services_with_different_clocks_and_downtimes(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    """Three services, each ticking at its own (monotonic) times with gaps, planning from
    different states: every tick is still fired once, none lost (catch-up all)."""
    rng = random.Random(7)
    services = _services(server, folder, 3)
    services[0].scan(T - 1)
    end = T + 90 * MIN
    nows = []
    for _ in services:
        now, mine = T, []
        while now < end:
            now += rng.choice([1, 7, 30, 61, 95, 240])
            mine.append(min(now, end))
        nows.append(mine)
    rounds = max(len(n) for n in nows)
    nows = [n + [end] * (rounds - len(n)) for n in nows]
    reports = _run_together(services, nows)
    fired = Counter(f.run_id for report in reports for f in report.fired)
    assert all(count == 1 for count in fired.values()), fired.most_common(3)
    client = Client(redis=redis_client)
    for i in range(FLOWS):
        ids = run_ids(client, f"f{i}")
        assert len(ids) == 91 and len(set(ids)) == 91  # T .. T+90m, every minute
        assert registration(client, f"f{i}").next == end + MIN


def tick_of(run_id: str) -> float:
    return datetime.strptime(run_id.split("@")[1], RUN_ID_TIME).replace(tzinfo=UTC).timestamp()


def test_the_service_runs_on_apscheduler_and_stops_cleanly(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Real time, briefly: APScheduler drives tick, scan and housekeeping until stop()."""
    folder = tmp_path / "live"
    folder.mkdir()
    write_flow(folder, "live", cron="* * * * *", catchup="latest", window="1h")
    client = Client(redis=redis_client)
    service = make_service(
        client,
        folder,
        service_id="live-service",
        tick_interval=0.05,
        scan_interval=0.1,
        housekeeping_interval=0.05,
        retention_interval=0.2,
    )
    started = service.server_time()
    service.scan(started - 130)  # registered with a tick already due
    jid = client.queues["other"].put("K", {}, delay=0.3)
    thread = threading.Thread(target=service.run, kwargs={"install_signals": False})
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if run_ids(client, "live") and client.jobs[jid].state == "waiting":
                break
            time.sleep(0.05)
        # Catch-up `latest`: one run for the ticks missed before the start. The clock is
        # real, so a minute turning meanwhile fires its own tick too.
        assert len([r for r in run_ids(client, "live") if tick_of(r) <= started]) == 1
        assert client.jobs[jid].state == "waiting"  # promoted with no worker popping
        write_flow(folder, "live2", cron="0 0 * * *")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not registration_exists(client, "live2"):
            time.sleep(0.05)
        assert registration_exists(client, "live2")  # picked up without a restart
        assert [s.id for s in service.schedules.services()] == ["live-service"]
    finally:
        service.stop()
        thread.join(timeout=20)
    assert not thread.is_alive()
    assert service.schedules.services() == []  # a clean stop deregisters its health entry


def registration_exists(client: Client, name: str) -> bool:
    try:
        registration(client, name)
    except AssertionError:
        return False
    return True


def test_ticks_hold_the_flows_max_active_runs(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The service's own ticks respect concurrency.max_active_runs: with overlap allow and a
    limit of 2, the third tick (two runs still active) is skipped in the firing call."""
    folder = tmp_path / "limited"
    folder.mkdir()
    text = (
        'version: 1\nname: lim\nqueue: lim\nschedule:\n  cron: "* * * * *"\n'
        "  overlap: allow\nconcurrency: {max_active_runs: 2}\nsteps:\n  s0: {run: echo 0}\n"
    )
    (folder / "lim.yaml").write_text(text)
    client = Client(server.url)
    service = make_service(client, folder)
    service.scan(T - 1)
    reports = [service.tick(T + minute * MIN) for minute in range(3)]
    assert len(run_ids(client, "lim")) == 2  # no worker: both stay active
    assert [len(r.fired) for r in reports] == [1, 1, 0]
    assert [(name, s.first, s.reason) for name, s in reports[2].skipped] == [
        ("lim", T + 2 * MIN, "max_active_runs")
    ]
    reasons = {skip.reason for skip in registration(client, "lim").skips}
    assert reasons == {"max_active_runs"}


def test_the_totals_count_every_tick_when_a_scan_ticks_beside_the_loop(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    """The tick loop and a scan's catch-up tick (``tick(now, only=name)``, in the scan's
    thread) add to the service's totals (fired, skipped, conflicts: its health info) at once:
    every tick's report is counted in full, whichever thread ticked. (The lost update this
    guards against needs a thread switch inside the few bytecodes of one update: the
    interpreter is told to switch as often as it can, but these rounds need not hit it.)"""
    service = make_service(Client(redis=connect(server.url)), folder, batch=3)
    service.scan(T - 1)
    minutes = 300
    times = [T + m * MIN + 1 for m in range(minutes)]
    barrier = threading.Barrier(2)
    reports: list[TickReport] = []
    failures: list[BaseException] = []

    def loop(only: str | None) -> None:
        try:
            for now in times:
                barrier.wait(timeout=30)
                reports.append(service.tick(now, only=only))  # list.append: atomic
        except BaseException as error:  # surfaced by the assertion below
            failures.append(error)
            barrier.abort()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=loop, args=(only,)) for only in (None, "f0")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures
    assert service.totals == {
        "fired": sum(len(r.fired) for r in reports),
        "skipped": sum(len(r.skipped) for r in reports),
        "conflicts": sum(r.conflicts for r in reports),
    }
    assert service.totals["fired"] == FLOWS * minutes


def test_a_file_another_service_registers_during_a_scan_stays_registered(
    server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services of one folder: while the first reads the files it listed, the second finds a
    file added since and registers it. The first must not take that schedule for one whose file
    is gone (it never listed the file): its ticks would go unfired until a later scan."""
    folder = tmp_path / "pipelines"
    folder.mkdir()
    write_flow(folder, "f0", cron="* * * * *")
    first, second = _services(server, folder, 2)
    first.scan(T)
    second.scan(T)
    listed_read = first.reloader._read

    def read_while_the_second_registers_a_new_file(*args: Any) -> Any:
        write_flow(folder, "f1", cron="* * * * *")
        assert "f1" in second.scan(T).registered
        return listed_read(*args)

    monkeypatch.setattr(first.reloader, "_read", read_while_the_second_registers_a_new_file)
    report = first.scan(T)
    assert "f1" not in report.unregistered
    assert registration_exists(Client(redis=connect(server.url)), "f1")
