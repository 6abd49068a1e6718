"""The server's instructions for one engine call, counted by valgrind's ``callgrind``.

On a shared machine wall and CPU times of the same code move by a third between runs; the
instructions the server runs for one call do not. The server (the embedded server's binary and
settings, append-only file on) runs under ``callgrind`` with counting off; the call is prepared
and the engine loaded by a smaller call first, and counting is on around the one call alone::

    python -m benchmarks.engine_instructions submit --size 10000   # flowgen's layered flow
    python -m benchmarks.engine_instructions fanout --size 10000   # a producer's complete
    python -m benchmarks.engine_instructions put --size 2000       # lone puts, one at a time

``submit``: ``flow.submit`` of :func:`benchmarks.flowgen.layered_flow`'s run of ``size`` steps;
``fanout``: the ``complete`` of the fan-out benchmark's producer (``benchmarks/fanoutbench.py``)
whose output lists ``size`` items; ``put``: ``size`` puts of ``{}`` into one queue, each waiting
for its reply (the peers benchmark's put), after 200 to warm the queue. Each checkout in turn
(``PYTHONPATH=<checkout>``) for an A/B.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from benchmarks import flowgen
from benchmarks.baseline import KLASS
from benchmarks.fanoutbench import FANOUT_QUEUE, FLOW, WORKER
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from scheduler.embedded import HASH_LISTPACK_VALUE, find_server_binary
from scheduler.engine.client import Client

FLOW_QUEUE = "bench-flow"
PUT_QUEUE = "bench-put"
#: Commands whose calls the report counts (``INFO commandstats`` after the call).
COMMANDS = ("hset", "sadd", "publish", "zadd", "rpush", "hmget", "incr")


@contextmanager
def counted_server() -> Iterator[tuple[Client, Callable[[str], None], Path]]:
    """A server under ``callgrind`` (counting off), a client of it without a read timeout (the
    call runs some fifty times slower), what tells its ``callgrind`` (``callgrind_control``'s
    options: ``-i on``, ``-i off``, ``-d``), and the file it writes."""
    folder = Path(tempfile.mkdtemp(prefix="bench-cg-"))
    socket, out = folder / "s", folder / "callgrind.out"
    server = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            str(find_server_binary()),
            *("--port", "0", "--unixsocket", str(socket), "--dir", str(folder)),
            *("--appendonly", "yes", "--appendfsync", "everysec", "--save", ""),
            *("--hash-max-listpack-value", str(HASH_LISTPACK_VALUE)),
            *("--latency-tracking", "no", "--slowlog-log-slower-than", "-1", "--hz", "1"),
            *("--busy-reply-threshold", "3600000"),
            *("--commandlog-request-larger-than", str(64 * 1024 * 1024)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def control(option: str) -> None:
        # This server's alone: others may run under callgrind on the same machine.
        subprocess.run(
            ["callgrind_control", *option.split(), str(server.pid)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    try:
        deadline = time.monotonic() + 120
        while not socket.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server under valgrind did not start")
            time.sleep(0.2)
        # Told so: redis-py's Redis() reads with a 5 s timeout by default, after which the call
        # is sent again (a second flow.submit of the same run, counted with the first).
        connection = redis.Redis(
            unix_socket_path=str(socket), decode_responses=True, socket_timeout=None
        )
        with Client(redis=connection) as client:
            yield client, control, out
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def instructions(out: Path) -> int:
    """The instructions counted so far (``callgrind_control -d`` has dumped them)."""
    total = 0
    for part in out.parent.glob(out.name + "*"):
        for line in part.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total


def submit_call(client: Client, size: int) -> Callable[[], object]:
    """``flow.submit`` of a layered flow of ``size`` steps, its JSON made beforehand."""
    warm = flowgen.validated(flowgen.layered_flow("bench-flow", 20, FLOW_QUEUE))
    submit(client, assemble_run("warm", warm.name, flowgen.expanded(warm, "warm"), params={}))
    flow = flowgen.validated(flowgen.layered_flow("bench-flow", size, FLOW_QUEUE))
    built = assemble_run("big", flow.name, flowgen.expanded(flow, "big"), params={})
    request = built.request
    args = (request.run_id, request.run_json(), request.jobs_json())
    return lambda: client.engine.call("flow.submit", *args)


def fanout_call(client: Client, size: int) -> Callable[[], object]:
    """The ``complete`` of a popped producer whose output lists ``size`` items."""
    flow = flowgen.validated(FLOW.format(queue=FANOUT_QUEUE))
    for run_id in ("warm", "big"):
        submit(client, assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={}))
        if f"{run_id}:list" not in client.engine.call("pop", FANOUT_QUEUE, WORKER, 1):
            raise RuntimeError(f"fan-out: expected to pop {run_id}:list")
    one = json.dumps({"files": ["a.csv"]})
    client.engine.call("complete", "warm:list", WORKER, FANOUT_QUEUE, "", "result", one)
    result = json.dumps({"files": [f"file-{i:05d}.csv" for i in range(size)]})
    return lambda: client.engine.call(
        "complete", "big:list", WORKER, FANOUT_QUEUE, "", "result", result
    )


def put_calls(client: Client, size: int) -> Callable[[], object]:
    """``size`` lone puts of ``{}``, after 200 of them."""
    queue = client.queues[PUT_QUEUE]
    for _ in range(200):
        queue.put(KLASS, {})
    return lambda: [queue.put(KLASS, {}) for _ in range(size)]


CALLS = {"submit": submit_call, "fanout": fanout_call, "put": put_calls}


def sent_for(kind: str, size: int) -> int:
    """Engine calls the count must hold: one, but ``put``'s one per put."""
    return size if kind == "put" else 1


def measure(kind: str, size: int) -> dict[str, int]:
    """The instructions of the one call, and how often each of :data:`COMMANDS` ran in it."""
    with counted_server() as (client, control, out):
        call = CALLS[kind](client, size)
        client.redis.config_resetstat()
        control("-i on")
        call()
        control("-i off")
        stats = client.redis.info("commandstats")
        control("-d")
        sent = int(stats.get("cmdstat_fcall", {}).get("calls", 0)) + int(
            stats.get("cmdstat_evalsha", {}).get("calls", 0)
        )
        expected = sent_for(kind, size)
        if sent != expected:
            raise RuntimeError(f"{kind}: the engine was called {sent} times, not {expected}")
        time.sleep(1)  # the dump is written by the server's next moment under valgrind
        counts = {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in COMMANDS}
        return {"instructions": instructions(out), **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(CALLS))
    parser.add_argument("--size", type=int, default=10000, help="steps, items or puts (10000)")
    options = parser.parse_args()
    figures = measure(options.kind, options.size)
    total = figures.pop("instructions")
    per = total // options.size
    commands = ", ".join(f"{name} {count}" for name, count in figures.items() if count)
    print(f"{options.kind} of {options.size:,}: {total:,} instructions ({per:,} each); {commands}")


if __name__ == "__main__":
    main()
