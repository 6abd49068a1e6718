"""A month of a minutely schedule on the virtual clock: what ``flows test`` costs per tick.

``python -m benchmarks.flow_test_clock [--days N] [--zone Z]`` writes a flow on ``* * * * *``
in Europe/Berlin (``mock: all``) and a test case over March 2026, the night clocks spring
forward included, and runs it as ``flows test`` does: a private embedded server without fsync,
the real scheduler service ticking at every fire time, each run's job popped, stubbed and
completed through the engine. ``--days`` shortens the period (from 2026-03-01). Prints the
runs fired (checked against the cron library's fire times), the wall time, the CPU time of
this process and of the server (the client's build of the next run, and its play of the
run's stub, overlap the server's work; the rest of the two wait on each other), the round
trips of the case's engine calls, the server's peak memory above its memory before the case (the
case's namespace is removed when it ends: its peak is what the case held at most) and the load
average, so a figure from a busy machine can be read for what it is.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from flows.testing.session import private_server, run_files
from scheduler.cron import Schedule, missed_ticks

START = datetime(2026, 3, 1, tzinfo=UTC)

FLOW = """\
version: 1
name: minutely
queue: ticks
schedule:
  cron: "* * * * *"
  timezone: {zone}
steps:
  tick:
    run: echo tick
"""

CASE = """\
flow: minutely.yaml
cases:
  - name: every minute of the period
    schedule: {{from: "{start}", to: "{end}"}}
    mock: all
    expect: {{runs: {runs}}}
"""


def expected_ticks(zone: str, start: datetime, end: datetime) -> list[float]:
    """The fire times in [start, end) by the cron library alone."""
    schedule = Schedule(("* * * * *",), zone)
    first, last = start.timestamp(), end.timestamp()
    return [t for t in missed_ticks(schedule, first - 1, last, limit=10**7) if t < last]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=31, help="length of the period (31)")
    parser.add_argument("--zone", default="Europe/Berlin", help="the schedule's time zone")
    args = parser.parse_args()
    end = START + timedelta(days=args.days)
    ticks = expected_ticks(args.zone, START, end)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    with tempfile.TemporaryDirectory(prefix="flow-test-clock-") as folder:
        root = Path(folder)
        (root / "minutely.yaml").write_text(FLOW.format(zone=args.zone))
        test = root / "minutely.test.yaml"
        test.write_text(
            CASE.format(start=START.strftime(stamp), end=end.strftime(stamp), runs=len(ticks))
        )
        with private_server() as server:

            def server_cpu() -> float:
                info = server.info("cpu")
                return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

            load = os.getloadavg()[0]
            before = int(server.info("memory")["used_memory"])
            wall, cpu, served = time.perf_counter(), time.process_time(), server_cpu()
            session = run_files(server, [test])
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
            served = server_cpu() - served
            peak = int(server.info("memory")["used_memory_peak"]) - before
    [case] = session.cases
    runs = case.observed.runs if case.observed is not None else None
    print(f"* * * * * {args.zone}, {args.days} days from {START:%Y-%m-%d}, mock: all")
    print(f"runs fired: {runs} (the cron library's fire times: {len(ticks)})")
    if not case.passed:
        print("\n".join(case.failure))
    print(f"wall: {wall:.1f} s ({wall / len(ticks) * 1000:.2f} ms a tick)")
    if case.observed is not None:
        trips = case.observed.round_trips
        print(f"round trips: {trips} ({trips / len(ticks):.2f} a tick)")
    print(f"CPU: client {cpu:.1f} s + server {served:.1f} s = {cpu + served:.1f} s")
    print(f"server memory: peak {peak / 2**20:.1f} MiB above its {before / 2**20:.1f} MiB before")
    print(f"load average: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    raise SystemExit(0 if case.passed else 1)


if __name__ == "__main__":
    main()
