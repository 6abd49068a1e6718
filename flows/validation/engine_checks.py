"""Engine checks: settings the engine would accept but that cannot work, and, on request,
whether every ``job`` imports (``flows validate --check-imports``; it runs the modules' code).
"""

from __future__ import annotations

import importlib
import sys
import traceback
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
    default_heartbeat = flow.defaults.heartbeat
    for label, base, action in _actions(flow):
        if action.heartbeat is None and default_heartbeat is None:
            continue  # no heartbeat set (the queue's): nothing to compare
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


def has_jobs(flow: Flow) -> bool:
    """Whether a step or hook is a Python ``job``: what :func:`check_imports` would import."""
    return any(action.job is not None for _, _, action in _actions(flow))


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
                problem = _import_problem(action.job, flow_dir)
                if problem is not None:
                    sink.error((*base, "job"), "import", *problem)
    finally:
        if str(flow_dir) in sys.path:
            sys.path.remove(str(flow_dir))
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if Path(origin).resolve().is_relative_to(flow_dir.resolve()):
                del sys.modules[name]


def _import_problem(dotted: str, flow_dir: Path) -> tuple[str, str] | None:
    module_name, _, attribute = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure of the user's module is the finding
        return (
            f"job '{dotted}' does not import: {type(error).__name__}: {error}",
            _import_hint(module_name, error, flow_dir),
        )
    if not hasattr(module, attribute):
        names = [name for name in vars(module) if not name.startswith("_")]
        hint = did_you_mean(attribute, names) or f"define {attribute} in {module_name}"
        return f"job '{dotted}': module '{module_name}' has no '{attribute}'", hint
    if not callable(getattr(module, attribute)):
        return f"job '{dotted}' is not callable", "name a function or a class"
    return None


def _import_hint(module_name: str, error: Exception, flow_dir: Path) -> str:
    """What to do about a module that does not import: make it importable when it is not
    there, else fix what its own code does at the line that failed."""
    if isinstance(error, ModuleNotFoundError):
        missing = error.name or ""
        parts = module_name.split(".")
        if not missing or missing in {".".join(parts[:n]) for n in range(1, len(parts) + 1)}:
            return (
                f"make '{module_name}' importable from the flow file's folder or the working "
                "directory"
            )
        return (
            f"'{module_name}' imports '{missing}', which is not installed: install it where "
            "the workers run, or fix that import"
        )
    if isinstance(error, SyntaxError) and error.filename:
        return f"fix the syntax error at {_shown(error.filename, flow_dir)}:{error.lineno}"
    frames = traceback.extract_tb(error.__traceback__)
    base = flow_dir.resolve()
    own = [frame for frame in frames if Path(frame.filename).resolve().is_relative_to(base)]
    if own or frames:
        frame = (own or frames)[-1]
        where = f"{_shown(frame.filename, flow_dir)}:{frame.lineno}"
        return f"'{module_name}' raises {type(error).__name__} when imported: fix {where}"
    return f"'{module_name}' raises {type(error).__name__} when imported: fix it"


def _shown(filename: str, flow_dir: Path) -> str:
    """A source file as the user knows it: relative to the flow file's folder when inside it."""
    path = Path(filename).resolve()
    base = flow_dir.resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
