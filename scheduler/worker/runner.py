"""Run one job and decide its outcome, once; no engine writes happen here.

:func:`run` calls the worker's ``prepare`` hook and then the job's function, and maps what
happened to an :class:`Outcome` (complete with its result encoded, skip, retry with a delay,
fail in a group, release, bury, or handed or lost: nothing to report, the worker no longer holds
the job). What a job or hook raises to choose its outcome is caught in one place, and every
secret the process resolved is masked before the outcome leaves here.
:mod:`scheduler.worker.reporting` sends outcomes to the engine.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

from scheduler import secrets
from scheduler.engine import limits
from scheduler.engine.errors import EngineError, InvalidArgument
from scheduler.worker import results
from scheduler.worker.context import JobContext
from scheduler.worker.failures import user_traceback
from scheduler.worker.imports import KlassNotFound, add_paths, resolve
from scheduler.worker.outcomes import (
    BuryJob,
    FailJob,
    HandedOver,
    JobInterrupted,
    JobOutcome,
    ReleaseJob,
    RetryJob,
    SkipJob,
    TimeoutInterrupt,
)

MAX_MESSAGE = 16384

Kind = Literal["complete", "skip", "retry", "fail", "release", "bury", "handed", "lost"]
Prepare = Callable[[JobContext], None]
# Entered around the part of a run that may be interrupted (the import and the job's function);
# it gives False when the job was stopped before it started.
Around = AbstractContextManager[bool]


@dataclass(frozen=True)
class Outcome:
    """What should happen to a job: ``kind`` and what that needs (``result``: the result as
    the JSON text the engine stores, "" for none)."""

    kind: Kind
    result: str = ""
    delay: float = 0.0
    group: str = ""
    message: str = ""


# Most jobs complete without a result: one shared (immutable) outcome for all of them.
_COMPLETE = Outcome("complete")


def _tail(text: str) -> str:
    """A message as it is reported: every secret the process resolved masked, then its end
    kept (masked first, so the cut cannot leave the end of a secret unmasked); a lone
    surrogate (``os.fsdecode`` of a file name's undecodable bytes), which is not UTF-8 and
    which the engine could not be sent, written as its escape."""
    text = secrets.masked(text)
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_MESSAGE else "...\n" + text[-MAX_MESSAGE:]


def failure(group: str, message: str) -> Outcome:
    return Outcome("fail", group=_group(group, "failed"), message=_tail(message))


def _group(name: str, default: str) -> str:
    # A group comes from the job (an exception's class name or `group`): one the engine would
    # refuse (a space in it, say) would leave the outcome unreported and the job running again.
    return limits.id_from(name, default)


def skipped(message: str) -> Outcome:
    return Outcome("skip", message=_tail(message))


def _retry(ctx: JobContext, group: str, message: str, delay: float | None = None) -> Outcome:
    if delay is None:
        delay = ctx.options.retry.delay_for(ctx.attempt)
    return Outcome("retry", delay=delay, group=_group(group, "retry"), message=_tail(message))


class _Always:
    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: object) -> None:
        return None


def run(ctx: JobContext, prepare: Prepare | None = None, around: Around | None = None) -> Outcome:
    """Prepare and run the job (``around`` the import and the job's function); return what
    should happen to it."""
    stage = "prepare-error"
    try:
        if prepare is not None:
            prepare(ctx)
        with around or _Always() as starts:
            if not starts:
                return stopped(ctx, ctx.stop_reason or "interrupted")
            stage = "import-error"
            add_paths(ctx.options.pythonpath)
            function = resolve(ctx.klass, ctx.queue)
            stage = ""
            value = function(ctx)
    except JobInterrupted as interrupt:
        timeout = isinstance(interrupt, TimeoutInterrupt)
        return stopped(ctx, "timeout" if timeout else ctx.stop_reason or interrupt.reason)
    except JobOutcome as chosen:
        return _chosen(ctx, chosen)
    except BaseException as error:
        # SystemExit (sys.exit) and KeyboardInterrupt too: raised by the job's own code (no
        # signal reaches a slot thread), they end a script, not the worker's thread.
        return _error(ctx, stage, error)
    if ctx.stopping and ctx.stop_reason != "timeout":
        return stopped(ctx, ctx.stop_reason)
    return _completed(ctx, value)


def _chosen(ctx: JobContext, chosen: JobOutcome) -> Outcome:
    """The outcome a job (or the prepare hook) chose by raising it."""
    if isinstance(chosen, RetryJob):
        if ctx.stopping:  # e.g. a shell step whose process the worker killed
            return stopped(ctx, ctx.stop_reason)
        message = chosen.message or "job asked for a retry"
        return _retry(ctx, chosen.group or "retry", message, chosen.delay)
    if isinstance(chosen, FailJob):
        return failure(chosen.group, chosen.message or chosen.group)
    if isinstance(chosen, SkipJob):
        return skipped(chosen.message)
    if isinstance(chosen, ReleaseJob):
        return Outcome("release", delay=chosen.delay)
    if isinstance(chosen, BuryJob):
        return Outcome("bury", message=_tail(chosen.message))
    if isinstance(chosen, HandedOver):
        return Outcome("handed", message=_tail(chosen.message))
    return _error(ctx, "", chosen)


def _error(ctx: JobContext, stage: str, error: BaseException) -> Outcome:
    """The outcome of an exception: the hook's or the import's fail the job, the job's are
    retried (unless the worker stopped it: its subprocess was killed, say)."""
    if stage == "prepare-error":
        return failure(stage, f"{type(error).__name__}: {_text(error)}")
    if stage == "import-error":
        text = str(error) if isinstance(error, KlassNotFound) else user_traceback(error)
        return failure(stage, text)
    if ctx.stopping:
        return stopped(ctx, ctx.stop_reason)
    group = getattr(error, "group", None) or type(error).__name__
    return _retry(ctx, str(group), user_traceback(error))


def _completed(ctx: JobContext, value: Any) -> Outcome:
    """Complete with ``value`` as the result, or fail in ``bad-result`` when the engine would
    refuse it (too large, too deep, NaN): better now than after the lock ran out, retry by retry."""
    if value is None:  # most jobs: nothing to check
        return _COMPLETE
    if type(value) in _UNRUN_BODIES:
        return _never_ran(value)
    try:
        if limits.json_depth(value, limits.MAX_RESULT_DEPTH) > limits.MAX_RESULT_DEPTH:
            raise InvalidArgument(
                f'Complete(): Arg "result" nests more than {limits.MAX_RESULT_DEPTH} levels deep'
            )
        return Outcome("complete", result=_encoded(secrets.masked_value(value)))
    except RecursionError:
        return failure("bad-result", "the job's result nests too deeply to encode")
    except EngineError as error:
        return failure("bad-result", f"the job's result cannot be stored: {error}")
    except results.UnstorableResult as error:
        return failure("bad-result", f"the result of {_result_of(ctx)} cannot be stored: {error}")
    except Exception as error:  # the result's own code raised (a key whose str() fails, say)
        message = f"the job's result cannot be read: {type(error).__name__}: {_text(error)}"
        return failure("bad-result", message)


# What an async def, a generator function or an async generator function returns without
# running its body: completing with it would report work that was never done.
_UNRUN_BODIES: dict[type, str] = {
    types.CoroutineType: "a coroutine (is it an async def?)",
    types.GeneratorType: "a generator",
    types.AsyncGeneratorType: "an async generator",
}


def _never_ran(value: Any) -> Outcome:
    """Fail a job whose function returned its body unrun."""
    if not isinstance(value, types.AsyncGeneratorType):
        value.close()  # unstarted, it runs none of its code (and warns of no "never awaited")
    return failure(
        "bad-result",
        f"the job function returned {_UNRUN_BODIES[type(value)]}, whose body never ran: the"
        " worker calls a job function and neither awaits nor iterates what it returns; call it"
        " from a plain function (asyncio.run(...), list(...)) and make that the klass",
    )


def _text(error: BaseException) -> str:
    """``str(error)``, or a word for it when its own ``__str__`` raises."""
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose str() failed>"


def _encoded(value: Any) -> str:
    """The result as the engine stores it: the values JSON carries as text made that text (a
    number's or None's key too, as JSON writes it, which the engine alone refuses)."""
    try:
        return _as_payload(value)
    except EngineError:
        carried = results.storable(value)  # raises for what no text carries
        if carried == value:  # nothing was made text: the engine's refusal stands
            raise
        return _as_payload(carried)


def _as_payload(value: Any) -> str:
    return limits.encode_payload(
        "complete", "result", secrets.masked_value(value), max_depth=limits.MAX_RESULT_DEPTH
    )


def _result_of(ctx: JobContext) -> str:
    """Whose result it is, as a refusal names it: the flow step, else the job function."""
    step = ctx.envelope.get("step")
    return f"step {step!r}" if isinstance(step, str) else ctx.klass


def stopped(ctx: JobContext, reason: str) -> Outcome:
    """The outcome of a run the worker stopped: a timeout uses a retry; at shutdown the job is
    handed back (only now that its run has ended, so no other worker runs it meanwhile); after a
    lost lock there is nothing to report."""
    if reason == "timeout":
        return _retry(ctx, "timeout", f"job exceeded its timeout of {ctx.options.timeout}s")
    if reason == "shutdown":
        return Outcome("release")
    return Outcome("lost", message=_tail(reason))
