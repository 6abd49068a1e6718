"""A minutely schedule across the DST nights through ``flows test``'s machinery: the real
scheduler service fires every tick the cron library says, once each, and nothing else.

The month (44,640 runs) is marked slow; its wall time is measured by
``python -m benchmarks.flow_test_clock``, not asserted here."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from flows.testing.driver import run_case
from flows.testing.files import read_test_file
from flows.testing.session import run_files
from scheduler.cron import Schedule, missed_ticks

FLOW = """\
version: 1
name: minutely
queue: ticks
schedule:
  cron: "* * * * *"
  timezone: Europe/Berlin
steps:
  tick:
    run: echo tick
"""


def run_period(
    server: redis.Redis, tmp_path: Path, start: datetime, end: datetime
) -> tuple[list[float], list[float]]:
    """The ticks the case fired over [start, end), and those the cron library gives."""
    (tmp_path / "minutely.yaml").write_text(FLOW)
    test = tmp_path / "minutely.test.yaml"
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    expected = [
        t
        for t in missed_ticks(
            Schedule(("* * * * *",), "Europe/Berlin"),
            start.timestamp() - 1,
            end.timestamp(),
            limit=10**6,
        )
        if t < end.timestamp()
    ]
    test.write_text(
        "flow: minutely.yaml\ncases:\n"
        f'  - name: minutely\n    schedule: {{from: "{start:{stamp}}", to: "{end:{stamp}}"}}\n'
        f"    mock: all\n    expect: {{runs: {len(expected)}}}\n"
    )
    session = run_files(server, [test])
    assert session.findings == []
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None
    return case.observed.ticks, expected


@pytest.mark.parametrize(
    ("start", "end"),
    [
        # Clocks spring forward at 02:00 CET (01:00 UTC), and fall back at 03:00 CEST.
        (datetime(2026, 3, 28, 22, tzinfo=UTC), datetime(2026, 3, 29, 4, tzinfo=UTC)),
        (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 4, tzinfo=UTC)),
    ],
    ids=["spring-forward", "fall-back"],
)
def test_every_minute_of_a_dst_night_fires_once(
    redis_client: redis.Redis, tmp_path: Path, start: datetime, end: datetime
) -> None:
    fired, expected = run_period(redis_client, tmp_path, start, end)
    # A minutely schedule fires every real minute: none lost in the gap, none doubled in the
    # repeated hour (the hour field is `*`, so both of its occurrences fire).
    assert len(expected) == 6 * 60
    assert expected == [start.timestamp() + 60 * i for i in range(6 * 60)]
    assert fired == expected


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 51 s of CPU; a minute or more of wall time on a busy machine
def test_a_month_of_a_minutely_schedule_across_the_dst_night(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    start, end = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
    fired, expected = run_period(redis_client, tmp_path, start, end)
    assert len(expected) == 31 * 24 * 60 == 44_640
    assert fired == expected


def test_ticks_while_the_last_run_still_runs_follow_the_overlap_policy(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A tick's run that outlasts the minute is still active at the next tick, which the
    service then skips (overlap: skip): the pops and due reads the driver shares round trips
    with see the engine as they would one by one."""
    (tmp_path / "minutely.yaml").write_text(FLOW)
    test = tmp_path / "minutely.test.yaml"
    test.write_text(
        "flow: minutely.yaml\ncases:\n"
        '  - name: slow runs\n    schedule: {from: "2026-03-02T00:00:00Z", '
        'to: "2026-03-02T01:00:00Z"}\n'
        "    mock: {tick: {duration: 90s, outputs: {}}}\n    expect: {runs: 30}\n"
    )
    session = run_files(redis_client, [test])
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None
    start = datetime(2026, 3, 2, tzinfo=UTC).timestamp()
    assert case.observed.ticks == [start + 120 * i for i in range(30)]


def test_a_day_long_step_costs_its_heartbeats_not_a_round_each(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A stub that runs for a day is heartbeaten as a worker would (every third of its lock, so
    the lock holds throughout and the step succeeds at its first attempt), but the clock goes
    from one event to the next: the heartbeats in between go in one round trip, each at its
    time. Each of them cost a round of the loop (housekeeping, pops, a read of the run), five
    engine calls and twenty seconds of wall time a day."""

    def engine_calls() -> int:
        stats = redis_client.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_fcall"))

    (tmp_path / "day.yaml").write_text(
        "version: 1\nname: day\nqueue: days\nsteps:\n"
        "  long: {run: echo long}\n  after: {run: echo after, needs: [long]}\n"
    )
    test = tmp_path / "day.test.yaml"
    test.write_text(
        "flow: day.yaml\ncases:\n"
        '  - name: a day-long step\n    at: "2026-03-02T00:00:00Z"\n'
        "    mock: {long: {duration: 1d, outputs: {}}, after: {outputs: {}}}\n"
        "    expect:\n      status: succeeded\n"
        "      steps: {long: {status: success, attempts: 1}, after: {status: success}}\n"
    )
    before = engine_calls()
    session = run_files(redis_client, [test])
    calls = engine_calls() - before
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None and case.observed.order == ["long", "after"]
    beats = 86_400 // 20  # the queue's lock is 60 s: a heartbeat every 20 s
    assert beats <= calls < beats + 100


def test_a_reply_read_ahead_answers_only_the_next_call_if_it_matches(
    redis_client: redis.Redis,
) -> None:
    from flows.testing.clock import Clock, ClockedEngine

    clock = Clock(1_000.0)
    engine = ClockedEngine(redis_client, "clocked:", clock)
    real = engine.call("schedule.due", 0, 500, now=1_060.0)
    engine.read_ahead(("schedule.due", (0, 500), 1_060.0), "read ahead")
    assert engine.call("schedule.due", 0, 500, now=1_060.0) == "read ahead"
    assert engine.call("schedule.due", 0, 500, now=1_060.0) == real  # taken once
    engine.read_ahead(("schedule.due", (0, 500), 1_060.0), "read ahead")
    assert engine.call("schedule.due", 0, 500, now=1_120.0) == real  # another time: sent
    engine.read_ahead(("schedule.due", (0, 500), 1_060.0), "read ahead")
    engine.pipeline().read("zcard", "clocked:x").execute()  # a round trip in between
    assert engine.call("schedule.due", 0, 500, now=1_060.0) == real


CHAIN = """\
version: 1
name: chain
queue: links
schedule:
  cron: "*/5 * * * *"
  timezone: UTC
steps:
  first: {run: echo first}
  second: {run: echo second, needs: [first]}
"""

#: Cases of ``chain.yaml`` whose ticks are foreseen (a first job stubbed to end at once), or
#: not (it takes time, the run before still runs, or the service was down meanwhile).
CHAIN_CASES = """\
flow: chain.yaml
cases:
  - name: stubs that end at once
    schedule: {from: "2026-03-02T00:00:00Z", to: "2026-03-02T02:00:00Z"}
    mock: {first: {outputs: {n: 1}}, second: {outputs: {}}}
    expect: {runs: 24}
  - name: a first step that outlasts a tick
    schedule: {from: "2026-03-02T00:00:00Z", to: "2026-03-02T01:00:00Z"}
    mock: {first: {duration: 7m, outputs: {}}, second: {outputs: {}}}
    expect: {runs: 6}
  - name: a second step that outlasts a tick
    schedule: {from: "2026-03-02T00:00:00Z", to: "2026-03-02T01:00:00Z"}
    mock: {first: {outputs: {}}, second: {duration: 7m, outputs: {}}}
    expect: {runs: 6}
  - name: an outage and its catch-up
    schedule:
      from: "2026-03-02T00:00:00Z"
      to: "2026-03-02T02:00:00Z"
      outage: "2026-03-02T00:32:00Z/2026-03-02T01:08:00Z"
    mock: {first: {outputs: {}}, second: {outputs: {}}}
    expect: {runs: 18}
"""


def engine_commands(server: redis.Redis, path: Path, case: int, *, foresee: bool) -> list[str]:
    """The commands a case sends to its namespace (its engine calls and their commands, its
    reads; the prefix left out), as the server's MONITOR sees them, until its removal."""
    reading = read_test_file(path)
    assert reading.test is not None, reading.findings
    test = reading.test
    seen: list[str] = []
    watcher = server.monitor()
    ready = threading.Event()

    def watch() -> None:
        with watcher as monitor:
            ready.set()
            for command in monitor.listen():
                if command["command"].startswith("SCAN"):  # the namespace's removal
                    return
                seen.append(command["command"])

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    ready.wait(5)
    observed = run_case(server, test, test.cases[case], foresee=foresee)
    thread.join(10)
    assert observed.runs == test.cases[case].expect.runs
    prefix = re.compile(r"flows-test-[0-9a-f]{12}:")
    # The namespace's (not loading the engine, say), without the service's health (its pid
    # and start): no engine state a case compares.
    return [prefix.sub("NS:", c) for c in seen if prefix.search(c) and '"started"' not in c]


@pytest.mark.parametrize(
    "case", [0, 1, 2, 3], ids=["at-once", "outlasting", "second-outlasting", "outage"]
)
def test_ticks_foreseen_send_the_calls_of_the_ticks_not_foreseen(
    redis_client: redis.Redis, tmp_path: Path, case: int
) -> None:
    """A tick whose run's first job ends at once as a stub is reported in the round trip of
    its fire (its outcome played while the server fired the tick before): the server sees
    the very calls, in the very order, of the loop that waits for each pop."""
    (tmp_path / "chain.yaml").write_text(CHAIN)
    path = tmp_path / "chain.test.yaml"
    path.write_text(CHAIN_CASES)
    foreseen = engine_commands(redis_client, path, case, foresee=True)
    one_by_one = engine_commands(redis_client, path, case, foresee=False)
    assert len(foreseen) > 100
    assert foreseen == one_by_one


def test_a_foreseen_tick_takes_one_round_trip(redis_client: redis.Redis, tmp_path: Path) -> None:
    """A minutely one-step run stubbed to end at once: its fire, pop, complete and the reads
    of what comes next go in one round trip a tick."""
    (tmp_path / "minutely.yaml").write_text(FLOW)
    path = tmp_path / "minutely.test.yaml"
    path.write_text(
        "flow: minutely.yaml\ncases:\n"
        '  - name: an hour\n    schedule: {from: "2026-03-02T00:00:00Z", '
        'to: "2026-03-02T01:00:00Z"}\n    mock: all\n    expect: {runs: 60}\n'
    )
    reading = read_test_file(path)
    assert reading.test is not None
    observed = run_case(redis_client, reading.test, reading.test.cases[0])
    assert observed.runs == 60
    assert observed.round_trips < 60 + 10  # the first ticks read the queues apart


HOURLY = """\
version: 1
name: hourly
queue: hours
schedule:
  cron: "0 * * * *"
  timezone: UTC
steps:
  tick:
    run: echo tick
"""


def test_run_records_age_out_on_the_virtual_clock_as_the_service_ages_them(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Ten days of an hourly schedule: what the case asserts (its runs) counts every tick, but
    the records of runs ended more than `jobs-history` (a week) ago are dropped as the service's
    retention drops them, on the virtual clock, so memory does not grow with the period."""
    from flows.testing.clock import Clock
    from flows.testing.driver import RETENTION_INTERVAL, _Driver, _run_schedule, namespace

    (tmp_path / "hourly.yaml").write_text(HOURLY)
    path = tmp_path / "hourly.test.yaml"
    path.write_text(
        "flow: hourly.yaml\ncases:\n"
        '  - name: ten days\n    schedule: {from: "2026-03-01T00:00:00Z", '
        'to: "2026-03-11T00:00:00Z"}\n    mock: all\n    expect: {runs: 240}\n'
    )
    reading = read_test_file(path)
    assert reading.test is not None
    [case] = reading.test.cases
    assert case.schedule is not None
    clock = Clock(case.schedule.start)
    with namespace(redis_client, clock) as client:
        observed = _run_schedule(
            _Driver(client, clock, reading.test, case, tmp_path), reading.test, case
        )
        kept = [
            float(s) for _, s in redis_client.zrange(f"{client.prefix}runs", 0, -1, withscores=True)
        ]
        week = float(client.config["jobs-history"])
    assert observed.runs == 240 and len(observed.ticks) == 240
    last = observed.ticks[-1]
    # Every run of the last week is kept, none older than a week and one retention interval.
    assert min(kept) >= last - week - RETENTION_INTERVAL
    assert sum(1 for t in observed.ticks if t > last - week) <= len(kept) < 240
