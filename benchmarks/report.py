"""The benchmark's output: a Markdown table (for docs/pages/benchmarks.md) and a JSON file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.figures import TIMES, Figure

_FORMATS = {"jobs/s": "{:,.0f}", "ms": "{:.3f}", "µs": "{:.1f}", "bytes": "{:,.0f}", "s": "{:.2f}"}


def amount(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return _FORMATS.get(unit, "{:g}").format(value) + f" {unit}"


def _verdict(figure: Figure) -> str:
    met = figure.met
    return "" if met is None else ("ok" if met else "**MISS**")


def row(figure: Figure) -> str:
    value = amount(figure.value, figure.unit) if figure.value is not None else figure.note or "n/a"
    baseline = (
        f"{amount(figure.baseline, figure.unit)} ({figure.baseline_label})"
        if figure.baseline is not None
        else "—"
    )
    ratio = f"{figure.ratio:.2f}{TIMES}" if figure.ratio is not None else "—"
    target = figure.target.describe(figure.unit) if figure.target is not None else "—"
    return f"| {figure.label} | {value} | {baseline} | {ratio} | {target} | {_verdict(figure)} |"


def table(figures: Sequence[Figure]) -> str:
    lines = [
        "| figure | value | baseline (same run) | ratio | target | |",
        "|---|---|---|---|---|---|",
        *(row(f) for f in figures),
    ]
    return "\n".join(lines)


def notes(figures: Sequence[Figure]) -> list[str]:
    return [f"- {f.label}: {f.note}" for f in figures if f.note and f.value is not None]


def header(meta: dict[str, Any]) -> str:
    server = meta["server"]
    client = meta["client"]
    load = meta["load_average"]
    return "\n".join(
        [
            f"redis-flows benchmarks, {meta['date']}, mode: {meta['mode_text']}",
            f"server: {server['name']} {server['version']} on a unix socket, appendfsync "
            f"{server['appendfsync']}; engine calls: {meta['engine']['calls']}",
            f"client: redis-py {client['redis_py']}, hiredis {client['hiredis']}, Python "
            f"{client['python']}; {meta['machine']['cpus']} CPUs (load average "
            f"{load['start']} at start, {load.get('end', '?')} at end); git {meta['git']}",
            f"rounds: {meta['rounds']} (medians; baseline and engine alternate); worker log level "
            f"{meta['worker_log_level']}",
        ]
    )


def render(meta: dict[str, Any], figures: Sequence[Figure]) -> str:
    parts = [header(meta), "", table(figures)]
    extra = notes(figures)
    if extra:
        parts += ["", *extra]
    return "\n".join(parts)


def write_json(path: Path, meta: dict[str, Any], figures: Sequence[Figure]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {**meta, "figures": [f.to_json() for f in figures]}
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
