"""What a job can ask for besides returning (complete) or raising (retry, then fail).

A job function may raise:

* :class:`RetryJob` -- run me again later (uses a retry; ``delay`` overrides the backoff);
* :class:`FailJob` -- fail now in a named group, without using the remaining retries;
* :class:`ReleaseJob` -- hand me back without using a retry (Tarantool's release), optionally later;
* :class:`BuryJob` -- take me out of circulation without failing me (Tarantool's bury) until an
  operator kicks me (``flows kick QUEUE``);
* :class:`HandedOver` -- I handed the job on myself, in an engine call that took it from this
  worker (a flow's sub-flow step waiting for its child run): there is nothing to report.

A worker's ``prepare`` hook may raise :class:`FailJob`, or :class:`SkipJob` -- complete without
running, as skipped: dependents that need its success are skipped too (a flow step whose ``if:``
is false). The hook and the job are run in one place (:mod:`scheduler.worker.runner`), so
either may raise any of these.

:class:`RetryPolicy` turns an attempt number into the delay before the next try.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

# Our own generator, so retries never move the process's shared `random` state.
_jitter = random.Random()


class JobOutcome(Exception):
    """Base of the exceptions a job raises to choose its outcome."""


class RetryJob(JobOutcome):
    """Retry the job (uses one retry). ``delay`` seconds, or the job's backoff when None."""

    def __init__(self, message: str = "", *, delay: float | None = None, group: str | None = None):
        super().__init__(message)
        self.message = message
        self.delay = delay
        self.group = group


class FailJob(JobOutcome):
    """Fail the job now in ``group`` with ``message``; no retry is used."""

    def __init__(self, group: str, message: str = ""):
        super().__init__(f"{group}: {message}")
        self.group = group
        self.message = message


class ReleaseJob(JobOutcome):
    """Give the job back to its queue without using a retry, runnable after ``delay`` seconds."""

    def __init__(self, delay: float = 0):
        super().__init__(f"release after {delay}s")
        self.delay = delay


class SkipJob(JobOutcome):
    """Complete the job as skipped (``message``: why); see the engine's ``complete ... skipped``."""

    def __init__(self, message: str = "skipped"):
        super().__init__(message)
        self.message = message


class BuryJob(JobOutcome):
    """Bury the job: it stays, neither failed nor run again, until its queue is kicked."""

    def __init__(self, message: str = ""):
        super().__init__(message or "buried")
        self.message = message


class HandedOver(JobOutcome):
    """The job function's own engine call took the job from this worker (its lock is gone):
    the worker reports nothing and lets it go."""

    def __init__(self, message: str = ""):
        super().__init__(message or "handed over")
        self.message = message or "handed over"


class JobInterrupted(BaseException):
    """Raised inside a job's thread to stop it (lock lost, timeout, shutdown).

    A BaseException, so that a job's own ``except Exception`` does not swallow it.
    """

    reason: str = "interrupted"


class LockLostInterrupt(JobInterrupted):
    reason = "lock-lost"


class TimeoutInterrupt(JobInterrupted):
    reason = "timeout"


class ShutdownInterrupt(JobInterrupted):
    reason = "shutdown"


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before retry number ``attempt`` (1 = the first retry).

    ``fixed``: always ``delay``. ``exponential``: ``delay * 2 ** (attempt - 1)``, capped at
    ``max_delay`` (None: not capped). Then spread by ``jitter`` (a fraction: 0.2 means +-20 %),
    so that many jobs failing together do not come back together.
    """

    backoff: Literal["fixed", "exponential"] = "exponential"
    delay: float = 1.0
    max_delay: float | None = 300.0
    jitter: float = 0.2

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds before retry number ``attempt``, jitter drawn from ``rng`` (default: the
        module's own generator)."""
        if self.backoff == "fixed":
            base = self.delay  # what was asked for, however long: the cap is the growth's
        else:
            base = self.delay * 2 ** max(0, attempt - 1)
            if self.max_delay is not None:
                base = min(base, self.max_delay)
        if self.jitter <= 0 or base <= 0:
            return base
        spread = base * self.jitter
        return max(0.0, base + (rng or _jitter).uniform(-spread, spread))

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> RetryPolicy:
        """The policy a job's ``retry`` mapping asks for (a flow step's ``retry:``); the
        defaults for what it leaves out, and for None."""
        if not raw:
            return cls()

        def number(name: str, default: float) -> float:
            value = raw.get(name)
            return default if value is None else float(value)

        return cls(
            backoff="fixed" if raw.get("backoff") == "fixed" else "exponential",
            delay=number("delay", cls.delay),
            # A flow's retry always names it; null there is "no cap" (the flow reference).
            max_delay=None
            if "max_delay" in raw and raw["max_delay"] is None
            else number("max_delay", 300.0),
            jitter=number("jitter", cls.jitter),
        )
