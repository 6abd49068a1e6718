"""Flow files generated for the benchmark: independent steps, or a layered graph of steps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePath

from benchmarks.context import REPO_ROOT
from flows.expand.jobs import JobSpec, expand
from flows.flowfile.model import Flow
from flows.validation.validate import validate_text

NOOP = "benchmarks.tasks.noop"
ECHO = "benchmarks.tasks.echo"


def independent_flow(name: str, steps: int, queue: str) -> str:
    """``steps`` steps without needs, each a no-op job."""
    lines = [f"version: 1\nname: {name}\nqueue: {queue}\nsteps:"]
    lines += [f"  s{i}: {{job: {NOOP}, with: {{n: {i}}}}}" for i in range(steps)]
    return "\n".join(lines) + "\n"


def layered_flow(name: str, steps: int, queue: str, width: int = 10) -> str:
    """Layers of ``width`` steps; each step after the first layer needs two steps of the layer
    before and reads an output of one of them (so workers resolve upstream outputs)."""
    lines = [f"version: 1\nname: {name}\nqueue: {queue}\nsteps:"]
    for index in range(steps):
        layer, lane = divmod(index, width)
        if layer == 0:
            lines.append(f"  s{index}: {{job: {ECHO}, with: {{n: {index}}}}}")
            continue
        first = (layer - 1) * width + lane
        second = (layer - 1) * width + (lane + 1) % width
        needs = f"[s{first}, s{second}]" if second != first else f"[s{first}]"
        reads = "'${{ steps.s" + str(first) + ".outputs.n }}'"
        lines.append(
            f"  s{index}: {{job: {ECHO}, needs: {needs}, with: {{n: {index}, up: {reads}}}}}"
        )
    return "\n".join(lines) + "\n"


def validated(text: str) -> Flow:
    result = validate_text(text, file="bench.yaml", flow_dir=REPO_ROOT)
    if result.flow is None:
        raise ValueError("; ".join(f.format() for f in result.findings[:5]))
    return result.flow


def expanded(flow: Flow, run_id: str) -> list[JobSpec]:
    return expand(flow, run_id=run_id, logical_time=datetime.now(UTC), flow_dir=PurePath(REPO_ROOT))
