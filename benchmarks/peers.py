"""Side by side with huey: the same figures, the same run, the same server.

    python -m benchmarks.peers                  # about two minutes
    python -m benchmarks.peers --busy           # with low-priority spinners keeping CPUs awake
    python -m benchmarks.peers --samples 2000 --puts 20000

Three figures, each measured for redis-flows, for huey (``RedisHuey`` on the same embedded
server's unix socket, default settings) and for the raw-Redis baseline the main benchmark uses:

* put, one call per job, one process: ``queue.put(klass, {})`` against a no-op huey task called
  once per job, against one LPUSH round trip per message; rounds alternate (ours, huey, LPUSH)
  on an emptied database, medians of the rounds;
* memory per waiting job: the growth of ``used_memory`` after ``--memory`` puts with the data
  ``{"i": n}``, huey task calls with ``n``, or LPUSHes of the baseline's message (jid, klass,
  data), each on an emptied database;
* put-to-start latency with an idle consumer: a WorkerPool of one worker against huey's own
  consumer (``huey_consumer -k thread -w 1``, blocking BRPOP), each running a task whose first
  line records CLOCK_MONOTONIC (:func:`benchmarks.tasks.stamp`), against one PING; the three
  samples interleave (their order rotates) with the same pause before each, while both
  consumers wait.

huey is not a dependency of the project: it is imported only here, at run time (``pip install
huey``, or the ``peers`` extra); without it the command says so and exits 2. Prints a Markdown
table and writes every round to benchmarks/results/peers.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import baseline, latency, report, run, server_memory
from benchmarks.context import REPO_ROOT, Bench, Sizes, fresh_bench, wait_until
from benchmarks.figures import TIMES, Figure, compared, median
from benchmarks.measure import Sample, measured
from benchmarks.processes import spinners, stop_all, worker_pool
from benchmarks.tasks import STAMPS_KEY

DEFAULT_JSON = REPO_ROOT / "benchmarks" / "results" / "peers.json"
PUT_QUEUE = "bench-peers-put"
#: huey's name for the instance: its queue is the list ``huey.redis.<name>``.
HUEY_NAME = "benchpeers"
#: The instance huey's consumer loads by import path, as ``huey_consumer`` is run in practice.
HUEY_APP = "benchmarks.huey_app.app"
#: One thread worker; the polling delays are used only after a connection error (BRPOP blocks).
HUEY_CONSUMER = [
    "--worker-type",
    "thread",
    "--workers",
    "1",
    "--delay",
    "0.01",
    "--max-delay",
    "0.1",
]
MISSING = 2  # exit status without huey
WARMUP = 20
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class HueyTasks:
    """A ``RedisHuey`` instance and the two tasks the benchmark calls (typed ``Any``: huey is
    optional and untyped)."""

    app: Any
    noop: Any
    stamp: Any


def huey_installed() -> bool:
    try:
        importlib.import_module("huey")
    except ImportError:
        return False
    return True


def huey_tasks(url: str) -> HueyTasks:
    """``RedisHuey`` on ``url`` (blocking dequeue, huey's default, said explicitly) with ``noop``
    and ``stamp``; the enqueuing side and the consumer both build it, so the names match."""
    huey = importlib.import_module("huey")
    app = huey.RedisHuey(HUEY_NAME, url=url, blocking=True)

    def noop(*args: Any) -> None:
        """Nothing (with arguments: a payload, for the memory figure)."""

    def stamp(task: Any) -> None:
        """The moment the task function starts, as :func:`benchmarks.tasks.stamp` records it."""
        started = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        app.storage.conn.rpush(STAMPS_KEY, f"{task.id} {started}")

    return HueyTasks(app, app.task(name="noop")(noop), app.task(name="stamp", context=True)(stamp))


# -- put, one call per job -----------------------------------------------------------------------


def put_ours(bench: Bench, count: int) -> None:
    queue = bench.client.queues[PUT_QUEUE]
    for _ in range(count):
        queue.put(baseline.KLASS, {})


def put_huey(tasks: HueyTasks, count: int) -> None:
    noop = tasks.noop
    for _ in range(count):
        noop()


def put_figure(bench: Bench, tasks: HueyTasks) -> Figure:
    count = bench.sizes.put
    ours: list[Sample] = []
    theirs: list[Sample] = []
    base: list[float] = []
    for _ in range(bench.rounds):
        bench.fresh()
        ours.append(measured(bench, count, lambda: put_ours(bench, count)))
        bench.fresh()
        theirs.append(measured(bench, count, lambda: put_huey(tasks, count)))
        bench.fresh()
        base.append(baseline.lpush_each(bench.redis, count))
    return compared(
        "put",
        "put, one call per job, one process",
        "jobs/s",
        [s.rate for s in ours],
        base,
        "LPUSH, one round trip per job",
        None,
        extra={
            "huey_rounds": [s.rate for s in theirs],
            "per_job": [s.per_job() for s in ours],
            "huey_per_job": [s.per_job() for s in theirs],
        },
    )


# -- memory per waiting job -----------------------------------------------------------------------


def _grown_by(bench: Bench, count: int, put: Callable[[], object]) -> float:
    """Bytes of server memory per job that ``put`` leaves waiting, on an emptied database (what
    :func:`benchmarks.server_memory.growth` counts)."""
    bench.fresh()
    return server_memory.growth(bench.redis, put) / count


def _lpush_messages(bench: Bench, count: int) -> None:
    """What a queue needs at least: the baseline's messages (jid, klass and data) in a list."""
    pipe = bench.redis.pipeline(transaction=False)
    for index in range(count):
        pipe.lpush(baseline.SOURCE, baseline.message(index))
    pipe.execute()


def memory_figure(bench: Bench, tasks: HueyTasks) -> Figure:
    """Server memory per waiting job with the payload ``{"i": n}``: ours (one put each), a huey
    task called with ``n``, and an LPUSH of a JSON message holding the jid, klass and data."""
    count = bench.sizes.memory
    queue = bench.client.queues[PUT_QUEUE]
    ours: list[float] = []
    theirs: list[float] = []
    base: list[float] = []
    for _ in range(bench.rounds):
        ours.append(
            _grown_by(
                bench, count, lambda: [queue.put(baseline.KLASS, {"i": i}) for i in range(count)]
            )
        )
        theirs.append(_grown_by(bench, count, lambda: [tasks.noop(i) for i in range(count)]))
        base.append(_grown_by(bench, count, lambda: _lpush_messages(bench, count)))
    bench.fresh()
    return compared(
        "memory_waiting",
        f'memory per waiting job (data {{"i": n}}, {count:,} jobs)',
        "bytes",
        ours,
        base,
        "LPUSH of the message",
        None,
        better="lower",
        extra={"huey_rounds": theirs},
    )


# -- put-to-start latency --------------------------------------------------------------------------


def huey_put_to_start(bench: Bench, tasks: HueyTasks) -> float:
    """Milliseconds from the task call to the task function's first line in huey's consumer."""
    start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    result = tasks.stamp()
    reply = bench.redis.blpop([STAMPS_KEY], timeout=30)
    if reply is None:
        raise TimeoutError(f"huey task {result.id} did not start within 30 s")
    got, started = str(reply[1]).split()
    if got != result.id:
        raise RuntimeError(f"expected a stamp of huey task {result.id}, got one of {got}")
    return (int(started) - start) / 1e6


def _blocked_on(bench: Bench, command: str) -> int:
    return sum(1 for c in bench.redis.client_list() if c.get("cmd") == command)


@contextlib.contextmanager
def huey_consumer(bench: Bench) -> Iterator[subprocess.Popen[bytes]]:
    """huey's own consumer command on :data:`HUEY_APP`; yields once it waits in BRPOP."""
    command = [sys.executable, "-m", "huey.bin.huey_consumer", HUEY_APP, *HUEY_CONSUMER]
    with open(bench.workdir / "huey.log", "ab") as log:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=bench.child_env(), stdout=log, stderr=log
        )
    try:

        def waiting() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"huey's consumer exited ({process.returncode}); see huey.log")
            return _blocked_on(bench, "brpop") >= 1

        wait_until(waiting, START_TIMEOUT, "huey's consumer")
        yield process
    finally:
        stop_all([process])


def latency_figures(bench: Bench, tasks: HueyTasks) -> list[Figure]:
    count = bench.sizes.latency
    bench.fresh()  # before the consumers start: a flush would drop the workers' registration
    samples: dict[str, list[float]] = {"ours": [], "huey": [], "ping": []}
    measure: dict[str, Callable[[], float]] = {
        "ours": lambda: latency.put_to_start(bench),
        "huey": lambda: huey_put_to_start(bench, tasks),
        "ping": lambda: baseline.ping_rtt(bench.redis),
    }
    sides = list(measure)
    with worker_pool(bench, latency.QUEUE, 1), huey_consumer(bench):
        for index in range(WARMUP + count):
            shift = index % len(sides)  # no side always follows the same one
            for side in sides[shift:] + sides[:shift]:
                time.sleep(bench.latency_gap)
                value = measure[side]()
                if index >= WARMUP:
                    samples[side].append(value)
    summaries = {side: latency.summary(values) for side, values in samples.items()}
    extra: dict[str, Any] = {
        "put_to_start_ms": summaries["ours"],
        "huey_put_to_start_ms": summaries["huey"],
        "ping_ms": summaries["ping"],
        "samples": count,
        "gap_s": bench.latency_gap,
    }
    return [
        compared(
            f"latency_{name}",
            f"put-to-start latency, idle consumer, {name}",
            "ms",
            [summaries["ours"][name]],
            [summaries["ping"][name]],
            f"PING round trip, {name}",
            None,
            better="lower",
            extra={**extra, "huey_rounds": [summaries["huey"][name]]},
        )
        for name in ("p50", "p99")
    ]


# -- the table -------------------------------------------------------------------------------------


def huey_value(figure: Figure) -> float | None:
    return median(figure.extra.get("huey_rounds", []))


def _ratio(value: float | None, other: float | None) -> str:
    return f"{value / other:.2f}{TIMES}" if value is not None and other else "—"


def table(figures: list[Figure]) -> str:
    lines = [
        "| figure | ours | huey | baseline (same run) | ours ÷ baseline | huey ÷ baseline "
        "| ours ÷ huey |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        theirs = huey_value(f)
        lines.append(
            f"| {f.label} | {report.amount(f.value, f.unit)} | {report.amount(theirs, f.unit)} "
            f"| {report.amount(f.baseline, f.unit)} ({f.baseline_label}) "
            f"| {_ratio(f.value, f.baseline)} | {_ratio(theirs, f.baseline)} "
            f"| {_ratio(f.value, theirs)} |"
        )
    return "\n".join(lines)


def header(meta: dict[str, Any]) -> str:
    load = meta["load_average"]
    return (
        f"redis-flows and huey {meta['huey']['version']} side by side, {meta['date']}, "
        f"mode: {meta['mode_text']}\nserver: {meta['server']['name']} "
        f"{meta['server']['version']} on a unix socket, appendfsync "
        f"{meta['server']['appendfsync']}; load average {load['start']} at start, "
        f"{load.get('end', '?')} at end; git {meta['git']}\nput: {meta['sizes']['put']:,} jobs "
        f"a round, {meta['rounds']} rounds (medians); latency: {meta['sizes']['latency']:,} "
        f"samples each, {meta['latency_gap_s'] * 1000:g} ms pause before each"
    )


# -- the command -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--busy", action="store_true", help="keep every CPU busy with low-priority spinners"
    )
    parser.add_argument(
        "--samples", type=int, default=2000, help="latency samples of each side (default 2000)"
    )
    parser.add_argument("--puts", type=int, default=10_000, help="jobs a put round (10000)")
    parser.add_argument("--rounds", type=int, default=3, help="put rounds (default 3)")
    parser.add_argument(
        "--memory", type=int, default=10_000, help="jobs a memory round (default 10000)"
    )
    parser.add_argument(
        "--latency-gap", type=float, default=0.01, metavar="SECONDS", help="default 0.01"
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, metavar="PATH")
    args = parser.parse_args(argv)
    if min(args.samples, args.puts, args.rounds, args.memory) < 1:
        parser.error("--samples, --puts, --rounds and --memory must be at least 1")
    return args


def bench_for(args: argparse.Namespace) -> contextlib.AbstractContextManager[Bench]:
    sizes = Sizes().replace(put=args.puts, latency=args.samples, memory=args.memory)
    return fresh_bench(sizes, args.rounds, latency_gap=args.latency_gap)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not huey_installed():
        print(
            "huey is not installed: pip install huey (or pip install -e '.[peers]')",
            file=sys.stderr,
        )
        return MISSING
    with contextlib.ExitStack() as stack:
        if args.busy:
            stack.enter_context(spinners(os.cpu_count() or 1))
        bench = stack.enter_context(bench_for(args))
        meta = run.metadata(argparse.Namespace(busy=args.busy, smoke=False), bench)
        meta["command"] = " ".join(["python -m benchmarks.peers", *(sys.argv[1:])])
        meta["huey"] = {
            "version": importlib.metadata.version("huey"),
            "storage": "RedisHuey(blocking=True), the server's unix socket URL",
            "consumer": " ".join(["huey_consumer", HUEY_APP, *HUEY_CONSUMER]),
        }
        meta["latency_gap_s"] = bench.latency_gap
        tasks = huey_tasks(bench.url)
        print("[peers] put ...", file=sys.stderr, flush=True)
        figures = [put_figure(bench, tasks)]
        print("[peers] memory ...", file=sys.stderr, flush=True)
        figures.append(memory_figure(bench, tasks))
        print("[peers] latency ...", file=sys.stderr, flush=True)
        figures += latency_figures(bench, tasks)
        meta["load_average"]["end"] = round(os.getloadavg()[0], 2)
    print(header(meta) + "\n\n" + table(figures))
    for f in figures:  # huey's own rounds, next to ours, in the JSON
        f.extra["huey"] = huey_value(f)
    report.write_json(args.json, meta, figures)
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # huey names a task after its function's module: run the one huey's consumer imports, not
    # this copy as __main__, so both sides register the same names.
    from benchmarks import peers

    sys.exit(peers.main())
