"""What a benchmark reports: :class:`Figure` (a value, its baseline, their ratio) and targets."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Better = Literal["higher", "lower"]
#: ``ratio-min``: value/baseline ≥ limit; ``ratio-max``: ≤ limit; ``max``: value ≤ limit;
#: ``below``: value < limit.
TargetKind = Literal["ratio-min", "ratio-max", "max", "below"]
TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    limit: float

    def describe(self, unit: str = "") -> str:
        symbol = {"ratio-min": "≥", "ratio-max": "≤", "max": "≤", "below": "<"}[self.kind]
        suffix = TIMES if self.kind.startswith("ratio") else f" {unit}".rstrip()
        return f"{symbol} {self.limit:g}{suffix}"

    def met(self, value: float | None, ratio: float | None) -> bool | None:
        """True or False, or None when the figure was not measured."""
        subject = ratio if self.kind.startswith("ratio") else value
        if subject is None:
            return None
        if self.kind == "ratio-min":
            return subject >= self.limit
        if self.kind == "below":
            return subject < self.limit
        return subject <= self.limit


@dataclass
class Figure:
    """One row of the table.

    ``value`` is None when the figure could not be measured (``note`` says why). ``rounds`` and
    ``baseline_rounds`` hold each round's measurement; ``value``/``baseline`` are their medians.
    ``extra`` carries what explains the figure (server time, CPU, calls per job, ...).
    """

    key: str
    label: str
    unit: str
    value: float | None
    better: Better = "higher"
    baseline: float | None = None
    baseline_label: str = ""
    target: Target | None = None
    rounds: list[float] = field(default_factory=list)
    baseline_rounds: list[float] = field(default_factory=list)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value, self.ratio)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["target"] = None if self.target is None else self.target.describe(self.unit)
        out["target_rule"] = None if self.target is None else asdict(self.target)
        out["ratio"] = self.ratio
        out["met"] = self.met
        return out


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def compared(
    key: str,
    label: str,
    unit: str,
    rounds: Sequence[float],
    baseline_rounds: Sequence[float],
    baseline_label: str,
    target: Target | None,
    *,
    better: Better = "higher",
    extra: dict[str, Any] | None = None,
) -> Figure:
    """A figure measured against a baseline over several rounds (medians of each side)."""
    return Figure(
        key=key,
        label=label,
        unit=unit,
        value=median(rounds),
        better=better,
        baseline=median(baseline_rounds),
        baseline_label=baseline_label,
        target=target,
        rounds=list(rounds),
        baseline_rounds=list(baseline_rounds),
        extra=extra or {},
    )


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]
