"""What no shell step can run: a NUL character in a ``run:`` command, an ``env:`` value or a
``cwd:`` of a step or hook, as written in the file. None of them can carry one (a command line,
a variable and a path end at the first NUL), so the job would fail every time it started; a
YAML double-quoted string reads ``\\0`` as that character, which makes it easy to write by
mistake. Checked on the document as read, so a step the model refused is checked too. Pure.

A NUL that comes with a value of the run (a param, an output) reaches the command as a variable
and fails the job at once in ``bad-value`` (:mod:`flows.runtime.tasks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from flows.flowfile.findings import DataPath, FindingSink

NUL: Final = "\0"
HINT: Final = (
    "in YAML double quotes \\0 is a NUL character: write \\\\0 there, or use single quotes"
)


def check_nul_characters(data: Mapping[str, Any], sink: FindingSink) -> None:
    """Report each ``run``, ``env`` value and ``cwd`` of a step or hook holding a NUL."""
    for section, kind in (("steps", "step"), ("hooks", "hook")):
        actions = data.get(section)
        if not isinstance(actions, Mapping):
            continue
        for name, action in actions.items():
            # Most have no NUL: the label and path are made for those that do.
            if isinstance(action, Mapping) and _has_nul(action):
                _check_action(f"{kind} '{name}'", (section, name), action, sink)


def _has_nul(action: Mapping[str, Any]) -> bool:
    """Whether :func:`_check_action` may find a NUL in ``action``."""
    run, env, cwd = action.get("run"), action.get("env"), action.get("cwd")
    if (isinstance(run, str) and NUL in run) or (isinstance(cwd, str) and NUL in cwd):
        return True
    return isinstance(env, Mapping) and any(
        isinstance(value, str) and NUL in value for value in env.values()
    )


def _check_action(label: str, base: DataPath, action: Mapping[str, Any], sink: FindingSink) -> None:
    run = action.get("run")
    if isinstance(run, str) and NUL in run:
        message = f"{label}: the command contains a NUL character, which no shell can run"
        sink.error((*base, "run"), "nul-character", message, HINT)
    env = action.get("env")
    if isinstance(env, Mapping):
        for variable, value in env.items():
            if isinstance(value, str) and NUL in value:
                sink.error(
                    (*base, "env", variable),
                    "nul-character",
                    f"{label}: env {variable} contains a NUL character, which no environment "
                    "variable can carry",
                    HINT,
                )
    cwd = action.get("cwd")
    if isinstance(cwd, str) and NUL in cwd:
        message = f"{label}: cwd contains a NUL character, which no path can hold"
        sink.error((*base, "cwd"), "nul-character", message, HINT)


__all__ = ["check_nul_characters"]
