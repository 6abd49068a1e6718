"""Building a run: the one path from a flow file to what the engine takes.

Every run is built here, whoever starts it: ``flows run`` and a sub-flow step's child run
(:func:`read_flow_file`), the scheduler service's ticks and backfills, and a manual trigger from
``flows schedule trigger`` or the REST API (:func:`parse_flow_text` of the registered text,
:mod:`flows.runs.service_source`). The file is read,
validated and hashed once (:class:`FlowFile`); :func:`build_run` expands it for one run id and
logical time, binds and checks the params, checks the engine's limits and returns the run record
and its jobs' JSON text (:class:`~scheduler.service.records.RunRequest`) that ``flow.submit``,
``schedule.fire`` and ``schedule.trigger`` write in one engine call. A job has one shape on the
way: the :class:`~flows.expand.jobs.JobSpec` expansion makes, encoded once. No I/O but reading
the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from flows.expand.cache_keys import seal
from flows.expand.flow_outputs import RECORD_FIELD, outputs_record
from flows.expand.jobs import FlowPlan, JobSpec, expand_run, plan_flow
from flows.expand.run_specs import check_limits, compact_json, content_hash
from flows.flowfile.model import Flow
from flows.flowfile.notify_rules import job_flags, run_rules
from flows.flowfile.subflow_files import child_queues
from flows.flowfile.yaml_reader import RefusedFile, read_text
from flows.gc_pause import gc_paused
from flows.runs.graph import stored_run_graph
from flows.validation.validate import InvalidFlow, validate_text
from scheduler.service.records import RunRequest


@dataclass(frozen=True)
class FlowFile:
    """A flow file read, validated and hashed once: ``file`` is its absolute path (a registered
    flow's recorded path), ``hash`` names the exact text a run was built from."""

    flow: Flow
    file: str
    text: str
    hash: str

    @cached_property
    def flow_dir(self) -> Path:
        """Where relative paths of the flow (job modules, working directories) start (made
        once: every run built from the file asks, twice)."""
        return Path(self.file).parent

    @cached_property
    def plan(self) -> FlowPlan:
        """What every run of the file shares (:func:`~flows.expand.jobs.plan_flow`): worked
        out once, as a schedule builds a run of the same file each tick."""
        return plan_flow(self.flow)


def parse_flow_text(
    text: str,
    file: str,
    *,
    shown: str | None = None,
    now: float | None = None,
    expand_check: bool = False,
) -> FlowFile:
    """The flow in ``text``, which lives (or lived) at ``file``; raises :class:`InvalidFlow` with
    every finding when it has errors. Findings name the file ``shown`` (default: ``file``), and
    its relative paths start from that one's folder. ``expand_check``: also refuse a flow no run
    of which could be submitted with its param defaults (what ``flows validate`` checks)."""
    shown = file if shown is None else shown
    result = validate_text(
        text, file=shown, flow_dir=Path(shown).parent, now=now, expand=expand_check
    )
    if result.flow is None:
        raise InvalidFlow(result.findings)
    return FlowFile(result.flow, file, text, content_hash(text))


def read_flow_file(path: Path, *, now: float | None = None, expand_check: bool = False) -> FlowFile:
    """:func:`parse_flow_text` of the file at ``path``; findings name the path as given, the
    run records where it is. A file too large or not UTF-8 is an :class:`InvalidFlow` too."""
    try:
        text = read_text(path)
    except RefusedFile as refused:
        raise InvalidFlow([refused.finding]) from None
    return parse_flow_text(
        text, str(path.resolve()), shown=str(path), now=now, expand_check=expand_check
    )


def validated_flow_file(flow: Flow, path: Path) -> FlowFile:
    """``flow``, just validated from the file at ``path``, as :func:`read_flow_file` gives it,
    without validating it again (only its text read again, for the hash). Raises
    :class:`InvalidFlow` when the file can no longer be read."""
    try:
        text = read_text(path)
    except RefusedFile as refused:
        raise InvalidFlow([refused.finding]) from None
    return FlowFile(flow, str(path.resolve()), text, content_hash(text))


@dataclass(frozen=True)
class BuiltRun:
    """A run ready to submit, and the queues its jobs go to (for a local worker)."""

    request: RunRequest
    queues: tuple[str, ...]

    @property
    def run_id(self) -> str:
        return self.request.run_id


def build_run(
    source: FlowFile,
    *,
    run_id: str,
    logical_time: datetime,
    params: Mapping[str, Any],
    trigger: str,
    schedule: str | None = None,
    tick: float | None = None,
    delay: float = 0.0,
) -> BuiltRun:
    """The run ``run_id`` of ``source`` at ``logical_time``.

    ``params`` are bound to the flow's declarations (text converted to the declared type,
    defaults filled, unknown names and wrong types refused:
    :class:`~flows.flowfile.params.ParamError`); the run record keeps the bound values. An
    expansion the flow cannot make raises :class:`~flows.expand.jobs.ExpansionError`, a run over
    the engine's limits the engine's error class. ``trigger`` says why the run was started
    (``manual``, or the service's ``schedule``, ``catch-up``, ``buffered``), kept in the run
    record.
    ``schedule`` and ``tick`` name the schedule and the fire time a scheduled run stands for;
    the jobs without dependencies start ``delay`` seconds late (the schedule's jitter).
    """
    # One pause for all of it: see flows.gc_pause.
    with gc_paused():
        expansion = expand_run(
            source.flow,
            run_id=run_id,
            logical_time=logical_time,
            params=params,
            flow_dir=source.flow_dir,
            plan=source.plan,
        )
        jobs = expansion.jobs
        seal(jobs)  # cached steps' own keys, their declared files read now
        outputs = outputs_record(source.flow, expansion)
        return assemble_run(
            run_id,
            source.flow.name,
            jobs,
            # As bound, not as given: typed (`-p n=5` is 5), defaults filled, whoever started it.
            params=expansion.params,
            trigger=trigger,
            file_hash=source.hash,
            file=source.file,
            schedule=schedule,
            tick=tick,
            delay=delay,
            outputs=outputs,
            more_queues=child_queues(source.flow, source.flow_dir),
            notify=notify_plan(source.flow),
            flow_model=source.flow,
            max_active_runs=source.flow.concurrency.max_active_runs,
        )


@dataclass(frozen=True)
class NotifyPlan:
    """A run's ``notify:`` rules (the run record's ``notify``), each step's job flag, and the
    run's and its steps' ``deadline:`` in seconds."""

    rules: list[dict[str, Any]]
    flags: dict[str, str]
    deadline: float | None = None
    step_deadlines: dict[str, float] | None = None


def notify_plan(flow: Flow) -> NotifyPlan | None:
    """What the run of ``flow`` needs for its notifications and deadlines (None: nothing)."""
    steps = [(step_id, step.notify) for step_id, step in flow.steps.items() if step.notify]
    deadlines = {step_id: s.deadline for step_id, s in flow.steps.items() if s.deadline}
    if not flow.notify and not steps and not deadlines and not flow.deadline:
        return None
    flags: dict[str, str] = {}
    for step_id in [*flow.steps, *(name for name, _ in flow.hooks.defined())]:
        step = flow.steps.get(step_id)
        flag = job_flags(flow.notify, step.notify if step is not None else ())
        if flag:
            flags[step_id] = flag
    return NotifyPlan(run_rules(flow.notify, steps), flags, flow.deadline, deadlines or None)


def assemble_run(
    run_id: str,
    flow: str,
    jobs: Sequence[JobSpec],
    *,
    params: Mapping[str, Any],
    trigger: str = "manual",
    file_hash: str = "",
    file: str = "",
    schedule: str | None = None,
    tick: float | None = None,
    delay: float = 0.0,
    outputs: Mapping[str, Any] | None = None,
    more_queues: Iterable[str] = (),
    notify: NotifyPlan | None = None,
    flow_model: Flow | None = None,
    max_active_runs: int | None = None,
) -> BuiltRun:
    """The run record and jobs' JSON text of expanded ``jobs`` (the second half of
    :func:`build_run`, for callers that expand themselves: benchmarks and tests). ``outputs``:
    the flow's (:func:`flows.expand.flow_outputs.outputs_record`); ``more_queues``: queues its child
    runs use, which a local worker of the run must also take jobs from."""
    # A few containers per job, among the many the expansion left alive: see flows.gc_pause.
    with gc_paused():
        queues = tuple(sorted({job.queue for job in jobs} | set(more_queues)))
        record: dict[str, Any] = {
            "flow": flow,
            "params": dict(params),
            "trigger": trigger,
            "hash": file_hash,
            "file": file,
            "queues": list(queues),
        }
        if schedule is not None:
            record["schedule"] = schedule
        if tick is not None:
            record["tick"] = tick  # the fire time it stands for (a manual run stands for none)
        if outputs is not None:
            record[RECORD_FIELD] = dict(outputs)
        if notify is not None and notify.rules:
            record["notify"] = notify.rules
        if notify is not None and notify.deadline:
            record["deadline"] = notify.deadline
        if max_active_runs:
            # The engine call that fires a schedule's tick holds the flow's limit.
            record["max_active_runs"] = max_active_runs
        # The run carries its graph: every surface draws it without the flow file. As JSON
        # text, which the engine keeps as it is (an object it would decode and encode again).
        record["graph"] = compact_json(stored_run_graph(jobs, flow_model))
        # The limits are checked now, before anything is sent; the engine takes the text as it is.
        jobs_text = check_limits(run_id, _adjusted(jobs, delay, notify))
        return BuiltRun(RunRequest(run_id, record, jobs_text, len(jobs)), queues)


def _adjusted(
    jobs: Sequence[JobSpec], delay: float, notify: NotifyPlan | None
) -> Sequence[JobSpec]:
    """The jobs as the run sends them: those without dependencies ``delay`` seconds late; a
    step's notify flag and deadline on each of its jobs."""
    flags = notify.flags if notify is not None else {}
    deadlines = (notify.step_deadlines or {}) if notify is not None else {}
    if not flags and not deadlines and delay <= 0:
        return jobs
    adjusted = []
    for job in jobs:
        changes: dict[str, Any] = {}
        if job.step in flags:
            changes["notify"] = flags[job.step]
        if job.step in deadlines:
            changes["deadline"] = deadlines[job.step]
        if delay > 0 and not job.depends:
            changes["delay"] = job.delay + delay
        adjusted.append(replace(job, **changes) if changes else job)
    return adjusted


__all__ = ["BuiltRun", "FlowFile", "assemble_run", "build_run", "parse_flow_text", "read_flow_file"]
