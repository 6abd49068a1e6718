"""Backfills on a real server, through the library and the scheduler service: the ticks and run
ids are the service's own, a tick runs once whoever comes first, the limits hold while the
service advances a backfill, canceling stops it. Time is always passed; nothing sleeps."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from scheduler_support import MIN, T, make_service, run_ids, write_flow
from ui_support import TOKEN, Api, off_document, serve

from flows.expand.run_ids import run_id_for
from flows.runs import backfill
from flows.ui.auth import Auth
from scheduler.cron import next_fire, plan_catchup
from scheduler.engine.client import Client
from scheduler.service.backfills import Backfills, backfill_ticks
from scheduler.service.loop import SchedulerService

H = 60 * MIN


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client, worker_name="w") as client:
        yield client


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "pipelines"
    path.mkdir()
    return path


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def start(
    client: Client, path: Path, first: float, last: float, now: float, max_active: int = 10
) -> tuple[str, backfill.Plan]:
    target = backfill.resolve(client, str(path), now)
    plan = backfill.plan(target, first, last, now)
    backfill_id, _ = backfill.start(client, plan, max_active, now)
    return backfill_id, plan


def work_all(client: Client, now: float) -> list[str]:
    """Complete every waiting job of queue q; returns their run ids."""
    done = []
    for job in client.queues["q"].pop(1000, now=now):
        job.complete(now=now)
        done.append(job.jid.split(":")[0])
    return done


def record(client: Client, run_id: str) -> dict[str, Any]:
    return json.loads(client.engine.call("run.get", run_id))


@pytest.mark.parametrize(
    ("cron", "day", "ranges", "live"),
    [
        # 02:30 does not exist on the spring-forward night: the schedule fires it at 03:00 CEST
        (
            "30 2 * * *",
            "2026-03-29",
            [("02:30", "02:30"), ("02:15", "02:45"), ("02:00", "02:59"), ("02:30", "03:00")],
            ["2026-03-29T01:00:00"],
        ),
        # every half hour: 02:00 and 02:30 fall in the gap and fire at 03:00 with its own tick
        ("*/30 * * * *", "2026-03-29", [("02:00", "02:59")], ["2026-03-29T01:00:00"]),
        # 02:30 happens twice on the fall-back night: fired once, at the first (CEST)
        (
            "30 2 * * *",
            "2026-10-25",
            [("02:30", "02:30"), ("02:00", "02:59")],
            ["2026-10-25T00:30:00"],
        ),
        # an every-hour expression fires both: a range of the repeated hour holds both
        (
            "30 * * * *",
            "2026-10-25",
            [("02:00", "02:59"), ("02:30", "02:30")],
            ["2026-10-25T00:30:00", "2026-10-25T01:30:00"],
        ),
    ],
    ids=["spring-forward", "spring-forward-every-30", "fall-back", "fall-back-every-hour"],
)
def test_a_range_of_wall_clock_times_holds_the_ticks_the_live_schedule_fired_there(
    client: Client,
    folder: Path,
    cron: str,
    day: str,
    ranges: list[tuple[str, str]],
    live: list[str],
) -> None:
    """Times read in the schedule's zone are mapped as the schedule maps its ticks. A range
    inside the spring-forward gap found no tick (02:30 was read as 03:30 CEST, after the tick
    the schedule fired at 03:00), or was refused as ending before it starts (02:30 to 03:00)."""
    path = write_flow(folder, "f", cron=cron, timezone="Europe/Berlin", catchup="all", window="30d")
    now = utc("2027-01-01T00:00:00")
    target = backfill.resolve(client, str(path), now)
    # What the service fires live over the night, catching up on the virtual clock.
    night_start, night_end = utc(f"{day}T00:00:00") - 1, utc(f"{day}T01:59:59")
    service = make_service(client, folder)
    service.scan(night_start)
    for _ in range(5):
        service.tick(night_end)
    fired = run_ids(client, "f")
    assert {run_id_for("f", utc(t)) for t in live} <= set(fired)
    for first, last in ranges:
        start_at = backfill.parse_moment(f"{day}T{first}", target.zone, option="--from")
        end_at = backfill.parse_moment(f"{day}T{last}", target.zone, option="--to", end=True)
        plan = backfill.plan(target, start_at, end_at, now)
        assert list(plan.ticks) == [utc(t) for t in live], (first, last)
        assert set(plan.run_ids) <= set(fired)  # each the very run the schedule fired


def test_ticks_and_run_ids_are_those_the_services_catch_up_fires(
    client: Client, folder: Path
) -> None:
    # Two expressions, Berlin, across the spring-forward night (02:30 fires at 03:00 CEST) and
    # the fall-back night (02:30 fires once, at its first occurrence).
    cron = "30 2 * * *"
    for first, last in [("2026-03-27", "2026-03-31"), ("2026-10-23", "2026-10-27")]:
        name = f"f{first[5:7]}"
        path = write_flow(
            folder, name, cron=cron, timezone="Europe/Berlin", catchup="all", window="30d"
        )
        lines = path.read_text().replace(f'cron: "{cron}"', 'cron: ["30 2 * * *", "0 */6 * * *"]')
        path.write_text(lines)
        target = backfill.resolve(client, str(path), utc("2027-01-01T00:00:00"))
        zone = target.zone
        start_at = backfill.parse_moment(first, zone, option="--from")
        end_at = backfill.parse_moment(last, zone, option="--to", end=True)
        plan = backfill.plan(target, start_at, end_at, utc("2027-01-01T00:00:00"))
        schedule = target.definition.schedule

        # the pure catch-up plan over the same range fires exactly these ticks
        expected = next_fire(schedule, math.ceil(start_at) - 1.0)
        assert expected is not None
        catchup = plan_catchup(schedule, "all", None, 10_000, expected, end_at)
        assert list(plan.ticks) == [f.tick for f in catchup.fires]
        assert len(plan.ticks) == 5 * 5  # five days, four 6-hourly ticks and one 02:30 each
        if first.startswith("2026-03"):  # 02:30 does not exist: it fires at 03:00 CEST
            assert utc("2026-03-29T01:00:00") in plan.ticks
        else:  # 02:30 happens twice: it fires at the first (CEST), not at the second (CET)
            assert utc("2026-10-25T00:30:00") in plan.ticks
            assert utc("2026-10-25T01:30:00") not in plan.ticks

        # and the service, catching up `all` over the range, fires runs of the same ids
        service = make_service(client, folder)
        service.scan(start_at - 1)
        assert service.schedules.get(name) is not None
        for _ in range(3):
            service.tick(end_at)
        assert run_ids(client, name) == sorted(plan.run_ids)
        assert plan.run_ids == [run_id_for(name, t) for t in plan.ticks]
        # the backfill of that range then has nothing left to run
        assert Backfills(client).run_statuses(plan.run_ids) == ["running"] * len(plan.ticks)
        path.unlink()
        service.scan(end_at + 1)


def test_a_backfilled_tick_is_not_run_again_when_the_schedule_fires_it(
    client: Client, folder: Path
) -> None:
    path = write_flow(folder, cron="*/5 * * * *", catchup="all", window="1d")
    service = make_service(client, folder)
    service.scan(T - 30 * MIN - 1)  # the service's next tick: T - 30 min
    # The service was down; meanwhile the ticks are backfilled.
    _, plan = start(client, path, T - 30 * MIN, T, T + 30, max_active=100)
    assert len(plan.ticks) == 7
    assert run_ids(client) == sorted(plan.run_ids)
    report = service.tick(T + 40)  # catching up, it fires the same ticks
    assert {f.run_id for f in report.fired} == set(plan.run_ids)
    assert {f.outcome for f in report.fired} == {"exists"}
    assert run_ids(client) == sorted(plan.run_ids)  # not one run twice
    assert record(client, run_id_for("f", T))["trigger"] == "backfill"
    assert len(record(client, run_id_for("f", T))["jids"]) == 1


def test_a_tick_that_ran_on_schedule_is_not_backfilled(client: Client, folder: Path) -> None:
    path = write_flow(folder, cron="*/5 * * * *")
    service = make_service(client, folder)
    service.scan(T - 100)
    assert [f.outcome for f in service.tick(T + 1).fired] == ["fired"]
    backfill_id, plan = start(client, path, T - 10 * MIN, T + 5 * MIN, T + 5 * MIN + 1)
    assert len(plan.ticks) == 4
    b = Backfills(client).get(backfill_id)
    assert b is not None
    assert (b.submitted, b.existed) == (3, 1)
    assert record(client, run_id_for("f", T))["trigger"] == "schedule"


def test_max_active_holds_while_the_service_advances_the_backfill(
    client: Client, folder: Path
) -> None:
    path = write_flow(folder, cron="0 * * * *", timezone="America/New_York", steps=1)
    path.write_text(path.read_text().replace("run: echo 0", 'run: "echo ${{ run.logical_time }}"'))
    service = make_service(client, folder)  # the folder is not scanned: a backfill needs none
    now = T + 1000
    backfill_id, plan = start(client, path, T - 6 * H, T - 1 * H, now, max_active=2)
    assert len(plan.ticks) == 6
    order: list[str] = []
    most = 0
    for step in range(10):
        active = [
            r for r, s in zip(plan.run_ids, _statuses(client, plan), strict=True) if s == "running"
        ]
        most = max(most, len(active))
        order += work_all(client, now + step)
        service.advance_backfills(now + step)
    assert most == 2
    assert order == plan.run_ids  # oldest first, each once
    b = Backfills(client).get(backfill_id)
    assert b is not None
    assert (b.state, b.submitted, b.next, b.active) == ("done", 6, 6, ())
    # each run stands for its tick, in the schedule's time zone
    first = record(client, plan.run_ids[0])
    assert (first["trigger"], float(first["tick"]), first["backfill"]) == (
        "backfill",
        plan.ticks[0],
        backfill_id,
    )
    job = client.jobs[first["jids"][0]]
    assert "2026-01-05T01:00:00-05:00" in json.dumps(job.data)


def _statuses(client: Client, plan: backfill.Plan) -> list[str]:
    return Backfills(client).run_statuses(plan.run_ids)


def test_the_flows_max_active_runs_holds_too(client: Client, folder: Path) -> None:
    path = write_flow(folder, cron="0 * * * *")
    path.write_text(path.read_text().replace("steps:", "concurrency: {max_active_runs: 1}\nsteps:"))
    service = make_service(client, folder)
    _, plan = start(client, path, T - 3 * H, T - 1 * H, T, max_active=5)
    assert _statuses(client, plan) == ["running", "missing", "missing"]
    service.advance_backfills(T + 1)  # nothing ended: nothing more
    assert _statuses(client, plan) == ["running", "missing", "missing"]
    work_all(client, T + 2)
    report = service.once(T + 3).backfills
    assert report.submitted == [plan.run_ids[1]]
    assert _statuses(client, plan) == ["succeeded", "running", "missing"]


def test_cancel_stops_the_backfill_and_cancels_its_active_runs(
    client: Client, folder: Path
) -> None:
    path = write_flow(folder, cron="0 * * * *")
    service = make_service(client, folder)
    backfill_id, plan = start(client, path, T - 5 * H, T - 1 * H, T, max_active=2)
    work_all(client, T + 1)
    service.advance_backfills(T + 2)
    assert _statuses(client, plan) == ["succeeded", "succeeded", "running", "running", "missing"]
    canceled = Backfills(client).cancel(backfill_id, now=T + 3)
    assert (canceled.changed, canceled.runs, canceled.pending) == (True, 2, 1)
    assert _statuses(client, plan) == ["succeeded", "succeeded", "canceled", "canceled", "missing"]
    assert not service.advance_backfills(T + 4).busy
    assert _statuses(client, plan)[-1] == "missing"


def test_a_canceled_backfill_started_again_resumes_its_canceled_runs(
    client: Client, folder: Path
) -> None:
    """The range of a canceled backfill, started again: the ticks whose runs were canceled run
    (their runs resumed as `flows retry RUN` resumes them: what completed stays), oldest first
    within --max-active, and the schedule firing those ticks later finds the runs existing."""
    path = write_flow(folder, cron="0 * * * *", catchup="all", window="1d", steps=2)
    service = make_service(client, folder)
    service.scan(T - 4 * H - 1)  # the service's next tick: T - 4 h, fired only at the end
    first, plan = start(client, path, T - 4 * H, T - 1 * H, T, max_active=2)
    assert sorted(work_all(client, T + 1)) == plan.run_ids[:2]  # each one's s0
    Backfills(client).cancel(first, now=T + 2)
    assert _statuses(client, plan) == ["canceled", "canceled", "missing", "missing"]
    s0 = [record(client, r)["jids"][0] for r in plan.run_ids[:2]]
    assert [client.jobs[jid].state for jid in s0] == ["complete", "complete"]

    again, _ = start(client, path, T - 4 * H, T - 1 * H, T + 10, max_active=1)
    b = Backfills(client).get(again)
    assert b is not None
    assert (b.resumed, b.submitted, b.existed, b.active) == (1, 0, 0, (plan.run_ids[0],))
    assert _statuses(client, plan) == ["running", "canceled", "missing", "missing"]
    order: list[str] = []
    resumed: list[str] = []
    for step in range(8):
        order += work_all(client, T + 20 + step)
        resumed += service.advance_backfills(T + 20 + step).resumed
    # each tick's remaining work once, oldest tick first; s0 of a resumed run did not run again
    new = [r for r in plan.run_ids[2:] for _ in ("s0", "s1")]
    assert order == [*plan.run_ids[:2], *new]
    assert resumed == [plan.run_ids[1]]
    for jid in s0:
        assert [e["what"] for e in client.jobs[jid].history].count("popped") == 1
    b = Backfills(client).get(again)
    assert b is not None
    assert (b.state, b.resumed, b.submitted, b.existed, b.failed) == ("done", 2, 2, 0, 0)
    assert _statuses(client, plan) == ["succeeded"] * 4
    assert record(client, plan.run_ids[0])["backfill"] == first  # the run it always was

    # the schedule, catching up over the range, finds every backfilled tick's run existing
    fired = {f.run_id: f.outcome for f in service.tick(T + 100).fired}
    assert {fired[r] for r in plan.run_ids} == {"exists"}
    assert run_ids(client) == sorted([*plan.run_ids, run_id_for("f", T)])


def test_two_services_advancing_one_backfill_handle_each_tick_once(
    client: Client, folder: Path, tmp_path: Path
) -> None:
    path = write_flow(folder, cron="*/5 * * * *")
    other = tmp_path / "elsewhere"
    other.mkdir()
    services = [make_service(client, folder), make_service(client, other, service_id="s2")]
    backfill_id, plan = start(client, path, T - 55 * MIN, T, T + 1, max_active=3)
    for step in range(6):
        work_all(client, T + 2 + step)
        reports = [s.advance_backfills(T + 2 + step) for s in services]
        submitted = [r for report in reports for r in report.submitted]
        assert len(submitted) == len(set(submitted))
    b = Backfills(client).get(backfill_id)
    assert b is not None
    assert (b.state, b.submitted, b.existed) == ("done", 12, 0)
    assert run_ids(client) == sorted(plan.run_ids)


def test_a_registered_flow_is_backfilled_by_name(client: Client, folder: Path) -> None:
    write_flow(folder, cron="0 * * * *")
    service: SchedulerService = make_service(client, folder)
    service.scan(T - 100)
    target = backfill.resolve(client, "f", T)
    assert target.definition.hash == service.schedules.get("f").definition.hash  # type: ignore[union-attr]
    plan = backfill.plan(target, T - 2 * H, T, T)
    assert len(plan.ticks) == 3
    with pytest.raises(backfill.BackfillError, match="no registered flow"):
        backfill.resolve(client, "nope", T)


def test_ticks_enumeration_is_bounded() -> None:
    from scheduler.cron import Schedule

    every_minute = Schedule(("* * * * *",), "UTC")
    assert len(backfill_ticks(every_minute, T, T + 9_999 * MIN)) == 10_000
    with pytest.raises(ValueError, match="10,000"):
        backfill_ticks(every_minute, T, T + 10_000 * MIN)


def test_the_api_and_the_dashboard_show_a_backfills_progress_and_cancel_it(
    client: Client, folder: Path
) -> None:
    path = write_flow(folder, cron="0 * * * *")
    backfill_id, _ = start(client, path, T - 3 * H, T - 1 * H, T, max_active=1)
    with serve(client, Auth(TOKEN, reads_open=True)) as base:
        api = Api(base)
        [listed] = api.get("/api/v1/backfills").body["items"]
        got = api.get(f"/api/v1/backfills/{backfill_id}")
        assert off_document(api, "get", "/backfills/{backfill_id}", got) is None
        one = got.body
        assert listed == one
        assert (one["state"], one["ticks"], one["handled"], one["progress"]) == (
            "active",
            3,
            1,
            round(1 / 3, 4),
        )
        assert len(one["active"]) == 1
        page = api.get("/backfills").body
        assert backfill_id in page and 'max="3" value="1"' in page and ">Cancel</button>" in page
        assert api.post(f"/api/v1/backfills/{backfill_id}/cancel", token=None).status == 401
        canceled = api.post(f"/api/v1/backfills/{backfill_id}/cancel")
        assert canceled.status == 200, canceled.body
        assert off_document(api, "post", "/backfills/{backfill_id}/cancel", canceled) is None
        assert (canceled.body["runs"], canceled.body["pending"]) == (1, 2)
        assert api.get(f"/api/v1/backfills/{backfill_id}").body["state"] == "canceled"
        again = api.post(f"/api/v1/backfills/{backfill_id}/cancel")
        assert again.status == 409 and "canceled" in str(again.body)
        assert api.get("/api/v1/backfills/nope").status == 404
