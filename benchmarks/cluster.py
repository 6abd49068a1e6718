#!/usr/bin/env python3
"""Cluster figures, apart from the main benchmark (whose run time they would double).

    python benchmarks/cluster.py                 # about 3 minutes
    python benchmarks/cluster.py --jobs 5000     # per namespace and figure
    python benchmarks/cluster.py --skip-failover

Starts its own Valkey clusters on loopback ports (benchmarks/topology.py) and reports:

* **shard scaling**: the aggregate drain rate of 1, 2 and 3 namespaces, each on its own master
  of a 3-master cluster, with one worker process per namespace, as a ratio to one shard
  measured in the same run. Every server and worker shares this machine's cores, so the ratio
  is bounded by them, not by the cluster;
* **WAIT cost**: put latency and drain rate of one namespace with and without ``?wait=1`` on a
  cluster with a replica per master, and the difference per job;
* **failover**: :func:`benchmarks.failover.drain_through_failover` in both modes: acknowledged
  writes lost, the write outage, jobs run twice (their function started twice) and, apart,
  jobs popped again only because a pop's reply was lost.

Prints a Markdown table and writes the figures to ``--json``
(default benchmarks/results/cluster.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redis.crc import key_slot

from benchmarks.failover import KLASS, drain_through_failover
from benchmarks.processes import stop_all
from benchmarks.topology import Cluster
from scheduler import Client
from scheduler.engine.queue import NewJob

QUEUE = "bench"
THREADS = 4


def namespaces_on_shards(cluster: Cluster, count: int) -> list[str]:
    chosen: dict[int, str] = {}
    for i in range(10_000):
        name = f"shard{i}"
        chosen.setdefault(cluster.node_of_slot(key_slot(f"{{{name}}}:".encode())).port, name)
        if len(chosen) == count:
            return list(chosen.values())
    raise RuntimeError("no namespaces on distinct shards")


def fill(url: str, namespace: str, jobs: int) -> None:
    with Client(url, namespace=namespace) as client:
        queue = client.queues[QUEUE]
        for start in range(0, jobs, 1000):
            queue.put_many([NewJob(KLASS, {}) for _ in range(start, min(jobs, start + 1000))])


def drain(url: str, namespaces: list[str]) -> float:
    """Seconds one worker process per namespace takes to empty its queue, from the moment every
    worker is registered and waiting (the queues are paused until then: start-up is not timed)."""
    command = [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())"]
    clients = [Client(url, namespace=namespace) for namespace in namespaces]
    queues = [client.queues[QUEUE] for client in clients]
    for queue in queues:
        queue.pause()
    workers = [
        subprocess.Popen(
            [*command, "worker", "-q", QUEUE, "--processes", "0", "--threads", str(THREADS),
             "--redis", url, "--namespace", namespace, "--log-level", "WARNING"],
        )
        for namespace in namespaces
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not all(client.workers.registry(QUEUE) for client in clients):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start")
            time.sleep(0.05)
        started = time.monotonic()
        for queue in queues:
            queue.unpause()
        while any(queue.length() for queue in queues):
            time.sleep(0.01)
        return time.monotonic() - started
    finally:
        stop_all(workers)
        for client in clients:
            client.close()


def shard_scaling(root: Path, jobs: int) -> dict[str, Any]:
    cluster = Cluster.start(root / "scaling", masters=3, replicas=0)
    try:
        url = cluster.nodes[0].url
        names = namespaces_on_shards(cluster, 3)
        rates: dict[str, float] = {}
        for shards in (1, 2, 3):
            # A fresh namespace per round, on the same masters: the hash tag is what counts.
            prefixes = [f"{{{name}}}:{shards}:" for name in names[:shards]]
            for prefix in prefixes:
                fill(url, prefix, jobs)
            seconds = drain(url, prefixes)
            rates[str(shards)] = round(shards * jobs / seconds, 1)
        one = rates["1"]
        return {
            "jobs_per_namespace": jobs,
            "threads_per_worker": THREADS,
            "rate": rates,
            "ratio_to_one_shard": {k: round(v / one, 2) for k, v in rates.items()},
            "cpus": os.cpu_count(),
        }
    finally:
        cluster.stop()


def wait_cost(root: Path, jobs: int) -> dict[str, Any]:
    cluster = Cluster.start(root / "wait", masters=3, replicas=1)
    try:
        base = cluster.nodes[0].url
        figures: dict[str, Any] = {}
        for mode, suffix in (("async", ""), ("wait", "?wait=1")):
            namespace = f"{{waitcost}}:{mode}:"
            with Client(base + suffix, namespace=namespace) as client:
                queue = client.queues["latency"]
                samples = []
                for _ in range(min(jobs, 2000)):
                    began = time.perf_counter()
                    queue.put(KLASS, {})
                    samples.append(time.perf_counter() - began)
            fill(base, namespace, jobs)
            seconds = drain(base + suffix, [namespace])
            figures[mode] = {
                "put_ms_median": round(statistics.median(samples) * 1000, 3),
                "drain_rate": round(jobs / seconds, 1),
            }
        a, w = figures["async"], figures["wait"]
        figures["extra_ms_per_put"] = round(w["put_ms_median"] - a["put_ms_median"], 3)
        figures["extra_ms_per_drained_job"] = round(
            1000 / w["drain_rate"] - 1000 / a["drain_rate"], 3
        )
        return figures
    finally:
        cluster.stop()


def failover(root: Path, jobs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, suffix in (("async", ""), ("wait", "?wait=1&wait_timeout=2")):
        cluster = Cluster.start(root / f"failover-{mode}", masters=3, replicas=1)
        try:
            slot = key_slot(b"{failover}:")
            owner = cluster.node_of_slot(slot)
            entry = next(node for node in cluster.nodes if node is not owner)
            result = drain_through_failover(
                entry.url + suffix,
                "failover",
                lambda cluster=cluster, slot=slot: cluster.fail_over(slot),  # type: ignore[misc]
                jobs=jobs,
                mode=mode,
                workdir=Path(tempfile.mkdtemp(dir=root)),
            )
            out[mode] = result.as_dict()
        finally:
            cluster.stop()
    return out


def table(results: dict[str, Any]) -> str:
    lines = ["| figure | value |", "|---|---|"]
    scaling = results.get("shard_scaling")
    if scaling:
        for shards, rate in scaling["rate"].items():
            ratio = scaling["ratio_to_one_shard"][shards]
            lines.append(f"| drain, {shards} shard(s) | {rate:,.0f} jobs/s ({ratio:.2f}x one) |")
        lines.append(f"| CPUs shared by servers and workers | {scaling['cpus']} |")
    cost = results.get("wait_cost")
    if cost:
        for mode in ("async", "wait"):
            lines.append(
                f"| put median, {mode} | {cost[mode]['put_ms_median']} ms |"
                f"\n| drain, {mode} | {cost[mode]['drain_rate']:,.0f} jobs/s |"
            )
        lines.append(f"| WAIT cost per put | +{cost['extra_ms_per_put']} ms |")
        lines.append(f"| WAIT cost per drained job | +{cost['extra_ms_per_drained_job']} ms |")
    for mode, figures in (results.get("failover") or {}).items():
        lines.append(
            f"| failover, {mode} | {figures['lost']} of {figures['acknowledged']} acknowledged"
            f" writes lost; writes stopped {figures['recovery_seconds']} s; {figures['reruns']}"
            f" of {figures['jobs']} jobs ran twice, {figures['pop_replies_lost']} more popped"
            f" again after a lost pop reply; run {figures['flow_status']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per namespace and figure")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results/cluster.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flows-cluster-bench-") as tmp:
        root = Path(tmp)
        results["shard_scaling"] = shard_scaling(root, args.jobs)
        results["wait_cost"] = wait_cost(root, args.jobs)
        if not args.skip_failover:
            results["failover"] = failover(root, args.jobs)
    print(table(results))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
