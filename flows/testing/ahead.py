"""Building a schedule's next run while the engine fires this one.

On the virtual clock the client and the server take turns: the service builds a tick's run
(about a quarter of the client's time per tick), the server fires it, and so on. A run's build
is a pure function of the registered flow and the tick, so :class:`AheadSource` builds the
next tick's run while the server works on this tick's fire batch
(:attr:`~flows.testing.clock.ClockedEngine.meanwhile`), and the service's build of that tick
takes it. A guess that turns out wrong (a catch-up after an outage, a buffered tick, a jitter
that depends on lateness) is just not taken: the service builds as it always does.
"""

from __future__ import annotations

from flows.flowfile.model import Flow
from flows.runs.service_source import FlowsSource
from scheduler.service.planning import fire_after, start_delay
from scheduler.service.records import Definition, RunRequest

#: What the service's build is called with, as the key of a run built ahead.
_Key = tuple[str, str, float, str, float]


def builds_alike_ahead(flow: Flow) -> bool:
    """Whether a run of ``flow`` built a tick early is the run built on time: its build reads
    no file a step could change meanwhile (a cached step's declared files, a sub-flow's)."""
    return all(step.cache is None and step.flow is None for step in flow.steps.values())


class AheadSource(FlowsSource):
    """A :class:`FlowsSource` that keeps the run of one tick built ahead."""

    def __init__(self, definition: Definition) -> None:
        super().__init__()
        self.definition = definition
        self._ahead: tuple[_Key, RunRequest] | None = None

    def build_after(self, now: float) -> None:
        """Build the run of the schedule's first tick after ``now``, as an on-time tick's.
        Never raises: a run that cannot be built is the service's to report, on time."""
        definition = self.definition
        try:
            tick = fire_after(definition.schedule, now)
            if tick is None:
                return
            run_id = self.run_id(definition.name, tick)
            delay = start_delay(definition, tick, tick)
            run = super().build(definition, run_id, tick, "schedule", delay)
            run.run_json()  # encoded now too: the fire call sends it
        except Exception:  # the tick's own build, on time, reports what is wrong
            return
        self._ahead = ((definition.hash, run_id, tick, "schedule", delay), run)

    @property
    def built(self) -> RunRequest | None:
        """The run built ahead, not taken yet."""
        return self._ahead[1] if self._ahead is not None else None

    def run_id(self, flow: str, tick: float) -> str:
        ahead = self._ahead
        if ahead is not None and ahead[0][2] == tick and flow == self.definition.name:
            return ahead[0][1]  # named ahead, with the run built for that tick
        return super().run_id(flow, tick)

    def build(
        self, definition: Definition, run_id: str, tick: float, trigger: str, delay: float
    ) -> RunRequest:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == (definition.hash, run_id, tick, trigger, delay):
            return ahead[1]
        return super().build(definition, run_id, tick, trigger, delay)
