"""Loading, validating and expanding a large flow without the cyclic garbage collector's passes.

A flow file of 10,000 steps loads into a few hundred thousand containers (the data, and where
each value is in the text), and expands into about as many more, all of them trees that
refcounting frees. The cyclic collector would still pass over them again and again while they
are built: validating such a file took 1.1 to 1.3 s of CPU with it, 0.7 s without (expanding
it, about 0.05 s less); assembling the run's jobs adds a few containers per job on top of
them all. :func:`gc_paused` turns it off for the duration; once back on, the first collection
passes over every container still alive, so `flows run` pauses it once from reading the file to
the run's JSON text (at 10,000 steps a collection between the steps cost about 0.1 s of CPU).

The collector is process-wide, so the pause happens only in a process that asked for it with
:func:`enable`: the short-lived commands that validate or submit a file (`flows validate`,
`plan`, `graph`, `run`) do, before any thread of theirs starts. Everywhere else (the scheduler
service, `flows ui`, workers, a library user's program) :func:`gc_paused` changes nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_enabled = False


def enable() -> None:
    """Let :func:`gc_paused` pause the collector in this process (a single-threaded command)."""
    global _enabled
    _enabled = True


def disable() -> None:
    """Undo :func:`enable`: :func:`gc_paused` changes nothing again (a benchmark that measures
    a command's work, then a service's, in one process)."""
    global _enabled
    _enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block, where :func:`enable` was called; enabled again
    after it, if it was before. Nested blocks are fine: only the outermost one turns the
    collector back on."""
    if not _enabled:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
