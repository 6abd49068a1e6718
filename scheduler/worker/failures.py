"""A job's exception as its author reads it: the traceback of their own code, not the worker's.

The frames of the worker and of the flows package (the runner calling the job, a flow's step
wrapper) say nothing to the person whose step failed; they are left out of the message stored
as the job's failure. When every frame is ours (the job's function was refused before it ran)
the last one is kept, so the message still says where.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path

_OURS = ("scheduler", "flows")


def _package_dirs() -> list[str]:
    """The directories of this project's packages, as frames name their files."""
    dirs = []
    for name in _OURS:
        module = sys.modules.get(name)  # looked up, not imported: the worker imports no flows
        file = getattr(module, "__file__", None)
        if file:
            dirs.append(str(Path(file).resolve().parent) + "/")
    return dirs


def _ours(filename: str, dirs: list[str]) -> bool:
    if filename.startswith("<frozen importlib"):  # the import machinery running a module
        return True
    try:
        path = str(Path(filename).resolve())
    except (OSError, RuntimeError):
        return False
    return any(path.startswith(d) for d in dirs)


def user_traceback(error: BaseException) -> str:
    """``error`` formatted as ``traceback.format_exception`` does, without our frames (in the
    chained exceptions too)."""
    dirs = _package_dirs()
    library = [*dirs, str(Path(sysconfig.get_paths()["stdlib"]).resolve()) + "/"]
    summary = traceback.TracebackException.from_exception(error)
    seen: set[int] = set()
    current: traceback.TracebackException | None = summary
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # From the first frame of the user's own code (the calls into it are ours or the
        # standard library's, such as importlib), then without ours.
        stack = list(current.stack)
        first = next(
            (i for i, frame in enumerate(stack) if not _ours(frame.filename, library)), len(stack)
        )
        frames = [frame for frame in stack[first:] if not _ours(frame.filename, dirs)]
        if not frames and current.stack:
            frames = [current.stack[-1]]
        current.stack = traceback.StackSummary.from_list(frames)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "".join(summary.format())
