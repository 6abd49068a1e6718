#!/usr/bin/env python3
"""redis-flows benchmarks: every figure next to a raw-Redis baseline from the same run.

    python benchmarks/run.py                    # everything, about 10 minutes
    python benchmarks/run.py --busy             # with low-priority spinners keeping CPUs awake
    python benchmarks/run.py --smoke            # a few hundred jobs per figure, seconds (CI)
    python benchmarks/run.py --only put drain --size drain=50000 --rounds 5

Starts its own embedded server (appendfsync everysec) in a temp dir and stops it at the end;
prints a Markdown table and writes every figure, round and explanation to ``--json``
(default benchmarks/results/latest.json). Missed targets do not change the exit status; a
benchmark that breaks does (1).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import report
from benchmarks.chain import chain_figures
from benchmarks.cli_startup import cli_figures
from benchmarks.context import (
    APPENDFSYNC,
    REPO_ROOT,
    SMOKE,
    Bench,
    Sizes,
    fresh_bench,
)
from benchmarks.fanoutbench import fanout_figures
from benchmarks.figures import Figure
from benchmarks.flowbench import cron_figures, flow_figures
from benchmarks.latency import latency_figures
from benchmarks.observability import log_figures
from benchmarks.processes import spinner_policy, spinners
from benchmarks.retention import retention_figures
from benchmarks.server_cost import lifecycle_figures, memory_figures
from benchmarks.throughput import bulk_figures, drain_figures, put_figures
from benchmarks.writes import write_figures
from scheduler.engine.scripts import library_name

Group = Callable[[Bench], list[Figure]]
GROUPS: dict[str, Group] = {
    "put": put_figures,
    "bulk": bulk_figures,
    "drain": drain_figures,
    "latency": latency_figures,
    "lifecycle": lifecycle_figures,
    "memory": memory_figures,
    "writes": write_figures,
    "flow": flow_figures,
    "cron": cron_figures,
    "logs": log_figures,
    "fanout": fanout_figures,
    "cli": cli_figures,
    "chain": chain_figures,
    "retention": retention_figures,
}
DEFAULT_JSON = REPO_ROOT / "benchmarks" / "results" / "latest.json"


def _size(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    fields = {f.name for f in dataclasses.fields(Sizes)}
    if name not in fields or not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(
            f"expected NAME=N with N ≥ 1 and NAME one of {', '.join(sorted(fields))}"
        )
    return name, int(value)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round (CI)")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="keep every CPU busy with low-priority spinners (idle vCPUs are slow to wake)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        metavar="PATH",
        help=f"where to write the results (default {DEFAULT_JSON.relative_to(REPO_ROOT)})",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(GROUPS),
        metavar="NAME",
        help=f"run only these: {', '.join(GROUPS)}",
    )
    parser.add_argument("--rounds", type=int, help="rounds per figure (default 3; smoke 1)")
    parser.add_argument(
        "--size",
        type=_size,
        action="append",
        default=[],
        metavar="NAME=N",
        help="change one size, e.g. drain=50000 (see benchmarks/context.py)",
    )
    parser.add_argument(
        "--worker-log-level",
        default="INFO",
        help="log level of the benchmark's workers (INFO: what users get)",
    )
    parser.add_argument(
        "--latency-gap",
        type=float,
        default=0.01,
        metavar="SECONDS",
        help="pause before each latency sample (default 0.01)",
    )
    return parser.parse_args(argv)


def _git() -> str:
    def run(*args: str) -> str:
        done = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()

    with contextlib.suppress(OSError):
        commit = run("rev-parse", "--short", "HEAD")
        if commit:
            return commit + (" with uncommitted changes" if run("status", "--porcelain") else "")
    return "unknown (not a git checkout)"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _load() -> float:
    """The 1-minute load average: other work on a shared machine shows up here."""
    return round(os.getloadavg()[0], 2)


def _engine_calls(bench: Bench) -> str:
    bench.redis.config_resetstat()
    bench.client.engine.call("config.get")
    stats = bench.server_info("commandstats")
    if "cmdstat_fcall" in stats or "cmdstat_fcall_ro" in stats:  # a read: the read-only entry
        return f"FCALL (Functions library {library_name()})"
    return "EVALSHA (qless bundle)"


def metadata(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    info = bench.server_info("server")
    name = str(info.get("server_name") or "redis")
    cpus = os.cpu_count() or 1
    busy = f"busy ({cpus} {spinner_policy()} spinners keep the CPUs awake)"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "busy" if args.busy else "normal",
        "mode_text": busy if args.busy else "normal (idle CPUs may sleep)",
        "smoke": args.smoke,
        "command": " ".join(["python", "benchmarks/run.py", *(sys.argv[1:])]),
        "server": {
            "name": name.capitalize(),
            "version": info.get("valkey_version") or info.get("redis_version"),
            "appendfsync": APPENDFSYNC,
        },
        "engine": {"calls": _engine_calls(bench), "library": library_name()},
        "client": {
            "redis_py": _version("redis"),
            "hiredis": _version("hiredis"),
            "python": platform.python_version(),
        },
        "machine": {"cpus": cpus, "platform": platform.platform()},
        "load_average": {"start": _load()},
        "git": _git(),
        "repository": str(REPO_ROOT),
        "rounds": bench.rounds,
        "sizes": dataclasses.asdict(bench.sizes),
        "worker_log_level": bench.worker_log_level,
    }


def bench_for(args: argparse.Namespace) -> contextlib.AbstractContextManager[Bench]:
    sizes = (SMOKE if args.smoke else Sizes()).replace(**dict(args.size))
    rounds = args.rounds or (1 if args.smoke else 3)
    return fresh_bench(
        sizes, rounds, worker_log_level=args.worker_log_level, latency_gap=args.latency_gap
    )


def run_groups(bench: Bench, names: list[str]) -> tuple[list[Figure], bool]:
    figures: list[Figure] = []
    ok = True
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            figures += GROUPS[name](bench)
        except Exception as error:
            ok = False
            traceback.print_exc()
            figures.append(
                Figure(
                    f"{name}_error",
                    f"{name}: benchmark failed",
                    "",
                    None,
                    note=f"error: {type(error).__name__}: {error}",
                )
            )
        print(
            f"[bench] {name} done in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return figures, ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.only or list(GROUPS)
    with contextlib.ExitStack() as stack:
        if args.busy:
            stack.enter_context(spinners(os.cpu_count() or 1))
        bench = stack.enter_context(bench_for(args))
        meta = metadata(args, bench)
        figures, ok = run_groups(bench, names)
        meta["load_average"]["end"] = _load()
    print(report.render(meta, figures))
    report.write_json(args.json, meta, figures)
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
