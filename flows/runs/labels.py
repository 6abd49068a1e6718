"""A step as `flows status` labels it: ``step``, or ``step/child-step`` for a step of the child
run a sub-flow step started (a few levels deep). Every command and route that names a step
resolves the label here, to the run that has the step and the step's name in it."""

from __future__ import annotations

from typing import Any

from flows.flowfile.findings import did_you_mean
from flows.flowfile.subflow_job import child_run_id
from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError
from scheduler.engine.limits import read_json


class UnknownStep(FlowsError, LookupError):
    """The run has no such step, or the step started no child run (the message says which,
    with the step likely meant)."""


def run_steps(run_id: str, record: Any) -> list[str]:
    """The steps of a run, from its record's job ids."""
    prefix = f"{run_id}:"
    jids = (str(jid) for jid in read_json(record).get("jids") or [])
    return sorted({jid[len(prefix) :].split("[", 1)[0] for jid in jids if jid.startswith(prefix)})


def no_step(run_id: str, step: str, steps: list[str]) -> str:
    """Run ``run_id`` has no step ``step``, said with the one likely meant."""
    hint = did_you_mean(step, steps) or f"its steps: {', '.join(steps)}"
    return f"run {run_id} has no step {step!r} ({hint})"


def _no_run(run_id: str) -> str:
    return f"no run {run_id!r} (see `flows runs`)"


def labelled_step(client: Client, run_id: str, label: str) -> tuple[str, str]:
    """The run and step ``label`` names: ``step/child-step`` is ``child-step`` of the child run
    ``step`` started, ``step`` a step of ``run_id`` itself (whether the run has it is left to
    the action: the engine's refusal says so). Raises :class:`UnknownStep` when a parent step
    of the label is none of its run's, or started no child run."""
    while "/" in label:
        head, _, label = label.partition("/")
        record = client.engine.call("run.get", run_id)
        if record is None:
            raise UnknownStep(_no_run(run_id))
        steps = run_steps(run_id, record)
        if head not in steps:
            raise UnknownStep(no_step(run_id, head, steps))
        child = child_run_id(run_id, head)
        if client.engine.call("run.get", child) is None:
            raise UnknownStep(
                f"run {run_id}: step {head!r} started no child run "
                "(a 'flow:' step starts one once it runs)"
            )
        run_id = child
    return run_id, label


def labelled_jid(client: Client, target: str) -> str:
    """The job id ``RUN:step/child-step`` names (``<child run>:child-step``, a foreach
    step's item ``[i]`` kept); any other target as it is (a jid holds no "/": a label is
    never one). Raises :class:`UnknownStep` as :func:`labelled_step` does, and when RUN is
    no run or the child run has no step ``child-step``."""
    head, slash, rest = target.partition("/")
    run_id, colon, step = head.rpartition(":")
    if not slash or not colon:
        return target
    if client.engine.call("run.get", run_id) is None:
        raise UnknownStep(_no_run(run_id))
    child, child_step = labelled_step(client, run_id, f"{step}/{rest}")
    steps = run_steps(child, client.engine.call("run.get", child))
    if child_step.split("[", 1)[0] not in steps:
        raise UnknownStep(no_step(child, child_step, steps))
    return f"{child}:{child_step}"


__all__ = ["UnknownStep", "labelled_jid", "labelled_step", "no_step", "run_steps"]
