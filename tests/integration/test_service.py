"""The scheduler service on a real server: firing, catch-up, overlap, DST, bounds, pause,
trigger and health. Time is always passed to ``tick(now)``; nothing sleeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from helpers import register_legacy_cron
from scheduler_support import (
    MIN,
    T,
    make_service,
    registration,
    run_ids,
    skipped_ticks,
    write_flow,
)

from flows.expand.run_ids import run_id_for
from flows.runs.service_source import FlowsSource
from scheduler.cron import jitter_for
from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound, WrongState
from scheduler.service.loop import SchedulerService, check_health
from scheduler.service.schedules import Schedules


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client) as client:
        yield client


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    return path


def test_a_schedule_fires_on_its_tick(client: Client, folder: Path) -> None:
    write_flow(folder, steps=2)
    service = make_service(client, folder)
    assert service.scan(T - 100).registered == ["f"]
    assert registration(client).next == T
    assert service.tick(T - 1).fired == []
    report = service.tick(T + 1)
    assert [(f.run_id, f.trigger, f.outcome) for f in report.fired] == [
        ("f@20260105T120000Z", "schedule", "fired")
    ]
    assert service.tick(T + 2).fired == []  # the same tick never fires twice
    assert run_ids(client) == ["f@20260105T120000Z"]
    reg = registration(client)
    assert (reg.next, reg.last_run, reg.last_tick, reg.fired) == (
        T + 5 * MIN,
        "f@20260105T120000Z",
        T,
        1,
    )
    # The run is what `flows run` would put: one job per step, ids <run>:<step>, needs as depends.
    first, second = client.jobs["f@20260105T120000Z:s0"], client.jobs["f@20260105T120000Z:s1"]
    assert (first.state, second.state, second.dependencies) == ("waiting", "depends", [first.jid])
    assert first.data["_flows"]["run"] == "f@20260105T120000Z"
    record = json.loads(client.engine.call("run.get", "f@20260105T120000Z"))
    assert (record["trigger"], record["schedule"], record["flow"]) == ("schedule", "f", "f")
    assert float(record["tick"]) == T
    assert [f.run_id for f in service.tick(T + 5 * MIN).fired] == ["f@20260105T120500Z"]


def test_jitter_delays_the_first_jobs_alike_on_every_service(client: Client, folder: Path) -> None:
    write_flow(folder, jitter="4m", steps=2)
    service = make_service(client, folder)
    service.scan(T - 100)
    service.tick(T)
    delay = jitter_for("f", T, 240.0)
    first = client.jobs[f"{run_id_for('f', T)}:s0"]
    assert first.state == "scheduled"
    scheduled = client.redis.zscore(client.prefix + "q:q-scheduled", first.jid)
    assert scheduled == pytest.approx(T + delay, abs=0.01)
    assert client.jobs[f"{run_id_for('f', T)}:s1"].state == "depends"


@pytest.mark.parametrize(
    ("catchup", "max_runs", "window", "fired", "reasons"),
    [
        ("none", None, "1h", [], {"catch-up policy none": 12}),
        ("latest", None, "1h", [55], {"catch-up policy latest (superseded by a newer run)": 11}),
        ("all", None, "1h", [0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55], {}),
        ("all", 3, "1h", [45, 50, 55], {"max_runs 3 reached": 9}),
        ("all", None, "20m", [40, 45, 50, 55], {"outside catch-up window 20m": 8}),
        ("latest", None, "2m", [], {"outside catch-up window 2m": 12}),
    ],
)
def test_catch_up_after_downtime(
    client: Client,
    folder: Path,
    catchup: str,
    max_runs: int | None,
    window: str,
    fired: list[int],
    reasons: dict[str, int],
) -> None:
    write_flow(folder, catchup=catchup, max_runs=max_runs, window=window)
    service = make_service(client, folder)
    service.scan(T - 1)
    # Down from before T until T+58m: the ticks T .. T+55m (12 of them) were missed.
    report = service.tick(T + 58 * MIN)
    assert sorted(f.tick for f in report.fired) == [T + m * MIN for m in fired]
    assert {f.trigger for f in report.fired} <= {"catch-up"}
    assert run_ids(client) == sorted(run_id_for("f", T + m * MIN) for m in fired)
    reg = registration(client)
    by_reason: dict[str, int] = {}
    for skip in reg.skips:
        by_reason[skip.reason] = by_reason.get(skip.reason, 0) + (skip.count or 0)
    assert by_reason == reasons
    # Every missed tick is either fired or recorded as skipped with a reason.
    assert len(fired) + skipped_ticks(reg) == 12
    assert reg.next == T + 60 * MIN
    assert service.tick(T + 58 * MIN).fired == []


def _pop_all(client: Client, queue: str = "q") -> list[str]:
    return [job.jid for job in client.queues[queue].pop(100)]


def test_overlap_skip(client: Client, folder: Path) -> None:
    write_flow(folder, overlap="skip")
    service = make_service(client, folder)
    service.scan(T - 1)
    service.tick(T)
    [jid] = _pop_all(client)  # the first run is now running, for a long time
    report = service.tick(T + 5 * MIN)
    assert report.fired == []
    assert [(name, s.first, s.reason) for name, s in report.skipped] == [
        ("f", T + 5 * MIN, "overlap skip: previous run still active")
    ]
    client.jobs[jid].complete()
    assert [f.tick for f in service.tick(T + 10 * MIN).fired] == [T + 10 * MIN]


def _buffered_behind_a_running_run(client: Client, folder: Path) -> tuple[SchedulerService, str]:
    """A buffer_one schedule whose first run (the job returned) runs and whose tick T+5m is
    buffered behind it."""
    write_flow(folder, overlap="buffer_one")
    service = make_service(client, folder)
    service.scan(T - 1)
    service.tick(T)
    [jid] = _pop_all(client)
    assert service.tick(T + 5 * MIN).buffered == [("f", T + 5 * MIN)]
    return service, jid


def test_overlap_buffer_one(client: Client, folder: Path) -> None:
    service, jid = _buffered_behind_a_running_run(client, folder)
    report = service.tick(T + 10 * MIN)  # one is buffered already: this one is dropped
    assert [s.reason for _, s in report.skipped] == [
        "overlap buffer_one: a run is already buffered"
    ]
    assert service.tick(T + 11 * MIN).fired == []  # still running: the buffered tick waits
    client.jobs[jid].complete()
    fired = service.tick(T + 12 * MIN).fired
    assert [(f.run_id, f.trigger) for f in fired] == [(run_id_for("f", T + 5 * MIN), "buffered")]
    assert registration(client).buffered is None
    assert run_ids(client) == [run_id_for("f", T), run_id_for("f", T + 5 * MIN)]


def test_overlap_buffer_one_never_fires_a_due_tick_beside_its_buffered_one(
    client: Client, folder: Path
) -> None:
    """The run ends just before the next tick: the buffered tick fires, and the due one meets
    that new run (buffered), never the snapshot that saw no run active."""
    service, jid = _buffered_behind_a_running_run(client, folder)
    client.jobs[jid].complete()  # ends between two ticks: no tick ran since
    report = service.tick(T + 10 * MIN)
    assert [(f.run_id, f.trigger) for f in report.fired] == [
        (run_id_for("f", T + 5 * MIN), "buffered")
    ]
    assert report.buffered == [("f", T + 10 * MIN)]
    assert run_ids(client) == [run_id_for("f", T), run_id_for("f", T + 5 * MIN)]


def test_overlap_cancel_running(client: Client, folder: Path) -> None:
    write_flow(folder, overlap="cancel_running", steps=2)
    service = make_service(client, folder)
    service.scan(T - 1)
    service.tick(T)
    first_run = run_id_for("f", T)
    [jid] = _pop_all(client)
    listener = client.redis.pubsub()
    listener.subscribe(client.prefix + f"w:{client.worker_name}")
    assert listener.get_message(timeout=5) is not None  # subscribed
    report = service.tick(T + 5 * MIN)
    assert [f.run_id for f in report.fired] == [run_id_for("f", T + 5 * MIN)]
    assert client.jobs.get(jid) is None and client.jobs.get(f"{first_run}:s1") is None
    message = listener.get_message(timeout=5)
    assert message is not None and json.loads(message["data"])["event"] == "canceled"
    listener.close()
    assert json.loads(client.engine.call("run.get", first_run))["canceled"]


def test_overlap_allow(client: Client, folder: Path) -> None:
    write_flow(folder, overlap="allow")
    service = make_service(client, folder)
    service.scan(T - 1)
    service.tick(T)
    _pop_all(client)
    service.tick(T + 5 * MIN)
    assert run_ids(client) == [run_id_for("f", T), run_id_for("f", T + 5 * MIN)]


def test_catch_up_all_meets_overlap_skip(client: Client, folder: Path) -> None:
    # Catch-up runs count as runs: with overlap skip only the first of them fires.
    write_flow(folder, catchup="all", max_runs=100, overlap="skip")
    service = make_service(client, folder)
    service.scan(T - 1)
    report = service.tick(T + 12 * MIN)
    assert [f.tick for f in report.fired] == [T]
    assert [s.reason for _, s in report.skipped] == ["overlap skip: previous run still active"] * 2


def test_daylight_saving_fires_each_wall_clock_time_once(client: Client, folder: Path) -> None:
    write_flow(folder, cron="30 2 * * *", timezone="Europe/Berlin", catchup="none")
    service = make_service(client, folder)
    spring = datetime(2026, 3, 28, 12, 0, tzinfo=UTC).timestamp()
    service.scan(spring)
    fired = []
    for minute in range(0, 3 * 24 * 60, 10):  # three days, a tick every ten minutes
        fired += service.tick(spring + minute * MIN).fired
    # The missing 02:30 of 03-29 fires at 03:00 CEST (01:00 UTC), then 02:30 CEST as usual.
    assert [datetime.fromtimestamp(f.tick, UTC).strftime("%m-%d %H:%M") for f in fired] == [
        "03-29 01:00",
        "03-30 00:30",
        "03-31 00:30",
    ]
    autumn = datetime(2026, 10, 24, 12, 0, tzinfo=UTC).timestamp()
    client.redis.flushall()
    service = make_service(client, folder)
    service.scan(autumn)
    fired = []
    for minute in range(0, 2 * 24 * 60, 10):
        fired += service.tick(autumn + minute * MIN).fired
    # 02:30 happens twice on 10-25: it fires once, at the first (CEST) occurrence.
    assert [datetime.fromtimestamp(f.tick, UTC).strftime("%m-%d %H:%M") for f in fired] == [
        "10-25 00:30",
        "10-26 01:30",
    ]


def test_start_and_end_dates(client: Client, folder: Path) -> None:
    write_flow(folder, start="2026-01-05T12:10:00Z", end="2026-01-05T12:20:00Z")
    service = make_service(client, folder)
    service.scan(T - 1)
    assert registration(client).next == T + 10 * MIN
    fired = []
    for minute in range(0, 40):
        fired += [f.tick for f in service.tick(T + minute * MIN).fired]
    assert fired == [T + 10 * MIN, T + 15 * MIN, T + 20 * MIN]
    reg = registration(client)
    assert reg.next is None and reg.ended == T + 20 * MIN


def test_pause_resume_and_trigger(client: Client, folder: Path) -> None:
    write_flow(folder)
    service = make_service(client, folder)
    service.scan(T - 1)
    schedules = Schedules(client)
    schedules.pause("f", "deploy")
    report = service.tick(T + 1)
    assert report.fired == [] and [s.reason for _, s in report.skipped] == ["paused"]
    service.tick(T + 5 * MIN + 1)
    service.tick(T + 10 * MIN + 1)
    reg = registration(client)
    assert reg.is_paused and reg.pause_note == "deploy"
    assert [(s.first, s.last, s.count, s.reason) for s in reg.skips] == [
        (T, T + 10 * MIN, 3, "paused")
    ]
    # Ticks that came due since the last service tick are skipped too: resuming never fires
    # a tick of the paused time.
    assert schedules.resume("f", T + 16 * MIN) == "resumed"
    reg = registration(client)
    assert not reg.is_paused and reg.next == T + 20 * MIN and reg.skipped == 4
    assert schedules.resume("f", T + 16 * MIN) == "not-paused"
    assert service.tick(T + 16 * MIN).fired == []
    assert [f.tick for f in service.tick(T + 20 * MIN).fired] == [T + 20 * MIN]
    # Trigger: a run now, with the schedule's params, outside the ticks.
    definition = registration(client).definition
    request = FlowsSource().build(definition, "f-manual-1", T + 21 * MIN, "manual", 0.0)
    assert schedules.trigger("f", request, now=T + 21 * MIN) == "fired"
    reg = registration(client)
    assert (reg.last_run, reg.triggered, reg.next) == ("f-manual-1", 1, T + 25 * MIN)
    with pytest.raises(JobNotFound):
        schedules.resume("nope", T)


def test_a_schedule_paused_in_its_file(client: Client, folder: Path) -> None:
    write_flow(folder, paused=True)
    service = make_service(client, folder)
    service.scan(T - 1)
    assert service.tick(T).fired == []
    with pytest.raises(WrongState):
        Schedules(client).resume("f", T)
    write_flow(folder, paused=False)
    service.scan(T + 1)
    assert [f.tick for f in service.tick(T + 5 * MIN).fired] == [T + 5 * MIN]


def test_a_run_that_cannot_be_built_is_skipped_with_the_reason(
    client: Client, folder: Path
) -> None:
    write_flow(folder)
    service = make_service(client, folder)
    service.scan(T - 1)
    client.queues["q"].put("K", {}, jid=f"{run_id_for('f', T)}:s0")  # a job id taken by hand
    report = service.tick(T)
    assert report.fired == []
    [(_, skip)] = report.skipped
    assert skip.reason.startswith("run refused by the engine: ") and "already exists" in skip.reason
    assert registration(client).next == T + 5 * MIN
    assert [f.tick for f in service.tick(T + 5 * MIN).fired] == [T + 5 * MIN]


def test_a_tick_whose_run_exists_is_reported_but_counted_by_no_one(
    client: Client, folder: Path
) -> None:
    write_flow(folder)
    service = make_service(client, folder)
    service.scan(T - 1)
    made = run_id_for("f", T)  # a run of the tick made already, not by a fire
    job = {"jid": f"{made}:s0", "queue": "q", "klass": "K", "data": "{}"}
    client.engine.call("flow.submit", made, json.dumps({"flow": "f"}), json.dumps([job]))
    report = service.tick(T)
    assert [(f.run_id, f.outcome) for f in report.fired] == [(made, "exists")]
    reg = registration(client)
    assert (reg.last_run, reg.next, reg.fired) == (made, T + 5 * MIN, 0)
    assert service.totals["fired"] == 0
    assert json.loads(client.engine.call("schedulers"))[0]["info"]["fired"] == 0
    assert [f.outcome for f in service.tick(T + 5 * MIN).fired] == ["fired"]
    assert (registration(client).fired, service.totals["fired"]) == (1, 1)


def test_a_definition_the_cron_checks_now_refuse_is_said_once_without_a_traceback(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A schedule registered by a version that let a backwards range through stays due for ever
    (nothing can plan its ticks): each tick reports it, but the log says it once, in one line,
    where it logged a traceback every second."""
    write_flow(folder)
    service = make_service(client, folder)
    service.scan(T - 100)
    register_legacy_cron(client, "f", "1-0 * * * *")
    with caplog.at_level("ERROR", logger="flows.scheduler"):
        reports = [service.tick(T + second) for second in range(1, 4)]
    for report in reports:
        assert report.fired == [] and len(report.errors) == 1
        assert "the range 1-0 runs backwards" in report.errors[0]
    said = [r for r in caplog.records if "cannot plan its ticks" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is None, said
    assert "fix its file" in said[0].getMessage()


def test_health(client: Client, folder: Path) -> None:
    schedules = Schedules(client)
    assert check_health(schedules, T) == (
        False,
        "unhealthy: no scheduler service has ticked (none runs, or they stopped cleanly)",
    )
    write_flow(folder)
    service = make_service(client, folder, service_id="svc-1")
    service.tick(T)
    healthy = check_health(schedules, T + 30, max_age=60)
    assert healthy == (True, "healthy: svc-1: last tick 30.0s ago")
    assert check_health(schedules, T + 61, max_age=60) == (
        False,
        "unhealthy: svc-1: last tick 61.0s ago (too old)",
    )
    assert check_health(schedules, T + 30, service_id="svc-2") == (
        False,
        "unhealthy: scheduler svc-2 has not ticked (not running, or it stopped cleanly)",
    )
    [entry] = schedules.services()
    assert entry.info["flows_dir"] == str(folder) and entry.info["fired"] == 0
    # A tick a moment after the clock read here (another host's ping, read an instant late)
    # is no tick in the future: it said "last tick -0.0s ago".
    assert check_health(schedules, T - 0.04) == (True, "healthy: svc-1: last tick 0.0s ago")


def test_a_ping_interval_pings_at_most_that_often_fires_or_not(
    client: Client, folder: Path
) -> None:
    write_flow(folder)  # every 5 minutes
    schedules = Schedules(client)
    service = make_service(client, folder, ping_interval=3600.0)
    service.scan(T - 100)

    def last_ping() -> tuple[float, object]:
        [entry] = schedules.services()
        return entry.last_tick, entry.info["fired"]

    service.tick(T - 60)  # nothing due: the ping alone
    assert last_ping() == (T - 60, 0)
    for minutes in range(0, 60, 5):  # the ticks of the hour fire without a ping
        assert len(service.tick(T + minutes * MIN).fired) == 1
    assert last_ping() == (T - 60, 0)
    assert len(service.tick(T + 60 * MIN).fired) == 1  # an hour on: in the fire batch
    assert last_ping() == (T + 60 * MIN, 12)
    assert len(service.tick(T + 120 * MIN + 30).fired) == 1  # catch-up: the latest tick
    assert last_ping() == (T + 120 * MIN + 30, 13)
    service.tick(T + 60 * MIN)  # the clock went back (a failover): a ping at once
    assert last_ping()[0] == T + 60 * MIN
    every_tick = make_service(client, folder, service_id="svc-2")  # the default: each tick
    every_tick.tick(T + 121 * MIN)
    every_tick.tick(T + 121 * MIN)
    assert {(s.id, s.last_tick) for s in schedules.services()} >= {("svc-2", T + 121 * MIN)}


def test_once_runs_every_step_and_the_checks_hook(client: Client, folder: Path) -> None:
    write_flow(folder)
    calls: list[float | None] = []
    service = make_service(client, folder, checks=[lambda c, now: calls.append(now)])
    jid = client.queues["other"].put("K", {}, delay=10, now=T)
    report = service.once(T + 10)
    assert report.scan.registered == ["f"] and report.tick.fired == []
    assert report.housekeeping.promoted == 1 and client.jobs[jid].state == "waiting"
    assert calls == [T + 10]  # the consistency check plugs in here


def test_a_changed_cron_is_logged_with_what_it_now_is(
    client: Client, folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator who edits a cron reads in the service's log that the change was taken, and
    which cron now holds, without another command."""
    write_flow(folder, cron="*/5 * * * *")
    service = make_service(client, folder)
    with caplog.at_level("INFO", logger="flows.scheduler"):
        service.scan(T - 100)
        write_flow(folder, cron="*/10 * * * *", timezone="Europe/Berlin")
        assert service.scan(T - 50).updated == ["f"]
    said = [r.getMessage() for r in caplog.records if "schedule f " in r.getMessage()]
    assert len(said) == 2, said
    assert said[0].startswith("registered schedule f from ") and said[0].endswith(
        ": */5 * * * * (UTC)"
    )
    assert said[1].startswith("updated schedule f from ") and said[1].endswith(
        ": */10 * * * * (Europe/Berlin)"
    )
