"""Sub-flows: what a ``flow:`` step's job carries, and how its child run is named. Pure.

A step with ``flow: report.yaml`` becomes one job of klass :data:`SUBFLOW_KLASS` whose payload
is :func:`payload`: the child file (absolute), its params (the step's ``with``, whose step
references the worker resolves when the job starts) and the parent run's logical time. The job
(:mod:`flows.runtime.subflow`) submits the child run, ``<parent run>.<step>`` (:func:`child_run_id`:
the same id each time, so submitting again is a no-op), and hands the step to the engine, which
releases it once every job of the child run is done (``subflow.wait``, lua/commands/subflow.lua).
The job then takes the child flow's ``outputs:`` as its result, or fails when the child did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

SUBFLOW_KLASS: Final = "flows.runtime.subflow.run"
"""The klass of every sub-flow step's job."""
MAX_DEPTH: Final = 5
"""How deep sub-flows may nest: a top-level run's children are at depth 1."""
SEPARATOR: Final = "."
"""Between a parent run's id and the step in a child run's id (a run id may hold no '/': the
dashboard's and the REST API's paths carry it whole)."""

PARAMS_KEY: Final = "params"
FILE_KEY: Final = "flow"
LOGICAL_TIME_KEY: Final = "logical_time"


def child_run_id(parent_run: str, step: str) -> str:
    """The id of the child run a sub-flow step of ``parent_run`` starts."""
    return f"{parent_run}{SEPARATOR}{step}"


def payload(file: str, params: Mapping[str, Any], logical_time: str) -> dict[str, Any]:
    """A sub-flow job's data without its meta: the child file, its params, the logical time."""
    return {FILE_KEY: file, PARAMS_KEY: dict(params), LOGICAL_TIME_KEY: logical_time}


__all__ = ["MAX_DEPTH", "SUBFLOW_KLASS", "child_run_id", "payload"]
