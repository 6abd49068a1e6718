"""How soon a follower of a run or of its logs looks again.

Soon after a look found something new (a run's change, log lines), so a run's end and a burst
of lines show at once; twice as late after each look that found nothing, up to the caller's
longest pause; and never sooner than twice what the last look took, so following a big run
(a long reply, a read per open job) spends at most a third of its time reading, as a fixed
pause of that length would.
"""

from __future__ import annotations

QUICK = 0.02
"""Seconds before the next look after one that found something new."""


def next_pause(pause: float, found: bool, spent: float, longest: float) -> float:
    """The pause after a look that took ``spent`` seconds and ``found`` something new (or not),
    following a pause of ``pause``; at most ``longest``."""
    after = min(QUICK, longest) if found else min(pause * 2, longest)
    return max(after, min(2 * spent, longest))
