"""Two versions of the engine in one server, the same calls alternating between them.

    python -m benchmarks.engine_ab /path/to/another/checkout [--puts 2000] [--steps 10000]

On a shared machine two benchmark runs minutes apart see different loads; here both versions'
Functions libraries (named by the engine's hash, so they coexist) are loaded into one fresh
server and every call alternates between them, so both see the same machine. Prints, for the
other checkout ("before") and this one ("after"): the server time of a put (SLOWLOG, the median
call), of a put + ``pop.lean`` + ``complete``, of a ``flow.submit`` of ``--steps`` independent
steps (INFO commandstats), and the server memory per waiting job and per submitted job.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from redis import Redis

from benchmarks import flowgen, server_memory
from benchmarks.context import private_server
from flows.runs.build import assemble_run
from scheduler.engine.connections import connect

KLASS = "benchmarks.tasks.noop"
_LIBRARY = (
    "import json; from scheduler.engine import scripts; "
    "print(json.dumps([scripts.functions_library(), scripts.function_name()]))"
)


def library_of(checkout: Path | None) -> tuple[str, str]:
    """(the Functions library's source, its write function's name) of a checkout's engine."""
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY],
        env=env,
        cwd=checkout or Path.cwd(),
        capture_output=True,
        text=True,
        check=True,
    )
    source, name = json.loads(done.stdout)
    return str(source), str(name)


def _fcall(r: Redis, function: str, command: str, *args: object) -> object:
    return r.execute_command("FCALL", function, 0, command, "", *args)  # type: ignore[no-untyped-call]


def _put(r: Redis, function: str, queue: str, index: int) -> str:
    jid = uuid.uuid4().hex
    _fcall(r, function, "put", "w", queue, jid, KLASS, json.dumps({"i": index}), 0)
    return jid


def _puts(r: Redis, function: str, count: int) -> None:
    for index in range(count):
        _put(r, function, "q", index)


def _slowlog_usec(r: Redis, work: Callable[[], object]) -> int:
    """Server microseconds of the engine calls ``work`` makes (SLOWLOG records every call)."""
    r.slowlog_reset()
    work()
    return sum(int(e["duration"]) for e in r.slowlog_get(100) if "FCALL" in str(e["command"]))


def alternating(
    r: Redis, functions: dict[str, str], count: int, call: Callable[[str, str, int], object]
) -> dict[str, float]:
    """The median server time of ``call(version, function, index)``, versions alternating."""
    samples: dict[str, list[int]] = {version: [] for version in functions}
    order = list(functions)
    for index in range(count):
        for version in order if index % 2 else order[::-1]:
            one = functools.partial(call, version, functions[version], index)
            samples[version].append(_slowlog_usec(r, one))
    return {version: statistics.median(values) for version, values in samples.items()}


def _lifecycle(r: Redis, version: str, function: str, index: int) -> None:
    queue = f"life-{version}"
    jid = _put(r, function, queue, index)
    _fcall(r, function, "pop.lean", queue, "w", 1)
    _fcall(r, function, "complete", jid, "w", queue, "{}")


def _grown(r: Redis, count: int, work: Callable[[], object]) -> float:
    """Bytes of server memory per job that ``work`` adds, on an emptied database."""
    r.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
    return server_memory.growth(r, work) / count


def _submit(r: Redis, function: str, steps: int, run_id: str) -> float:
    flow = flowgen.validated(flowgen.independent_flow("ab-submit", steps, "ab-submit"))
    request = assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={}).request
    r.config_resetstat()
    _fcall(r, function, "flow.submit", request.run_id, request.run_json(), request.jobs_json())
    return int(r.info("commandstats")["cmdstat_fcall"]["usec"]) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_ab", description=__doc__)
    parser.add_argument("before", type=Path, help="another checkout of the repository")
    parser.add_argument("--puts", type=int, default=2000, help="alternating calls (2000)")
    parser.add_argument("--steps", type=int, default=10_000, help="steps submitted (10000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    args = parser.parse_args(argv)
    libraries = {"before": library_of(args.before.resolve()), "after": library_of(None)}
    functions = {version: name for version, (_, name) in libraries.items()}
    print(f"load average {os.getloadavg()[0]:.2f}; functions {functions}")
    with private_server() as (server, _):
        r = connect(server.url)
        for source, _ in libraries.values():
            r.execute_command("FUNCTION", "LOAD", "REPLACE", source)  # type: ignore[no-untyped-call]
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 1000)
        for round_ in range(args.rounds):
            r.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]
            puts = alternating(r, functions, args.puts, lambda v, f, i: _put(r, f, f"q-{v}", i))
            lives = alternating(
                r, functions, args.puts // 4, lambda v, f, i: _lifecycle(r, v, f, i)
            )
            print(f"round {round_ + 1}: put (µs) {puts}; put + pop.lean + complete (µs) {lives}")
        r.config_set("slowlog-log-slower-than", -1)  # its entries would count as memory
        r.slowlog_reset()
        waiting: dict[str, list[float]] = {version: [] for version in functions}
        per_job: dict[str, list[float]] = {version: [] for version in functions}
        submitted: dict[str, list[float]] = {version: [] for version in functions}
        order = list(functions)
        for round_ in range(args.rounds):
            for version in order if round_ % 2 else order[::-1]:
                function = functions[version]
                puts_of = functools.partial(_puts, r, function, args.puts)
                waiting[version].append(_grown(r, args.puts, puts_of))

                def submit(
                    function: str = function, into: list[float] = submitted[version]
                ) -> None:
                    into.append(_submit(r, function, args.steps, f"ab-{time.time()}"))

                per_job[version].append(_grown(r, args.steps, submit))
        for version in functions:
            print(
                f"{version}: memory per waiting job {statistics.median(waiting[version]):.0f} "
                f"bytes; flow.submit of {args.steps:,} steps "
                f"{statistics.median(submitted[version]):.3f} s of server time, "
                f"{statistics.median(per_job[version]):.0f} bytes a job (medians of "
                f"{args.rounds}: {[round(x) for x in per_job[version]]})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
