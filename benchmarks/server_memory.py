"""The server memory a benchmark's work adds: ``used_memory`` less what is not the work's.

Two things move ``used_memory`` by tens of kilobytes at moments of the server's own, and made a
figure of a few hundred jobs wrong, even below zero:

* connections: INFO's ``mem_clients_normal`` is a tally the server brings up to date only in its
  cron (``hz`` times a second). A connection opened, or a buffer grown, since the last tick is in
  ``used_memory`` already but not yet in the tally, so a reading before the tick and one after it
  disagreed by that much (three new connections: 50 KB). CLIENT LIST counts every connection's
  memory (``tot-mem``) when it is called; read in one MULTI with INFO, both see the same moment.
* latency histograms: with ``latency-tracking`` (on by default) the server allocates a histogram
  of about 24 KB for each command the first time it runs since start or CONFIG RESETSTAT (the
  commands a script calls included): a put's first round paid for a dozen of them.
  :func:`untracked` turns the tracking off while memory is measured.

And a big key deleted just before (``lpush_each`` DELs its list of 10,000 messages, a megabyte)
is freed by a background thread (``lazyfree-lazy-user-del``, on by default), under load well
into the next measurement: a reading waits until no object is pending and two readings
5 ms apart agree (the thread's frees reach ``used_memory`` a moment after it counts them; a first
round at 10,000 jobs came out 150 bytes a job instead of 245).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from redis import Redis

from benchmarks.context import wait_until

LATENCY_TRACKING = "latency-tracking"
#: Seconds to wait for the server's background thread to free what a DEL or a flush let go.
LAZYFREE_TIMEOUT = 30.0
#: Seconds between two readings that must agree once nothing is pending.
SETTLE_PAUSE = 0.005


def used_memory(redis: Redis) -> int:
    """``used_memory`` less every connection's memory and the AOF buffer, at one moment, once
    nothing waits to be freed in the background and two readings agree.

    Not this connection's output list: INFO's reply, when it outgrows the connection's reply
    buffer (the server shrinks that to its recent use), makes a 16 KB block there after INFO
    has counted ``used_memory``, before CLIENT LIST counts the connections.
    """
    reading: list[Any] = []
    last: list[int] = []  # used_memory of the reading before, once nothing was pending

    def settled() -> bool:
        pipe = redis.pipeline(transaction=True)
        pipe.client_id()
        pipe.info("memory")
        pipe.client_list()
        reading[:] = pipe.execute()
        if int(reading[1].get("lazyfree_pending_objects", 0)):
            last.clear()
            return False
        # The background thread's frees reach used_memory a moment after it counts the object
        # freed (seen: 96 MB still counted with nothing pending): two readings apart agree.
        used = int(reading[1]["used_memory"])
        if last and last[0] == used:
            return True
        last[:] = [used]
        return False

    wait_until(settled, LAZYFREE_TIMEOUT, "objects freed in the background", pause=SETTLE_PAUSE)
    me, memory, clients = reading
    connections = sum(int(client["tot-mem"]) for client in clients)
    mine = sum(int(client["omem"]) for client in clients if int(client["id"]) == int(me))
    used = int(memory["used_memory"]) - int(memory.get("mem_aof_buffer", 0))
    return used - connections + mine


@contextlib.contextmanager
def untracked(redis: Redis) -> Iterator[None]:
    """No latency histograms made (each command's, at its first call) until the block ends."""
    was = str(redis.config_get(LATENCY_TRACKING)[LATENCY_TRACKING])
    redis.config_set(LATENCY_TRACKING, "no")
    try:
        yield
    finally:
        redis.config_set(LATENCY_TRACKING, was)


def growth(redis: Redis, work: Callable[[], object]) -> int:
    """Bytes of server memory that ``work`` adds (latency histograms not made meanwhile)."""
    with untracked(redis):
        before = used_memory(redis)
        work()
        return used_memory(redis) - before
