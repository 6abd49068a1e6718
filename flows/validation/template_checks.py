"""Template checks: every ``${{ ... }}`` names something that will exist when it is resolved.

Where templates may appear: a step's or hook's ``run``, ``with``, ``env`` and ``cwd``, a step's
``foreach.items`` (a param, or one output of a step it needs: :mod:`flows.flowfile.fanout`), param
defaults (``run.*`` only) and the flow's ``outputs``. Anywhere else they would stay literal text,
so they are reported. References are checked against the params, the run fields, the steps
upstream of the reader (a step's outputs are readable only once it is done: it must be needed,
directly or through other steps) and the reader's own foreach variable.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from flows.flowfile import conditions
from flows.flowfile.dag import Ancestry
from flows.flowfile.fanout import is_source_reference
from flows.flowfile.findings import (
    DataPath,
    FindingSink,
    Within,
    did_you_mean,
    names_hint,
    path_text,
)
from flows.flowfile.model import MAX_FOREACH_ITEMS, Action, Param, Step, matrix_id_text
from flows.flowfile.params import choice_problem, type_problem
from flows.flowfile.templates import (
    LEAVES,
    MATRIX,
    OPEN,
    PARAMS,
    RUN,
    RUN_FIELDS,
    STEP_FIELDS,
    STEPS,
    Reference,
    located_references,
    strings,
    template_strings,
    templates,
    whole_reference,
)
from flows.flowfile.yaml_reader import Trap

_ROOTS = (PARAMS, RUN, STEPS, MATRIX)
_ACTION_FIELDS = ("run", "with", "env", "cwd")
_TEMPLATE_HINT = "templates are read in run, with, env, cwd, foreach.items and param defaults"


@dataclass(slots=True)
class _Reader:
    """Who is reading references, and what it may see. (Not frozen, which would make it three
    times as long to make: one is made for each step.)"""

    name: str  # "step 'load'" or "hook 'finally'"
    step_id: str | None  # None for hooks, which see every step
    needs: Sequence[str]
    item_name: str | None
    axes: Sequence[str] = ()  # of a matrix step


class TemplateChecker:
    """Checks the templates of a flow's valid parts; see the module doc."""

    def __init__(
        self,
        steps: Mapping[str, Step],
        params: Mapping[str, Param],
        step_ids: Collection[str],
        needs: Mapping[str, Sequence[str]],
        sink: FindingSink,
        *,
        untyped: Collection[str] = (),
    ) -> None:
        """``untyped``: params whose ``type`` was refused; their values, keys and defaults are
        not checked against the stand-in type (the bad type is reported on its own)."""
        self.steps = steps
        self.params = params
        self.untyped = frozenset(untyped)
        self.step_ids = frozenset(step_ids)
        self.needs = needs
        self.sink = sink
        self.foreach_names = {
            step.foreach.as_: step_id for step_id, step in steps.items() if step.foreach
        }

    def check(
        self, hooks: Sequence[tuple[str, Action]], traps: Mapping[DataPath, Trap]
    ) -> set[DataPath]:
        """Run every check; return the trap paths that explained a param default problem."""
        for step_id, step in self.steps.items():
            item_name = step.foreach.as_ if step.foreach else None
            axes = tuple(step.matrix or ())
            reader = _Reader(f"step '{step_id}'", step_id, step.needs, item_name, axes)
            self.check_action(("steps", step_id), step, reader)
            if step.foreach is not None:
                self.check_foreach(step_id, step)
            if step.matrix is not None:
                self.check_matrix(step_id, step)
            if step.if_ is not None:
                self.check_condition(step_id, step.if_, reader)
        for name, hook in hooks:
            self.check_action(("hooks", name), hook, _Reader(f"hook '{name}'", None, (), None))
        return self.check_param_defaults(traps)

    # -- steps and hooks ------------------------------------------------------------------------

    def check_action(self, base: DataPath, action: Action, reader: _Reader) -> None:
        fields = (
            ("run", action.run),
            ("with", action.with_),
            ("env", action.env),
            ("cwd", action.cwd),
        )
        for field, value in fields:
            if not value:
                continue  # None, '' or {}: no template to read
            for path, text in template_strings(value, (*base, field)):
                for reference, within in self.parse(path, text):
                    problem = self.reference_problem(reference, reader, field)
                    if problem is not None:
                        self.sink.error(path, "template", *problem, within=within)
        if isinstance(action, Step) and action.cache is not None and OPEN in action.cache.key:
            self.check_cache_key((*base, "cache", "key"), action.cache.key)

    def check_cache_key(self, path: DataPath, key: str) -> None:
        """A cache key is rendered when the run is made, before any step ran: of params and
        run fields only."""
        for reference, within in self.parse(path, key):
            if reference.root == PARAMS:
                problem = self.param_problem(reference)
            elif reference.root == RUN:
                problem = _run_problem(reference)
            else:
                problem = (
                    f"a cache key may read params and run fields, not '{reference}'",
                    "what the step reads from upstream is in its key already",
                )
            if problem is not None:
                self.sink.error(path, "template", *problem, within=within)

    def parse(self, path: DataPath, text: str) -> list[tuple[Reference, Within]]:
        """The references of ``text``, each with where it is written; each malformed template
        is reported at its own place, and the others are still returned to be checked."""
        located = located_references(text)
        if located is not None:  # every template parses
            return located
        found: list[tuple[Reference, Within]] = []
        for template in templates(text):
            within = (template.written, template.occurrence)
            if template.reference is not None:
                found.append((template.reference, within))
            else:
                hint = "write ${{ params.name }}"
                self.sink.error(path, "template-syntax", str(template.error), hint, within=within)
        return found

    def reference_problem(
        self, reference: Reference, reader: _Reader, field: str
    ) -> tuple[str, str] | None:
        """(message, hint) when ``reference`` cannot be resolved for ``reader``."""
        root = reference.root
        if root == PARAMS:
            return self.param_problem(reference)
        if root == RUN:
            return _run_problem(reference)
        if root == STEPS:
            return self.step_problem(reference, reader, field)
        if root == reader.item_name:
            return None
        if root == MATRIX:
            return _matrix_problem(reference, reader)
        owner = self.foreach_names.get(root)
        if owner is not None:
            return (
                f"{reader.name} uses '{root}', the foreach variable of step '{owner}'",
                f"read the items' results as steps.{owner}.outputs (add '{owner}' to needs)",
            )
        known = [*_ROOTS, *([reader.item_name] if reader.item_name else [])]
        hint = did_you_mean(root, known) or (
            "a reference starts with params., run., steps. or the foreach variable"
        )
        return f"unknown reference '{reference}'", hint

    def param_problem(self, reference: Reference) -> tuple[str, str] | None:
        if len(reference.path) < 2:
            return f"'{reference}' names no param", "write params.<name>"
        name = reference.path[1]
        if name not in self.params:
            hint = did_you_mean(name, self.params) or (
                names_hint("params", list(self.params))
                if self.params
                else "declare it under params:"
            )
            return f"unknown param '{name}' in '{reference}'", hint
        kind = self.params[name].type
        if len(reference.path) > 2 and kind != "object" and name not in self.untyped:
            return (
                f"'{reference}' reads a key of params.{name}, which is of type {kind}",
                "only object params have keys",
            )
        return None

    def step_problem(
        self, reference: Reference, reader: _Reader, field: str
    ) -> tuple[str, str] | None:
        path = reference.path
        if len(path) < 3:
            return (
                f"'{reference}' is incomplete",
                "write steps.<id>.outputs.<key> or steps.<id>.status",
            )
        step_id, what = path[1], path[2]
        if step_id not in self.step_ids:
            hint = did_you_mean(step_id, self.step_ids) or names_hint(
                "steps", sorted(self.step_ids)
            )
            return f"'{reference}' names no step '{step_id}'", hint
        if what not in STEP_FIELDS or (what == "status" and len(path) > 3):
            hint = did_you_mean(what, STEP_FIELDS) or "outputs.<key> or status"
            return f"'{reference}': a step has outputs and status", hint
        if field == "cwd":
            return (
                f"'{reference}' in cwd: the working directory is fixed when the run is submitted",
                "pass the value through env instead",
            )
        declared = self.steps[step_id].outputs if step_id in self.steps else None
        if what == "outputs" and len(path) > 3 and declared is not None and path[3] not in declared:
            hint = did_you_mean(path[3], declared) or (
                f"add '{path[3]}' to steps.{step_id}.outputs"
                + (f" ({names_hint('declared', declared)})" if declared else "")
            )
            return f"'{reference}': step '{step_id}' declares no output '{path[3]}'", hint
        if reader.step_id is None:
            return None  # hooks run after every step
        if step_id == reader.step_id:
            return f"{reader.name} reads its own {what}", "a step can only read upstream steps"
        if step_id in reader.needs or self.is_upstream(step_id, reader.step_id):
            return None
        if self.is_upstream(reader.step_id, step_id):  # adding the need would make a cycle
            return (
                f"{reader.name} reads steps.{step_id}.{what}, but '{step_id}' runs after it "
                f"(it needs '{reader.step_id}', directly or not)",
                f"a step reads only steps that run before it: remove the reference, or read it "
                f"in a step that needs '{step_id}'",
            )
        # Needs that name no step are reported on their own: the hint must not repeat them.
        kept = [n for n in dict.fromkeys(reader.needs) if n in self.step_ids and n != step_id]
        return (
            f"{reader.name} reads steps.{step_id}.{what} but does not depend on '{step_id}'",
            f"add it to needs: needs: [{', '.join([*kept, step_id])}]",
        )

    @cached_property
    def ancestry(self) -> Ancestry:
        """Who runs before whom, made only when a step reads beyond its direct needs."""
        return Ancestry(self.needs)

    def is_upstream(self, step_id: str, reader: str) -> bool:
        # A step the model refused (a typo in one of its keys) has no needs here: not upstream.
        return self.ancestry.reaches(step_id, reader)

    # -- the flow's outputs ---------------------------------------------------------------------

    def check_outputs(self, outputs: Mapping[str, Any]) -> None:
        """The flow's ``outputs:`` read what a hook may: every step, the params, the run."""
        reader = _Reader("the flow's outputs", None, (), None)
        for path, text in strings(dict(outputs), ("outputs",)):
            for reference, within in self.parse(path, text):
                problem = self.reference_problem(reference, reader, "outputs")
                if problem is not None:
                    self.sink.error(path, "template", *problem, within=within)

    # -- conditions -----------------------------------------------------------------------------

    def check_condition(self, step_id: str, text: str, reader: _Reader) -> None:
        path: DataPath = ("steps", step_id, "if")
        try:
            node = conditions.parse(text)
        except conditions.ConditionError as error:
            self.sink.error(path, "condition", _condition_message(text, error), _CONDITION_HINT)
            return
        bad: set[Reference] = set()
        for reference, offset in conditions.references_of(node):
            problem = self.reference_problem(reference, reader, "if")
            if problem is not None:
                bad.add(reference)
                message, hint = problem
                where = _condition_message(text, conditions.ConditionError(message, offset))
                self.sink.error(path, "condition", where, hint)
        step_outputs = {s: st.fans_out for s, st in self.steps.items()}

        def kind_of(reference: Reference) -> str:
            if reference in bad:  # reported above: its type is not known
                return conditions.ANY
            root, rest = reference.root, reference.path[1:]
            if root == PARAMS and len(rest) == 1 and rest[0] not in self.untyped:
                return conditions.param_kind(self.params[rest[0]].type)
            if root == RUN:
                return "string"
            if root == STEPS and rest[1:] == ("status",):
                return "string"
            if root == STEPS and rest[1:] == ("outputs",):
                return "list" if step_outputs.get(rest[0]) else conditions.ANY
            return conditions.ANY

        for found in conditions.check_types(node, kind_of):
            hint = found.hint or _CONDITION_HINT
            self.sink.error(path, "condition", _condition_message(text, found), hint)

    # -- foreach items --------------------------------------------------------------------------

    def check_foreach(self, step_id: str, step: Step) -> None:
        assert step.foreach is not None
        path: DataPath = ("steps", step_id, "foreach", "items")
        items = step.foreach.items
        reader = _Reader(f"step '{step_id}'", step_id, step.needs, None)
        if isinstance(items, str):
            reference = whole_reference(items)
            if reference is not None and reference.root == STEPS:
                self.check_fanout(step_id, step, reference, path)
            elif reference is not None:
                problem = self.items_problem(reference, reader)
                if problem is not None:
                    self.sink.error(path, "foreach-items", *problem)
            return
        for item_path, text in strings(items, path):
            for reference, within in self.parse(item_path, text):
                problem = self.items_problem(reference, reader, in_list=True)
                if problem is not None:
                    self.sink.error(item_path, "foreach-items", *problem, within=within)

    def check_fanout(self, step_id: str, step: Step, reference: Reference, path: DataPath) -> None:
        """``foreach.items`` that reads a step's output (:mod:`flows.flowfile.fanout`): one output
        of a step the step needs directly, which runs as one job."""
        problem = self.fanout_problem(step_id, step, reference)
        if problem is not None:
            self.sink.error(path, "foreach-items", *problem)
            return
        if step.trigger_rule != "all_success":
            self.sink.error(
                ("steps", step_id, "trigger_rule"),
                "foreach-items",
                f"step '{step_id}' takes its items from {reference.path[1]}'s output, so it runs "
                f"when its needs succeeded: trigger_rule {step.trigger_rule} is not possible",
                "remove trigger_rule, or take the items from a param",
            )
        assert step.foreach is not None
        item = step.foreach.as_
        for text_path, text in strings(step.cwd, ("steps", step_id, "cwd")) if step.cwd else ():
            read = [within for found, within in self.parse(text_path, text) if found.root == item]
            if read:
                self.sink.error(
                    text_path,
                    "template",
                    f"'{item}' in cwd: the items of step '{step_id}' are known only when "
                    f"'{reference.path[1]}' completes, and the working directory is fixed before",
                    "pass the item through env instead",
                    within=read[0],
                )

    def fanout_problem(
        self, step_id: str, step: Step, reference: Reference
    ) -> tuple[str, str] | None:
        if not is_source_reference(reference):
            return (
                f"foreach.items reads '{reference}': items from a step are one of its outputs",
                "write ${{ steps.<id>.outputs.<key> }}, the step in needs",
            )
        producer = reference.path[1]
        if producer not in self.step_ids:
            hint = did_you_mean(producer, self.step_ids) or names_hint(
                "steps", sorted(self.step_ids)
            )
            return f"'{reference}' names no step '{producer}'", hint
        if producer == step_id:
            return f"step '{step_id}' reads its own outputs", "take the items from a step it needs"
        if producer not in step.needs:
            kept = [n for n in dict.fromkeys(step.needs) if n in self.step_ids]
            return (
                f"foreach.items reads steps.{producer}.outputs but step '{step_id}' does not "
                f"need '{producer}' directly",
                f"add it to needs: needs: [{', '.join([*kept, producer])}]",
            )
        source = self.steps.get(producer)
        if source is not None and source.fans_out:
            return (
                f"foreach.items reads the outputs of '{producer}', which runs as several jobs "
                "(foreach or matrix): its outputs are a list of their outputs",
                f"let one step gather the list: a step that needs '{producer}' and outputs it",
            )
        declared = source.outputs if source is not None else None
        key = reference.path[3]
        if declared is not None and key not in declared:
            hint = did_you_mean(key, declared) or f"add '{key}' to steps.{producer}.outputs"
            return f"'{reference}': step '{producer}' declares no output '{key}'", hint
        return None

    def check_matrix(self, step_id: str, step: Step) -> None:
        assert step.matrix is not None
        reader = _Reader(f"step '{step_id}'", step_id, step.needs, None)
        size = 1
        for axis, values in step.matrix.items():
            path: DataPath = ("steps", step_id, "matrix", axis)
            label = f"matrix.{axis}"
            if isinstance(values, list):
                size *= len(values)
                texts = [matrix_id_text(value, i) for i, value in enumerate(values)]
                twice = next((i for i, text in enumerate(texts) if text in texts[:i]), None)
                if twice is not None:
                    self.sink.error(
                        (*path, twice),
                        "matrix",
                        f"matrix axis '{axis}' has the value {texts[twice]} more than once",
                        "each combination must be distinct: remove the repeated value",
                    )
            if isinstance(values, str):
                reference = whole_reference(values)
                if reference is not None:
                    problem = self.items_problem(reference, reader, label=label)
                    if problem is not None:
                        self.sink.error(path, "matrix", *problem)
                continue
            for item_path, text in strings(values, path):
                for reference, within in self.parse(item_path, text):
                    problem = self.items_problem(reference, reader, in_list=True, label=label)
                    if problem is not None:
                        self.sink.error(item_path, "matrix", *problem, within=within)
        if size > MAX_FOREACH_ITEMS:
            self.sink.error(
                ("steps", step_id, "matrix"),
                "matrix",
                f"the matrix has {size:,} combinations, more than the limit of "
                f"{MAX_FOREACH_ITEMS:,}",
                "split the step, or loop inside a job",
            )

    def items_problem(
        self,
        reference: Reference,
        reader: _Reader,
        in_list: bool = False,
        label: str = "foreach.items",
    ) -> tuple[str, str] | None:
        if reference.root == STEPS:
            return (
                f"{label} cannot read '{reference}': the items are fixed when the run is "
                "submitted, before any step has run",
                _output_items_hint(reference, label),
            )
        problem = self.reference_problem(reference, reader, label)
        if problem is not None or in_list:
            return problem
        if reference.root == RUN:
            return f"{label} must be a list: '{reference}' is text", "use an array param"
        name = reference.path[1]
        kind = self.params[name].type
        if len(reference.path) == 2 and kind != "array" and name not in self.untyped:
            return (
                f"{label} must be a list: params.{name} is of type {kind}",
                f"declare params.{name} with 'type: array'",
            )
        return None

    # -- params ---------------------------------------------------------------------------------

    def check_param_defaults(self, traps: Mapping[DataPath, Trap]) -> set[DataPath]:
        explained: set[DataPath] = set()
        for name, param in self.params.items():
            if not param.has_default:
                continue
            path: DataPath = ("params", name, "default")
            texts = list(strings(param.default, path))
            if any(OPEN in text for _, text in texts):
                self.check_default_templates(name, param, texts)
                continue
            if name in self.untyped:
                continue  # checked against the stand-in type, it would take the type's blame
            problem = type_problem(param.default, param) if param.default is not None else None
            if problem is None:
                choice = choice_problem(param.default, param) if param.default is not None else None
                if choice is not None:
                    self.sink.error(
                        path,
                        "param-default",
                        f"the default of param '{name}' is not among its choices: {choice}",
                        "make the default one of the choices, or add it to them",
                    )
                continue
            trap = traps.get(path)
            if trap is not None:
                self.sink.error(path, "yaml-trap", f"{path_text(path)}: {trap.message}", trap.hint)
                explained.add(path)
            else:
                self.sink.error(
                    path,
                    "param-default",
                    f"the default of param '{name}' does not match its type: {problem}",
                    f"change the default, or the type ({param.type})",
                )
        return explained

    def check_default_templates(
        self, name: str, param: Param, texts: list[tuple[DataPath, str]]
    ) -> None:
        for path, text in texts:
            for reference, within in self.parse(path, text):
                if reference.root != RUN:
                    self.sink.error(
                        path,
                        "template",
                        f"the default of param '{name}' reads '{reference}'; defaults can only "
                        "read run.* (params are set before anything else)",
                        "use run.id, run.flow, run.logical_date or run.logical_time",
                        within=within,
                    )
                    continue
                problem = _run_problem(reference)
                if problem is not None:
                    self.sink.error(path, "template", *problem, within=within)
                elif (
                    param.type not in ("string", "date")
                    and name not in self.untyped
                    and whole_reference(text) is not None
                ):
                    self.sink.error(
                        path,
                        "param-default",
                        f"the default of param '{name}' is text ('{reference}') but its type "
                        f"is {param.type}",
                        "use type string or date",
                    )


def _matrix_problem(reference: Reference, reader: _Reader) -> tuple[str, str] | None:
    if not reader.axes:
        return (
            f"{reader.name} uses '{reference}' but has no matrix",
            "add matrix: {<axis>: [...]} to the step, or read another value",
        )
    axis = reference.path[1] if len(reference.path) == 2 else ""
    if axis in reader.axes:
        return None
    hint = did_you_mean(axis, reader.axes) or names_hint("axes", list(reader.axes))
    return f"'{reference}' names no axis of the matrix of {reader.name}", hint


def _run_problem(reference: Reference) -> tuple[str, str] | None:
    field = reference.path[1] if len(reference.path) > 1 else ""
    if len(reference.path) == 2 and field in RUN_FIELDS:
        return None
    hint = did_you_mean(field, RUN_FIELDS) or "run has: " + ", ".join(RUN_FIELDS)
    return f"unknown reference '{reference}'", hint


def _output_items_hint(reference: Reference, label: str) -> str:
    """Where a list known only once a step ran can go: a foreach's items, whole (a foreach
    reaches here only for a template inside its list of items)."""
    items = f'items: "${{{{ {reference} }}}}"'
    if label == "foreach.items":
        return f"give the output as the items themselves, not inside a list: {items}"
    return (
        "a matrix's axes are fixed at submit; a foreach takes its items from an output when "
        f"its step completes: foreach: {{{items}}}"
    )


_CONDITION_HINT = (
    "a condition uses literals, references, ==, !=, <, <=, >, >=, in, &&, ||, !, parentheses, "
    "contains(), startsWith() and length()"
)


def _condition_message(text: str, error: conditions.ConditionError) -> str:
    expression = conditions.expression_of(text)
    offset = error.offset
    near = expression[offset : offset + 20].strip() or "the end"
    return f"condition, at character {offset + 1} ('{near}'): {error}"


def check_template_places(data: Mapping[str, Any], sink: FindingSink) -> None:
    """Report ``${{`` in fields that are never rendered (it would stay literal text).

    Skipped where another finding already points (the model refused the value anyway).
    """
    reported = {(f.line, f.col) for f in sink.findings}
    found: list[DataPath] = []
    _unrendered_templates(data, (), found)
    for path in found:
        if sink.locate(path, False) not in reported:
            sink.error(path, "template-place", *template_place_problem(path))


def template_place_problem(path: DataPath) -> tuple[str, str]:
    """(message, hint) for a template in a field that is never rendered."""
    return f"templates are not expanded in {path_text(path)}", _TEMPLATE_HINT


def _unrendered_templates(value: Any, path: DataPath, found: list[DataPath]) -> None:
    """The paths of strings under ``value`` holding ``${{`` where nothing renders it, in order.

    Fields that are rendered are not walked into: in a large flow they hold most of the values.
    """
    if type(value) is dict or isinstance(value, Mapping):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif type(value) is list or isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        if isinstance(item, str):
            # A description is free text; a literal '${{' there harms nothing.
            if OPEN in item and key != "description" and not _all_rendered((*path, key)):
                found.append((*path, key))
        elif type(item) in LEAVES or _plain_texts(item):
            continue  # no template inside (a step's needs, say)
        elif not _all_rendered((*path, key)):
            _unrendered_templates(item, (*path, key), found)


def _plain_texts(value: Any) -> bool:
    """Whether ``value`` is a list of strings none of which holds ``${{`` (told in one join,
    which a line break keeps from making one of two strings)."""
    if type(value) is not list:
        return False
    try:
        return OPEN not in "\n".join(value)
    except TypeError:  # not all strings
        return False


def _all_rendered(path: DataPath) -> bool:
    """Whether every string at or under ``path`` is rendered (or free text)."""
    if path[0] in ("description", "outputs"):
        return True
    if len(path) < 3:
        return False
    if path[0] in ("steps", "hooks") and path[2] in _ACTION_FIELDS:
        return True
    if path[0] == "steps" and path[2] == "if":
        return True
    if path[0] == "steps" and path[2:4] == ("cache", "key"):
        return True  # checked by TemplateChecker.check_cache_key
    if len(path) >= 4 and path[0] == "steps" and path[2:4] == ("foreach", "items"):
        return True
    if len(path) >= 4 and path[0] == "steps" and path[2] == "matrix":
        return True
    return path[0] == "params" and path[2] == "default"
