"""Schedule checks: the cron arithmetic is :func:`scheduler.cron.validate_schedule`'s (bad
expressions, never-firing dates, unknown zones, daylight-saving gaps and overlaps, catch-ups
that would enqueue too many runs); this module maps its findings onto the file and adds what
needs the whole flow: a scheduled run has nobody to give a required param.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flows.flowfile.findings import DataPath, FindingSink, Severity
from flows.flowfile.model import Param, Schedule
from scheduler.cron import validate_schedule
from scheduler.engine.limits import MAX_SOURCE_BYTES

_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def check_schedule(
    schedule: Schedule,
    raw_cron: Any,
    params: Mapping[str, Param],
    sink: FindingSink,
    now: float,
) -> None:
    """Report the schedule's problems; ``raw_cron`` is ``schedule.cron`` as written (str/list)."""
    problems = validate_schedule(
        raw_cron if isinstance(raw_cron, str) else list(schedule.cron),
        schedule.timezone,
        now=now,
        catchup_policy=schedule.catchup.policy,
        catchup_window=schedule.catchup.window,
        max_runs=schedule.catchup.max_runs,
        overlap=schedule.overlap,
        jitter=schedule.jitter,
        start=epoch(schedule.start, schedule.timezone),
        end=epoch(schedule.end, schedule.timezone),
    )
    for problem in problems:
        severity = Severity.ERROR if problem.severity == "error" else Severity.WARNING
        sink.add(severity, field_path(problem.field), "schedule", problem.message, problem.hint)
    for name, param in params.items():
        if param.is_required:
            sink.error(
                ("params", name),
                "schedule-param",
                f"param '{name}' is required, but scheduled runs give no params",
                "give it a default (scheduled runs use the defaults), or set 'required: false'",
            )


def check_source_size(text: str, sink: FindingSink) -> None:
    """A scheduled flow's file is registered whole (the service fires the registered text):
    one past the engine's bound could be run by hand but never scheduled."""
    if len(text) * 4 <= MAX_SOURCE_BYTES:
        return  # fewer bytes than that whatever its characters
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        sink.error(
            ("schedule",),
            "schedule-size",
            f"the flow file is {size:,} bytes; a scheduled flow's file may have at most "
            f"{MAX_SOURCE_BYTES:,} (the scheduler registers it whole)",
            "move large data out of the file (into a file a step reads), or drop the schedule",
            at_key=True,
        )


def epoch(moment: datetime | None, timezone: str) -> float | None:
    """Epoch seconds of a schedule bound; a bound without an offset is read in ``timezone``."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        try:
            moment = moment.replace(tzinfo=ZoneInfo(timezone))
        except (ZoneInfoNotFoundError, ValueError):
            return None  # the unknown zone is reported on its own
    return moment.timestamp()


def field_path(field: str) -> DataPath:
    """``schedule.cron[0]`` → ``("schedule", "cron", 0)``."""
    return tuple(int(index) if index else name for name, index in _FIELD_PART.findall(field))
