"""Sub-flow checks: every ``flow:`` step names a valid flow file that takes the params it gives.

A flow is validated together with its sub-flows: each child file is read (relative to the file
naming it) and validated as a flow of its own, its findings reported with the parent's (naming
the child file, so ``flows validate parent.yaml`` shows ``report.yaml:4:7: ...``), and the parent
step gets a finding of its own when the child is missing or invalid. The ``with`` values written
as literals are checked against the child's params (unknown names, wrong types); values with
templates are checked when the step runs, as are all of them again. The step's outputs are the
child's ``outputs:``: what it declares, and what the flow reads of it, must be among them. A
chain of sub-flows that comes back to a file it passed (``a.yaml → b.yaml → a.yaml``) is an
error, and so is one deeper than :data:`flows.flowfile.subflow_job.MAX_DEPTH`.

Reads files; runs nothing. The validation of a child goes through ``validate_child`` (given by
:mod:`flows.validation.validate`, which this module cannot import); the chain of files being
validated is kept in a context variable for the length of the top-level check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from flows.flowfile.findings import (
    DataPath,
    Finding,
    FindingSink,
    did_you_mean,
    has_errors,
    names_hint,
    path_meant,
)
from flows.flowfile.model import Action, Flow, Step
from flows.flowfile.params import value_problem
from flows.flowfile.subflow_job import MAX_DEPTH
from flows.flowfile.templates import (
    OPEN,
    STEPS,
    Reference,
    strings,
    templates,
)

ValidateChild = Callable[[Path, str], tuple[Flow | None, list[Finding]]]
"""Validate the child file at an absolute path, its findings naming it by the given text."""


@dataclass
class _Session:
    """One top-level validation: the files from the top down to the one being checked, and the
    children validated so far (each once, however many steps name it)."""

    chain: tuple[Path, ...]
    validated: dict[Path, tuple[Flow | None, list[Finding]]] = field(default_factory=dict)


_SESSION: ContextVar[_Session | None] = ContextVar("flows_subflow_session", default=None)


def check_subflows(
    flow: Flow, file: str, flow_dir: Path, sink: FindingSink, validate_child: ValidateChild
) -> dict[str, Flow]:
    """Check the sub-flow steps of ``flow`` (read from ``file``, which lives in ``flow_dir``);
    the valid child flow of each step that has one."""
    steps = [(step_id, step) for step_id, step in flow.steps.items() if step.flow is not None]
    if not steps:
        return {}
    session = _SESSION.get()
    token = None
    if session is None:
        session = _Session((_resolved(flow_dir / Path(file).name),))
        token = _SESSION.set(session)
    try:
        children = {
            step_id: child
            for step_id, step in steps
            if (child := _check_step(step_id, step, file, flow_dir, sink, session, validate_child))
        }
    finally:
        if token is not None:
            _SESSION.reset(token)
    if children:
        _check_outputs_read(flow, children, sink)
    return children


def child_outputs(flow: Flow, children: Mapping[str, Flow]) -> dict[str, tuple[str, list[str]]]:
    """For each sub-flow step of ``flow`` with a valid child (``children``): the child's file,
    as the flow names it, and the keys of its ``outputs:``, which are what the step gives."""
    return {
        step_id: (str(flow.steps[step_id].flow), list(child.outputs or {}))
        for step_id, child in children.items()
    }


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _check_step(
    step_id: str,
    step: Step,
    file: str,
    flow_dir: Path,
    sink: FindingSink,
    session: _Session,
    validate_child: ValidateChild,
) -> Flow | None:
    """Check one sub-flow step; its child flow when that is valid."""
    assert step.flow is not None
    where = ("steps", step_id, "flow")
    shown = str(Path(file).parent / step.flow)
    actual = _resolved(flow_dir / step.flow)
    chain = session.chain
    if actual in chain:
        loop = " → ".join(path.name for path in (*chain[chain.index(actual) :], actual))
        sink.error(
            where,
            "subflow-cycle",
            f"step '{step_id}': sub-flows form a cycle: {loop}",
            "a flow cannot run itself, directly or through its sub-flows",
        )
        return None
    if len(chain) > MAX_DEPTH:
        nested = " → ".join(path.name for path in (*chain, actual))
        sink.error(
            where,
            "subflow-depth",
            f"step '{step_id}': sub-flows nest more than {MAX_DEPTH} deep: {nested}",
            "run some of the deeper flows' steps in a flow higher up",
        )
        return None
    if not actual.is_file():
        sink.error(
            where,
            "subflow-file",
            f"step '{step_id}': sub-flow file '{step.flow}' not found ({actual})",
            _relative_hint(step.flow, Path(file)),
        )
        return None
    if actual not in session.validated:
        session.chain = (*chain, actual)
        try:
            session.validated[actual] = validate_child(actual, shown)
        finally:
            session.chain = chain
        sink.findings.extend(session.validated[actual][1])  # reported once, naming the child
    child, findings = session.validated[actual]
    if child is None:
        if has_errors(findings):
            errors = sum(1 for finding in findings if finding.severity == "error")
            sink.error(
                where,
                "subflow-invalid",
                f"step '{step_id}': sub-flow {step.flow} has {errors} error(s)",
                f"fix {shown} (its findings are listed with this file's)",
            )
        return None
    _check_params(step_id, step, child, step.flow, sink)
    return child


def _check_params(step_id: str, step: Step, child: Flow, shown: str, sink: FindingSink) -> None:
    """The step's ``with`` against the child's params: names, and the types of literal values."""
    declared = child.params
    base = ("steps", step_id, "with")
    for name, value in step.with_.items():
        param = declared.get(name)
        if param is None:
            hint = did_you_mean(name, declared) or (
                names_hint("params", list(declared)) if declared else f"{shown} declares no params"
            )
            sink.error(
                (*base, name),
                "subflow-param",
                f"step '{step_id}': sub-flow {shown} has no param '{name}'",
                hint,
                at_key=True,
            )
            continue
        if any(OPEN in text for _, text in strings(value)):
            continue  # known when the step runs: checked then
        problem = value_problem(value, param)
        if problem is not None:
            sink.error(
                (*base, name),
                "subflow-param",
                f"step '{step_id}': param '{name}' of sub-flow {shown}: {problem}",
                f"give a value of type {param.type}",
            )
    missing = [name for name, p in declared.items() if p.is_required and name not in step.with_]
    if missing:
        sink.error(
            ("steps", step_id, "with") if step.with_ else ("steps", step_id, "flow"),
            "subflow-param",
            f"step '{step_id}': sub-flow {shown} needs param(s) {', '.join(missing)}",
            f"give them in with: ({', '.join(f'{name}: ...' for name in missing)})",
        )


def _check_outputs_read(flow: Flow, children: dict[str, Flow], sink: FindingSink) -> None:
    """A sub-flow step's outputs are its child's ``outputs:``: what the step declares, and what
    the flow's templates read of a step that declares none, must be keys of them."""
    for step_id, child in children.items():
        declared = flow.steps[step_id].outputs
        for index, key in enumerate(declared or ()):
            if key not in (child.outputs or {}):
                sink.error(
                    ("steps", step_id, "outputs", index),
                    "subflow-output",
                    f"step '{step_id}' declares output '{key}', which sub-flow "
                    f"{flow.steps[step_id].flow} does not give",
                    _outputs_hint(key, child, flow.steps[step_id].flow),
                )
    for path, text in _template_strings(flow):
        for template in templates(text):
            reference = template.reference
            if reference is None:
                continue  # the template checks report it
            reader, rest = _output_read(reference)
            read = children.get(reader) if reader else None
            if read is None or flow.steps[reader].outputs is not None or not rest:
                continue  # declared outputs are checked against the declaration
            if rest[0] not in (read.outputs or {}):
                shown = flow.steps[reader].flow
                sink.error(
                    path,
                    "subflow-output",
                    f"'{reference}': sub-flow {shown} has no output '{rest[0]}'",
                    _outputs_hint(rest[0], read, shown),
                    within=(template.written, template.occurrence),
                )


def _outputs_hint(key: str, child: Flow, shown: str | None) -> str:
    keys = list(child.outputs or {})
    if not keys:
        return f"{shown} declares no outputs: add an outputs: map to it"
    return did_you_mean(key, keys) or names_hint("its outputs", keys)


def _template_strings(flow: Flow) -> list[tuple[DataPath, str]]:
    """Every string templates are read in: steps' and hooks' actions, the flow's outputs."""
    found: list[tuple[DataPath, str]] = []
    actions: list[tuple[DataPath, Action]] = [
        (("steps", sid), st) for sid, st in flow.steps.items()
    ]
    actions += [(("hooks", name), hook) for name, hook in flow.hooks.defined()]
    for base, action in actions:
        for name, value in (("run", action.run), ("with", action.with_), ("env", action.env)):
            if value:
                found += strings(value, (*base, name))
    if flow.outputs:
        found += strings(dict(flow.outputs), ("outputs",))
    return found


def _output_read(reference: Reference) -> tuple[str, tuple[str, ...]]:
    """(step id, keys) of ``steps.<id>.outputs.<keys>``, else ("", ())."""
    path = reference.path
    if len(path) >= 3 and path[0] == STEPS and path[2] == "outputs":
        return path[1], path[3:]
    return "", ()


def _relative_hint(written: str, parent: Path) -> str:
    """Where a sub-flow's path is read from, with the file likely meant when one is close."""
    relative = f"the path is relative to the folder of {parent.name}"
    meant = path_meant(written, parent.parent)
    return f"did you mean '{meant}'? ({relative})" if meant else relative


__all__ = ["ValidateChild", "check_subflows", "child_outputs"]
