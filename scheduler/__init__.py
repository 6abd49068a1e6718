"""redis-flows' Python package: the client of the qless-compatible engine, and what runs on it.

The public API is re-exported here::

    from scheduler import Client, EventListener, JobNotFound

Names are imported on first use (:data:`_EXPORTS`), so importing one small module of the
package (``scheduler.engine.errors``, ``scheduler.cron``) does not load the client, redis or the
worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.lazy import lazy_exports

if TYPE_CHECKING:
    from scheduler.connect import Client
    from scheduler.engine.client import Config, FailedJobs, Jobs, Tagged, Tracked, Workers
    from scheduler.engine.errors import (
        ClientClosed,
        ClusterDown,
        ClusterError,
        EngineError,
        FlowsError,
        ForeignEngine,
        HasDependents,
        InvalidArgument,
        JobNotFound,
        LockLost,
        NamespaceNotInOneSlot,
        NotReplicated,
        OutcomeUnknown,
        ReadOnlyReplica,
        ServerError,
        SlotMoving,
        TooLarge,
        UnknownCommand,
        WrongState,
    )
    from scheduler.engine.events import Event, EventListener
    from scheduler.engine.faults import (
        AuthenticationFailed,
        PermissionDenied,
        ServerFault,
        ServerOutOfMemory,
        ServerReadOnly,
        ServerUnavailable,
        ServerWithoutReplicas,
    )
    from scheduler.engine.job import Job, RanBy, RecurringJob
    from scheduler.engine.queue import NewJob, PutResult, Queue, QueueJobs, Queues
    from scheduler.engine.safety import UnsafeServer
    from scheduler.engine.scripts import Engine, EnginePipeline
    from scheduler.engine.server_support import UnsupportedServer

_EXPORTS: dict[str, str] = {
    "AuthenticationFailed": "scheduler.engine.faults",
    "Client": "scheduler.connect",
    "ClientClosed": "scheduler.engine.errors",
    "ClusterDown": "scheduler.engine.errors",
    "ClusterError": "scheduler.engine.errors",
    "Config": "scheduler.engine.client",
    "Engine": "scheduler.engine.scripts",
    "EngineError": "scheduler.engine.errors",
    "EnginePipeline": "scheduler.engine.scripts",
    "Event": "scheduler.engine.events",
    "EventListener": "scheduler.engine.events",
    "FailedJobs": "scheduler.engine.client",
    "FlowsError": "scheduler.engine.errors",
    "ForeignEngine": "scheduler.engine.errors",
    "HasDependents": "scheduler.engine.errors",
    "InvalidArgument": "scheduler.engine.errors",
    "Job": "scheduler.engine.job",
    "JobNotFound": "scheduler.engine.errors",
    "Jobs": "scheduler.engine.client",
    "LockLost": "scheduler.engine.errors",
    "NamespaceNotInOneSlot": "scheduler.engine.errors",
    "NewJob": "scheduler.engine.queue",
    "NotReplicated": "scheduler.engine.errors",
    "OutcomeUnknown": "scheduler.engine.errors",
    "PermissionDenied": "scheduler.engine.faults",
    "PutResult": "scheduler.engine.queue",
    "Queue": "scheduler.engine.queue",
    "QueueJobs": "scheduler.engine.queue",
    "Queues": "scheduler.engine.queue",
    "RanBy": "scheduler.engine.job",
    "ReadOnlyReplica": "scheduler.engine.errors",
    "RecurringJob": "scheduler.engine.job",
    "ServerError": "scheduler.engine.errors",
    "ServerFault": "scheduler.engine.faults",
    "ServerOutOfMemory": "scheduler.engine.faults",
    "ServerReadOnly": "scheduler.engine.faults",
    "ServerUnavailable": "scheduler.engine.faults",
    "ServerWithoutReplicas": "scheduler.engine.faults",
    "SlotMoving": "scheduler.engine.errors",
    "Tagged": "scheduler.engine.client",
    "TooLarge": "scheduler.engine.errors",
    "Tracked": "scheduler.engine.client",
    "UnknownCommand": "scheduler.engine.errors",
    "UnsafeServer": "scheduler.engine.safety",
    "UnsupportedServer": "scheduler.engine.server_support",
    "Workers": "scheduler.engine.client",
    "WrongState": "scheduler.engine.errors",
}


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)


__all__ = [
    "AuthenticationFailed",
    "Client",
    "ClientClosed",
    "ClusterDown",
    "ClusterError",
    "Config",
    "Engine",
    "EngineError",
    "EnginePipeline",
    "Event",
    "EventListener",
    "FailedJobs",
    "FlowsError",
    "ForeignEngine",
    "HasDependents",
    "InvalidArgument",
    "Job",
    "JobNotFound",
    "Jobs",
    "LockLost",
    "NamespaceNotInOneSlot",
    "NewJob",
    "NotReplicated",
    "OutcomeUnknown",
    "PermissionDenied",
    "PutResult",
    "Queue",
    "QueueJobs",
    "Queues",
    "RanBy",
    "ReadOnlyReplica",
    "RecurringJob",
    "ServerError",
    "ServerFault",
    "ServerOutOfMemory",
    "ServerReadOnly",
    "ServerUnavailable",
    "ServerWithoutReplicas",
    "SlotMoving",
    "Tagged",
    "TooLarge",
    "Tracked",
    "UnknownCommand",
    "UnsafeServer",
    "UnsupportedServer",
    "Workers",
    "WrongState",
]
