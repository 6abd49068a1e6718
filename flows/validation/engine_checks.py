"""Engine checks: settings the engine would accept but that cannot work, and, on request,
whether every ``job`` imports (``flows validate --check-imports``; it runs the modules' code).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

from flows.flowfile.durations import format_duration
from flows.flowfile.findings import DataPath, FindingSink, did_you_mean
from flows.flowfile.model import Action, Flow, FlowSettings


def _actions(flow: Flow) -> Iterator[tuple[str, DataPath, Action]]:
    """Every step and hook: what to call it in a message, its data path, itself."""
    for step_id, step in flow.steps.items():
        yield f"step '{step_id}'", ("steps", step_id), step
    for name, hook in flow.hooks.defined():
        yield f"hook '{name}'", ("hooks", name), hook


def check_heartbeats(flow: Flow, sink: FindingSink) -> None:
    """A job's heartbeat (its lock time) must be shorter than its timeout."""
    settings_of = FlowSettings(flow)
    for label, base, action in _actions(flow):
        settings = settings_of.of(action)
        heartbeat, timeout = settings.heartbeat, settings.timeout
        if heartbeat is None or timeout is None or heartbeat < timeout:
            continue
        if action.heartbeat is not None:
            path: DataPath = (*base, "heartbeat")
        elif action.timeout is not None:
            path = (*base, "timeout")
        else:
            path = ("defaults", "heartbeat")
        sink.error(
            path,
            "heartbeat",
            f"{label}: heartbeat {format_duration(heartbeat)} is not shorter "
            f"than timeout {format_duration(timeout)}, so a stuck or lost job is only noticed "
            "after its time is up",
            "make the heartbeat a fraction of the timeout (e.g. a tenth)",
        )


def check_imports(flow: Flow, flow_dir: Path, sink: FindingSink) -> None:
    """Import every ``job`` with ``flow_dir`` importable, as a worker would.

    Modules imported from ``flow_dir`` are forgotten afterwards, so flows in other folders with
    a module of the same name (``tasks.py`` next to each) are each checked against their own.
    """
    before = set(sys.modules)
    sys.path.insert(0, str(flow_dir))
    try:
        for _, base, action in _actions(flow):
            if action.job is not None:
                problem = _import_problem(action.job)
                if problem is not None:
                    sink.error((*base, "job"), "import", *problem)
    finally:
        if str(flow_dir) in sys.path:
            sys.path.remove(str(flow_dir))
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if Path(origin).resolve().is_relative_to(flow_dir.resolve()):
                del sys.modules[name]


def _import_problem(dotted: str) -> tuple[str, str] | None:
    module_name, _, attribute = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure of the user's module is the finding
        return (
            f"job '{dotted}' does not import: {type(error).__name__}: {error}",
            f"make '{module_name}' importable from the flow file's folder",
        )
    if not hasattr(module, attribute):
        names = [name for name in vars(module) if not name.startswith("_")]
        hint = did_you_mean(attribute, names) or f"define {attribute} in {module_name}"
        return f"job '{dotted}': module '{module_name}' has no '{attribute}'", hint
    if not callable(getattr(module, attribute)):
        return f"job '{dotted}' is not callable", "name a function or a class"
    return None
