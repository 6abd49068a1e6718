"""What ``flows run`` would refuse that only expanding the flow shows, as validation findings.

The file alone does not tell how many items a ``foreach`` over a param gets, or how large a
job's data is once params and templates are filled in. ``flows validate`` finds out the way a
run does, with the same code: it expands the flow with its param defaults
(:func:`flows.expand.jobs.expand`) and checks the submission against the engine's limits
(:func:`flows.expand.run_specs.check_limits`). A flow with a required param (no default) is not
expanded: its values are only known when a run gives them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from flows.expand.jobs import ExpansionError, expand
from flows.expand.run_ids import manual_run_id
from flows.expand.run_specs import check_limits
from flows.flowfile.findings import DataPath, FindingSink
from flows.flowfile.model import Flow
from flows.flowfile.params import ParamError
from scheduler.engine.errors import EngineError, shorten, without_command

# `steps.<id>.<key>...: what`: where in the file an expansion error is (a step's foreach items,
# a matrix or one of its axes).
_EXPANSION_PLACE = re.compile(r"^steps\.([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*):")
_SPLIT = "a run would be refused: split the items over several runs or steps"
_DISTINCT = "a run would be refused: an axis's values name its jobs, so make them distinct"
_JOB = re.compile(r"^job \S+?:([A-Za-z0-9_-]+)(?:\[\d+\])?: ")


def check_run(flow: Flow, flow_dir: Path, sink: FindingSink, now: float) -> None:
    """Report what a run of ``flow`` with its param defaults would be refused for."""
    if any(param.is_required for param in flow.params.values()):
        return
    run_id = manual_run_id(flow.name, now)
    try:
        jobs = expand(
            flow, run_id=run_id, logical_time=datetime.fromtimestamp(now, UTC), flow_dir=flow_dir
        )
        check_limits(run_id, jobs)
    except ParamError:
        return  # a default of the wrong type: the param checks report it
    except ExpansionError as error:
        said = str(error)
        place = _EXPANSION_PLACE.match(said)
        path: DataPath = ("steps", place.group(1), *place.group(2).split(".")[1:]) if place else ()
        hint = _DISTINCT if said.endswith("a value is there twice") else _SPLIT
        sink.error(path or ("steps",), "run-limits", shorten(said), hint, at_key=not path)
    except EngineError as error:
        job = _JOB.match(str(error))
        name = job.group(1) if job else ""
        kind = "hook" if name in type(flow.hooks).model_fields else "step"
        said = without_command(str(error)[job.end() :] if job else str(error))
        said = f"{kind} '{name}': {said}" if job else said
        sink.error(
            (f"{kind}s", name, "with") if job else ("steps",),
            "run-limits",
            shorten(said),
            "a run would be refused: pass a reference (a path or URL) to large data, not the "
            "data itself, in params and 'with'",
            at_key=not job,
        )


__all__ = ["check_run"]
