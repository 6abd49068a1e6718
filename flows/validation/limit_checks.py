"""Validation findings for flows that would exceed the engine's size limits.

The limits themselves live in :mod:`scheduler.engine.limits` (the same numbers the engine enforces).
What a file says statically is checked here, at ``flows validate`` time: the tags a job would
carry and the size of a Python step's literal ``with`` data. What only expansion knows (the
rendered data of each job, the number of jobs, the size of the whole submission) is checked by
:func:`flows.expand.run_specs.check_limits` before the round trip.
"""

from __future__ import annotations

import json
from typing import Final

from flows.flowfile.findings import FindingSink
from flows.flowfile.model import Action, Flow, job_tags
from scheduler.engine import limits
from scheduler.engine.limits import MAX_TAGS

# As json.dumps(..., separators=(",", ":"), default=str), made once: this runs for every step.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def check_limits(flow: Flow, sink: FindingSink) -> None:
    """Report steps and hooks whose jobs the engine would refuse as too large."""
    # A label and a path are made for an action with a finding only: most have none.
    actions: list[tuple[str, str, Action]] = [
        ("step", sid, step) for sid, step in flow.steps.items()
    ]
    actions += [("hook", name, hook) for name, hook in flow.hooks.defined()]
    too_large = _too_large([action for _, _, action in actions])
    for index, (kind, name, action) in enumerate(actions):
        # No more distinct tags than tags given: most are counted without making the tags.
        tags = job_tags(flow, action) if len(flow.tags) + len(action.tags) > MAX_TAGS else ()
        if len(tags) > MAX_TAGS:
            sink.error(
                (f"{kind}s", name, "tags"),
                "limits",
                f"{kind} '{name}': its jobs would carry {len(tags)} tags (the flow's and its "
                f"own), more than the limit of {MAX_TAGS}",
                "use fewer tags",
            )
        if index in too_large:
            sink.error(
                (f"{kind}s", name, "with"),
                "limits",
                f"{kind} '{name}': its data is {too_large[index]} bytes of JSON, more than the "
                f"limit of {limits.MAX_PAYLOAD_BYTES} bytes per job",
                "pass a reference (a path or URL) to large data instead of the data itself",
            )


_BATCH: Final = 100


def _too_large(actions: list[Action]) -> dict[int, int]:
    """The JSON size of each action's ``with`` that is more than a job may carry, by index.

    Measured a hundred at a time (a list of them is never shorter than any one of them), and
    one by one only in a batch over the limit: one encoder call per step was most of the cost
    of this check on a large flow.
    """
    found: dict[int, int] = {}
    for start in range(0, len(actions), _BATCH):
        batch = [action.with_ for action in actions[start : start + _BATCH]]
        if _json_size(batch) <= limits.MAX_PAYLOAD_BYTES:
            continue
        for index, data in enumerate(batch, start):
            size = _json_size(data)
            if size > limits.MAX_PAYLOAD_BYTES:
                found[index] = size
    return found


def _json_size(value: object) -> int:
    return len(_COMPACT_JSON.encode(value).encode())


__all__ = ["check_limits"]
