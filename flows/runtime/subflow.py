"""The job of a sub-flow step (klass :data:`flows.flowfile.subflow_job.SUBFLOW_KLASS`): start the
child run, hand the step to the engine while it runs, and report how it ended.

A worker runs it like any flow job (its ``with`` resolved first: :mod:`flows.runtime.worker_hook`).
It holds no worker while the child runs; each run of it is short and safe to repeat:

1. ``subflow.wait`` (lua/commands/subflow.lua) for the child run ``<parent run>.<step>``. When the
   run does not exist yet, the child file is read, validated and built with the one run builder
   (:func:`flows.runs.build.build_run`: the step's ``with`` as params, the parent's logical
   time) and the call submits it. Either way the engine, in that same call, parks the step on
   the child's jobs (the reply ``waiting``: the job ends here with :class:`HandedOver`, and the
   engine releases it when every job of the child is done) or replies how the child ended.
2. Released, the job runs again: ``succeeded`` completes the step with the child flow's
   ``outputs:`` (:mod:`flows.expand.flow_outputs`) as its result; any other end fails it in group
   ``subflow-failed``, naming the child's failed jobs.

A worker killed at any point leaves either nothing done (its lock runs out, the job runs again
and the child run's fixed id makes the submission happen once) or the step parked by one atomic
call. A file that cannot be read, is invalid, does not take the params, or makes a run the
engine refuses fails the step in group ``subflow-invalid`` (retrying would not help), and so does
a step whose ``with`` resolves to other params than its child run was submitted with (a re-run
after an upstream step's output changed): a re-run runs the child as it was submitted.
"""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from flows.flowfile.job_data import FlowsMeta, UnresolvedReference
from flows.flowfile.params import ParamError
from flows.flowfile.subflow_job import (
    FILE_KEY,
    LOGICAL_TIME_KEY,
    MAX_DEPTH,
    PARAMS_KEY,
    child_run_id,
)
from flows.runs.build import build_run, read_flow_file
from flows.runs.read import load_run, run_outputs
from flows.validation.validate import InvalidFlow
from scheduler.engine.errors import (
    EngineError,
    FlowsError,
    InvalidArgument,
    JobNotFound,
    TooLarge,
)
from scheduler.engine.job import Session
from scheduler.worker import FailJob, HandedOver, JobContext

INVALID_GROUP: Final = "subflow-invalid"
FAILED_GROUP: Final = "subflow-failed"
MAX_LISTED: Final = 5
"""Failed child jobs a failure message names (then how many more)."""
MESSAGE_LINES: Final = 12
"""Lines of each failed child job's message quoted (its first, then its last)."""
GIVEN_KEY: Final = "parent_with"
"""The child run's record field holding the params its step gave (JSON text, keys sorted)."""


def run(job: JobContext) -> dict[str, Any]:
    """Run the sub-flow step ``job`` (see the module doc): its child's outputs once it succeeded."""
    meta = FlowsMeta.from_data(job.job.data)
    if meta is None:
        raise FailJob(INVALID_GROUP, "a sub-flow job needs its flow meta (put by a flow run)")
    client = job.job.client
    child = child_run_id(meta.run, meta.step)
    _same_params(client, child, _given(job))
    try:
        reply = _wait(client, job, child)
    except JobNotFound as missing:
        if "no run" not in str(missing):
            raise
        record, jobs_text = _build(client, job, meta, child)
        try:
            reply = _wait(client, job, child, json.dumps(record), jobs_text)
        except (InvalidArgument, TooLarge) as refused:  # the run itself: retrying cannot help
            raise FailJob(INVALID_GROUP, f"run {child} was refused: {refused}") from None
    if reply == "waiting":
        raise HandedOver(f"waiting for its child run {child}")
    if reply != "succeeded":
        raise FailJob(FAILED_GROUP, _failure(client, meta.run, child, str(reply)))
    return _outputs(client, child)


def _wait(client: Session, job: JobContext, child: str, *submission: str) -> Any:
    return client.engine.call("subflow.wait", job.jid, job.worker, job.queue, child, *submission)


def _build(
    client: Session, job: JobContext, meta: FlowsMeta, child: str
) -> tuple[dict[str, Any], str]:
    """The child run's record and jobs (JSON), or :class:`FailJob` saying why there are none."""
    depth = _depth(client, meta.run) + 1
    if depth > MAX_DEPTH:
        raise FailJob(
            INVALID_GROUP, f"sub-flows nest more than {MAX_DEPTH} deep: run {child} is not started"
        )
    path = Path(str(job.data.get(FILE_KEY, "")))
    params = job.data.get(PARAMS_KEY) or {}
    try:
        source = read_flow_file(path)
        built = build_run(
            source,
            run_id=child,
            logical_time=datetime.fromisoformat(str(job.data.get(LOGICAL_TIME_KEY))),
            params=params,
            trigger="parent",
        )
    except OSError as error:
        raise FailJob(INVALID_GROUP, f"the sub-flow file cannot be read: {error}") from None
    except InvalidFlow as invalid:
        lines = [finding.format() for finding in invalid.findings if finding.severity == "error"]
        raise FailJob(INVALID_GROUP, "the sub-flow file is invalid:\n" + "\n".join(lines)) from None
    except (ParamError, FlowsError, ValueError) as error:
        raise FailJob(INVALID_GROUP, f"run {child} of {path} cannot be built: {error}") from None
    record = {
        **built.request.run,
        "parent_run": meta.run,
        "parent_step": meta.step,
        "depth": depth,
        GIVEN_KEY: _given(job),
    }
    return record, built.request.jobs_json()


def _given(job: JobContext) -> str:
    """The params the step gives its child now (its ``with``, resolved), as canonical JSON."""
    params = job.data.get(PARAMS_KEY) or {}
    return json.dumps(params, sort_keys=True, separators=(",", ":"), allow_nan=False)


_NOT_GIVEN: Final = object()


def _same_params(client: Session, child: str, given: str) -> None:
    """Refuse (:class:`FailJob`) to run the existing child run ``child`` again for a step that
    now gives it other params than it was submitted with: a re-run (or retry) resumes the child
    as it was submitted, so it would run with the params of before without a word."""
    raw = client.engine.call("run.get", child)
    kept = json.loads(raw).get(GIVEN_KEY) if raw is not None else None
    if not isinstance(kept, str) or kept == given:  # no child yet, or one of an older release
        return
    then, now = json.loads(kept), json.loads(given)
    changes = []
    for name in sorted(set(then) | set(now)):
        before, after = then.get(name, _NOT_GIVEN), now.get(name, _NOT_GIVEN)
        if before != after:
            changes.append(f"{name}: {_shown(before)} then, {_shown(after)} now")
    raise FailJob(
        INVALID_GROUP,
        f"run {child} was submitted with other params than the step gives it now "
        f"({'; '.join(changes)}): a re-run runs the child run as it was submitted; "
        "start a new run of the parent to run it with these",
    )


def _shown(value: Any) -> str:
    return "(not given)" if value is _NOT_GIVEN else repr(value)


def _depth(client: Session, run_id: str) -> int:
    """How deep run ``run_id`` is among sub-flows (0: started by itself)."""
    raw = client.engine.call("run.get", run_id)
    if raw is None:
        return 0
    try:
        return int(json.loads(raw).get("depth") or 0)
    except (TypeError, ValueError):
        return 0


def _failure(client: Session, parent: str, child: str, status: str) -> str:
    """Why the step fails, in the child's terms: the child's end, then each failed step of it
    with its group and the end of its message (a shell step's exit code and last lines)."""
    lines = [f"child run {child} {status}"]
    view = load_run(client, child)
    failed = view.failed_jobs if view is not None else []
    for failed_job in failed[:MAX_LISTED]:
        failure = failed_job.failure or {}
        step = failed_job.jid.removeprefix(child + ":")
        lines.append(f"  step {step} {failed_job.state} ({failure.get('group', '')}):")
        message = str(failure.get("message", "")).strip().splitlines()
        if len(message) > MESSAGE_LINES:
            message = [message[0], "...", *message[-(MESSAGE_LINES - 2) :]]
        lines += [f"    {line}" for line in message]
    if len(failed) > MAX_LISTED:
        lines.append(f"  ... and {len(failed) - MAX_LISTED} more")
    lines.append(f"fix the cause, then: flows retry {shlex.quote(parent)}")  # as it is pasted
    return "\n".join(lines)


def _outputs(client: Session, child: str) -> dict[str, Any]:
    """The child flow's ``outputs:``, read from its steps' results ({} when it has none)."""
    try:
        return run_outputs(client, child)
    except (UnresolvedReference, EngineError) as error:
        raise FailJob("flows-reference", f"the child's outputs: {error}") from None


__all__ = ["FAILED_GROUP", "INVALID_GROUP", "run"]
