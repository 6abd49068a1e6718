"""Validation: every check of a flow file, every finding at once.

The order is loader → model → graph → templates → YAML traps → schedule → engine. A problem in
one step does not hide problems elsewhere: when the whole model does not validate, the steps,
params and hooks that do are still checked on their own (:class:`_Parts`). The schedule and
engine checks need a valid model.

Use :func:`validate_file` for findings, :func:`load_flow` to get a flow or an
:class:`InvalidFlow` error (what ``flows run`` and the scheduler service do).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from flows.flowfile.findings import (
    DataPath,
    Finding,
    FindingSink,
    Severity,
    has_errors,
    sort_findings,
)
from flows.flowfile.model import Action, Flow, Param, Schedule, Step
from flows.flowfile.subflow_files import child_jobs
from flows.flowfile.yaml_reader import (
    NOT_A_FLOW,
    YAML_SUFFIXES,
    LoadedYaml,
    Trap,
    load_file,
    load_yaml,
)
from flows.gc_pause import gc_paused
from flows.validation.cache_checks import check_cache_files
from flows.validation.case_checks import check_tests
from flows.validation.cwd_checks import check_cwds
from flows.validation.engine_checks import check_heartbeats, check_imports
from flows.validation.graph_checks import check_graph
from flows.validation.limit_checks import check_limits
from flows.validation.model_errors import report_model_errors
from flows.validation.run_checks import check_run
from flows.validation.schedule_checks import check_schedule, check_source_size
from flows.validation.secret_checks import check_secrets
from flows.validation.shell_checks import check_nul_characters
from flows.validation.subflow_checks import check_subflows, child_outputs
from flows.validation.template_checks import TemplateChecker, check_template_places
from scheduler.engine.errors import FlowsError


@dataclass(frozen=True)
class Validation:
    """The outcome for one file: ``flow`` is set only when there is no error."""

    file: str
    flow_dir: Path
    flow: Flow | None
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return not has_errors(self.findings)


class InvalidFlow(FlowsError, ValueError):
    """A flow file with errors; ``findings`` holds all of them (and the warnings)."""

    def __init__(self, findings: list[Finding]) -> None:
        errors = [f for f in findings if f.severity == "error"]
        super().__init__(
            f"{len(errors)} error(s) in {errors[0].file}" if errors else "invalid flow"
        )
        self.findings = findings


@dataclass
class _Parts:
    """The pieces of a flow that validate on their own, for checks that need typed values."""

    step_ids: list[str]
    steps: dict[str, Step] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)
    hooks: list[tuple[str, Action]] = field(default_factory=list)
    schedule: Schedule | None = None
    # Params whose declared type the model refused: kept (templates may name them), but their
    # stand-in type is not what the author meant, so nothing is checked against it.
    untyped: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, flow: Flow) -> _Parts:
        return cls(
            list(flow.steps),
            dict(flow.steps),
            dict(flow.params),
            flow.hooks.defined(),
            flow.schedule,
        )

    @classmethod
    def salvage(cls, data: Mapping[str, Any]) -> _Parts:
        """What validates of a document whose whole model does not."""
        steps, params, hooks = (_mapping(data.get(key)) for key in ("steps", "params", "hooks"))
        schedule = _valid(Schedule, data["schedule"]) if "schedule" in data else None
        parts = cls([str(step_id) for step_id in steps], schedule=schedule)
        for step_id, raw in steps.items():
            step = _valid(Step, raw)
            if step is not None:
                parts.steps[step_id] = step
        for name, raw in params.items():
            param = _valid(Param, raw)
            if param is not None:
                parts.params[name] = param
                if "type" in _mapping(raw) and "type" not in param.model_fields_set:
                    parts.untyped.add(name)
        for name, raw in hooks.items():
            hook = _valid(Action, raw)
            if hook is not None and name in ("on_success", "on_failure", "finally"):
                parts.hooks.append((name, hook))
        return parts


def _raw_needs(data: Mapping[str, Any]) -> dict[str, list[str]]:
    """Needs as written, for steps the model refused (their graph problems still count)."""
    needs: dict[str, list[str]] = {}
    for step_id, raw in _mapping(data.get("steps")).items():
        wanted = _mapping(raw).get("needs", [])
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if isinstance(wanted, list) and all(isinstance(need, str) for need in wanted):
            needs[str(step_id)] = wanted
    return needs


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


M = TypeVar("M", bound=BaseModel)


def _valid(model: type[M], raw: Any) -> M | None:
    """``raw`` as ``model``; failing that, without the keys that had errors (once).

    Only for checks: a step with a bad ``timeout`` still has its templates checked. A bad
    ``needs`` is not dropped, since the checks would then misjudge what is upstream.
    """
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        if not isinstance(raw, dict):
            return None
        bad = {str(e["loc"][0]) for e in error.errors() if e["loc"]}
        if not bad or "needs" in bad or "matrix" in bad or not bad <= raw.keys():
            return None
        kept = {k: v for k, v in raw.items() if k not in bad}
        tries = [kept]
        foreach = raw.get("foreach")
        if "foreach" in bad and isinstance(foreach, dict):
            # Items the model refused (too many, say) still name the foreach variable, which
            # the templates of the step may use.
            tries.insert(0, {**kept, "foreach": {**foreach, "items": []}})
        for attempt in tries:
            try:
                return model.model_validate(attempt)
            except ValidationError:
                continue
        return None


def validate_loaded(
    loaded: LoadedYaml,
    flow_dir: Path,
    *,
    check_imports_too: bool = False,
    now: float | None = None,
    expand_too: bool = False,
) -> Validation:
    """Validate an already loaded document (see the module doc for the order of checks).

    ``expand_too``: also expand a valid flow with its param defaults and check what a run
    would be refused for (:mod:`flows.validation.run_checks`; ``flows validate`` does).
    """
    if _not_a_flow(loaded):
        return Validation(loaded.file, flow_dir, None, [_not_a_flow_finding(loaded.file)])
    with gc_paused():
        return _validate_loaded(loaded, flow_dir, check_imports_too, now, expand_too)


def _validate_loaded(
    loaded: LoadedYaml,
    flow_dir: Path,
    check_imports_too: bool,
    now: float | None,
    expand_too: bool = False,
) -> Validation:
    sink = FindingSink(
        loaded.file,
        loaded.source_map.locate,
        list(loaded.findings),
        loaded.source_map.locate_in,
    )
    data = loaded.data
    if data is None:
        return Validation(loaded.file, flow_dir, None, sort_findings(sink.findings))
    explained: set[DataPath] = set()
    flow: Flow | None = None
    try:
        flow = Flow.model_validate(data)
    except ValidationError as error:
        explained |= report_model_errors(error, data, sink, loaded.traps)
    parts = _Parts.of(flow) if flow is not None else _Parts.salvage(data)
    needs = {step_id: step.needs for step_id, step in parts.steps.items()}
    # A valid model holds every step's needs; otherwise the refused steps' needs count too.
    check_graph(needs if flow is not None else {**_raw_needs(data), **needs}, parts.step_ids, sink)
    checker = TemplateChecker(
        parts.steps, parts.params, parts.step_ids, needs, sink, untyped=parts.untyped
    )
    explained |= checker.check(parts.hooks, loaded.traps)
    if flow is not None and flow.outputs:
        checker.check_outputs(flow.outputs)
    check_template_places(data, sink)
    check_nul_characters(data, sink)
    _report_traps(loaded.traps, explained, sink)
    if parts.schedule is not None:
        raw_cron = _mapping(data.get("schedule")).get("cron")
        check_schedule(parts.schedule, raw_cron, parts.params, sink, now or time.time())
        check_source_size(loaded.source_map.text, sink)
    children: dict[str, Flow] = {}
    if flow is not None:
        _check_queues(flow, sink)
        check_heartbeats(flow, sink)
        check_secrets(flow, sink)
        check_limits(flow, sink)
        if check_imports_too:
            check_imports(flow, flow_dir, sink)
        children = check_subflows(flow, loaded.file, flow_dir, sink, _validate_child)
    jobs = [*parts.step_ids, *(name for name, _ in parts.hooks)]  # a case stubs hooks too
    # A sub-flow step's outputs are its child's: known once the children are validated.
    subflows = child_outputs(flow, children) if flow is not None else None
    # A case may name a child run's jobs by their labels (report/count).
    tested = flow is not None and bool(children) and "tests" in data
    labelled = child_jobs(flow, flow_dir) if flow is not None and tested else None
    check_tests(data, jobs, parts.schedule is not None, sink, parts.params, subflows, labelled)
    if flow is not None:
        check_cache_files(flow, loaded.file, flow_dir, sink)
        check_cwds(flow, loaded.file, flow_dir, sink)
        if expand_too and not has_errors(sink.findings):
            check_run(flow, flow_dir, sink, now or time.time())
    findings = sort_findings(_said_once(sink.findings))
    return Validation(loaded.file, flow_dir, None if has_errors(findings) else flow, findings)


# One mistake, one finding: where two checks report the same place, the finding that says more
# about it stands for both. Finding code → the codes it outranks at its place.
_SAYS_MORE: Mapping[str, frozenset[str]] = {
    # A need is a step's name: the steps there are help more than what an id may look like.
    "unknown-need": frozenset({"bad-format", "reserved-id", "generated-id", "out-of-range"}),
    # A template in needs is no typo of a step's name.
    "template-place": frozenset({"unknown-need"}),
    # A key of no string (steps: {1: ...}) that is no id quoted either: quoting would not do.
    "bad-format": frozenset({"yaml-key-type"}),
}


def _said_once(findings: list[Finding]) -> list[Finding]:
    """Without findings another at their place outranks (:data:`_SAYS_MORE`), and without what
    the checks said of a value the YAML reader refused as no JSON (``.nan``): its finding says
    what is wrong there."""
    refused = {(f.line, f.col) for f in findings if f.code == "yaml-not-json"}
    outranked = {
        (f.line, f.col, code)
        for f in findings
        if f.severity == "error"
        for code in _SAYS_MORE.get(f.code, ())
    }
    return [
        f
        for f in findings
        if (f.line, f.col, f.code) not in outranked
        and (f.code.startswith("yaml-") or (f.line, f.col) not in refused)
    ]


def _validate_child(path: Path, shown: str) -> tuple[Flow | None, list[Finding]]:
    """A sub-flow's file validated on its own (:mod:`flows.validation.subflow_checks`), named
    ``shown``."""
    result = validate_loaded(load_file(path, shown), path.parent)
    return result.flow, result.findings


def _report_traps(
    traps: Mapping[DataPath, Trap], explained: set[DataPath], sink: FindingSink
) -> None:
    """Traps no other finding explained: base 60 is never meant; octal maybe (file modes).

    Booleans are left alone here: ``dry_run: yes`` in ``with`` is a fine boolean, and where a
    string was needed the model already reported it.
    """
    for path, trap in traps.items():
        if path in explained or trap.kind == "boolean":
            continue
        if trap.kind == "sexagesimal":
            sink.error(path, "yaml-trap", trap.message, trap.hint)
        else:
            sink.warning(path, "yaml-trap", trap.message, trap.hint + " if you meant the text")


def _check_queues(flow: Flow, sink: FindingSink) -> None:
    if flow.queue and flow.defaults.queue and flow.queue != flow.defaults.queue:
        sink.warning(
            ("defaults", "queue"),
            "queue-twice",
            f"the flow's queue '{flow.queue}' is overridden by defaults.queue "
            f"'{flow.defaults.queue}' for every step",
            "set the queue in one place",
        )


def validate_text(
    text: str,
    *,
    file: str = "<string>",
    flow_dir: Path = Path("."),
    check_imports: bool = False,
    now: float | None = None,
    expand: bool = False,
) -> Validation:
    """Validate flow text; ``file`` names it in findings, ``flow_dir`` is where it would live;
    ``expand`` as for :func:`validate_file`."""
    with gc_paused():  # also between loading and validating: see flows.gc_pause
        loaded = load_yaml(text, file)
        result = validate_loaded(
            loaded, flow_dir, check_imports_too=check_imports, now=now, expand_too=expand
        )
        del loaded  # freed before the collector is back, which then need not look at it
    return result


def import_findings(flow: Flow, text: str, *, file: str, flow_dir: Path) -> list[Finding]:
    """The findings of a valid flow whose Python steps do not import here, as a worker here
    would import them (``flows run`` without ``--detach``). The model is checked; the text is
    read again only when something does not import, to place the findings (file:line:col)."""
    probe = FindingSink(file, lambda _path, _at_key: (0, 0))
    check_imports(flow, flow_dir, probe)
    if not probe.findings:
        return []
    return validate_text(text, file=file, flow_dir=flow_dir, check_imports=True).findings


def validate_file(
    path: Path, *, check_imports: bool = False, now: float | None = None, expand: bool = False
) -> Validation:
    """Validate the flow file at ``path`` (findings name it as given); ``expand``: also check
    what a run with the param defaults would be refused for (``flows validate``)."""
    flow_dir = path.resolve().parent
    with gc_paused():  # also between loading and validating: see flows.gc_pause
        loaded = load_file(path)
        result = validate_loaded(
            loaded, flow_dir, check_imports_too=check_imports, now=now, expand_too=expand
        )
        del loaded  # freed before the collector is back, which then need not look at it
    return result


def _not_a_flow(loaded: LoadedYaml) -> bool:
    """A file named otherwise than YAML (``flows run tasks.py``) that is no mapping with
    ``steps:``: not a flow file with a mistake in it, so no YAML syntax or missing key to speak
    of (a file refused unread keeps its own finding)."""
    if Path(loaded.file).suffix in ("", *YAML_SUFFIXES):
        return False
    if any(f.code == "yaml-file" for f in loaded.findings):
        return False
    return loaded.data is None or "steps" not in loaded.data


def _not_a_flow_finding(file: str) -> Finding:
    path = Path(file)
    if path.suffix == ".py":
        hint = f"a Python step names a function of it in a flow file: job: {path.stem}.<function>"
    else:
        hint = "write the flow in a .yaml file starting with 'version: 1'"
    return Finding(file, 1, 1, Severity.ERROR, "not-a-flow", NOT_A_FLOW, hint)


def subflow_outputs(flow: Flow, flow_dir: Path) -> dict[str, tuple[str, list[str]]]:
    """What each sub-flow step of the valid ``flow`` (whose file is in ``flow_dir``) gives when
    it declares no outputs of its own: its child's file and the keys of the child's
    ``outputs:``, as validating ``flow`` checked them (each child read again)."""
    children = {}
    for step_id, step in flow.steps.items():
        if step.flow is not None:
            child = validate_file(flow_dir / step.flow).flow
            if child is not None:
                children[step_id] = child
    return child_outputs(flow, children)


def load_flow(path: Path, *, check_imports: bool = False, now: float | None = None) -> Flow:
    """The flow in ``path``; :class:`InvalidFlow` (with every finding) when it has errors."""
    result = validate_file(path, check_imports=check_imports, now=now)
    if result.flow is None:
        raise InvalidFlow(result.findings)
    return result.flow
