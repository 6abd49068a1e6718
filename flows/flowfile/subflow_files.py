"""Where a sub-flow step's file is, and the queues and jobs its child runs may have.

Reads files (no engine): :func:`child_queues` lets ``flows run`` and ``flows retry`` work a
parent run's children with their local worker (the run record's ``queues``); :func:`child_jobs`
lets a flow test stub, signal and expect a child run's steps by their labels.
"""

from __future__ import annotations

from pathlib import Path

from flows.flowfile.model import Action, Flow, FlowSettings
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


def child_flows(flow: Flow, flow_dir: Path) -> dict[str, tuple[Flow, Path]]:
    """Each sub-flow step's child flow and the folder its file is in (files that do not load as
    flows are left out: validation reports them)."""
    children: dict[str, tuple[Flow, Path]] = {}
    for step_id, step in flow.steps.items():
        if step.flow is None:
            continue
        path = child_file(flow_dir, step.flow)
        try:
            data = load_file(path).data
            child = Flow.model_validate(data)
        except Exception:  # any file that is no flow: validation says why
            continue
        children[step_id] = (child, path.resolve().parent)
    return children


def child_queues(flow: Flow, flow_dir: Path, depth: int = 1) -> set[str]:
    """The queues of every child run ``flow``'s sub-flow steps start, theirs included."""
    queues: set[str] = set()
    if depth > MAX_DEPTH:
        return queues
    for child, child_dir in child_flows(flow, flow_dir).values():
        queues |= flow_queues(child) | child_queues(child, child_dir, depth + 1)
    return queues


def child_jobs(flow: Flow, flow_dir: Path, depth: int = 1) -> dict[str, Action]:
    """The jobs of every child run ``flow``'s sub-flow steps start (steps and hooks,
    grandchildren's included), by the label ``flows logs`` gives each in the parent's run
    (``report/count``, ``report/notify/send``): what a flow test may stub, signal and expect
    beside the flow's own steps."""
    jobs: dict[str, Action] = {}
    if depth > MAX_DEPTH:
        return jobs
    for step_id, (child, child_dir) in child_flows(flow, flow_dir).items():
        own: dict[str, Action] = {**child.steps, **dict(child.hooks.defined())}
        deeper = child_jobs(child, child_dir, depth + 1)
        jobs |= {f"{step_id}/{name}": job for name, job in (own | deeper).items()}
    return jobs


__all__ = [
    "child_file",
    "child_flows",
    "child_jobs",
    "child_queues",
    "flow_queues",
]
