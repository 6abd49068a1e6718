"""A 10,000-step flow validates and expands in a few seconds.

Run as a script for the timings: ``.venv/bin/python tests/unit/test_flows_scale.py [steps]``.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import PurePath

from flows.expand.jobs import expand
from flows.validation.validate import validate_text

STEPS = 10_000


def generated_flow(steps: int) -> str:
    """Layers of ten parallel steps, each needing two steps of the layer before and reading an
    output of one; every tenth layer a shell step; a foreach of three at the end."""
    lines = [
        "version: 1",
        "name: scale",
        "params:",
        "  day: {type: date, default: '${{ run.logical_date }}'}",
        "  regions: {type: array, default: [de, at, ch]}",
        "defaults: {timeout: 10m, retry: {attempts: 3}}",
        "steps:",
    ]
    for index in range(steps - 1):
        layer, lane = divmod(index, 10)
        lines.append(f"  s{index}:")
        if layer % 10 == 9:
            lines.append("    run: ./work.sh --day ${{ params.day }} --n " + str(index))
        else:
            lines.append("    job: tasks.work")
        if layer:
            first, second = (layer - 1) * 10 + lane, (layer - 1) * 10 + (lane + 1) % 10
            lines.append(f"    needs: [s{first}, s{second}]")
            if layer % 10 != 9:
                lines.append(f"    with: {{n: {index}, up: '${{{{ steps.s{first}.outputs.x }}}}'}}")
        elif layer % 10 != 9:
            lines.append(f"    with: {{n: {index}, day: '${{{{ params.day }}}}'}}")
    last = steps - 2
    lines += [
        "  fan:",
        "    job: tasks.load",
        f"    needs: [s{last}]",
        "    foreach: {items: '${{ params.regions }}', as: region}",
        "    with: {region: '${{ region }}'}",
    ]
    return "\n".join(lines) + "\n"


def timed(steps: int) -> tuple[float, float, int]:
    """CPU seconds to validate, CPU seconds to expand (this process's: other processes' load
    does not stretch them as it stretches wall time), number of jobs."""
    text = generated_flow(steps)
    start = time.process_time()
    result = validate_text(text, file="scale.yaml", now=0.0)
    validated = time.process_time()
    assert result.flow is not None, [f.format() for f in result.findings[:5]]
    puts = expand(
        result.flow,
        run_id="scale@1",
        logical_time=datetime(2025, 1, 31, tzinfo=UTC),
        flow_dir=PurePath("/srv"),
    )
    expanded = time.process_time()
    return validated - start, expanded - validated, len(puts)


def test_ten_thousand_steps_validate_and_expand_quickly() -> None:
    validate_seconds, expand_seconds, jobs = timed(STEPS)
    assert jobs == STEPS - 1 + 3
    assert validate_seconds + expand_seconds < 30  # a loose bound for slow CI machines, in CPU


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else STEPS
    size = len(generated_flow(count))
    validate_seconds, expand_seconds, jobs = timed(count)
    print(
        f"{count} steps ({size / 1e6:.1f} MB of YAML, {jobs} jobs): "
        f"validate {validate_seconds:.2f}s, expand {expand_seconds:.2f}s, "
        f"total {validate_seconds + expand_seconds:.2f}s of CPU"
    )
