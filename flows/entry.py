"""The ``flows`` console script (``[project.scripts]`` in pyproject.toml): the command line,
with Ctrl-C handled from the script's first statement.

The command line's own boundary (:func:`flows.cli.common.guarded`) ends a command after Ctrl-C
with exit code :data:`INTERRUPTED` and one line, ``interrupted``. It exists only once click and
the ``flows`` group are imported, a tenth of a second or so into every command; a Ctrl-C before
that printed a traceback. This module imports nothing but ``sys`` (loaded before any script
runs) until it has the command line in hand, and answers a Ctrl-C during that import as the
command line does.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells use."""


def interrupted_line() -> str:
    """The line a command ends with after Ctrl-C: ``interrupted`` (on a terminal on a line of
    its own, after the echoed ``^C``)."""
    return ("\n" if sys.stderr.isatty() else "") + "interrupted"


def main() -> None:
    """``flows ARGS...``: import the command line and run it; Ctrl-C at any point, the import
    included, ends it with :data:`INTERRUPTED` and :func:`interrupted_line`, no traceback."""
    try:
        from flows.cli import main as command_line

        command_line()
    except KeyboardInterrupt:
        import contextlib
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: we are ending already
        with contextlib.suppress(OSError, ValueError):  # no stderr: the exit code says it
            print(interrupted_line(), file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
