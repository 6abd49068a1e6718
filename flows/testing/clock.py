"""The virtual clock of a flow test, and the engine that runs every call at its time.

Every engine command takes ``now`` as an argument (lua/README.md, Time); the client sends ``''``
(the server's clock) by default. :class:`ClockedEngine` sends the clock's time instead, so the
unchanged client, the flows layer and the scheduler service run at virtual time: a retry delay
of an hour, a wait's timeout or a month of ticks pass by setting the clock, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from scheduler.engine.scripts import Engine


class Clock:
    """Virtual time in epoch seconds; it only moves forward."""

    def __init__(self, start: float) -> None:
        self.now = float(start)

    def advance_to(self, moment: float) -> None:
        self.now = max(self.now, float(moment))

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, float(seconds))


class ClockedEngine(Engine):
    """An :class:`Engine` whose calls without an explicit ``now`` run at ``clock.now``."""

    def __init__(self, client: redis.Redis, prefix: str, clock: Clock) -> None:
        super().__init__(client, prefix)
        self.clock = clock

    def _args(self, command: str, args: Sequence[Any], now: float | str) -> list[Any]:
        return super()._args(command, args, self.clock.now if now == "" else now)

    def server_time(self) -> float:
        return self.clock.now
