"""Measuring one stretch of work: wall time, this process's CPU, the server's CPU and commands."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.context import Bench

#: ``P completed``: the engine's zset of completed jids (lua/README.md, key layout).
COMPLETED = "completed"


@dataclass
class Sample:
    """One measured stretch: ``count`` jobs in ``seconds``."""

    count: int
    seconds: float
    client_cpu: float
    server_cpu: float
    commands: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def per_job(self) -> dict[str, Any]:
        """Microseconds per job of wall time, client CPU, server CPU, and commands per job."""
        n = self.count
        return {
            "wall_us": 1e6 * self.seconds / n,
            "client_cpu_us": 1e6 * self.client_cpu / n,
            "server_cpu_us": 1e6 * self.server_cpu / n,
            "commands": {
                name: {"calls": stat["calls"] / n, "usec": stat["usec"] / n}
                for name, stat in sorted(self.commands.items())
            },
        }


def server_cpu(bench: Bench) -> float:
    cpu = bench.server_info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def command_stats(bench: Bench) -> dict[str, dict[str, float]]:
    """``{command: {calls, usec}}`` since the last CONFIG RESETSTAT (INFO commandstats)."""
    out: dict[str, dict[str, float]] = {}
    for key, stat in bench.server_info("commandstats").items():
        name = key.removeprefix("cmdstat_")
        if name in ("info", "config|resetstat"):
            continue
        out[name] = {"calls": float(stat["calls"]), "usec": float(stat["usec"])}
    return out


def measured(bench: Bench, count: int, work: Callable[[], Any]) -> Sample:
    """Run ``work`` (which handles ``count`` jobs) and measure it."""
    bench.redis.config_resetstat()
    cpu, server = time.process_time(), server_cpu(bench)
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    client_cpu = time.process_time() - cpu
    return Sample(count, seconds, client_cpu, server_cpu(bench) - server, command_stats(bench))


def completed(bench: Bench) -> int:
    return int(bench.redis.zcard(bench.client.prefix + COMPLETED))
