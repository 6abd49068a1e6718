"""Reading one big run: the engine's ``run.read`` and ``runs.statuses``, ``flows runs`` and
``flows status RUN`` as whole processes, and the dashboard's run page, ``GET /api/v1/runs/{id}``,
``/metrics``, ``/flows`` and ``/runs``, with a finished run of ``--items`` fan-out items, two small
runs, and ``--runs`` older one-job runs and ``--schedules`` schedules in the namespace.

    python -m benchmarks.run_reads [--items 10000] [--runs 10000] [--schedules 1000] [--samples 5]

Prints each figure's median; the engine's figures are server time (INFO commandstats), which
the machine's load disturbs less than wall time. Run it in two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from benchmarks import flowgen
from benchmarks.context import Bench, Sizes, fresh_bench
from benchmarks.fanoutbench import FANOUT_QUEUE, FLOW, WORKER
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.ui.app import create_app
from flows.ui.auth import Auth

ENTRY = "import sys; from flows.cli import main; sys.argv[0] = 'flows'; main()"
RUN = "bench-reads-0"


def _finished_run(bench: Bench, items: int) -> None:
    """Three runs of the fan-out flow; the first worked to its end with `items` items."""
    flow = flowgen.validated(FLOW.format(queue=FANOUT_QUEUE).replace(", max_parallel: 4", ""))
    for index in range(3):
        run_id = f"bench-reads-{index}"
        requests = flowgen.expanded(flow, run_id)
        submit(bench.client, assemble_run(run_id, flow.name, requests, params={}))
    call = bench.client.engine.call
    call("pop", FANOUT_QUEUE, WORKER, 1)
    files = json.dumps({"files": [f"f-{i:05d}" for i in range(items)]})
    call("complete", f"{RUN}:list", WORKER, FANOUT_QUEUE, "", "result", files)
    while True:
        raw = call("pop", FANOUT_QUEUE, WORKER, 200)
        jobs = json.loads(raw) if isinstance(raw, str) else raw
        if not jobs:
            return
        for job in jobs:
            if job["jid"].startswith(f"{RUN}:"):
                call("complete", job["jid"], WORKER, FANOUT_QUEUE, "", "result", "{}")


def _crowd(bench: Bench, runs: int, schedules: int) -> None:
    """`runs` one-job runs (submitted, not worked) and `schedules` schedules."""
    call = bench.client.engine.call
    for index in range(runs):
        run_id = f"bench-crowd-{index}"
        job = {"jid": f"{run_id}:a", "queue": "bench-crowd", "klass": "K", "data": "{}"}
        call("flow.submit", run_id, json.dumps({"flow": "crowd"}), json.dumps([job]))
    for index in range(schedules):
        name = f"bench-schedule-{index}"
        definition = {
            "flow": name,
            "hash": "h",
            "file": f"/flows/{name}.yaml",
            "cron": ["0 0 * * *"],
            "timezone": "UTC",
            "overlap": "skip",
            "catchup": "latest",
            "jitter": 0,
            "params": {},
            "paused": False,
        }
        call("schedule.register", name, json.dumps(definition), "bench", time.time() + 3600, "", "")


def _median_ms(action: Callable[[], object], samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _server_ms(bench: Bench, samples: int, *call: Any) -> float:
    """Server time of one engine call (FCALL or FCALL_RO), the mean of `samples`."""
    bench.redis.config_resetstat()
    for _ in range(samples):
        bench.client.engine.call(*call)
    stats = bench.redis.info("commandstats")
    fcalls = [v for k, v in stats.items() if k.startswith("cmdstat_fcall")]
    usec = float(sum(v["usec"] for v in fcalls))
    return usec / max(1, sum(int(v["calls"]) for v in fcalls)) / 1000


@contextmanager
def served(bench: Bench) -> Iterator[str]:
    """A ``flows ui`` on a free loopback port, reads open to all; yields its base URL."""
    app = create_app(bench.client, Auth(None, reads_open=True))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, capture_output=True, check=True)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url) as reply:
        body: bytes = reply.read()
    return body


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.run_reads", description=__doc__)
    parser.add_argument("--items", type=int, default=10_000, help="fan-out items (10000)")
    parser.add_argument("--runs", type=int, default=0, help="older one-job runs (0)")
    parser.add_argument("--schedules", type=int, default=0, help="schedules (0)")
    parser.add_argument("--samples", type=int, default=5, help="samples per figure (5)")
    args = parser.parse_args(argv)
    with fresh_bench(Sizes(), 1) as bench:
        _crowd(bench, args.runs, args.schedules)
        _finished_run(bench, args.items)
        print(
            f"load average {os.getloadavg()[0]:.2f}; a finished run of {args.items} items,"
            f" {args.runs} more runs, {args.schedules} schedules"
        )
        n = args.samples
        print(f"run.read server time: {_server_ms(bench, n, 'run.read', RUN):.2f} ms")
        statuses = _server_ms(bench, n, "runs.statuses", "", 0, 100)
        print(f"runs.statuses server time: {statuses:.2f} ms")
        env = dict(bench.child_env(), COLUMNS="100")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for words in (["--help"], ["runs"], ["status", RUN]):
            argv_ = [sys.executable, "-c", ENTRY, *words]
            subprocess.run(argv_, env=env, capture_output=True, check=True)  # compiled once
            took = _median_ms(functools.partial(_run, argv_, env), n)
            print(f"flows {' '.join(words)}: {took:.0f} ms whole process")
        with served(bench) as base:
            scrape = _get(base + "/metrics").decode().splitlines()
            calls = [line.split()[1] for line in scrape if line.startswith("flows_scrape_engine")]
            print(f"/metrics engine calls: {calls[0] if calls else '?'}")
            for path in (f"/runs/{RUN}", f"/api/v1/runs/{RUN}", "/metrics", "/flows", "/runs"):
                size = len(_get(base + path))
                took = _median_ms(functools.partial(_get, base + path), n)
                print(f"GET {path}: {took:.1f} ms, {size:,} bytes")
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
