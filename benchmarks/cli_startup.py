"""How long a ``flows`` command takes as a whole process: ``--help``, ``runs``, ``status``.

Each command runs as a user runs it (a new interpreter importing ``flows.cli`` and calling its
``main``, as the ``flows`` script does), against the benchmark's server holding one small run,
next to the bare interpreter's start (``python -c pass``) in the same rounds. With
``$BENCH_CLI_BEFORE`` naming another checkout of the repository, its commands run too,
alternating with these in every round, so one run compares two versions on one machine.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import flowgen
from benchmarks.context import Bench
from benchmarks.figures import Figure, Target

ENV_BEFORE = "BENCH_CLI_BEFORE"
COMMANDS: dict[str, tuple[list[str], float]] = {
    "help": (["--help"], 0.15),
    "runs": (["runs"], 0.30),
    "status": (["status"], 0.30),
}
"""Each figure's arguments and its target (seconds, whole process)."""
ENTRY = "import sys; from flows.cli import main; sys.argv[0] = 'flows'; main()"
QUEUE = "bench-cli"


def _elapsed(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """The command's wall time and CPU time (user + system: steadier on a loaded machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd: not a checkout, whose flows package `-c` would import before PYTHONPATH's
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False, timeout=120)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _env(bench: Bench, source: str | None) -> dict[str, str]:
    env = bench.child_env()
    if source is not None:  # another checkout first on the path: its flows and scheduler
        env["PYTHONPATH"] = os.pathsep.join([source, env["PYTHONPATH"]])
    env["COLUMNS"] = "100"
    # As installed: compiled modules are cached (and read), not compiled at every start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _one_run(bench: Bench) -> None:
    """One run of a 10-step flow in the database, submitted (not worked) as `flows run` does."""
    from datetime import UTC, datetime

    from flows.runs.build import assemble_run
    from flows.runs.submit import submit

    flow = flowgen.validated(flowgen.layered_flow("bench-cli", 10, QUEUE, width=2))
    run_id = f"bench-cli@{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    submit(bench.client, assemble_run(run_id, flow.name, flowgen.expanded(flow, run_id), params={}))


def cli_figures(bench: Bench) -> list[Figure]:
    bench.fresh()
    _one_run(bench)
    variants = {"after": _env(bench, None)}
    before = os.environ.get(ENV_BEFORE)
    if before:
        variants["before"] = _env(bench, before)
    for env in variants.values():  # once first: write the compiled modules
        for args, _ in COMMANDS.values():
            _elapsed([sys.executable, "-c", ENTRY, *args], env, bench.workdir)
    samples_per_round = bench.sizes.cli
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    bare: list[float] = []
    for _ in range(bench.rounds):
        for _ in range(samples_per_round):
            bare.append(
                _elapsed([sys.executable, "-c", "pass"], variants["after"], bench.workdir)[0]
            )
            for name, (args, _) in COMMANDS.items():
                for variant, env in variants.items():
                    argv = [sys.executable, "-c", ENTRY, *args]
                    samples.setdefault((variant, name), []).append(
                        _elapsed(argv, env, bench.workdir)
                    )
    figures = []
    for name, (args, limit) in COMMANDS.items():
        after = [wall for wall, _ in samples[("after", name)]]
        rounds = [
            statistics.median(after[i : i + samples_per_round])
            for i in range(0, len(after), samples_per_round)
        ]
        cpu = statistics.median(c for _, c in samples[("after", name)])
        extra: dict[str, object] = {"samples": after, "cpu_s": cpu}
        note = f"whole process, median of {samples_per_round}; CPU {cpu:.3f} s"
        if before:
            earlier = samples[("before", name)]
            wall_before = statistics.median(w for w, _ in earlier)
            cpu_before = statistics.median(c for _, c in earlier)
            extra.update(before=wall_before, before_cpu_s=cpu_before, before_source=before)
            extra["before_samples"] = [w for w, _ in earlier]
            note += f"; before ({before}): {wall_before:.3f} s, CPU {cpu_before:.3f} s"
        figures.append(
            Figure(
                key=f"cli_{name}_s",
                label=f"`flows {' '.join(args)}` start to exit",
                unit="s",
                value=statistics.median(rounds),
                better="lower",
                baseline=statistics.median(bare),
                baseline_label="`python -c pass`",
                target=Target("max", limit),
                rounds=rounds,
                note=note,
                extra=extra,
            )
        )
    return figures
