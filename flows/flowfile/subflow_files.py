"""Where a sub-flow step's file is, and the queues its child runs' jobs may use.

Reads files (no engine): :func:`child_queues` lets ``flows run`` and ``flows retry`` work a
parent run's children with their local worker (the run record's ``queues``).
"""

from __future__ import annotations

from pathlib import Path

from flows.flowfile.model import Flow, FlowSettings
from flows.flowfile.subflow_job import MAX_DEPTH
from flows.flowfile.yaml_reader import load_file


def child_file(flow_dir: Path, written: str) -> Path:
    """The file ``flow: <written>`` names, from the folder of the file naming it."""
    return flow_dir / written


def flow_queues(flow: Flow) -> set[str]:
    """The queues of a flow's own jobs (steps and hooks)."""
    settings = FlowSettings(flow)
    actions = [*flow.steps.values(), *(hook for _, hook in flow.hooks.defined())]
    return {settings.of(action).queue for action in actions}


def child_queues(flow: Flow, flow_dir: Path, depth: int = 1) -> set[str]:
    """The queues of every child run ``flow``'s sub-flow steps start, theirs included (files
    that do not load as flows are left out: validation reports them)."""
    queues: set[str] = set()
    if depth > MAX_DEPTH:
        return queues
    for step in flow.steps.values():
        if step.flow is None:
            continue
        path = child_file(flow_dir, step.flow)
        try:
            data = load_file(path).data
            child = Flow.model_validate(data)
        except Exception:  # any file that is no flow: validation says why
            continue
        queues |= flow_queues(child) | child_queues(child, path.resolve().parent, depth + 1)
    return queues


__all__ = ["child_file", "child_queues", "flow_queues"]
