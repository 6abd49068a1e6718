"""The flow layer as the scheduler service sees it: :class:`FlowsSource`.

The service (:mod:`scheduler.service.loop`) knows schedules, not flows; this module turns a flow
file
into a schedule :class:`~scheduler.service.schedules.Definition` (with every check ``flows
validate``
runs) and a registered definition back into a run (``expand`` plus the run record), the same
way ``flows run`` builds one. Runs are built from the *registered* text, not the file on disk,
so every service fires exactly the version that was registered.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from flows.expand import expand
from flows.model import Flow
from flows.run_specs import content_hash, job_spec
from flows.schedule_checks import epoch
from flows.validate import validate_text
from scheduler.service.records import Definition, InvalidSource, RunRequest

#: Parsed flows kept by content hash (a service fires the same few versions over and over).
CACHE_SIZE = 100_000


class FlowsSource:
    """Loads flow files into schedule definitions and expands registered ones into runs."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._flows: OrderedDict[str, Flow] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def load(self, path: Path, text: str, now: float) -> Definition | None:
        """The file's schedule definition; None without a ``schedule:`` block.

        Raises :class:`~scheduler.service.schedules.InvalidSource` with every error ``flows
        validate``
        would print when the file does not validate.
        """
        resolved = path.resolve()
        # Expanded too, as flows validate does: a flow no run of which could be submitted is
        # refused now, not at each tick.
        result = validate_text(text, file=str(path), flow_dir=resolved.parent, now=now, expand=True)
        if result.flow is None:
            errors = [f.format() for f in result.findings if f.severity == "error"]
            raise InvalidSource("\n".join(errors) or f"{path}: invalid flow")
        flow = result.flow
        if flow.schedule is None:
            return None
        digest = content_hash(text)
        self._remember(digest, flow)
        return definition_of(flow, resolved, text, digest)

    def build(
        self, definition: Definition, run_id: str, tick: float, trigger: str, delay: float
    ) -> RunRequest:
        """The run of ``tick``: one job per step as ``flows run`` puts them, the jobs without
        dependencies delayed ``delay`` seconds. Raises ValueError (ExpansionError, ParamError)
        when the registered flow cannot be expanded."""
        flow = self._flow(definition)
        flow_dir = Path(definition.file).parent
        requests = expand(
            flow,
            run_id=run_id,
            logical_time=datetime.fromtimestamp(tick, ZoneInfo(definition.timezone)),
            params=definition.params,
            flow_dir=flow_dir,
        )
        jobs = []
        for request in requests:
            spec = job_spec(request)
            if delay > 0 and not request.depends:
                spec["delay"] = request.delay + delay
            jobs.append(spec)
        run: dict[str, object] = {
            "flow": flow.name,
            "params": dict(definition.params),
            "trigger": trigger,
            "hash": definition.hash,
            "file": definition.file,
            "queues": sorted({r.queue for r in requests}),
            "schedule": definition.name,
        }
        if trigger != "manual":
            run["tick"] = tick  # the fire time it stands for (a manual run stands for none)
        return RunRequest(run_id, run, jobs)

    def _flow(self, definition: Definition) -> Flow:
        with self._lock:
            flow = self._flows.get(definition.hash)
            if flow is not None:
                self._flows.move_to_end(definition.hash)
                return flow
        result = validate_text(
            definition.source, file=definition.file, flow_dir=Path(definition.file).parent
        )
        if result.flow is None:
            errors = "; ".join(f.message for f in result.findings if f.severity == "error")
            raise ValueError(f"the registered flow no longer validates: {errors}")
        self._remember(definition.hash, result.flow)
        return result.flow

    def _remember(self, digest: str, flow: Flow) -> None:
        with self._lock:
            self._flows[digest] = flow
            self._flows.move_to_end(digest)
            while len(self._flows) > self._cache_size:
                self._flows.popitem(last=False)


def definition_of(flow: Flow, path: Path, text: str, digest: str) -> Definition:
    """The schedule definition of a validated flow that has a schedule."""
    schedule = flow.schedule
    assert schedule is not None
    return Definition(
        name=flow.name,
        file=str(path),
        hash=digest,
        source=text,
        cron=tuple(schedule.cron),
        timezone=schedule.timezone,
        start=epoch(schedule.start, schedule.timezone),
        end=epoch(schedule.end, schedule.timezone),
        jitter=schedule.jitter,
        catchup=schedule.catchup.policy,
        window=schedule.catchup.window,
        max_runs=schedule.catchup.max_runs,
        overlap=schedule.overlap,
        params={},
        paused=schedule.paused,
    )


__all__ = ["FlowsSource", "definition_of"]
