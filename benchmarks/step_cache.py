"""The step cache on the example ETL: a run whose every step is cached against one that runs.

``python -m benchmarks.step_cache [--rounds N]`` copies ``examples/etl.yaml`` (and its
``tasks.py``) with ``cache: {ttl: 1h}`` on every step into a temp folder, starts a private
server and one long-lived worker (4 threads, as ``flows worker``), and alternates in the same
process: a run after ``cache.clear`` (every step runs) and a run of the same params right after
(every step a cache hit). A run's time is the engine's: from its submission to the end of its
last job (each job's ``updated``), so the benchmark's own polling costs nothing. Prints the
median of each and their ratio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import yaml

from flows.runs.build import build_run, read_flow_file
from flows.runs.read import load_run
from flows.runs.submit import submit
from flows.runtime.worker_hook import prepare
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.worker import Worker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def cached_copy(folder: Path) -> Path:
    """examples/etl.yaml with a cache on every step (notify's command names the run id, which
    makes each run's key its own: it reports on the run instead)."""
    data = yaml.safe_load((EXAMPLES / "etl.yaml").read_text())
    for step in data["steps"].values():
        step["cache"] = {"ttl": "1h"}
    data["steps"]["notify"]["run"] = data["steps"]["notify"]["run"].replace(
        "run ${{ run.id }}", "run of ${{ params.date }}"
    )
    shutil.copy(EXAMPLES / "tasks.py", folder / "tasks.py")
    path = folder / "etl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def one_run(client: Client, path: Path, statuses: set[str]) -> float:
    """Submit one run and wait for it; seconds from submission to its last job's end."""
    source = read_flow_file(path)
    run_id = f"sales-etl@bench-{uuid.uuid4().hex[:8]}"
    built = build_run(
        source,
        run_id=run_id,
        logical_time=datetime(2026, 11, 1, tzinfo=UTC),
        params={"date": "2026-11-01"},
        trigger="manual",
    )
    start = client.engine.server_time()
    submit(client, built)
    while True:
        view = load_run(client, run_id)
        assert view is not None
        if view.finished:
            break
        time.sleep(0.005)
    assert view.status == "succeeded", view.status
    statuses.update(step.status for step in view.steps)
    ends = [job.updated for step in view.steps for job in step.jobs if job.updated]
    return max(ends) - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flows-cache-bench-") as temp:
        folder = Path(temp)
        path = cached_copy(folder)
        server = EmbeddedServer(folder / "server", appendfsync="everysec")
        server.start()
        try:
            client = Client(server.url, worker_name="bench")
            worker = Worker(
                Client(server.url, worker_name="bench-worker"),
                ["etl"],
                threads=4,
                prepare=prepare,
                poll_interval=0.05,
            )
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            one_run(client, path, set())  # warm up: imports, the library, the first sandbox
            uncached: list[float] = []
            cached: list[float] = []
            ran: set[str] = set()
            hit: set[str] = set()
            for _ in range(args.rounds):
                client.engine.call("cache.clear")
                uncached.append(one_run(client, path, ran))
                cached.append(one_run(client, path, hit))
            worker.stop()
            thread.join(timeout=10)
        finally:
            server.stop()
    a, b = statistics.median(uncached), statistics.median(cached)
    print(f"runs: {args.rounds} of each, alternating; step statuses: {sorted(ran)} / {sorted(hit)}")
    print(f"uncached run: median {a * 1000:.1f} ms (min {min(uncached) * 1000:.1f})")
    print(f"cached run:   median {b * 1000:.1f} ms (min {min(cached) * 1000:.1f})")
    print(f"cached / uncached: {b / a:.3f}")


if __name__ == "__main__":
    main()
