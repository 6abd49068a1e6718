"""What ``flows validate`` says of a shell step's or hook's ``cwd:`` that names no folder.

A run fails such a step when it starts (``bad-cwd``, :mod:`flows.runtime.tasks`). A warning,
not an error: an earlier step may make the folder, or it may exist only where the workers run.
A templated ``cwd`` is known only when a run is built, and is not checked. Reads the file
system; runs nothing.
"""

from __future__ import annotations

from pathlib import Path

from flows.flowfile.findings import FindingSink
from flows.flowfile.job_data import shell_cwd
from flows.flowfile.model import Action, Flow
from flows.flowfile.templates import OPEN


def check_cwds(flow: Flow, file: str, flow_dir: Path, sink: FindingSink) -> None:
    """A warning at each literal ``cwd`` of ``flow``'s steps and hooks that is not a folder."""
    actions: list[tuple[str, tuple[str, str], Action]] = [
        *((f"step '{step_id}'", ("steps", step_id), step) for step_id, step in flow.steps.items()),
        *((f"hook '{name}'", ("hooks", name), hook) for name, hook in flow.hooks.defined()),
    ]
    for label, place, action in actions:
        cwd = action.cwd
        if cwd is None or OPEN in cwd or "\0" in cwd:  # a NUL is an error of its own
            continue
        path = shell_cwd(flow_dir, cwd)
        if path.is_dir():
            continue
        problem = "is not a folder" if path.exists() else "not found"
        sink.warning(
            (*place, "cwd"),
            "cwd-not-found",
            f"{label}: cwd '{cwd}' {problem} ({path.absolute()}): a run fails it when it starts"
            " unless an earlier step makes it",
            f"the path is relative to the folder of {Path(file).name}",
        )
