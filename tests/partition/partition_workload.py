"""The clients of a partition scenario, run inside the clients' namespace (``nc``).

``python partition_workload.py CONFIG.json``: a writer puts jobs at a steady rate through the
URL (Sentinel's or a cluster's) and notes each acknowledged one, a completer pops them and
notes each acknowledged complete; two scheduler services fire the ticks of a
minutely flow on a fast virtual clock, one following Sentinel, the other pinned to the first
master (a service on the side a partition cuts off); two workers run the ticks' jobs, one on
each side, and each job notes that it ran. The test partitions and heals the network meanwhile
(``healed`` file); afterwards this counts, on the master the URL names now, what was lost and
what ran twice, and writes ``result.json``.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.engine.connections import MasterWatch
from scheduler.service.loop import SchedulerService
from scheduler.worker import Worker

FLOW = """version: 1
name: tick
queue: ticks
schedule:
  cron: "* * * * *"
  catchup: {{policy: all, window: 24h}}
  overlap: allow
steps:
  ran: {{run: 'echo "$FLOWS_JID" >> {ran}'}}
"""
# Virtual seconds per real second of the services' clock: a minutely tick every half second.
SPEED = 120.0


class Clock:
    """The services' shared virtual clock (epoch seconds), from a minute boundary."""

    def __init__(self) -> None:
        self.start_real = time.monotonic()
        self.start = float(int(time.time() // 60 * 60))

    def now(self) -> float:
        return self.start + (time.monotonic() - self.start_real) * SPEED


class Workload:
    """The clients' threads and what they saw."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.work = Path(config["work"])
        self.url, self.pinned = config["url"], config["pinned"]
        self.namespace: str | None = config.get("namespace")  # a cluster's: one slot
        self.stop = threading.Event()
        self.ran = self.work / "ran"
        self.flows_dir = self.work / "flows"
        self.flows_dir.mkdir(exist_ok=True)
        (self.flows_dir / "tick.yaml").write_text(FLOW.format(ran=self.ran))
        self.clock = Clock()
        self.writer_client = self.client(self.url, "writer")
        self.acked: list[tuple[str, float]] = []
        self.completed: list[str] = []
        self.refused: Counter[str] = Counter()
        self.fired: list[dict[str, Any]] = []
        self.tick_errors: Counter[str] = Counter()
        self.workers: list[Worker] = []
        self.watches: list[MasterWatch] = []  # the following service's (it fences)

    def client(self, url: str, name: str) -> Client:
        return Client(url, namespace=self.namespace, worker_name=name)

    def writer(self) -> None:
        queue = self.writer_client.queues["writes"]
        i = 0
        while not self.stop.is_set():
            jid = f"w{i:06d}"
            i += 1
            try:
                queue.put("tasks.noop", {}, jid=jid)
                self.acked.append((jid, time.monotonic()))
            except Exception as error:  # noted: an unacknowledged write may be lost
                self.refused[type(error).__name__] += 1
            self.stop.wait(1 / self.config["rate"])

    def completer(self) -> None:
        """Pops the writer's jobs and completes them, noting each acknowledged complete."""
        queue = self.client(self.url, "completer").queues["writes"]
        while not self.stop.is_set():
            try:
                jobs = queue.pop(10)
            except Exception:  # a pop that failed gave nothing (its jobs come back later)
                self.stop.wait(0.2)
                continue
            for job in jobs:
                try:
                    job.complete()
                    self.completed.append(job.jid)
                except Exception:  # noted: an unacknowledged complete may be lost
                    self.refused["complete"] += 1
            if not jobs:
                self.stop.wait(0.1)

    def service(self, name: str, url: str) -> None:
        client = self.client(url, name)
        svc = SchedulerService(client, FlowsSource(), self.flows_dir, service_id=name)
        watch = MasterWatch.of(client.redis)
        if watch is not None:
            self.watches.append(watch)
        while not self.stop.is_set():
            now = self.clock.now()
            try:
                svc.scan(now)
                report = svc.tick(now)
            except Exception as error:  # a service logs a failed tick and carries on
                self.tick_errors[f"{name}:{type(error).__name__}"] += 1
                logging.getLogger("workload").info("%s: %s", name, error)
                self.stop.wait(0.5)
                continue
            for item in report.fired:
                self.fired.append({"service": name, "run": item.run_id, "outcome": item.outcome})
            for error_text in report.errors:
                self.tick_errors[f"{name}:{error_text[:60]}"] += 1
            self.stop.wait(0.1)

    def worker(self, name: str, url: str) -> None:
        worker = Worker(self.client(url, name), ["ticks"], poll_interval=0.2)
        self.workers.append(worker)
        worker.run()

    def run(self) -> dict[str, Any]:
        threads = [
            threading.Thread(target=self.writer, name="writer", daemon=True),
            threading.Thread(target=self.completer, name="completer", daemon=True),
            threading.Thread(target=self.service, args=("svc-follow", self.url), daemon=True),
            threading.Thread(target=self.service, args=("svc-pinned", self.pinned), daemon=True),
            threading.Thread(target=self.worker, args=("w-follow", self.url), daemon=True),
            threading.Thread(target=self.worker, args=("w-pinned", self.pinned), daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(self.config["warmup"])
        (self.work / "ready").write_text("1")
        while not (self.work / "healed").exists():
            time.sleep(0.05)
        healed_at = time.monotonic()
        time.sleep(self.config["after_heal"])
        self.stop.set()
        for worker in self.workers:
            worker.stop()
        for thread in threads:
            thread.join(20)
        return self.outcome(healed_at)

    def outcome(self, healed_at: float) -> dict[str, Any]:
        """What was lost and what ran twice, read from the master the URL names now."""
        check = self.client(self.url.split("?")[0], "checker")
        jids = [jid for jid, _ in self.acked]
        states: dict[str, str] = {}
        for start in range(0, len(jids), 500):
            page = jids[start : start + 500]
            pipe = check.engine.pipeline()
            for jid in page:
                pipe.call("get", jid)
            for jid, reply in zip(page, pipe.execute(), strict=True):
                if reply:
                    states[jid] = str(json.loads(reply).get("state"))
        lost = [jid for jid in jids if jid not in states]
        # A complete acknowledged and lost leaves its job waiting or running again.
        completes_lost = [jid for jid in self.completed if states.get(jid, "") != "complete"]
        times = sorted(t for _, t in self.acked)
        longest_gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
        acked_at = dict(self.acked)
        after_heal = [t for _, t in self.acked if t >= healed_at]
        runs = json.loads(check.engine.call("runs", "tick", 0, 100_000))
        run_ids = sorted(str(r["id"]) for r in runs) if isinstance(runs, list) else []
        lines = self.ran.read_text().splitlines() if self.ran.exists() else []
        executions = Counter(line.strip() for line in lines)
        watch = MasterWatch.of(self.writer_client.redis)  # None on a cluster
        switched_at = watch.switched_at if watch is not None and watch.switches else None
        lost_times = [acked_at[jid] for jid in lost]
        return {
            "switches": watch.switches if watch is not None else 0,
            # The last write acknowledged by the deposed master (it was lost), after the switch.
            "lost_after_switch_s": (
                max(lost_times) - switched_at if lost_times and switched_at is not None else None
            ),
            "lost_window_s": (max(lost_times) - min(lost_times)) if lost_times else 0.0,
            "acknowledged_puts": len(self.acked),
            "lost_puts": len(lost),
            "lost_examples": lost[:10],
            "refused_puts": dict(self.refused),
            "acknowledged_completes": len(self.completed),
            "completes_lost": len([j for j in completes_lost if j in states]),
            # A complete lost and the job popped and completed again: it ran twice.
            "completed_twice": len(self.completed) - len(set(self.completed)),
            "first_put_after_heal_s": (min(after_heal) - healed_at) if after_heal else None,
            "longest_write_outage_s": round(longest_gap, 2),
            "fired": len(self.fired),
            "acknowledged_fires_lost": sorted({f["run"] for f in self.fired} - set(run_ids)),
            "runs": len(run_ids),
            "executions": sum(executions.values()),
            "ran_twice": sorted(jid for jid, n in executions.items() if n > 1),
            "runs_never_ran": len([r for r in run_ids if not any(r in j for j in executions)]),
            "tick_errors": dict(self.tick_errors),
            # What the following service did to the deposed master (see fencing).
            "fences": [f.outcome for w in self.watches for f in w.fences],
        }


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    logging.basicConfig(
        filename=Path(config["work"]) / "workload.log",
        level=logging.INFO,
        format="%(asctime)s %(threadName)s %(name)s %(message)s",
    )
    result = Workload(config).run()
    (Path(config["work"]) / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
