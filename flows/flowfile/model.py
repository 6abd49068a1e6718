"""The flow file, as immutable pydantic models: the one place for the schema.

Every model is frozen, strict (no silent ``"5"`` → 5) and refuses unknown keys. The JSON Schema
that editors use (``flows schema``) is generated from these classes, field docstrings included.
Cross-field checks that need the whole flow (the graph, templates, schedules) live in
:mod:`flows.validation.validate`; the defaults a job inherits are applied by :func:`settings_for`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from flows.flowfile.conditions import MAX_LENGTH as MAX_CONDITION
from flows.flowfile.durations import (
    DURATION_EXAMPLES,
    DURATION_PATTERN,
    DurationError,
    parse_duration,
)
from flows.flowfile.findings import describe
from flows.flowfile.job_data import ENV_PREFIX, META_KEY
from flows.flowfile.notify_rules import NotifyRules, SecretName, Triggers
from flows.flowfile.templates import (
    MATRIX,
    PARAMS,
    RUN,
    SEGMENT_PATTERN,
    STEPS,
    WHOLE_TEMPLATE_PATTERN,
    whole_reference,
)

MAX_STEPS: Final = 10_000
MAX_FOREACH_ITEMS: Final = 10_000
MAX_MATRIX_AXES: Final = 8
MATRIX_ID_VALUE: Final = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
"""A matrix value written as itself in job ids (``grid[region=de]``); others by position."""
PRIORITY_LIMIT: Final = 1_000_000
DEFAULT_QUEUE: Final = "default"
HOOK_NAMES: Final = ("on_success", "on_failure", "finally")
ID_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_-]*$"
_GENERATED_ID = re.compile(r"^(.+)\[(\d+)\]$")

TriggerRule = Literal["all_success", "all_done", "one_failed", "none_failed"]
ParamType = Literal["string", "int", "number", "bool", "date", "array", "object"]
ItemType = Literal["string", "int", "number", "bool", "date", "object"]


def problem(
    kind: str, message: str, hint: str = "", place: tuple[str | int, ...] = ()
) -> PydanticCustomError:
    """A validation error whose message and hint reach the user unchanged; ``place``: where in
    the value validated the mistake is (``("choices", 1)`` of a param), for its finding."""
    context: dict[str, Any] = {"message": message, "hint": hint}
    if place:
        context["place"] = place
    return PydanticCustomError(kind, "{message}", context)


# -- field types ------------------------------------------------------------------------------


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except DurationError as error:
        hint = f"did you mean '{error.suggestion}'?" if error.suggestion else ""
        hint = hint or error.hint or f"write {DURATION_EXAMPLES}"
        raise problem("duration", str(error), hint) from None


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
            ],
            "description": f"A duration: {DURATION_EXAMPLES}.",
        }
    ),
]


def _one_or_many(what: str) -> Callable[[object], object]:
    """A field that takes one string or a list of them: one is a list of one, anything else
    is said as ``what`` (not pydantic's "expected a list": one is what most files give)."""

    def listed(value: object) -> object:
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            return [value]
        raise problem("wrong_type", f"expected {what}, got {describe(value)}")

    return listed


_step_ids = _one_or_many("a step id such as 'extract', or a list of step ids")


def _step_id(value: object) -> object:
    if not isinstance(value, str):
        return value
    generated = _GENERATED_ID.match(value) if "[" in value else None
    if generated:
        raise problem(
            "generated_id",
            f"step id '{value}' collides with the job ids generated for the items of a "
            f"foreach step ('{generated.group(1)}[0]', '{generated.group(1)}[1]', ...)",
            "rename the step; ids may use letters, digits, '_' and '-'",
        )
    if value in HOOK_NAMES:
        raise problem(
            "reserved_id",
            f"step id '{value}' is the job id of the {value} hook",
            f"rename the step, or move it under hooks: {value}:",
        )
    return value


THROTTLE_PATTERN: Final = r"^[A-Za-z0-9_.:-]+$"
SUBFLOW_PATH_PATTERN: Final = r"^[^\s$]+\.ya?ml$"
Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN, max_length=64)]
StepId = Annotated[Identifier, BeforeValidator(_step_id)]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]+$", min_length=1, max_length=64)]
Queue = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$", max_length=64)]
Throttle = Annotated[str, StringConstraints(pattern=THROTTLE_PATTERN, max_length=64)]
Tag = Annotated[str, StringConstraints(pattern=r"^[^\s,]+$", max_length=64)]
DottedPath = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"),
]
OutputKey = Annotated[str, StringConstraints(pattern=rf"^{SEGMENT_PATTERN}$", max_length=64)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
SubflowPath = Annotated[str, StringConstraints(pattern=SUBFLOW_PATH_PATTERN, max_length=512)]
"""A flow file's path relative to the file naming it: no spaces, no templates (a sub-flow's
file is known when the parent is validated)."""
Needs = Annotated[
    list[StepId], BeforeValidator(_step_ids, json_schema_input_type=StepId | list[StepId])
]


_cron_expressions = _one_or_many('a cron string such as "0 3 * * *", or a list of them')


CronExpressions = Annotated[
    list[str],
    BeforeValidator(_cron_expressions, json_schema_input_type=str | list[str]),
    Field(min_length=1, max_length=20),
]
Priority = Annotated[int, Field(ge=-PRIORITY_LIMIT, le=PRIORITY_LIMIT)]
LenientDatetime = Annotated[datetime, Field(strict=False)]  # YAML dates arrive as text


def _foreach_items(value: object) -> object:
    if isinstance(value, list):
        if len(value) > MAX_FOREACH_ITEMS:
            raise problem("too_many_items", f"more than {MAX_FOREACH_ITEMS} foreach items")
        return value
    if isinstance(value, str) and whole_reference(value) is not None:
        return value
    raise problem(
        "foreach_items",
        f"foreach.items must be a list, or one template such as '${{{{ params.regions }}}}' "
        f"that names an array param or '${{{{ steps.list.outputs.files }}}}' (an output of a "
        f"step it needs); got {describe(value)}",
        "write the items as a YAML list, or declare an array param and reference it",
    )


ForeachItems = Annotated[
    Any,
    BeforeValidator(_foreach_items),
    WithJsonSchema(
        {"anyOf": [{"type": "array"}, {"type": "string", "pattern": WHOLE_TEMPLATE_PATTERN}]}
    ),
]


def _matrix_axis(value: object) -> object:
    if isinstance(value, list):
        return value
    if isinstance(value, str) and whole_reference(value) is not None:
        return value
    raise problem(
        "matrix_axis",
        f"a matrix axis must be a list, or one template such as '${{{{ params.regions }}}}' "
        f"that names an array param; got {describe(value)}",
        "write the axis as a YAML list, or declare an array param and reference it",
    )


MatrixAxis = Annotated[
    Any,
    BeforeValidator(_matrix_axis),
    WithJsonSchema(
        {"anyOf": [{"type": "array"}, {"type": "string", "pattern": WHOLE_TEMPLATE_PATTERN}]}
    ),
]


def matrix_id_text(value: Any, position: int) -> str:
    """How an axis value appears in a job id: itself when short and plain, else ``#<position>``
    (its place in the axis)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value) if isinstance(value, str | int | float) else ""
    return text if MATRIX_ID_VALUE.match(text) else f"#{position}"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )


# -- steps --------------------------------------------------------------------------------------


class Retry(_Model):
    """How often and how patiently a failed job is tried again."""

    attempts: int = Field(default=1, ge=1, le=100)
    """Tries in all, the first one included (1: no retry)."""
    backoff: Literal["fixed", "exponential"] = "exponential"
    """Wait `delay` each time, or double it after each failure."""
    delay: Duration = 10.0
    """Wait before the first retry."""
    max_delay: Duration | None = None
    """Upper bound of the wait with exponential backoff."""
    jitter: float = Field(default=0.0, ge=0.0, le=1.0)
    """Random spread of each wait, as a fraction of it (0.2: up to 20% either way)."""


class Action(_Model):
    """What runs: a shell command or a Python callable, and how. Steps and hooks share it."""

    run: str | None = Field(default=None, min_length=1)
    """A shell command, run in the flow file's folder (or `cwd`)."""
    job: DottedPath | None = None
    """A Python callable or class by dotted path, importable from the flow file's folder or
    the folder the worker started in."""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    """Arguments of a `job`: the job's data."""
    env: dict[EnvName, str] = Field(default_factory=dict)
    """Environment variables of a `run` command."""
    cwd: str | None = None
    """Working directory of a `run` command, relative to the flow file's folder."""
    queue: Queue | None = None
    """Queue of the job (default: defaults.queue, then the flow's queue, then 'default')."""
    priority: Priority | None = None
    """Lower runs sooner."""
    tags: list[Tag] = Field(default_factory=list)
    timeout: Duration | None = None
    """A job running longer is stopped, then retried or failed."""
    heartbeat: Duration | None = None
    """The job's lock time: a worker that stops heartbeating loses the job after this long."""
    ttl: Duration | None = None
    """The job must start within this long of becoming ready, else it expires (the run fails)."""
    throttle: Throttle | None = None
    """A named throttle shared by every flow and queue: at most its limit of jobs holding it run
    at once (`flows throttle set NAME LIMIT`; no limit set: no bound)."""
    retry: Retry | None = None
    """Fields given here replace those of defaults.retry one by one."""

    @model_validator(mode="after")
    def _one_action(self) -> Action:
        if self.is_subflow:
            return self  # Step._subflow checks a sub-flow step
        # A step that waits for a signal runs nothing (Step._wait_alone checks it).
        if self.run is None and self.job is None and getattr(self, "wait", None) is None:
            raise problem(
                "missing_action",
                "missing 'run' or 'job': say what to execute",
                "add 'run: <shell command>' or 'job: <module>.<callable>'"
                + (", or 'flow: <file>' for a sub-flow" if isinstance(self, Step) else ""),
            )
        if self.run is not None and self.job is not None:
            raise problem(
                "both_actions",
                "both 'run' and 'job' are set; a step executes exactly one of them",
                "keep 'run' for a shell command or 'job' for a Python callable",
            )
        if self.job is not None and (self.env or self.cwd is not None):
            raise problem(
                "shell_only",
                "'env' and 'cwd' apply to 'run' (shell) steps",
                "pass a Python job its inputs through 'with'",
            )
        if self.run is not None and self.with_:
            raise problem(
                "job_only",
                "'with' applies to 'job' steps; a shell step takes its inputs in 'run' or 'env'",
                "move the values into 'env' (or into the command)",
            )
        if META_KEY in self.with_:
            raise problem("reserved_key", f"'{META_KEY}' is reserved in 'with'", "rename the key")
        reserved = (
            sorted(name for name in self.env if name.startswith(ENV_PREFIX)) if self.env else []
        )
        if reserved:
            raise problem(
                "reserved_env",
                f"environment names starting with {ENV_PREFIX} are reserved: {', '.join(reserved)}",
                "rename the variable",
            )
        return self

    @property
    def is_shell(self) -> bool:
        return self.run is not None

    @property
    def is_subflow(self) -> bool:
        """Whether the action starts a child run of another flow file (a step's ``flow``)."""
        return getattr(self, "flow", None) is not None


class Foreach(_Model):
    """Run the step once per item; dependents wait for every item."""

    items: ForeachItems
    """A list, a template naming an array param, or one naming an output of a step this step
    needs (`${{ steps.list.outputs.files }}`): then the items are made when that step
    completes, at most 10,000 (see Fan-out from outputs)."""
    as_: Identifier = Field(default="item", alias="as")
    """Name of the item in templates: `${{ item }}`, `${{ item.key }}` for mapping items."""
    max_parallel: int | None = Field(default=None, ge=1, le=MAX_FOREACH_ITEMS)
    """At most this many items run at once."""

    @model_validator(mode="after")
    def _name_is_free(self) -> Foreach:
        if self.as_ in (PARAMS, RUN, STEPS, MATRIX):
            raise problem(
                "reserved_name",
                f"foreach.as cannot be '{self.as_}': templates use that name for the {self.as_}",
                "pick another name, e.g. 'item' or 'region'",
            )
        return self


class Wait(_Model):
    """The step runs nothing: once its needs are met it waits for a signal
    (`flows signal RUN STEP --data JSON`, `flows approve RUN STEP --note TEXT`), whose data
    become its outputs."""

    signal: Identifier
    """The signal's name: shown while the step waits and recorded with the signal."""
    timeout: Annotated[Duration, Field(gt=0)] | None = None
    """How long after the step becomes ready a signal may come (not given: no bound)."""
    on_timeout: Literal["fail", "skip"] = "fail"
    """Past the timeout the step fails (group `wait-timeout`; `flows retry` makes it wait
    again) or is skipped (its dependents then follow their trigger rules)."""


# What a wait step may not have: it runs nothing, once (its own fields: needs, outputs,
# trigger_rule, queue, priority, tags).
_NOT_FOR_WAITS: Final = (
    ("run", "run"),
    ("job", "job"),
    ("with_", "with"),
    ("env", "env"),
    ("cwd", "cwd"),
    ("timeout", "timeout"),
    ("heartbeat", "heartbeat"),
    ("ttl", "ttl"),
    ("throttle", "throttle"),
    ("retry", "retry"),
    ("foreach", "foreach"),
    ("matrix", "matrix"),
    ("flow", "flow"),
    ("delay", "delay"),
    ("if_", "if"),
    ("cache", "cache"),
)


class StepCache(_Model):
    """Reuse a result: a step whose cache key matches a completed run of it (any flow, any
    worker) within `ttl` completes at once with that result, as status `cached`. The key is a
    hash of the step's command or callable, its resolved arguments (upstream outputs included),
    `key` and the contents of `files`."""

    key: str = Field(default="", max_length=1000)
    """Text added to the key (templates of params and run fields allowed), e.g. a version."""
    ttl: Annotated[Duration, Field(gt=0)]
    """How long a completed result may be reused."""
    files: list[str] = Field(default_factory=list, max_length=100)
    """Files (relative to the flow file) whose contents are part of the key."""


class Step(Action):
    """One step of the flow: an action, what it needs, and when it may run."""

    needs: Needs = Field(default_factory=list)
    """Steps that must be done first (their outputs become readable)."""
    outputs: list[OutputKey] | None = Field(default=None, max_length=100)
    """The keys of the step's outputs: `flows validate` then refuses references to any other
    key (`steps.<id>.outputs.<key>`). Not given: any key may be read."""
    foreach: Foreach | None = None
    matrix: dict[Identifier, MatrixAxis] | None = Field(
        default=None, min_length=1, max_length=MAX_MATRIX_AXES
    )
    """Run the step once per combination of the axes' values (their product), in axis order:
    `${{ matrix.<axis> }}` in templates, job ids `<step>[region=de,kind=full]`. Each axis is a
    list, or a template naming an array param."""
    trigger_rule: TriggerRule = "all_success"
    """When the step runs, given its needs: all succeeded, all done (succeeded or failed),
    one failed, or none failed."""
    delay: Duration | None = None
    """Wait this long once the step may run (after its needs are done)."""
    if_: str | None = Field(default=None, alias="if", min_length=1, max_length=MAX_CONDITION)
    """A condition (`params.publish && steps.list.outputs.files != []`), checked when the
    step's job starts: false skips the step, and the `all_success` steps that need it."""
    wait: Wait | None = None
    """Instead of `run` or `job`: the step waits for a signal once its needs are met."""
    flow: SubflowPath | None = None
    """A sub-flow: the step starts a run of this flow file (relative to this file) with `with`
    as its params, and succeeds with the child flow's `outputs:` when that run succeeds."""
    deadline: Annotated[Duration, Field(gt=0)] | None = None
    """The step must be done this long after it started (a wait step: after it began
    waiting); past it unfinished, a `deadline` notification and a mark on the step, once."""
    notify: NotifyRules = Field(default_factory=list)
    """Whom to tell of this step's failure, success, exhausted retries or wait
    (docs: Notifications)."""
    cache: StepCache | None = None
    """Complete at once with the result of an earlier run of the same work (see StepCache)."""

    @model_validator(mode="after")
    def _subflow(self) -> Step:
        if self.flow is None:
            return self
        others = [name for name, value in (("run", self.run), ("job", self.job)) if value]
        others += [name for name in _NOT_FOR_SUBFLOWS if getattr(self, name)]
        if others:
            raise problem(
                "subflow_fields",
                f"a sub-flow step (flow: {self.flow}) cannot have {', '.join(others)}: "
                "it runs the child flow's steps, one run of it",
                "remove them; pass the child its params in 'with'",
            )
        if META_KEY in self.with_:
            raise problem("reserved_key", f"'{META_KEY}' is reserved in 'with'", "rename the key")
        return self

    @model_validator(mode="after")
    def _one_fan_out(self) -> Step:
        if self.foreach is not None and self.matrix is not None:
            raise problem(
                "foreach_and_matrix",
                "a step has 'foreach' or 'matrix', not both",
                "add an axis to the matrix instead of the foreach",
            )
        return self

    @model_validator(mode="after")
    def _wait_alone(self) -> Step:
        if self.wait is None:
            return self
        if self.run is not None or self.job is not None:
            key = "run" if self.run is not None else "job"
            raise problem(
                "wait_with_action",
                f"a 'wait' step has no '{key}': no worker runs it, a signal completes it",
                f"move '{key}' into a step that needs this one",
            )
        given = [name for field, name in _NOT_FOR_WAITS if field in self.model_fields_set]
        if given:
            raise problem(
                "wait_only",
                f"{', '.join(repr(name) for name in given)} "
                f"{'does' if len(given) == 1 else 'do'} not apply to a 'wait' step: "
                "no worker runs it",
                "a wait step takes needs, outputs, trigger_rule, queue, priority and tags",
            )
        return self

    @property
    def is_wait(self) -> bool:
        """Whether the step waits for a signal instead of running."""
        return self.wait is not None

    @property
    def fans_out(self) -> bool:
        """Whether the step runs as several jobs (foreach or matrix): its outputs are a list."""
        return self.foreach is not None or self.matrix is not None


_NOT_FOR_SUBFLOWS: Final = ("env", "cwd", "foreach", "matrix", "cache")
"""Step fields a sub-flow step cannot have (checked by their truth: an empty env is none)."""


class Hooks(_Model):
    """Jobs that run after all the steps: on success, on failure, and in every case."""

    on_success: Action | None = None
    """Runs when every step succeeded."""
    on_failure: Action | None = None
    """Runs when any step failed."""
    finally_: Action | None = Field(default=None, alias="finally")
    """Runs once every step is done, whatever happened."""

    def defined(self) -> list[tuple[str, Action]]:
        """The hooks that are set, by name, in :data:`HOOK_NAMES` order."""
        actions = (self.on_success, self.on_failure, self.finally_)
        return [(name, a) for name, a in zip(HOOK_NAMES, actions, strict=True) if a is not None]


# -- params, schedule, defaults -----------------------------------------------------------------


class ParamItems(_Model):
    """The type of each item of an array param."""

    type: ItemType = "string"


class Param(_Model):
    """A value given when the run starts (`-p name=value`), with a type and maybe a default."""

    type: ParamType = "string"
    description: str | None = None
    default: Any = None
    """Used when the run does not give the param; may use `${{ run.* }}`."""
    items: ParamItems | None = None
    """Item type of an array param."""
    required: bool | None = None
    """Must the run give it? Default: yes exactly when there is no default."""
    choices: list[StrictStr | StrictInt | StrictFloat] | None = Field(
        default=None, min_length=1, max_length=1000
    )
    """The only values it may take (a string, int, number or date param); the dashboard's Run
    form offers them as a list."""

    @model_validator(mode="after")
    def _consistent(self) -> Param:
        if self.items is not None and self.type != "array":
            raise problem(
                "items_not_array",
                f"'items' applies to array params, not to type {self.type}",
                "remove 'items', or set 'type: array'",
            )
        if self.choices is not None:
            _check_choices(self.type, self.choices)
        if self.required and self.has_default:
            raise problem(
                "required_default",
                "a required param cannot have a default (the default would never be used)",
                "remove 'required: true', or remove the default",
            )
        return self

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set

    @property
    def is_required(self) -> bool:
        return self.required if self.required is not None else not self.has_default


_CHOICE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "date": (str,),
    "int": (int,),
    "number": (int, float),
}


def _check_choices(kind: str, choices: list[str | int | float]) -> None:
    """A param's choices: of a scalar type, each a value of it, none twice."""
    if kind not in _CHOICE_TYPES:
        raise problem(
            "choices_type",
            f"'choices' applies to string, int, number and date params, not to type {kind}",
            "remove 'choices'" + (" (a bool has two values already)" if kind == "bool" else ""),
        )
    for index, choice in enumerate(choices):
        ok = isinstance(choice, _CHOICE_TYPES[kind])
        if ok and kind == "date":
            ok = _is_date_text(str(choice))
        if not ok:
            article = "an" if kind == "int" else "a"
            raise problem(
                "choices_value",
                f"choice {choice!r} is not {article} {kind} value",
                f"give every choice as {article} {kind}"
                + (" such as 2026-01-31" if kind == "date" else ""),
                place=("choices", index),
            )
    seen: set[str | int | float] = set()
    for index, choice in enumerate(choices):
        if choice in seen:
            raise problem(
                "choices_twice",
                f"choice {choice!r} is listed twice",
                "list it once",
                place=("choices", index),
            )
        seen.add(choice)


def _is_date_text(text: str) -> bool:
    try:
        return len(text) == 10 and bool(date.fromisoformat(text))
    except ValueError:
        return False


class Catchup(_Model):
    """Which ticks missed while no scheduler ran are fired afterwards."""

    window: Duration = 86400.0
    """How far back missed ticks are considered."""
    policy: Literal["none", "latest", "all"] = "latest"
    """none: skip them; latest: fire the most recent once; all: fire each (up to max_runs)."""
    max_runs: int | None = Field(default=None, ge=1, le=10_000)


class Schedule(_Model):
    """When the flow runs by itself."""

    cron: CronExpressions
    """A cron expression (minute hour day-of-month month day-of-week) or a list of them."""
    timezone: str = "UTC"
    """IANA time zone the expressions are read in, e.g. Europe/Berlin."""
    catchup: Catchup = Catchup()
    overlap: Literal["skip", "buffer_one", "allow", "cancel_running"] = "skip"
    """What a tick does while the previous run is still active."""
    jitter: Duration = 0.0
    """Fire up to this long after the tick, at random, to spread load."""
    start: LenientDatetime | None = None
    """No tick fires before this moment."""
    end: LenientDatetime | None = None
    """No tick fires after this moment."""
    paused: bool = False

    @model_validator(mode="after")
    def _start_before_end(self) -> Schedule:
        start, end = self.start, self.end
        if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
            return self  # naive against aware: compared once the zone applies (scheduler.cron)
        if end <= start:
            raise problem("end_before_start", "schedule.end is not after schedule.start")
        return self


class Concurrency(_Model):
    max_active_runs: int | None = Field(default=None, ge=1, le=10_000)
    """Runs of this flow active at once (no limit when unset): a run started by hand is
    refused at the limit, a scheduled tick follows the schedule's overlap policy."""


class Defaults(_Model):
    """Settings every step and hook inherits unless it sets its own."""

    queue: Queue | None = None
    timeout: Duration | None = None
    heartbeat: Duration | None = None
    ttl: Duration | None = None
    throttle: Throttle | None = None
    priority: Priority = 0
    retry: Retry = Retry()


class Flow(_Model):
    """A flow file: named steps with their needs, params, an optional schedule and hooks."""

    version: Literal[1]
    """Version of this file format."""
    name: Name
    """Lowercase letters, digits, '_' and '-'; part of every run id and job id."""
    description: str | None = None
    queue: Queue | None = None
    """Default queue of the flow's jobs."""
    tags: list[Tag] = Field(default_factory=list)
    """Tags of every job of the flow."""
    params: dict[Identifier, Param] = Field(default_factory=dict)
    schedule: Schedule | None = None
    concurrency: Concurrency = Concurrency()
    defaults: Defaults = Field(default_factory=Defaults)
    steps: dict[StepId, Step] = Field(min_length=1, max_length=MAX_STEPS)
    """Step id → step. Ids use letters, digits, '_' and '-'."""
    hooks: Hooks = Hooks()
    outputs: dict[OutputKey, Any] | None = Field(default=None, max_length=100)
    """The flow's outputs: name → value, templates reading its steps' outputs
    (`${{ steps.load.outputs.rows }}`), params and run fields. A parent's sub-flow step takes
    them as its own outputs once the run succeeded."""
    deadline: Annotated[Duration, Field(gt=0)] | None = None
    """A run must be done this long after the time it stands for (a scheduled run's tick,
    else when it was started); past it unfinished, a `deadline` notification and a mark on the
    run, once (metric `flows_deadlines_missed_total`)."""
    on: Triggers | None = None
    """Other ways to start a run: `webhook: {secret: NAME, param: payload}` (docs: Starting
    runs)."""
    secrets: list[SecretName] = Field(default_factory=list, max_length=100)
    """Names of secrets the steps need, resolved on the worker when a job starts (an
    environment variable, a file under `$FLOWS_SECRETS_DIR` or `/run/secrets`, or the worker's
    `--env-file`): a shell step gets each as an environment variable, a Python job reads it with
    `scheduler.secrets.secret(NAME)`. Values never reach Redis and are masked as `***`."""
    notify: NotifyRules = Field(default_factory=list)
    """Whom to tell when a run fails or succeeds, a step's retries run out or a wait step
    starts waiting (docs: Notifications)."""
    tests: list[dict[str, Any]] | None = Field(default=None, min_length=1)
    """The flow's own test cases, run by `flows test` and pytest on a virtual clock: the same
    list as a test file's `cases:` (name, params, at, mock, schedule, signals, expect), the flow
    being this file (docs: Flow tests). Runs ignore it."""


# -- defaults applied ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    """How one step's (or hook's) jobs are put, after the flow's defaults are applied."""

    queue: str
    priority: int
    tags: tuple[str, ...]
    timeout: float | None
    heartbeat: float | None
    retry: Retry
    ttl: float | None = None
    throttle: str | None = None


def settings_for(flow: Flow, action: Action) -> Settings:
    """The effective settings of ``action``: its own, else ``defaults``, else the flow's."""
    return _settings(flow, *_own_settings(action))


class FlowSettings:
    """:func:`settings_for` of many actions of one flow: actions with the same settings of their
    own (most set none) share one :class:`Settings`, worked out once."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.known: dict[_OwnSettings, Settings] = {}

    def of(self, action: Action) -> Settings:
        own = _own_settings(action)
        settings = self.known.get(own)
        if settings is None:
            settings = self.known[own] = _settings(self.flow, *own)
        return settings


_RetryFields = tuple[tuple[str, Any], ...]
"""The fields an action's ``retry`` sets (its defaults do not replace those of defaults.retry)."""
_OwnSettings = tuple[
    str | None, int | None, tuple[str, ...], float | None, float | None, _RetryFields | None,
    float | None, str | None,
]  # fmt: skip


def _own_settings(action: Action) -> _OwnSettings:
    """What :func:`_settings` reads of an action (and only that, so it can be a cache key)."""
    return (
        action.queue,
        action.priority,
        tuple(action.tags),
        action.timeout,
        action.heartbeat,
        None if action.retry is None else _set_fields(action.retry),
        action.ttl,
        action.throttle,
    )


def _settings(
    flow: Flow,
    queue: str | None,
    priority: int | None,
    tags: tuple[str, ...],
    timeout: float | None,
    heartbeat: float | None,
    retry: _RetryFields | None,
    ttl: float | None,
    throttle: str | None,
) -> Settings:
    defaults = flow.defaults
    merged_retry = defaults.retry
    if retry is not None:
        merged_retry = merged_retry.model_copy(update=dict(retry))
    return Settings(
        queue=queue or defaults.queue or flow.queue or DEFAULT_QUEUE,
        priority=priority if priority is not None else defaults.priority,
        tags=tuple(dict.fromkeys([*flow.tags, *tags])),
        timeout=timeout if timeout is not None else defaults.timeout,
        heartbeat=heartbeat if heartbeat is not None else defaults.heartbeat,
        retry=merged_retry,
        ttl=ttl if ttl is not None else defaults.ttl,
        throttle=throttle if throttle is not None else defaults.throttle,
    )


def _set_fields(model: BaseModel) -> _RetryFields:
    return tuple((name, getattr(model, name)) for name in sorted(model.model_fields_set))


def job_tags(flow: Flow, action: Action) -> tuple[str, ...]:
    """The tags of ``action``'s jobs: the flow's, then its own, each once."""
    return tuple(dict.fromkeys([*flow.tags, *action.tags]))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of flow files, for editors (``flows schema``)."""
    schema = Flow.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "redis-flows flow file",
        **{key: value for key, value in schema.items() if key != "title"},
    }
