"""Signals to a run's ``wait:`` steps (``flows signal``, ``flows approve``, the REST API).

A ``wait:`` step is one job (``<run id>:<step>``) that no worker runs: the engine keeps it
``awaiting`` once its needs are met (``lua/include/waits.lua``). :func:`signal_step` completes it
with the signal's data as its outputs, and its dependents are released in that same engine call
(``wait.signal``). A signal to a step that is not awaiting one is refused with
:class:`SignalRefused`, naming the run, the step and its state, and nothing is written.
Timeouts are the scheduler service's (:func:`scheduler.service.housekeeping.time_out_waits`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flows.runs.labels import UnknownStep, labelled_step, no_step, run_steps
from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError, InvalidArgument, JobNotFound, TooLarge, WrongState
from scheduler.engine.limits import MAX_RESULT_DEPTH, json_depth, json_fault, read_json

APPROVED_BY = "approved_by"
NOTE = "note"
#: How deeply a signal's data may nest: the data become the step's outputs, so the limit of
#: every job's result (the engine's; every surface that shows outputs, the API, the dashboard,
#: ``flows status --json``, reads them well within it).
MAX_DATA_DEPTH = MAX_RESULT_DEPTH


class SignalRefused(FlowsError, ValueError):
    """The signal cannot be given: no such run or step (``kind`` ``missing``), the step is not a
    wait or not awaiting a signal: its needs are not done, or it is done (``state``), or its
    data do not fit (``data``)."""

    def __init__(self, message: str, kind: str = "data") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Signaled:
    """A signal given: the wait's job completed with ``data`` as its outputs."""

    run_id: str
    step: str
    jid: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WaitState:
    """A wait step as the engine has it (``wait.get``): its state and spec, and while it
    awaits its signal since when and until when (``deadline`` None: no timeout)."""

    jid: str
    state: str
    signal: str
    timeout: float | None
    on_timeout: str
    outputs: tuple[str, ...] | None
    since: float | None
    deadline: float | None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> WaitState:
        outputs = raw.get("outputs")
        return cls(
            jid=str(raw["jid"]),
            state=str(raw["state"]),
            signal=str(raw.get("signal", "")),
            timeout=raw.get("timeout"),
            on_timeout=str(raw.get("on_timeout", "fail")),
            outputs=tuple(outputs) if isinstance(outputs, list) else None,
            since=raw.get("since"),
            deadline=raw.get("deadline"),
        )


def wait_jid(run_id: str, step: str) -> str:
    """The job id of a run's (non-foreach) step, as expansion names it."""
    return f"{run_id}:{step}"


def approval(note: str | None, user: str) -> dict[str, Any]:
    """The data of ``flows approve``: the note ('' when none) and who approved."""
    return {NOTE: note or "", APPROVED_BY: user}


def wait_state(client: Client, jid: str) -> WaitState | None:
    """The wait of job ``jid``, or None when it is not a wait (or does not exist)."""
    raw = client.engine.call("wait.get", jid)
    return None if raw is None else WaitState.from_json(read_json(raw))


def signal_step(
    client: Client, run_id: str, step: str, data: Mapping[str, Any], by: str = ""
) -> Signaled:
    """Complete the run's wait step ``step`` with ``data`` (its outputs), releasing its
    dependents in the same engine call. ``by`` names who signaled (kept in the job's history);
    data naming an ``approved_by`` must name ``by``: an approval's output tells who gave it.
    Raises :class:`SignalRefused` (nothing written) when the step is not awaiting a signal."""
    where = f"run {run_id}, step {step}"
    text = _data_text(where, data)
    if by and APPROVED_BY in data and data[APPROVED_BY] != by:
        raise SignalRefused(
            f"{where}: the data's {APPROVED_BY} is {data[APPROVED_BY]!r}, but the signal is "
            f"given by {by!r}: an approval names who gives it (flows approve sets it)"
        )
    record = client.engine.call("run.get", run_id)
    if record is None:
        raise SignalRefused(f"{where}: no run {run_id}", "missing")
    if "/" in step:  # a wait of a child run, labelled as `flows status` and `flows logs` label it
        try:
            child, rest = labelled_step(client, run_id, step)
        except UnknownStep as error:
            raise SignalRefused(str(error), "missing") from None
        return signal_step(client, child, rest, data, by)
    jid = wait_jid(run_id, step)
    try:
        client.engine.call("wait.signal", jid, text, by)
    except JobNotFound:
        jids = read_json(record).get("jids") or []
        if jid in jids:  # the step's job is gone: canceled (with its run or alone), or removed
            raise SignalRefused(f"{where}: {_gone(client, run_id, jid)}", "state") from None
        if any(str(other).startswith(f"{jid}[") for other in jids):
            why = "not a wait step: a foreach or matrix step's jobs take no signal"
            raise SignalRefused(f"{where}: {why}", "state") from None
        raise SignalRefused(_no_step(run_id, step, record), "missing") from None
    except WrongState as error:
        raise SignalRefused(f"{where}: {_why_not(client, run_id, jid, error)}", "state") from None
    except (InvalidArgument, TooLarge) as error:
        raise SignalRefused(f"{where}: {_engine_words(error)}") from None
    return Signaled(run_id, step, jid, dict(data))


def _no_step(run_id: str, step: str, record: Any) -> str:
    return no_step(run_id, step, run_steps(run_id, record))


def _gone(client: Client, run_id: str, jid: str) -> str:
    """Why a wait whose job no longer exists takes no signal, in its run decider's words."""
    reply = client.engine.call("run.job", run_id, jid)
    view = read_json(reply) if reply else {}
    status = view.get("status", "gone")
    allowed = view.get("actions")
    text = f"not awaiting a signal (it is {status})"
    if isinstance(allowed, list) and "retry" in allowed:
        text += f": {_retry_hint(run_id)} puts it back to wait again"
    return text


def _data_text(where: str, data: Mapping[str, Any]) -> str:
    if not isinstance(data, Mapping):
        raise SignalRefused(f"{where}: the signal's data must be a JSON object")
    if json_depth(data, MAX_DATA_DEPTH) > MAX_DATA_DEPTH:
        raise SignalRefused(f"{where}: the signal's data nest more than {MAX_DATA_DEPTH} deep")
    fault = json_fault(data)
    if fault is not None:  # the engine would refuse it, in words that say neither what nor where
        raise SignalRefused(f"{where}: the signal's data{_at(fault)}")
    try:
        return json.dumps(dict(data), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise SignalRefused(f"{where}: the signal's data are not JSON: {error}") from None


def _retry_hint(run_id: str) -> str:
    """The command that puts a run's failed or canceled wait back, as a reader pastes it (a run
    id may hold quotes or ``;``)."""
    return f"`flows retry {shlex.quote(run_id)}`"


def _why_not(client: Client, run_id: str, jid: str, error: WrongState) -> str:
    wait = wait_state(client, jid)
    if wait is None:
        job = client.jobs.get(jid)
        state = job.state if job is not None else "gone"
        return f"not a wait step (state {state}): only a step with 'wait:' takes a signal"
    if wait.state == "depends":
        return "not awaiting a signal yet: its needs are not done (state depends)"
    if wait.state == "complete":
        return "already done (state complete): it took a signal or timed out"
    if wait.state == "failed":
        return f"failed (state failed: it timed out); {_retry_hint(run_id)} makes it wait again"
    return f"not awaiting a signal (state {wait.state}): {_engine_words(error)}"


def _engine_words(error: Exception) -> str:
    """The engine's message without its command prefix (``WaitSignal(): ...``)."""
    text = str(error)
    _, sep, rest = text.partition("(): ")
    return rest if sep else text


def parse_data(text: str) -> dict[str, Any]:
    """``--data`` text as a JSON object; :class:`SignalRefused` otherwise."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError as error:
        raise SignalRefused(f"--data is not JSON: {error}") from None
    except RecursionError:  # deeper than this interpreter's decoder goes
        raise SignalRefused(f"--data nests more than {MAX_DATA_DEPTH} deep") from None
    if not isinstance(value, dict):
        raise SignalRefused(f"--data must be a JSON object, got {type(value).__name__}")
    if json_depth(value, MAX_DATA_DEPTH) > MAX_DATA_DEPTH:
        raise SignalRefused(f"--data nests more than {MAX_DATA_DEPTH} deep")
    fault = json_fault(value)  # 1e999 reads as infinity, "\ud800" as no UTF-8 text
    if fault is not None:
        raise SignalRefused(f"--data{_at(fault)}")
    return value


def _at(fault: tuple[str, str]) -> str:
    """A fault :func:`~scheduler.engine.limits.json_fault` found, said after the data's name."""
    place, what = fault
    return f" at {place}: {what}" if place else f": {what}"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


__all__ = [
    "SignalRefused",
    "Signaled",
    "WaitState",
    "approval",
    "parse_data",
    "signal_step",
    "wait_jid",
    "wait_state",
]
