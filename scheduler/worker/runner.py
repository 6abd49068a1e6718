"""Run one job and decide its outcome; no engine writes happen here.

:func:`run` calls the job's function inside the job's sandbox and maps what happened to an
:class:`Outcome` (complete with a result, retry with a delay, fail in a group, release, bury, or
handed or lost: nothing to report, the worker no longer holds the job). The worker applies outcomes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Literal

from scheduler import secrets
from scheduler.engine import limits
from scheduler.engine.errors import EngineError, InvalidArgument
from scheduler.worker.context import JobContext
from scheduler.worker.failures import user_traceback
from scheduler.worker.imports import KlassNotFound, add_paths, resolve
from scheduler.worker.outcomes import (
    BuryJob,
    FailJob,
    HandedOver,
    JobInterrupted,
    ReleaseJob,
    RetryJob,
    TimeoutInterrupt,
)

MAX_MESSAGE = 16384

Kind = Literal["complete", "skip", "retry", "fail", "release", "bury", "handed", "lost"]


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    result: Any = None
    delay: float = 0.0
    group: str = ""
    message: str = ""


def masked_outcome(outcome: Outcome) -> Outcome:
    """The outcome with every secret the process resolved masked in its message and result."""
    if outcome.message:
        message = secrets.masked(outcome.message)
        if message != outcome.message:
            outcome = dataclasses.replace(outcome, message=message)
    if outcome.result is not None:
        result = secrets.masked_value(outcome.result)
        if result != outcome.result:
            outcome = dataclasses.replace(outcome, result=result)
    return outcome


# Most jobs complete without a result: one shared (immutable) outcome for all of them.
_COMPLETE = Outcome("complete")


def _tail(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else "...\n" + text[-MAX_MESSAGE:]


def failure(group: str, message: str) -> Outcome:
    return Outcome("fail", group=group, message=_tail(message))


def skipped(message: str) -> Outcome:
    return Outcome("skip", message=_tail(message))


def _retry(ctx: JobContext, group: str, message: str, delay: float | None = None) -> Outcome:
    if delay is None:
        delay = ctx.options.retry.delay_for(ctx.attempt)
    return Outcome("retry", delay=delay, group=group, message=_tail(message))


def _json_result(value: Any) -> Any:
    """The result as stored on the job: JSON-serialisable values as they are, others as text."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _chosen(chosen: ReleaseJob | BuryJob | HandedOver) -> Outcome:
    """The outcome a job chose that uses no retry and reports no result."""
    if isinstance(chosen, ReleaseJob):
        return Outcome("release", delay=chosen.delay)
    if isinstance(chosen, BuryJob):
        return Outcome("bury", message=_tail(chosen.message))
    return Outcome("handed", message=_tail(chosen.message))


def run(ctx: JobContext) -> Outcome:
    """Run the job's function and return what should happen to the job."""
    try:
        add_paths(ctx.options.pythonpath)
        function = resolve(ctx.klass, ctx.queue)
    except KlassNotFound as error:
        return failure("import-error", str(error))
    except Exception as error:  # the job's module raised while imported
        return failure("import-error", user_traceback(error))
    try:
        value = function(ctx)
    except JobInterrupted as interrupt:
        if isinstance(interrupt, TimeoutInterrupt):
            return stopped(ctx, "timeout")
        return stopped(ctx, ctx.stop_reason or interrupt.reason)
    except RetryJob as retry:
        if ctx.stopping:  # e.g. a shell step whose process the worker killed
            return stopped(ctx, ctx.stop_reason)
        return _retry(
            ctx, retry.group or "retry", retry.message or "job asked for a retry", retry.delay
        )
    except FailJob as fail:
        return failure(fail.group, fail.message or fail.group)
    except (ReleaseJob, BuryJob, HandedOver) as chosen:
        return _chosen(chosen)
    except Exception as error:
        if ctx.stopping:
            # The job failed because we stopped it (e.g. its subprocess was killed).
            return stopped(ctx, ctx.stop_reason)
        group = getattr(error, "group", None) or type(error).__name__
        return _retry(ctx, str(group), user_traceback(error))
    if ctx.stopping and ctx.stop_reason != "timeout":
        return stopped(ctx, ctx.stop_reason)
    return _completed(value)


def _completed(value: Any) -> Outcome:
    """Complete with ``value`` as the result, or fail in ``bad-result`` when the engine would
    refuse it (too large, too deep, NaN): better now than after the lock ran out, retry by retry."""
    if value is None:  # most jobs: nothing to check
        return _COMPLETE
    try:
        if limits.json_depth(value) > limits.MAX_JSON_DEPTH:
            raise InvalidArgument(
                f'Complete(): Arg "result" nests more than {limits.MAX_JSON_DEPTH} levels deep'
            )
        result = _json_result(value)
        limits.encode_payload("complete", "result", result)
    except RecursionError:
        return failure("bad-result", "the job's result nests too deeply to encode")
    except EngineError as error:
        return failure("bad-result", f"the job's result cannot be stored: {error}")
    return Outcome("complete", result=result)


def stopped(ctx: JobContext, reason: str) -> Outcome:
    """The outcome of a run the worker stopped: a timeout uses a retry; at shutdown the job is
    handed back (only now that its run has ended, so no other worker runs it meanwhile); after a
    lost lock there is nothing to report."""
    if reason == "timeout":
        return _retry(ctx, "timeout", f"job exceeded its timeout of {ctx.options.timeout}s")
    if reason == "shutdown":
        return Outcome("release")
    return Outcome("lost", message=reason)
