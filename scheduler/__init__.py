"""redis-flows' Python package: the client of the qless-compatible engine, and what runs on it.

The public API is re-exported here::

    from scheduler import Client, EventListener, JobNotFound
"""

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
