"""Workers: run jobs from queues reliably (see :mod:`scheduler.worker.worker`).

Job functions receive a :class:`JobContext`; they return a result (the job completes with it),
raise (the job is retried with its backoff, then failed with the exception's type as group), or
raise :class:`RetryJob`, :class:`FailJob`, :class:`ReleaseJob` or :class:`BuryJob` to choose.

Names are imported on first use, so ``scheduler.worker.envelope`` (read by the pure flow model)
does not load the threaded worker or redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.lazy import lazy_exports

if TYPE_CHECKING:
    from scheduler.worker.context import JobContext
    from scheduler.worker.outcomes import (
        BuryJob,
        FailJob,
        HandedOver,
        ReleaseJob,
        RetryJob,
        RetryPolicy,
        SkipJob,
    )
    from scheduler.worker.pool import WorkerPool
    from scheduler.worker.settings import WorkerSettings
    from scheduler.worker.worker import Worker

_EXPORTS: dict[str, str] = {
    "BuryJob": "scheduler.worker.outcomes",
    "FailJob": "scheduler.worker.outcomes",
    "HandedOver": "scheduler.worker.outcomes",
    "JobContext": "scheduler.worker.context",
    "ReleaseJob": "scheduler.worker.outcomes",
    "RetryJob": "scheduler.worker.outcomes",
    "RetryPolicy": "scheduler.worker.outcomes",
    "SkipJob": "scheduler.worker.outcomes",
    "Worker": "scheduler.worker.worker",
    "WorkerPool": "scheduler.worker.pool",
    "WorkerSettings": "scheduler.worker.settings",
}


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)


__all__ = [
    "BuryJob",
    "FailJob",
    "HandedOver",
    "JobContext",
    "ReleaseJob",
    "RetryJob",
    "RetryPolicy",
    "SkipJob",
    "Worker",
    "WorkerPool",
    "WorkerSettings",
]
