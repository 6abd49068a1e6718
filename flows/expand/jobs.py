"""Expansion: a validated flow, params and a run id become the run's jobs. Pure.

Each step becomes one job (``<run id>:<step>``), a foreach step one job per item
(``<run id>:<step>[<i>]``), a matrix step one job per combination of its axes' values
(``<run id>:<step>[region=de,kind=full]``, see :func:`flows.flowfile.model.matrix_id_text`), each
hook one job (``<run id>:<hook>``). ``needs`` become ``depends``:
a dependent of a foreach step depends on every item (fan-in); a foreach step that needs a foreach
step waits for all of its items too (no item-by-item pairing).

Templates in ``params``, ``run`` and the foreach variable are resolved here. References to other
steps' outputs and status stay in the job data for the worker (:mod:`flows.flowfile.job_data` is
that contract). In a shell command every template, whatever it names, becomes an environment
variable (:mod:`flows.expand.shell_command`): values are data there, never shell syntax.

``foreach.items`` is a list or a param, known now, or another step's output
(``${{ steps.list.outputs.files }}``): then the step is one template job ``<run id>:<step>``
that the engine turns into its items when the producer completes (:mod:`flows.flowfile.fanout`); its
payload keeps the foreach variable as a template, resolved by the worker like step outputs.

Hooks depend on every job of the run: ``on_success`` with trigger rule ``none_failed`` (a step
skipped by its own trigger rule is no failure), ``on_failure`` with ``one_failed``, ``finally``
with ``all_done``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any, Final

from flows.expand.shell_command import shell_command
from flows.flowfile import conditions
from flows.flowfile.dag import topological_steps
from flows.flowfile.fanout import FANOUT_KEY, Source, source_of
from flows.flowfile.job_data import (
    CACHE_KEY,
    CONDITION_KEY,
    META_KEY,
    SECRETS_KEY,
    SHELL_KLASS,
    WAIT_KLASS,
    Upstream,
    meta_json,
    shell_cwd,
)
from flows.flowfile.model import (
    MAX_FOREACH_ITEMS,
    Action,
    Flow,
    FlowSettings,
    Settings,
    Step,
    StepCache,
    TriggerRule,
    matrix_id_text,
)
from flows.flowfile.params import bind_params
from flows.flowfile.subflow_job import SUBFLOW_KLASS
from flows.flowfile.subflow_job import payload as subflow_payload
from flows.flowfile.templates import (
    KEEP,
    MATRIX,
    PARAMS,
    RUN,
    STEPS,
    Reference,
    render,
    select,
    to_text,
)
from flows.gc_pause import gc_paused
from scheduler.engine.errors import FlowsError

MAX_JOBS_PER_RUN: Final = 100_000
_HERE: Final = PurePath(".")
HOOK_TRIGGER_RULES: Final[Mapping[str, TriggerRule]] = {
    "on_success": "none_failed",
    "on_failure": "one_failed",
    "finally": "all_done",
}


class ExpansionError(FlowsError, ValueError):
    """The flow cannot be expanded with these params (a value of the wrong shape, a cycle)."""


@dataclass(slots=True)
class JobSpec:
    """One job of a run, named as ``flow.submit`` names its job options
    (``lua/include/runs.lua``), so it is sent as it is (:meth:`to_engine`); ``step`` and
    ``index`` are the flow's, for the run's graph, outputs and ``flows plan``, and not sent.
    Not changed once made (:func:`dataclasses.replace` makes a changed copy); not frozen, as
    a frozen dataclass is made three times slower, and a run makes one per job.

    ``depends`` lists jids; ``trigger`` (the step's ``trigger_rule``) decides how their outcomes
    release the job. ``delay`` counts from the moment the job may run. ``ttr`` is the step's
    ``heartbeat`` (None: the queue's). ``concurrency_key``/``concurrency_limit`` bound how many
    jobs holding the key run at once (a foreach step's ``max_parallel``); ``ttl`` and
    ``throttle`` are the step's (see :class:`flows.flowfile.model.Action`); ``wait`` a ``wait:``
    step's spec; ``fanout`` a fan-out step's template: (the producer's jid, the output holding
    the items); ``empty`` a foreach or matrix step with no items: one job
    ``<run id>:<step>`` that the engine completes with the empty list once nothing holds it
    back, as it completes a fan-out template whose producer output no items. ``notify`` and
    ``deadline`` are the step's notify flag and deadline in seconds, set when the run is
    assembled (:mod:`flows.runs.build`). None: not sent.
    """

    jid: str
    queue: str
    klass: str
    data: Mapping[str, Any]
    priority: int
    tags: tuple[str, ...]
    retries: int
    depends: tuple[str, ...]
    delay: float
    trigger: TriggerRule
    step: str
    index: int | None
    ttr: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    ttl: float | None = None
    throttle: str | None = None
    wait: Mapping[str, Any] | None = None
    fanout: tuple[str, str] | None = None
    notify: str | None = None
    deadline: float | None = None
    empty: bool = False

    def to_engine(self, encode: Callable[[Any], str]) -> dict[str, Any]:
        """The job as ``flow.submit`` takes it, ``data`` as JSON text (``encode``): the engine
        keeps it verbatim. Options left unset are left out, and so are a priority of 0, no
        tags, no dependencies and no delay: the engine's defaults for a new job."""
        spec: dict[str, Any] = {
            "jid": self.jid,
            "queue": self.queue,
            "klass": self.klass,
            "data": encode(self.data),
            "retries": self.retries,
            "trigger": self.trigger,
        }
        if self.concurrency_key is not None:
            spec["concurrency_key"] = self.concurrency_key
            spec["concurrency_limit"] = self.concurrency_limit
        # Each option compared here, not through a table of them: a run sends every job.
        if self.priority:
            spec["priority"] = self.priority
        if self.tags:
            spec["tags"] = list(self.tags)
        if self.depends:
            spec["depends"] = list(self.depends)
        if self.delay:
            spec["delay"] = self.delay
        if self.ttr is not None:
            spec["ttr"] = self.ttr
        self._add_step_options(spec)
        return spec

    def _add_step_options(self, spec: dict[str, Any]) -> None:
        """The options only some steps set, into ``spec``."""
        if self.ttl is not None:
            spec["ttl"] = self.ttl
        if self.throttle is not None:
            spec["throttle"] = self.throttle
        if self.wait is not None:
            spec["wait"] = dict(self.wait)
        if self.fanout:
            spec["fanout"] = {"from": self.fanout[0], "output": self.fanout[1]}
        if self.notify is not None:
            spec["notify"] = self.notify
        if self.deadline is not None:
            spec["deadline"] = self.deadline
        if self.empty:
            spec["empty"] = True

    def to_json(self) -> dict[str, Any]:
        """Every field, ``data`` as it is (``flows plan --json``)."""
        spec: dict[str, Any] = {
            "jid": self.jid,
            "queue": self.queue,
            "klass": self.klass,
            "data": self.data,
            "priority": self.priority,
            "tags": list(self.tags),
            "retries": self.retries,
            "depends": list(self.depends),
            "delay": self.delay,
            "trigger": self.trigger,
        }
        spec.update(self.to_engine(lambda data: data))  # and the options given
        spec["step"], spec["index"] = self.step, self.index
        return spec


def run_fields(flow: Flow, run_id: str, logical_time: datetime) -> dict[str, str]:
    """The values of ``${{ run.* }}`` for one run (see
    :data:`flows.flowfile.templates.RUN_FIELDS`)."""
    return {
        "id": run_id,
        "flow": flow.name,
        "logical_date": logical_time.date().isoformat(),
        "logical_time": logical_time.isoformat(),
    }


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """What every run of one flow shares, worked out once for the flow (a schedule builds a
    run a tick from the same flow): its steps in the order they expand, each step's and
    hook's settings, and their retry settings as JSON (by ``id`` of the retry; each job's
    meta takes a copy). Never changed once made: runs built at once may share it."""

    order: tuple[str, ...]
    steps: Mapping[str, Settings]
    hooks: Mapping[str, Settings]
    retries: Mapping[int, Mapping[str, Any]]


def plan_flow(flow: Flow) -> FlowPlan:
    """The :class:`FlowPlan` of ``flow``: what :func:`expand_run` would work out for each run."""
    try:
        order = topological_steps(flow)
    except Exception as error:  # networkx reports a cycle; validation names it first
        raise ExpansionError(f"the steps' needs form a cycle: {error}") from error
    settings = FlowSettings(flow)
    steps = {step_id: settings.of(step) for step_id, step in flow.steps.items()}
    hooks = {name: settings.of(hook) for name, hook in flow.hooks.defined()}
    retries: dict[int, Mapping[str, Any]] = {}
    for settings_of in (steps, hooks):
        for setting in settings_of.values():
            if id(setting.retry) not in retries:  # most steps share one: dumped once
                retries[id(setting.retry)] = setting.retry.model_dump()
    return FlowPlan(tuple(order), steps, hooks, retries)


@dataclass(slots=True)
class _Origin:
    """The step (or hook) a job comes from, with what every one of its jobs shares."""

    name: str
    action: Action
    settings: Settings
    trigger_rule: TriggerRule
    delay: float = 0.0
    max_parallel: int | None = None
    fanout: Source | None = None
    empty: bool = False


@dataclass
class _Scope:
    """What templates may read while one job is expanded, and which steps it read."""

    params: Mapping[str, Any]
    run: Mapping[str, str]
    item_name: str | None = None
    item: Any = None
    on_step: Callable[[Reference], Any] = lambda _: KEEP
    read_steps: dict[str, None] = field(default_factory=dict)

    def lookup(self, reference: Reference) -> Any:
        root, rest = reference.root, reference.path[1:]
        if root == STEPS:
            self.read_steps.setdefault(rest[0] if rest else "", None)
            return self.on_step(reference)
        try:
            if root == PARAMS:
                return select(self.params, rest, reference)
            if root == RUN:
                return select(self.run, rest, reference)
            if root == self.item_name:
                # A fan-out's item is known when its job starts (flows.flowfile.job_data).
                return KEEP if self.item is KEEP else select(self.item, rest, reference)
        except KeyError as error:
            raise ExpansionError(str(error.args[0])) from None
        raise ExpansionError(f"{reference}: unknown reference")


@dataclass(frozen=True, slots=True)
class Expansion:
    """One run of a flow expanded: its jobs, its params bound to their declarations, and the
    values of ``${{ run.* }}`` (what the run's ``outputs:`` resolve against)."""

    jobs: list[JobSpec]
    params: Mapping[str, Any]
    run: Mapping[str, str]


def expand(
    flow: Flow,
    *,
    run_id: str,
    logical_time: datetime,
    params: Mapping[str, Any] | None = None,
    flow_dir: PurePath = _HERE,
) -> list[JobSpec]:
    """The jobs of one run of ``flow`` (as ``flow.submit`` takes them), each after every job it
    depends on: :func:`expand_run`'s jobs."""
    return expand_run(
        flow, run_id=run_id, logical_time=logical_time, params=params, flow_dir=flow_dir
    ).jobs


def expand_run(
    flow: Flow,
    *,
    run_id: str,
    logical_time: datetime,
    params: Mapping[str, Any] | None = None,
    flow_dir: PurePath = _HERE,
    plan: FlowPlan | None = None,
) -> Expansion:
    """One run of ``flow``: its jobs, each after every job it depends on, and what they were
    expanded with.

    ``params`` are the values given for the run (text from ``-p`` is converted to the declared
    types; defaults fill the rest; :class:`flows.flowfile.params.ParamError` when they do not fit).
    ``flow_dir`` (absolute) is the flow file's folder: shell steps run there, Python jobs import
    from there. ``logical_time`` is the moment the run stands for (an aware datetime).
    ``plan``: the flow's :func:`plan_flow`, kept by a caller that builds many runs of it.
    """
    with gc_paused():
        return _expand(flow, run_id, logical_time, params or {}, flow_dir, plan)


def _expand(
    flow: Flow,
    run_id: str,
    logical_time: datetime,
    params: Mapping[str, Any],
    flow_dir: PurePath,
    plan: FlowPlan | None,
) -> Expansion:
    run = run_fields(flow, run_id, logical_time)
    bound = bind_params(flow.params, params, lambda value: render(value, _Scope({}, run).lookup))
    plan = plan_flow(flow) if plan is None else plan
    expander = _Expander(flow, plan, run_id, run, bound, flow_dir)
    for step_id in plan.order:
        expander.add_step(step_id, flow.steps[step_id])
    for name, hook in flow.hooks.defined():
        expander.add_hook(name, hook)
    return Expansion(expander.jobs, bound, run)


class _Expander:
    def __init__(
        self,
        flow: Flow,
        plan: FlowPlan,
        run_id: str,
        run: Mapping[str, str],
        params: Mapping[str, Any],
        flow_dir: PurePath,
    ) -> None:
        self.flow = flow
        self.plan = plan
        self.run_id = run_id
        self.run = run
        self.params = params
        self.flow_dir = flow_dir
        self.flow_dir_text = str(flow_dir)
        self.jids: dict[str, list[str]] = {}
        self.jobs: list[JobSpec] = []
        self.fanouts: dict[str, Source] = {}  # fan-out step -> where its items come from
        self.empty: set[str] = set()  # foreach and matrix steps with no items
        self.upstreams: dict[str, Upstream] = {}  # step read -> how its readers find its jobs

    def add_step(self, step_id: str, step: Step) -> None:
        depends = [jid for need in dict.fromkeys(step.needs) for jid in self.jids[need]]
        origin = _Origin(
            step_id,
            step,
            self.plan.steps[step_id],
            step.trigger_rule,
            step.delay or 0.0,
            step.foreach.max_parallel if step.foreach else None,
        )
        if step.matrix is not None:
            combinations = self.combinations(step_id, step)
            if not combinations:
                self.put_empty(origin, step_id, depends, MATRIX)
                return
            self.jids[step_id] = [f"{self.run_id}:{step_id}[{key}]" for key, _ in combinations]
            for index, (_, values) in enumerate(combinations):
                scope = _Scope(self.params, self.run, MATRIX, values)
                self.put(origin, self.jids[step_id][index], index, depends, scope)
            return
        if step.foreach is None:
            self.jids[step_id] = [f"{self.run_id}:{step_id}"]
            self.put(origin, self.jids[step_id][0], None, depends, _Scope(self.params, self.run))
            return
        source = source_of(step.foreach.items)
        if source is not None:
            # One template job; the engine puts the items when the producer completes.
            origin.fanout = self.fanouts[step_id] = source
            self.jids[step_id] = [f"{self.run_id}:{step_id}"]
            scope = _Scope(self.params, self.run, step.foreach.as_, KEEP)
            scope.read_steps[source.step] = None  # the worker reads the items from its outputs
            self.put(origin, self.jids[step_id][0], None, depends, scope)
            return
        items = self.items(step_id, step)
        if not items:
            self.put_empty(origin, step_id, depends, step.foreach.as_)
            return
        self.jids[step_id] = [f"{self.run_id}:{step_id}[{i}]" for i in range(len(items))]
        for index, item in enumerate(items):
            scope = _Scope(self.params, self.run, step.foreach.as_, item)
            self.put(origin, self.jids[step_id][index], index, depends, scope)

    def put_empty(self, origin: _Origin, step_id: str, depends: list[str], item: str) -> None:
        """A foreach or matrix step with no items: one job ``<run id>:<step>`` (its templates
        kept, as a fan-out template's), completed with the empty list by the engine when
        nothing holds it back, so the step is in the run as a fan-out with no items is."""
        origin.empty = True
        self.empty.add(step_id)
        self.jids[step_id] = [f"{self.run_id}:{step_id}"]
        self.put(
            origin, self.jids[step_id][0], None, depends, _Scope(self.params, self.run, item, KEEP)
        )

    def add_hook(self, name: str, hook: Action) -> None:
        depends = [jid for jids in self.jids.values() for jid in jids]
        origin = _Origin(name, hook, self.plan.hooks[name], HOOK_TRIGGER_RULES[name])
        self.put(origin, f"{self.run_id}:{name}", None, depends, _Scope(self.params, self.run))

    def items(self, step_id: str, step: Step) -> list[Any]:
        assert step.foreach is not None
        scope = _Scope(self.params, self.run, on_step=_no_steps_in_items(step_id))
        items = render(step.foreach.items, scope.lookup)
        if not isinstance(items, list):
            raise ExpansionError(
                f"steps.{step_id}.foreach.items: expected a list, got {type(items).__name__}"
            )
        if len(items) > MAX_FOREACH_ITEMS:
            raise ExpansionError(
                f"steps.{step_id}.foreach.items: {len(items)} items; the limit is "
                f"{MAX_FOREACH_ITEMS}"
            )
        return items

    def combinations(self, step_id: str, step: Step) -> list[tuple[str, dict[str, Any]]]:
        """The matrix's product in axis order: each combination's id text and its values."""
        assert step.matrix is not None
        scope = _Scope(self.params, self.run, on_step=_no_steps_in_items(step_id))
        axes: list[list[tuple[str, Any]]] = []
        size = 1
        for axis, written in step.matrix.items():
            values = render(written, scope.lookup)
            if not isinstance(values, list):
                raise ExpansionError(
                    f"steps.{step_id}.matrix.{axis}: expected a list, got {type(values).__name__}"
                )
            texts = [matrix_id_text(value, i) for i, value in enumerate(values)]
            if len(set(texts)) < len(texts):
                raise ExpansionError(f"steps.{step_id}.matrix.{axis}: a value is there twice")
            size *= len(values)
            if size > MAX_FOREACH_ITEMS:
                raise ExpansionError(
                    f"steps.{step_id}.matrix: more than {MAX_FOREACH_ITEMS} combinations"
                )
            axes.append(
                [(f"{axis}={text}", value) for text, value in zip(texts, values, strict=True)]
            )
        names = list(step.matrix)
        return [
            (
                ",".join(key for key, _ in combination),
                dict(zip(names, (v for _, v in combination), strict=True)),
            )
            for combination in itertools.product(*axes)
        ]

    def put(
        self, origin: _Origin, jid: str, index: int | None, depends: list[str], scope: _Scope
    ) -> None:
        if len(self.jobs) >= MAX_JOBS_PER_RUN:
            raise ExpansionError(f"the run has more than {MAX_JOBS_PER_RUN} jobs")
        action, settings = origin.action, origin.settings
        step = action if isinstance(action, Step) else None
        if step is not None and step.wait is not None:
            self.put_wait(origin, jid, depends, wait_spec(step))
            return
        payload = self.payload(action, scope)
        condition = (
            self.condition(origin, scope) if step is not None and step.if_ is not None else None
        )
        upstream = {}
        for step_id in scope.read_steps:
            if step_id not in self.jids:  # validation reports such references first
                raise ExpansionError(f"{origin.name}: reads steps.{step_id}, which is not upstream")
            upstream[step_id] = self.upstream(step_id)
        meta = meta_json(
            self.run_id,
            self.flow.name,
            origin.name,
            index,
            "shell" if action.is_shell else "python",
            upstream,
            settings.timeout,
            settings.heartbeat,
            self.plan.retries[id(settings.retry)],
            self.flow_dir_text,
        )
        if condition is not None:
            meta[CONDITION_KEY] = condition
        if self.flow.secrets:  # names only: each value is resolved on the worker
            meta[SECRETS_KEY] = list(self.flow.secrets)
        if step is not None and step.cache is not None:
            meta[CACHE_KEY] = self.cache_spec(step.cache, scope)
        fanout = origin.fanout
        if fanout is not None:
            assert step is not None and step.foreach is not None
            meta[FANOUT_KEY] = {
                "from": fanout.step,
                "output": fanout.output,
                "as": step.foreach.as_,
            }
        limit = origin.max_parallel
        self.jobs.append(
            JobSpec(
                jid=jid,
                queue=settings.queue,
                klass=_klass(action),
                data={**payload, META_KEY: meta},
                priority=settings.priority,
                tags=settings.tags,
                retries=settings.retry.attempts - 1,
                depends=tuple(depends),
                delay=origin.delay,
                trigger=origin.trigger_rule,
                step=origin.name,
                index=index,
                ttr=settings.heartbeat or None,  # 0: the queue's heartbeat
                concurrency_key=f"{self.run_id}:{origin.name}" if limit else None,
                concurrency_limit=limit or None,
                ttl=settings.ttl or None,
                throttle=settings.throttle,
                fanout=(self.jids[fanout.step][0], fanout.output) if fanout else None,
                empty=origin.empty,
            )
        )

    def put_wait(self, origin: _Origin, jid: str, depends: list[str], wait: dict[str, Any]) -> None:
        """A ``wait:`` step's job: no payload and nothing a worker would use (no worker runs
        it); the engine completes it with a signal's data (:mod:`flows.runs.signals`)."""
        settings = origin.settings
        meta = meta_json(
            self.run_id,
            self.flow.name,
            origin.name,
            None,
            "wait",
            {},
            None,
            None,
            self.plan.retries[id(settings.retry)],
            self.flow_dir_text,
        )
        self.jobs.append(
            JobSpec(
                jid=jid,
                queue=settings.queue,
                klass=WAIT_KLASS,
                data={META_KEY: meta},
                priority=settings.priority,
                tags=settings.tags,
                retries=0,
                depends=tuple(depends),
                delay=0.0,
                trigger=origin.trigger_rule,
                step=origin.name,
                index=None,
                wait=wait,
            )
        )

    def upstream(self, step_id: str) -> Upstream:
        """How a reader finds the jobs of ``step_id``: a fan-out step by its template and its
        producer's output. Made once for each step read (its jobs are known once it is
        expanded, before any reader): many steps read the same one."""
        upstream = self.upstreams.get(step_id)
        if upstream is None:
            upstream = self.upstreams[step_id] = self.made_upstream(step_id)
        return upstream

    def made_upstream(self, step_id: str) -> Upstream:
        source = self.fanouts.get(step_id)
        if step_id in self.empty:
            return Upstream(tuple(self.jids[step_id]), True, empty=True)
        if source is None:
            return Upstream(tuple(self.jids[step_id]), self.flow.steps[step_id].fans_out)
        producer = self.jids[source.step][0]
        return Upstream(
            tuple(self.jids[step_id]), True, {"from": producer, "output": source.output}
        )

    def condition(self, origin: _Origin, scope: _Scope) -> dict[str, Any] | None:
        """A step's ``if`` for the worker: the expression, with what expansion resolves of it
        (step references are noted as read, so they become upstream)."""
        text = origin.action.if_ if isinstance(origin.action, Step) else None
        if text is None:
            return None
        try:
            node = conditions.parse(text)
        except conditions.ConditionError as error:  # validation reports it first
            raise ExpansionError(f"steps.{origin.name}.if: {error}") from None
        values: dict[str, Any] = {}
        for reference, _ in conditions.references_of(node):
            value = scope.lookup(reference)
            if value is not KEEP:
                values[str(reference)] = value
        return {"expression": text, "values": values}

    def cache_spec(self, cache: StepCache, scope: _Scope) -> dict[str, Any]:
        """What the worker hashes into the step's cache key besides its data
        (:mod:`flows.runtime.step_cache`): the rendered `key`, the ttl, the files' absolute
        paths."""
        return {
            "key": to_text(render(cache.key, scope.lookup)),
            "ttl": cache.ttl,
            "files": [str(self.flow_dir / name) for name in cache.files],
        }

    def payload(self, action: Action, scope: _Scope) -> dict[str, Any]:
        """The job data without meta: ``with`` for Python; command, cwd and env for shell; the
        child file, params and logical time for a sub-flow (:mod:`flows.flowfile.subflow_job`)."""
        if not action.is_shell:
            rendered: dict[str, Any] = render(action.with_, scope.lookup)
            if isinstance(action, Step) and action.flow is not None:
                file = str(self.flow_dir / action.flow)
                return subflow_payload(file, rendered, self.run["logical_time"])
            return rendered
        # Env values are text; step references stay as templates for the worker.
        env = {name: to_text(value) for name, value in render(action.env, scope.lookup).items()}

        def value_of(reference: Reference) -> str:
            value = scope.lookup(reference)  # a step reference: KEEP, and noted as read
            return f"${{{{ {reference} }}}}" if value is KEEP else to_text(value)

        # Every value reaches the shell as a variable, never as command text.
        command, variables = shell_command(str(action.run), value_of)
        env.update(variables)
        cwd = str(render(action.cwd, scope.lookup)) if action.cwd is not None else None
        directory = shell_cwd(self.flow_dir, cwd)
        return {"command": command, "cwd": str(directory), "env": env}


def wait_spec(step: Step) -> dict[str, Any]:
    """What the engine keeps of a ``wait:`` step (``flow.submit``'s job option ``wait``): the
    signal, the timeout in seconds (absent: none), what a timeout does, the declared outputs."""
    assert step.wait is not None
    spec: dict[str, Any] = {"signal": step.wait.signal, "on_timeout": step.wait.on_timeout}
    if step.wait.timeout is not None:
        spec["timeout"] = step.wait.timeout
    if step.outputs is not None:
        spec["outputs"] = list(step.outputs)
    return spec


def _klass(action: Action) -> str:
    if action.is_shell:
        return SHELL_KLASS
    return SUBFLOW_KLASS if action.is_subflow else str(action.job)


def _no_steps_in_items(step_id: str) -> Callable[[Reference], Any]:
    def refuse(reference: Reference) -> Any:
        raise ExpansionError(
            f"steps.{step_id}.foreach.items reads {reference}: items must be known when the run "
            "is submitted"
        )

    return refuse
