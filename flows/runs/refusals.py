"""What the person who gave a command is told about an error, by the command line and the HTTP
API alike: :func:`scheduler.engine.faults.told`, with what to do when the engine refuses to
cancel a job of a child run because the sub-flow step that started the run waits for it."""

from __future__ import annotations

import re

from flows.flowfile.subflow_job import child_run_id
from scheduler.engine.errors import HasDependents
from scheduler.engine.faults import told as engine_told

_CANCEL_REFUSED = re.compile(
    r"(?P<dependent>\S+) is a dependent of (?P<dependency>\S+) but is not mentioned to be canceled"
)


def told(error: BaseException) -> str:
    """The one line said about ``error`` (:func:`scheduler.engine.faults.told`); a refused
    cancel of a child run's job its sub-flow step waits for says what to cancel instead."""
    text = engine_told(error)
    refused = _CANCEL_REFUSED.fullmatch(text) if isinstance(error, HasDependents) else None
    if refused is None:
        return text
    step_jid, jid = refused["dependent"], refused["dependency"]
    run_id, _, step = step_jid.rpartition(":")
    child = child_run_id(run_id, step)
    if not run_id or not jid.startswith(f"{child}:"):
        return text
    return (
        f"{text}: cancel the child run instead (`flows cancel {child}`: the step then fails)"
        f" or the step that started it (`flows cancel {step_jid}`: the child run with it)"
    )


__all__ = ["told"]
