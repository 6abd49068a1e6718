"""A flow file's own test cases (its ``tests:`` section), checked as ``flows test`` reads them.

The cases are read by :class:`flows.flowfile.cases.CaseReader` against the flow's steps, so a
mistake in one is a finding at its file:line:col in ``flows validate``, ``flows run`` and the
scheduler service alike, not only when the tests run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from flows.flowfile.cases import CaseReader
from flows.flowfile.findings import FindingSink
from flows.flowfile.model import Action, Param


def check_tests(
    data: Mapping[str, Any],
    steps: Sequence[str],
    scheduled: bool,
    sink: FindingSink,
    params: Mapping[str, Param] | None = None,
    subflows: Mapping[str, tuple[str, Collection[str]]] | None = None,
    children: Mapping[str, Action] | None = None,
) -> None:
    """Findings for the cases of ``data``'s ``tests:``. What is not a list of mappings the
    model reports (the flow's ``tests`` field): only the mappings are read here. ``params``:
    the flow's declared params that validate (a case's are checked against them when every
    declared one does: a name left out for its own mistake is not unknown). ``subflows``: the
    sub-flow steps whose child is valid, with its file and the keys of its ``outputs:`` (what
    such a step gives when it declares no outputs of its own). ``children``: the jobs of the
    valid child runs, which a case names by their labels (``report/count``)."""
    raw = data.get("tests")
    if not isinstance(raw, list):
        return
    # `steps:` that is not a mapping is the model's finding: its cases then know no waits.
    steps_raw = data.get("steps")
    waits = {
        name: _declared(spec.get("outputs"))
        for name, spec in (steps_raw.items() if isinstance(steps_raw, Mapping) else ())
        if isinstance(spec, Mapping) and spec.get("wait") is not None
    }
    declared = data.get("params") or {}
    complete = params is not None and isinstance(declared, Mapping) and len(declared) == len(params)
    reader = CaseReader(sink, steps, waits, params if complete else None)
    # As written: `outputs:` that is not a mapping is the model's finding (its keys unknown).
    outputs = data.get("outputs")
    reader.set_outputs(
        list(outputs) if isinstance(outputs, Mapping) else [] if outputs is None else None,
        {
            str(name): _declared(spec.get("outputs"))
            for name, spec in (steps_raw.items() if isinstance(steps_raw, Mapping) else ())
            if isinstance(spec, Mapping)
        },
        subflows,
    )
    if children is not None:
        reader.add_children(children)
    names: set[str] = set()
    for index, item in enumerate(raw):
        if isinstance(item, dict):
            reader.case(item, ("tests", index), scheduled, names)


def _declared(outputs: Any) -> list[str] | None:
    """A step's ``outputs:`` as written, when it is a list of names (else the model's finding)."""
    if isinstance(outputs, list) and all(isinstance(o, str) for o in outputs):
        return outputs
    return None
