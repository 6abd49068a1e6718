"""Graph checks: needs that name no step, a step needing itself, cycles, needs listed twice.

Step ids that collide with generated job ids (``load[0]``, a hook's name) are refused by the
model's step-id type (:func:`flows.flowfile.model._step_id`), since the key itself is the problem.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from flows.flowfile.dag import cycles
from flows.flowfile.findings import FindingSink, did_you_mean, names_hint


def check_graph(
    needs: Mapping[str, Sequence[str]], step_ids: Collection[str], sink: FindingSink
) -> None:
    """Report problems in ``needs`` (step id → its needs) against every step id of the file."""
    known = frozenset(step_ids)
    for step_id, wanted in needs.items():
        seen: set[str] = set()
        for index, need in enumerate(wanted):
            if need in known and need not in seen and need != step_id:
                seen.add(need)
                continue  # the usual need, found without making its path
            path = ("steps", step_id, "needs", index)
            if need == step_id:
                sink.error(
                    path,
                    "self-need",
                    f"step '{step_id}' needs itself",
                    f"remove '{step_id}' from its needs",
                )
            elif need not in known:
                hint = did_you_mean(need, step_ids) or names_hint("steps", sorted(step_ids))
                sink.error(
                    path,
                    "unknown-need",
                    f"step '{step_id}' needs '{need}', which is not a step",
                    hint,
                )
            elif need in seen:
                sink.warning(
                    path, "repeated-need", f"step '{step_id}' lists '{need}' twice in needs"
                )
            seen.add(need)
    for cycle in cycles(needs):
        first, second = cycle[0], cycle[1]
        index = list(needs[first]).index(second)
        sink.error(
            ("steps", first, "needs", index),
            "cycle",
            "the needs form a cycle: " + " -> ".join(cycle),
            "'a -> b' reads 'a needs b'; remove one of these needs",
        )
