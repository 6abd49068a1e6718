"""Workers: run jobs from queues reliably (see :mod:`scheduler.worker.worker`).

Job functions receive a :class:`JobContext`; they return a result (the job completes with it),
raise (the job is retried with its backoff, then failed with the exception's type as group), or
raise :class:`RetryJob`, :class:`FailJob`, :class:`ReleaseJob` or :class:`BuryJob` to choose.
"""

from scheduler.worker.context import JobContext
from scheduler.worker.outcomes import (
    BuryJob,
    FailJob,
    ReleaseJob,
    RetryJob,
    RetryPolicy,
    SkipJob,
)
from scheduler.worker.pool import WorkerPool
from scheduler.worker.worker import Worker

__all__ = [
    "BuryJob",
    "FailJob",
    "JobContext",
    "ReleaseJob",
    "RetryJob",
    "RetryPolicy",
    "SkipJob",
    "Worker",
    "WorkerPool",
]
