"""The virtual clock of a flow test, and the engine that runs every call at its time.

Every engine command takes ``now`` as an argument (lua/README.md, Time); the client sends ``''``
(the server's clock) by default. :class:`ClockedEngine` sends the clock's time instead, so the
unchanged client, the flows layer and the scheduler service run at virtual time: a retry delay
of an hour, a wait's timeout or a month of ticks pass by setting the clock, never by sleeping.

It also lets the test's driver share round trips with the scheduler service it drives, the
calls unchanged and in the order they would run one by one (nobody else writes to a case's
namespace): calls queued as a *rider* go after the service's next ``schedule.fire`` batch, in
its round trip (the worker's pop of the run just fired, and the report of its job when it was
known ahead), and a call's reply read ahead of time
(the service's due read of the next tick, after the driver's reports of this moment) answers
that call if it comes next, with the same arguments at the same time. Work the driver can
do ahead (:attr:`ClockedEngine.meanwhile`) runs while the server works on a fire batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis

from scheduler.engine.scripts import Engine, EnginePipeline

#: A call as the engine takes it: (command, args, now); command '' for a plain Redis read.
Call = tuple[str, tuple[Any, ...], float]


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
        self.rider: Callable[[RiderPipeline], None] | None = None
        """Queues the calls to send after the next ``schedule.fire`` batch, in its round trip
        (it sees the batch's calls: what rides may depend on what fires)."""
        self.rider_replies: list[Any] | None = None
        self.meanwhile: Callable[[], None] | None = None
        """Work to do while the server runs a ``schedule.fire`` batch (the next tick's run,
        built ahead): the client's turn and the server's overlap instead of alternating."""
        self._ahead: tuple[int, Call, Any] | None = None
        self._sent = 0  # round trips so far: a reply read ahead holds until the next one

    def _args(self, command: str, args: Sequence[Any], now: float | str) -> list[Any]:
        return super()._args(command, args, self.clock.now if now == "" else now)

    def server_time(self) -> float:
        return self.clock.now

    @property
    def round_trips(self) -> int:
        """The round trips this engine's calls and pipelines took so far."""
        return self._sent

    def read_ahead(self, call: Call, reply: Any) -> None:
        """``reply`` answers ``call`` if it is the next call this engine gets."""
        self._ahead = (self._sent, call, reply)

    def call(self, command: str, *args: Any, now: float | str = "") -> Any:
        ahead, self._ahead = self._ahead, None
        when = self.clock.now if now == "" else float(now)
        if ahead is not None and ahead[0] == self._sent and ahead[1] == (command, args, when):
            return ahead[2]
        self._sent += 1
        return super().call(command, *args, now=now)

    def command(self, *args: Any, writes: bool = False) -> Any:
        self._ahead = None
        self._sent += 1
        return super().command(*args, writes=writes)

    def pipeline(self) -> EnginePipeline:
        super().pipeline()  # the library loaded first, as for any pipeline
        return RiderPipeline(self)


class RiderPipeline(EnginePipeline):
    """A pipeline that takes its engine's rider along after a ``schedule.fire`` batch."""

    def __init__(self, engine: ClockedEngine) -> None:
        super().__init__(engine)
        self.clocked = engine

    def execute(self) -> list[Any]:
        engine = self.clocked
        engine._ahead = None
        engine._sent += 1
        firing = any(command == "schedule.fire" for command, _ in self._calls)
        ridden = 0
        if firing:
            self.meanwhile = engine.meanwhile
            rider, engine.rider = engine.rider, None
            if rider is not None:
                fired = len(self)
                rider(self)
                ridden = len(self) - fired
        replies = super().execute()
        if not ridden:
            return replies
        engine.rider_replies = replies[len(replies) - ridden :]
        return replies[: len(replies) - ridden]

    def fire_calls(self) -> list[list[Any]]:
        """The arguments of the ``schedule.fire`` calls queued (after the time)."""
        skip = len(self.clocked._keys) + 3  # the key count, the keys, the command, the time
        return [args[skip:] for command, args in self._calls if command == "schedule.fire"]
