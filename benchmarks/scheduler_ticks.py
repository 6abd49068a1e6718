"""How many schedules one scheduler service fires per second of tick work.

Writes N flow files that all fire at the same minute (``0 * * * *``), registers them with one
scan, then times one ``tick(now)`` at that minute: every schedule is planned, its run expanded
and fired through ``schedule.fire`` (compare-and-set plus the run's jobs, one Lua call each,
pipelined per batch). A second tick an hour later times the overlap path (every previous run is
still active, so with ``overlap: skip`` each tick is skipped with its reason).

    .venv/bin/python benchmarks/scheduler_ticks.py                 # 10,000 schedules, embedded
    .venv/bin/python benchmarks/scheduler_ticks.py -n 2000 --steps 3 --redis redis://host:6379/0

Without --redis a fresh embedded server (appendfsync everysec unless --appendfsync always)
runs in a temporary directory. With --redis the database is FLUSHED first: point it at a
scratch database.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import redis

from flows.runs.service_source import FlowsSource
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.connections import connect
from scheduler.service.loop import SchedulerService

TICK = datetime(2026, 1, 5, 12, 0, tzinfo=UTC).timestamp()


def flow(index: int, steps: int, overlap: str, distinct: bool) -> str:
    lines = [
        "version: 1",
        f"name: bench-{index:05d}",
        "queue: bench",
        "schedule:",
        '  cron: "0 * * * *"',
        f"  overlap: {overlap}",
        "steps:",
    ]
    if distinct:
        # A start bound of its own (long past, so the ticks are the same) makes every
        # schedule distinct: no fire time computed for one serves another.
        hours, seconds = divmod(index, 3600)
        start = f"2020-01-{1 + hours:02d}T00:{seconds // 60:02d}:{seconds % 60:02d}Z"
        lines.insert(-1, f'  start: "{start}"')
    for step in range(steps):
        needs = f", needs: [s{step - 1}]" if step else ""
        lines.append(f"  s{step}: {{run: echo {step}{needs}}}")
    return "\n".join(lines) + "\n"


@contextmanager
def server(url: str | None, appendfsync: str, root: Path) -> Iterator[str]:
    if url is not None:
        yield url
        return
    embedded = EmbeddedServer(root / "server", appendfsync=appendfsync)
    embedded.start()
    try:
        yield embedded.url
    finally:
        embedded.stop()


class Measured:
    """Wall-clock seconds of a block, and the CPU seconds this process and the server spent.

    On a busy machine the wall clock measures the neighbours too; CPU seconds (client plus
    server) are the tick's own work.
    """

    def __init__(self) -> None:
        self.wall = self.client_cpu = self.server_cpu = 0.0

    def summary(self, schedules: int) -> dict[str, float]:
        cpu = self.client_cpu + self.server_cpu
        return {
            "wall_seconds": round(self.wall, 2),
            "per_wall_second": round(schedules / self.wall),
            "client_cpu_seconds": round(self.client_cpu, 2),
            "server_cpu_seconds": round(self.server_cpu, 2),
            "per_cpu_second": round(schedules / cpu),
        }


def _server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@contextmanager
def measured(r: redis.Redis) -> Iterator[Measured]:
    out = Measured()
    wall, cpu, server_cpu = time.perf_counter(), time.process_time(), _server_cpu(r)
    yield out
    out.wall = time.perf_counter() - wall
    out.client_cpu = time.process_time() - cpu
    out.server_cpu = _server_cpu(r) - server_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--schedules", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1, help="jobs per run")
    parser.add_argument("--overlap", default="skip")
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="no two schedules alike (else all share one cron, as many real flows do)",
    )
    parser.add_argument("--batch", type=int, default=500, help="due schedules per round")
    parser.add_argument("--redis", help="a scratch Redis URL (FLUSHED); default: embedded")
    parser.add_argument("--appendfsync", default="everysec", choices=["everysec", "always"])
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory() as tmp,
        server(args.redis, args.appendfsync, Path(tmp)) as url,
    ):
        folder = Path(tmp) / "pipelines"
        folder.mkdir()
        for index in range(args.schedules):
            (folder / f"bench-{index:05d}.yaml").write_text(
                flow(index, args.steps, args.overlap, args.distinct)
            )
        r = connect(url)
        r.flushall()
        service = SchedulerService(
            Client(redis=r), FlowsSource(), folder, service_id="bench", batch=args.batch
        )

        started = time.perf_counter()
        scan = service.scan(TICK - 30)
        scan_seconds = time.perf_counter() - started

        with measured(r) as fire:
            first = service.tick(TICK + 1)
        with measured(r) as again:
            second = service.tick(TICK + 3600 + 1)

        assert len(first.fired) == args.schedules, (len(first.fired), first.errors[:3])
        print(
            json.dumps(
                {
                    "schedules": args.schedules,
                    "jobs_per_run": args.steps,
                    "distinct_schedules": args.distinct,
                    "scan_seconds": round(scan_seconds, 2),
                    "registered": len(scan.registered),
                    "fired": len(first.fired),
                    "fire_tick": fire.summary(len(first.fired)),
                    "second_tick_fired": len(second.fired),
                    "second_tick_skipped": len(second.skipped),
                    "second_tick": again.summary(args.schedules),
                    "load_average": os.getloadavg(),
                    "server": "embedded" if args.redis is None else "given",
                    "appendfsync": args.appendfsync if args.redis is None else "n/a",
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
