"""Where a command's Redis is decided: the URL given, else ``$FLOWS_REDIS_URL``, else the embedded
server, started on demand.

This sits above the engine layer, which connects to a URL it is given and knows nothing of the
embedded server: :class:`Client` (``scheduler.Client``) is the engine client that connects to the
embedded server when given no URL, and tells the engine layer, through a
:class:`~scheduler.engine.connections.Keeper`, how to start that server again and what to advise
when it cannot be reached.

::

    client = Client()                  # the embedded server (or $FLOWS_REDIS_URL)
    client = Client("redis://db:6379") # a server of one's own
"""

from __future__ import annotations

import os

import redis as redis_py

from scheduler.embedded import ENV_URL, EmbeddedServer, embedded_at
from scheduler.engine import client as engine_client
from scheduler.engine import connections
from scheduler.engine.connections import Durability
from scheduler.engine.errors import Given, given_as

UNREACHABLE = "start it with `flows server start` (any flows command starts the embedded server)"


def resolve_url(option: str | None = None) -> str:
    """The URL to use: ``option``, else ``$FLOWS_REDIS_URL``, else the embedded server's.

    The embedded server (in :func:`scheduler.embedded.default_data_dir`) is started on demand.
    """
    if option:
        return option
    from_env = os.environ.get(ENV_URL)
    if from_env:
        return from_env
    server = EmbeddedServer()
    server.start()
    return server.url


def keep(client: redis_py.Redis) -> redis_py.Redis:
    """``client``, with a keeper registered if it connects to the default embedded server (so
    a long-lived process starts that server again when it died, and faults say how to start
    it)."""
    server = embedded_at(client)
    if server is not None:
        connections.set_keeper(client, connections.Keeper(server.start, UNREACHABLE))
    return client


def connect(url: str | None = None) -> redis_py.Redis:
    """A redis-py client (``decode_responses=True``) for ``url``, resolved by
    :func:`resolve_url`."""
    return keep(connections.connect(resolve_url(url)))


class Client(engine_client.Client):
    """The engine client (:class:`scheduler.engine.client.Client`), whose ``url`` may be left
    out: None means ``$FLOWS_REDIS_URL``, else the embedded server (started, or reused).

    ``client.queues[name]``, ``client.jobs[jid]``, ``client.config``, ``client.throttles``,
    ``client.workers`` and ``client.events()`` are the engine client's, as are the other
    arguments (``namespace``, ``redis``, ``worker_name``, ``durability``): see its docstring.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str | None = None,
        redis: redis_py.Redis | None = None,
        worker_name: str | None = None,
        durability: Durability | None = None,
    ) -> None:
        given: Given = "argument"
        if redis is None:
            if not url and os.environ.get(ENV_URL):
                given = "environment"
            url = resolve_url(url)
        with given_as(given):
            super().__init__(
                url,
                namespace=namespace,
                redis=redis,
                worker_name=worker_name,
                durability=durability,
            )
        keep(self.redis)


__all__ = ["UNREACHABLE", "Client", "connect", "keep", "resolve_url"]
