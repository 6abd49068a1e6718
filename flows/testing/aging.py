"""A schedule case's run records age out on the virtual clock, as the scheduler service's
retention ages them in production: the runs submitted more than ``jobs-history`` seconds ago
that are no longer running are dropped (``maintain.retention``). A month of minutely ticks then
holds about a week of run records (the default ``jobs-history``), not the month; what a schedule
case asserts (``runs``, the ticks it fired) is counted from the service's fires, not read back
from the records."""

from __future__ import annotations

from scheduler.engine.client import Client
from scheduler.service.housekeeping import apply_retention


class Aging:
    """Calls the service's retention at the clock's time every ``interval`` virtual seconds,
    from the first moment a run of the period can be older than ``jobs-history`` (none can
    before: no call)."""

    def __init__(self, client: Client, start: float, interval: float) -> None:
        self.client = client
        self.interval = interval
        self.due = start + float(client.config["jobs-history"])

    def at(self, now: float) -> None:
        """Age the records out at ``now`` when a retention is due."""
        if now < self.due:
            return
        apply_retention(self.client, now)
        self.due = now + self.interval
