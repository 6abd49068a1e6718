"""The flow layer as the scheduler service sees it: :class:`FlowsSource`.

The service (:mod:`scheduler.service.loop`) knows schedules, not flows; this module turns a flow
file into a schedule :class:`~scheduler.service.records.Definition` (with every check
``flows validate`` runs) and a registered definition back into a run, built as every run is
(:func:`flows.runs.build.build_run`). Runs are built from the *registered* text, not the file on
disk, so every service fires exactly the version that was registered.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from flows.expand.run_ids import run_id_for
from flows.expand.run_specs import content_hash
from flows.runs.build import FlowFile, build_run, notify_plan, parse_flow_text
from flows.validation.schedule_checks import epoch
from flows.validation.validate import InvalidFlow
from scheduler.service.records import Definition, InvalidSource, RunRequest

#: Parsed flows kept by content hash (a service fires the same few versions over and over).
CACHE_SIZE = 100_000


class FlowsSource:
    """Loads flow files into schedule definitions and builds registered ones into runs."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._flows: OrderedDict[str, FlowFile] = OrderedDict()
        # Content hash → the notify rules of a file :meth:`load` parsed, scheduled or not: what
        # :meth:`channels` answers without parsing the file again.
        self._rules: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def load(self, path: Path, text: str, now: float) -> Definition | None:
        """The file's schedule definition; None without a ``schedule:`` block.

        Raises :class:`~scheduler.service.records.InvalidSource` with every error
        ``flows validate`` would print when the file does not validate (its ``findings``: the
        error :class:`~flows.flowfile.findings.Finding` objects).
        """
        try:
            # Expanded too, as flows validate does: a flow no run of which could be submitted
            # is refused now, not at each tick.
            flow_file = parse_flow_text(
                text, str(path.resolve()), shown=str(path), now=now, expand_check=True
            )
        except InvalidFlow as invalid:
            errors = [f for f in invalid.findings if f.severity == "error"]
            message = "\n".join(f.format() for f in errors) or f"{path}: invalid flow"
            raise InvalidSource(message, errors, declared_name(text)) from None
        self._keep_rules(flow_file)
        if flow_file.flow.schedule is None:
            return None
        self._remember(flow_file)
        return definition_of(flow_file)

    def channels(self, path: Path, text: str) -> Sequence[Mapping[str, Any]]:
        """The ``notify:`` rules of the flow file at ``path``, as :func:`notify_plan` puts them
        in its runs (kept when :meth:`load` parsed it; else it is parsed)."""
        with self._lock:
            rules = self._rules.get(content_hash(text))
        if rules is not None:
            return list(rules)
        try:
            flow_file = parse_flow_text(text, str(path.resolve()), shown=str(path))
        except InvalidFlow:
            return []
        return self._keep_rules(flow_file)

    def _keep_rules(self, flow_file: FlowFile) -> list[dict[str, Any]]:
        plan = notify_plan(flow_file.flow)
        rules = list(plan.rules) if plan is not None else []
        with self._lock:
            self._rules[flow_file.hash] = rules
            self._rules.move_to_end(flow_file.hash)
            while len(self._rules) > self._cache_size:
                self._rules.popitem(last=False)
        return list(rules)

    def run_id(self, flow: str, tick: float) -> str:
        """``<flow>@<UTC fire time>`` (:mod:`flows.expand.run_ids`)."""
        return run_id_for(flow, tick)

    def build(
        self, definition: Definition, run_id: str, tick: float, trigger: str, delay: float
    ) -> RunRequest:
        """The run of ``tick``: one job per step as ``flows run`` puts them, the jobs without
        dependencies delayed ``delay`` seconds. Raises ValueError (ExpansionError, ParamError,
        an engine limit) when the registered flow cannot be built."""
        built = build_run(
            self._flow_file(definition),
            run_id=run_id,
            logical_time=datetime.fromtimestamp(tick, ZoneInfo(definition.timezone)),
            params=definition.params,
            trigger=trigger,
            schedule=definition.name,
            tick=None if trigger == "manual" else tick,
            delay=delay,
        )
        return built.request

    def _flow_file(self, definition: Definition) -> FlowFile:
        with self._lock:
            flow_file = self._flows.get(definition.hash)
            if flow_file is not None:
                self._flows.move_to_end(definition.hash)
                return flow_file
        try:
            flow_file = parse_flow_text(definition.source, definition.file)
        except InvalidFlow as invalid:
            errors = "; ".join(f.message for f in invalid.findings if f.severity == "error")
            raise ValueError(f"the registered flow no longer validates: {errors}") from None
        self._remember(flow_file)
        return flow_file

    def _remember(self, flow_file: FlowFile) -> None:
        with self._lock:
            self._flows[flow_file.hash] = flow_file
            self._flows.move_to_end(flow_file.hash)
            while len(self._flows) > self._cache_size:
                self._flows.popitem(last=False)


# A top-level `name: x` line (quoted or not, a comment after it): read without YAML, so that a
# file whose YAML is broken still says which flow it is.
_NAME_LINE = re.compile(
    r"""^name:[ \t]*(["']?)([a-z0-9_-]{1,64})\1[ \t]*(?:#.*)?\r?$""", re.MULTILINE
)


def declared_name(text: str) -> str | None:
    """The flow name a file declares on a top-level ``name:`` line, whether or not the rest
    of it validates; None when it has no such line."""
    found = _NAME_LINE.search(text)
    return found.group(2) if found else None


def definition_of(flow_file: FlowFile) -> Definition:
    """The schedule definition of a validated flow that has a schedule."""
    flow = flow_file.flow
    schedule = flow.schedule
    assert schedule is not None
    return Definition(
        name=flow.name,
        file=flow_file.file,
        hash=flow_file.hash,
        source=flow_file.text,
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


__all__ = ["FlowsSource", "declared_name", "definition_of"]
