"""redis-flows' Python package: the client of the qless-compatible engine, and what runs on it.

The public API is re-exported here::

    from scheduler import Client, EventListener, JobNotFound

Names are imported on first use (:data:`_EXPORTS`), so importing one small module of the
package (``scheduler.errors``, ``scheduler.cron``) does not load the client, redis or the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.lazy import lazy_exports

if TYPE_CHECKING:
    from scheduler.client import Client, Config, FailedJobs, Jobs, Tagged, Tracked, Workers
    from scheduler.errors import (
        EngineError,
        FlowsError,
        HasDependents,
        InvalidArgument,
        JobNotFound,
        LockLost,
        ServerError,
        TooLarge,
        UnknownCommand,
        WrongState,
    )
    from scheduler.events import Event, EventListener
    from scheduler.faults import (
        AuthenticationFailed,
        PermissionDenied,
        ServerFault,
        ServerOutOfMemory,
        ServerReadOnly,
        ServerUnavailable,
    )
    from scheduler.job import Job, RanBy, RecurringJob
    from scheduler.queue import NewJob, Queue, QueueJobs, Queues
    from scheduler.scripts import Engine, EnginePipeline

_EXPORTS: dict[str, str] = {
    "AuthenticationFailed": "scheduler.faults",
    "Client": "scheduler.client",
    "Config": "scheduler.client",
    "Engine": "scheduler.scripts",
    "EngineError": "scheduler.errors",
    "EnginePipeline": "scheduler.scripts",
    "Event": "scheduler.events",
    "EventListener": "scheduler.events",
    "FailedJobs": "scheduler.client",
    "FlowsError": "scheduler.errors",
    "HasDependents": "scheduler.errors",
    "InvalidArgument": "scheduler.errors",
    "Job": "scheduler.job",
    "JobNotFound": "scheduler.errors",
    "Jobs": "scheduler.client",
    "LockLost": "scheduler.errors",
    "NewJob": "scheduler.queue",
    "PermissionDenied": "scheduler.faults",
    "Queue": "scheduler.queue",
    "QueueJobs": "scheduler.queue",
    "Queues": "scheduler.queue",
    "RanBy": "scheduler.job",
    "RecurringJob": "scheduler.job",
    "ServerError": "scheduler.errors",
    "ServerFault": "scheduler.faults",
    "ServerOutOfMemory": "scheduler.faults",
    "ServerReadOnly": "scheduler.faults",
    "ServerUnavailable": "scheduler.faults",
    "Tagged": "scheduler.client",
    "TooLarge": "scheduler.errors",
    "Tracked": "scheduler.client",
    "UnknownCommand": "scheduler.errors",
    "Workers": "scheduler.client",
    "WrongState": "scheduler.errors",
}


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)


__all__ = [
    "AuthenticationFailed",
    "Client",
    "Config",
    "Engine",
    "EngineError",
    "EnginePipeline",
    "Event",
    "EventListener",
    "FailedJobs",
    "FlowsError",
    "HasDependents",
    "InvalidArgument",
    "Job",
    "JobNotFound",
    "Jobs",
    "LockLost",
    "NewJob",
    "PermissionDenied",
    "Queue",
    "QueueJobs",
    "Queues",
    "RanBy",
    "RecurringJob",
    "ServerError",
    "ServerFault",
    "ServerOutOfMemory",
    "ServerReadOnly",
    "ServerUnavailable",
    "Tagged",
    "TooLarge",
    "Tracked",
    "UnknownCommand",
    "Workers",
    "WrongState",
]
