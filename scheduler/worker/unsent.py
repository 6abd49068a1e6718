"""What a worker could not send while its server was away: two lines an outage, not one a job.

During an outage every job that ends fails to report its outcome, and every flush of step log
lines fails: a warning each buried the outage's own two lines (lost, back) under hundreds. The
first is said at once, with what follows from it; the others are counted (at DEBUG each), and
the first send that succeeds after them says how many there were, naming the first few jobs.
A fault waiting cannot cure (a refused permission, a bug) is said each time, as before.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from scheduler.engine.backoff import transient
from scheduler.engine.faults import one_line

SHOWN: Final = 5
"""The jobs a summary names; the rest are counted."""


class Unsent:
    """One kind of send (``what``: "outcome", "step log lines") of one worker; thread-safe.
    ``meaning`` says what becomes of what was not sent."""

    def __init__(self, log: logging.Logger, what: str, meaning: str) -> None:
        self.log = log
        self.what = what
        self.meaning = meaning
        self._jids: list[str] = []
        self._lock = threading.Lock()

    def failed(self, jid: str, error: BaseException, detail: str = "") -> None:
        """``jid``'s send (its ``detail``: "complete") failed with ``error``."""
        what = f"{self.what} {detail}" if detail else self.what
        if not transient(error):
            self.log.warning("job %s: %s not sent (%s)", jid, what, one_line(error))
            return
        with self._lock:
            first = not self._jids
            self._jids.append(jid)
        if first:
            self.log.warning(
                "job %s: %s not sent (%s); %s. Until a send succeeds, the others are counted",
                jid,
                what,
                one_line(error),
                self.meaning,
            )
        else:
            self.log.debug("job %s: %s not sent (%s)", jid, what, one_line(error))

    def sent(self) -> None:
        """A send succeeded: say what the fault kept back since the first it said."""
        if not self._jids:  # the common case, without the lock
            return
        with self._lock:
            jids, self._jids = self._jids, []
        later = list(dict.fromkeys(jids[1:]))  # a job whose lines failed twice, once
        if not later:
            return
        more = len(later) - SHOWN
        self.log.warning(
            "the %s of %d more %s not sent while the server was away (for each, %s): %s%s",
            self.what,
            len(later),
            "job" if len(later) == 1 else "jobs",
            self.meaning,
            ", ".join(later[:SHOWN]),
            f" and {more} more" if more > 0 else "",
        )


__all__ = ["SHOWN", "Unsent"]
