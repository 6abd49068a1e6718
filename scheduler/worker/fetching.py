"""How a worker gets jobs from the engine: pop in its strategy's order, or wait to be handed one.

A worker with free slots pops (``ordered``: drain the first queue before the next;
``round-robin``: one job from each queue in turn). When its queues have nothing, it calls the
engine's ``await``, which pops once more and otherwise registers the worker as idle; the worker
then blocks on its inbox list, where the engine pushes the next job put in one of its queues,
already popped for it (``lua/include/handoff.lua``). So an idle worker starts a new job after one
push from the server, with no polling and no second round trip.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from scheduler.engine.client import Client

Strategy = Literal["ordered", "round-robin"]
Raw = dict[str, Any]
# Makes one engine call (`Engine.call`'s signature): the first call of a fetch may go through
# another path, in the same round trip as the worker's pending completes.
Send = Callable[..., Any]

# Pushed on the inbox to wake a worker blocked on it (it is stopping): an empty list of jobs.
WAKE = "[]"


class Fetcher:
    """Pops and waits for one worker (``client.worker_name``) on ``queues``."""

    def __init__(
        self, client: Client, queues: Sequence[str], strategy: Strategy, poll_interval: float
    ) -> None:
        self.client = client
        self.name = client.worker_name
        self.queues = list(queues)
        self.strategy = strategy
        self.poll_interval = poll_interval
        self.inbox = f"{client.engine.key_prefix}w:{self.name}:inbox"
        self._rr = 0

    def pop(self, count: int, send: Send | None = None) -> list[Raw]:
        """Up to ``count`` jobs, now running for this worker, in the strategy's order.

        ``send`` makes the first engine call (default: ``Engine.call``)."""
        sends = [send or self.client.engine.call]
        if self.strategy == "ordered":
            jobs: list[Raw] = []
            for queue in self.queues:
                jobs += self._pop(queue, count - len(jobs), sends)
                if len(jobs) >= count:
                    break
            return jobs
        return self._pop_round_robin(count, sends)

    def _pop(self, queue: str, count: int, sends: list[Send]) -> list[Raw]:
        # pop.lean: pop with a reply of just what a worker needs (no history, no dependents).
        send = sends.pop() if sends else self.client.engine.call
        return list(json.loads(send("pop.lean", queue, self.name, count)))

    def _pop_round_robin(self, count: int, sends: list[Send]) -> list[Raw]:
        """One job from each queue in turn, starting after the queue served last."""
        jobs: list[Raw] = []
        idle = 0
        while len(jobs) < count and idle < len(self.queues):
            queue = self.queues[self._rr % len(self.queues)]
            self._rr += 1
            got = self._pop(queue, 1, sends)
            idle = 0 if got else idle + 1
            jobs += got
        return jobs

    def wait(self, count: int, stopping: Callable[[], bool] = lambda: False) -> list[Raw]:
        """Jobs popped at once or handed over within about ``poll_interval``; [] when none.

        The engine registers the worker as idle for a little longer than it blocks here, so a
        job put while this call returns is handed over, and found by the next call. When
        ``stopping()`` has become true meanwhile, the registration is cancelled at once (the
        worker stopping may have cancelled it before this call made it): a job the worker
        hands back is not handed to it again.
        """
        order = self.queues
        if self.strategy == "round-robin":
            first = self._rr % len(self.queues)
            order = self.queues[first:] + self.queues[:first]
        jobs = json.loads(
            self.client.engine.call(
                "await", self.name, self.poll_interval + 1.0, max(1, count), *order
            )
        )
        if jobs:
            return list(jobs)
        if stopping():
            self.cancel()
            return []
        reply = self.client.engine.command("BLPOP", self.inbox, self.poll_interval, writes=True)
        return list(json.loads(reply[1])) if reply else []

    def cancel(self) -> None:
        """Stop being idle (stopping): no job is handed over from now on, and those handed over
        but not taken go back to their queues."""
        self.client.engine.call("await.cancel", self.name)

    def wake(self) -> None:
        """Make a :meth:`wait` blocked in another thread return now."""
        self.client.redis.lpush(self.inbox, WAKE)
