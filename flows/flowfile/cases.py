"""The shape of a flow test case, read into a :class:`Case`; every mistake a finding.

A case is written in a test file's ``cases:`` (``*.test.yaml``, :mod:`flows.testing.files`) or in
a flow file's own ``tests:`` section; both read through :class:`CaseReader`, so ``flows
validate`` reports a mistake in a flow's ``tests:`` (at its file:line:col) as it reports one in
its steps, and ``flows test`` runs the same :class:`Case`. Reading only: no engine, no clock.

A stub is a mapping of ``outputs`` (the step's result), ``fail`` (raise an error in that group:
retried as the step's policy says), ``exit`` (a shell step's exit code), ``duration`` (virtual
time the attempt takes) and ``skip`` (complete as skipped). The last stub of a list serves every
later attempt. A step without a stub really runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from flows.flowfile.durations import DurationError, format_duration, parse_duration
from flows.flowfile.findings import DataPath, FindingSink, describe, did_you_mean, names_hint
from flows.flowfile.model import Action, Param, Step
from flows.flowfile.params import ParamError, bind_params
from flows.flowfile.status_words import RUN_STATUSES, STEP_STATUSES
from scheduler.cron.preview import parse_period

DEFAULT_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
_CASE_KEYS: Final = ("name", "params", "at", "mock", "schedule", "signals", "expect")
_STUB_KEYS: Final = ("outputs", "fail", "exit", "duration", "skip")
_EXPECT_KEYS: Final = ("status", "steps", "order", "runs", "outputs")
_STEP_EXPECT_KEYS: Final = ("status", "attempts", "outputs")
_SCHEDULE_KEYS: Final = ("from", "to", "outage")
#: The longest period a schedule case may cover: a year, leap day included. A case runs every
#: tick of it on the virtual clock, so the bound keeps a minutely schedule's case to minutes.
MAX_SCHEDULE_DAYS: Final = 366
NODE_SEPARATOR: Final = "::"
"""What joins a file and a case in a test's id (``etl.test.yaml::load fails``), as in pytest's."""


@dataclass(frozen=True)
class Stub:
    """What one attempt of a mocked step does instead of running."""

    outputs: Mapping[str, Any] | None = None
    fail: str | None = None
    exit: int | None = None
    duration: float = 0.0
    skip: bool = False


ALL_SUCCEED: Final = Stub(outputs={})
"""``mock: all``: every step (not otherwise stubbed) succeeds at once with no outputs."""


@dataclass(frozen=True)
class StepExpect:
    status: str | None = None
    attempts: int | None = None
    outputs: Any = None
    has_outputs: bool = False


@dataclass(frozen=True)
class Expect:
    status: str | None = None
    steps: Mapping[str, StepExpect] = field(default_factory=dict)
    order: tuple[str, ...] | None = None
    runs: int | None = None
    outputs: Mapping[str, Any] | None = None
    """The run's outputs (the flow's ``outputs:``) by the keys named."""


@dataclass(frozen=True)
class Period:
    """A schedule's ticks from ``start`` to ``end`` (epoch seconds), the service down during
    ``outage`` (``(from, to)`` or None)."""

    start: float
    end: float
    outage: tuple[float, float] | None = None


@dataclass(frozen=True)
class Case:
    name: str
    line: int
    params: Mapping[str, Any]
    at: datetime
    mocks: Mapping[str, tuple[Stub, ...]]
    mock_all: bool
    schedule: Period | None
    signals: Mapping[str, Mapping[str, Any]]
    expect: Expect

    def stub(self, step: str, attempt: int) -> Stub | None:
        """The stub of ``step``'s attempt ``attempt`` (1-based), or None: it really runs."""
        stubs = self.mocks.get(step)
        if stubs:
            return stubs[min(attempt, len(stubs)) - 1]
        return ALL_SUCCEED if self.mock_all else None


_ISO_TIME: Final = "an ISO 8601 time such as 2026-11-01T03:00:00Z"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(value: Any) -> datetime:
    """An ISO 8601 time (``Z`` or an offset; a naive one is UTC), not before 1970 (the engine
    counts time in seconds since then). ValueError says what is wrong in words."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:  # its own words are Python's ("Invalid isoformat string")
            raise ValueError(f"{value!r} is not {_ISO_TIME}") from None
    else:
        raise ValueError(f"expected {_ISO_TIME}, got {describe(value)}")
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if moment < _EPOCH:
        shown = value if isinstance(value, str) else moment.isoformat()
        raise ValueError(
            f"{shown!r} is before 1970-01-01T00:00:00Z, where the engine's clock starts"
        )
    return moment


def _days(seconds: float) -> str:
    """``seconds`` in days, and what is left past the last whole day: ``366 days and 1s``."""
    days, rest = divmod(seconds, 86400)
    shown = f"{int(days):,} days"
    return f"{shown} and {format_duration(rest)}" if rest else shown


class CaseReader:
    """Reads cases of a flow with ``steps`` into :class:`Case` objects, every mistake a
    finding in ``sink``."""

    def __init__(
        self,
        sink: FindingSink,
        steps: Sequence[str],
        waits: Collection[str] | Mapping[str, Sequence[str] | None] = (),
        params: Mapping[str, Param] | None = None,
    ) -> None:
        self.sink = sink
        self.steps = list(steps)
        self.waits: set[str] = set()
        """The ``wait:`` steps: they take a signal, never a stub."""
        self.wait_outputs: dict[str, tuple[str, ...]] = {}
        """The outputs each wait step declares: what a signal to it must give."""
        self.set_waits(waits)
        self.params = params
        """The flow's declared params (None: not known, a case's are not checked)."""
        self.flow_outputs: tuple[str, ...] | None = None
        """The keys of the flow's ``outputs:`` (empty: it has none; None: not known, a case's
        ``expect.outputs`` is not checked)."""
        self.step_outputs: dict[str, tuple[str, ...]] = {}
        """The output keys each step declares (its ``outputs:``); a step not here may have any."""
        self.subflow_files: dict[str, str] = {}
        """The sub-flow steps whose outputs are their child's ``outputs:``: the child's file."""

    def set_outputs(
        self,
        flow: Collection[str] | None,
        steps: Mapping[str, Sequence[str] | None],
        subflows: Mapping[str, tuple[str, Collection[str]]] | None = None,
    ) -> None:
        """The flow's output keys (None: not known) and those its steps declare (None: any);
        ``subflows``: for a sub-flow step that declares none of its own, its child's file and
        the keys of the child's ``outputs:`` (what the step gives)."""
        self.flow_outputs = tuple(str(key) for key in flow) if flow is not None else None
        given = {
            str(step): (file, keys)
            for step, (file, keys) in (subflows or {}).items()
            if steps.get(step) is None
        }
        self.subflow_files = {step: file for step, (file, _) in given.items()}
        self.step_outputs = {
            **{step: tuple(str(key) for key in keys) for step, (_, keys) in given.items()},
            **{
                str(step): tuple(str(key) for key in keys)
                for step, keys in steps.items()
                if keys is not None
            },
        }

    def add_children(self, children: Mapping[str, Action]) -> None:
        """The flow's child runs' jobs, by their labels (``report/count``): stubbed, signaled
        and expected as the flow's own steps are."""
        self.steps += [label for label in children if label not in self.steps]
        for label, job in children.items():
            if not isinstance(job, Step):
                continue
            if job.wait is not None:
                self.waits.add(label)
                self.wait_outputs[label] = tuple(str(key) for key in job.outputs or ())
            if job.outputs is not None:
                self.step_outputs[label] = tuple(str(key) for key in job.outputs)

    def output_keys(self, given: Mapping[Any, Any], path: DataPath, step: str | None) -> None:
        """A finding for each key of ``given`` (outputs at ``path``) that ``step``, or the flow
        when None, does not declare: compared, it could only ever be missing (``expected 40,
        got null``); stubbed, nothing may read it."""
        declared = self.flow_outputs if step is None else self.step_outputs.get(step)
        if declared is None:
            return
        owner = "the flow" if step is None else f"step {step!r}"
        child = self.subflow_files.get(step) if step is not None else None
        if not declared:  # a flow without outputs:, a step's `outputs: []`, such a sub-flow
            hint = (
                "give the flow an outputs: section, or expect a step's under "
                "expect.steps.<step>.outputs"
                if step is None
                else f"{child} declares no outputs: add an outputs: map to it"
                if child is not None
                else "declare each key in the step's outputs:"
            )
            what = (
                "declares no outputs" if child is None else f"(sub-flow {child}) gives no outputs"
            )
            self.sink.error(path, "test-output", f"{owner} {what}", hint, at_key=True)
            return
        for key in given:
            if key not in declared:
                self.sink.error(
                    (*path, key),
                    "test-output",
                    f"{key!r} is not an output of {owner}"
                    + (f" (its outputs are sub-flow {child}'s)" if child is not None else ""),
                    did_you_mean(str(key), declared)
                    or names_hint(
                        f"{owner} declares" if child is None else "its outputs", list(declared)
                    ),
                    at_key=True,
                )

    def set_waits(self, waits: Collection[str] | Mapping[str, Sequence[str] | None]) -> None:
        """The flow's ``wait:`` steps, with the outputs each declares when ``waits`` maps them."""
        self.waits = {str(name) for name in waits}
        self.wait_outputs = (
            {str(k): tuple(str(o) for o in v or ()) for k, v in waits.items()}
            if isinstance(waits, Mapping)
            else {}
        )

    def keys(
        self, raw: Mapping[str, Any], allowed: Sequence[str], path: DataPath, what: str
    ) -> None:
        for key in raw:
            if key not in allowed:
                self.sink.error(
                    (*path, key),
                    "test-key",
                    f"unknown key {key!r} in {what}",
                    did_you_mean(str(key), allowed) or f"allowed: {', '.join(allowed)}",
                    at_key=True,
                )

    def step(self, name: Any, path: DataPath) -> bool:
        if name in self.steps:
            return True
        self.sink.error(
            path,
            "test-step",
            f"{name!r} is not a step of the flow",
            did_you_mean(str(name), self.steps) or f"steps: {', '.join(self.steps)}",
            at_key=True,
        )
        return False

    def mapping(self, raw: Any, path: DataPath, what: str) -> dict[str, Any] | None:
        if isinstance(raw, dict):
            return raw
        self.sink.error(path, "test-type", f"{what} must be a mapping")
        return None

    def time(self, raw: Any, path: DataPath) -> datetime | None:
        try:
            return parse_time(raw)
        except ValueError as error:
            self.sink.error(path, "test-time", str(error))
            return None

    def stub(self, raw: Any, path: DataPath, step: str) -> Stub | None:
        body = self.mapping(raw, path, "a stub")
        if body is None:
            return None
        self.keys(body, _STUB_KEYS, path, "a stub")
        ok = True
        outputs = body.get("outputs")
        if outputs is not None and not isinstance(outputs, dict):
            self.sink.error((*path, "outputs"), "test-type", "outputs must be a mapping")
            ok = False
        elif outputs:
            self.output_keys(outputs, (*path, "outputs"), step)
        code = body.get("exit")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int) or code == 0):
            self.sink.error((*path, "exit"), "test-type", "exit must be a non-zero exit code")
            ok = False
        fail = body.get("fail")
        if fail is not None and not isinstance(fail, str):
            self.sink.error((*path, "fail"), "test-type", "fail must be text: the error's group")
            ok = False
        skip = body.get("skip")
        if skip is not None and not isinstance(skip, bool):
            # Read as truth, the text "no" or "false" would skip the step.
            self.sink.error(
                (*path, "skip"), "test-type", "skip must be true or false", "e.g. skip: true"
            )
            ok = False
        duration = 0.0
        if "duration" in body:
            try:
                duration = parse_duration(body["duration"])
            except DurationError as error:
                self.sink.error((*path, "duration"), "test-duration", str(error))
                ok = False
        if sum(1 for k in ("outputs", "fail", "exit", "skip") if body.get(k) is not None) > 1:
            self.sink.error(path, "test-stub", "a stub has one of outputs, fail, exit or skip")
            ok = False
        if not ok:
            return None
        return Stub(
            outputs=outputs,
            fail=fail,
            exit=code,
            duration=duration,
            skip=skip is True,
        )

    def mocks(self, raw: Any, path: DataPath) -> tuple[dict[str, tuple[Stub, ...]], bool]:
        if raw is None:
            return {}, False
        if raw == "all":
            return {}, True
        body = self.mapping(raw, path, "mock (a mapping of steps, or 'all')")
        if body is None:
            return {}, False
        mock_all = False
        out: dict[str, tuple[Stub, ...]] = {}
        for step, spec in body.items():
            if step == "all":
                mock_all = bool(spec)
                continue
            if not self.step(step, (*path, step)):
                continue
            if step in self.waits:  # no worker runs it: a stub would never be used
                self.sink.error(
                    (*path, step),
                    "test-stub",
                    f"{step!r} is a wait step: it takes a signal, not a stub",
                    f"give its data under signals: {{{step}: {{...}}}}",
                    at_key=True,
                )
                continue
            specs = spec if isinstance(spec, list) else [spec]
            if not specs:
                self.sink.error((*path, step), "test-stub", "an empty list of stubs")
                continue
            stubs = [
                self.stub(
                    s, (*path, step, i) if isinstance(spec, list) else (*path, step), str(step)
                )
                for i, s in enumerate(specs)
            ]
            if all(s is not None for s in stubs):
                out[str(step)] = tuple(s for s in stubs if s is not None)
        return out, mock_all

    def schedule(self, raw: Any, path: DataPath, scheduled: bool) -> Period | None:
        body = self.mapping(raw, path, "schedule")
        if body is None:
            return None
        if not scheduled:
            self.sink.error(path, "test-schedule", "the flow has no schedule: to test")
            return None
        self.keys(body, _SCHEDULE_KEYS, path, "schedule")
        start = self.time(body.get("from"), (*path, "from"))
        end = self.time(body.get("to"), (*path, "to"))
        outage: tuple[float, float] | None = None
        if "outage" in body:
            raw = body["outage"]
            try:
                if not isinstance(raw, str):  # a mapping's text would be Python's, not the file's
                    raise ValueError(
                        "outage is one text, FROM/TO: two ISO 8601 times joined by '/', e.g. "
                        '"2026-03-01T02:30:00Z/2026-03-01T07:30:00Z"'
                    )
                outage = parse_period(raw)
            except ValueError as error:
                self.sink.error((*path, "outage"), "test-time", str(error))
                return None
        if start is None or end is None:
            return None
        if end <= start:
            self.sink.error((*path, "to"), "test-time", "'to' must be after 'from'")
            return None
        length = end.timestamp() - start.timestamp()
        if length > MAX_SCHEDULE_DAYS * 86400:
            self.sink.error(
                (*path, "to"),
                "test-time",
                f"the period is {_days(length)} long; a schedule case may cover at most "
                f"{MAX_SCHEDULE_DAYS} days (each tick runs the flow: a year of a minutely "
                f"schedule is {MAX_SCHEDULE_DAYS * 1440:,} runs, some 9 minutes)",
                "end it sooner, or split the period into cases of a year or less",
            )
            return None
        return Period(start.timestamp(), end.timestamp(), outage)

    def step_expect(self, step: Any, spec: Any, where: DataPath) -> StepExpect | None:
        if not self.step(step, where):
            return None
        if isinstance(spec, str):  # `load: success` for short
            spec = {"status": spec}
        item = self.mapping(spec, where, f"the expectation of step {step!r}")
        if item is None:
            return None
        self.keys(item, _STEP_EXPECT_KEYS, where, f"the expectation of step {step!r}")
        word = item.get("status")
        if word is not None and word not in STEP_STATUSES:
            self.sink.error(
                (*where, "status"),
                "test-status",
                f"{word!r} is not a step status",
                did_you_mean(str(word), STEP_STATUSES) or f"one of: {', '.join(STEP_STATUSES)}",
            )
        attempts = item.get("attempts")
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0
        ):
            self.sink.error((*where, "attempts"), "test-type", "attempts must be a number >= 0")
        outputs = item.get("outputs")
        if "outputs" in item and not isinstance(outputs, dict | list):
            # A step's outputs are a mapping (a foreach step's: a list, one per item).
            self.sink.error(
                (*where, "outputs"),
                "test-type",
                "outputs must map the step's outputs to values (a foreach step: a list of them)",
            )
        elif isinstance(outputs, dict):
            self.output_keys(outputs, (*where, "outputs"), str(step))
        elif isinstance(outputs, list):
            for i, each in enumerate(outputs):
                if isinstance(each, dict):
                    self.output_keys(each, (*where, "outputs", i), str(step))
        return StepExpect(word, attempts, outputs, "outputs" in item)

    def case(self, raw: Any, where: DataPath, scheduled: bool, names: set[str]) -> Case | None:
        body = self.mapping(raw, where, "a case")
        if body is None:
            return None
        self.keys(body, _CASE_KEYS, where, "a case")
        name = self.name(body.get("name"), where, names)
        if name is None:
            return None
        at = DEFAULT_START if "at" not in body else self.time(body["at"], (*where, "at"))
        params = body.get("params") or {}
        # A schedule case's params are a finding of their own (unused).
        self.check_params(params, (*where, "params"), "schedule" in body)
        mocks, mock_all = self.mocks(body.get("mock"), (*where, "mock"))
        period = None
        if "schedule" in body:
            period = self.schedule(body["schedule"], (*where, "schedule"), scheduled)
        signals = body.get("signals") or {}
        if self.mapping(signals, (*where, "signals"), "signals") is not None:
            for step, value in signals.items():
                if not self.step(step, (*where, "signals", step)):
                    continue
                if self.steps and step not in self.waits:  # never awaited: never delivered
                    self.sink.error(
                        (*where, "signals", step),
                        "test-signal",
                        f"{step!r} is not a wait step: only a step with wait: takes a signal",
                        names_hint("wait steps", sorted(self.waits)) if self.waits else "",
                        at_key=True,
                    )
                    continue
                data = self.mapping(value, (*where, "signals", step), "a signal's data")
                declared = self.wait_outputs.get(str(step), ())
                lacking = [name for name in declared if data is not None and name not in data]
                if lacking:  # the engine would refuse the signal: the case could not run
                    keys = ", ".join(f"{name}: ..." for name in declared)
                    self.sink.error(
                        (*where, "signals", step),
                        "test-signal",
                        f"the signal to {step!r} lacks "
                        f"{', '.join(repr(n) for n in lacking)}: the wait declares the outputs "
                        f"{', '.join(declared)}",
                        f"give each: signals: {{{step}: {{{keys}}}}}",
                        at_key=True,
                    )
        expect = self.expect(body.get("expect") or {}, (*where, "expect"))
        if expect is not None:
            # A schedule: given but in error is a schedule case all the same: its own finding
            # says what is wrong, not a second one about keys only a schedule case uses.
            self.unused(body, expect, where, period is not None or "schedule" in body)
        if at is None or expect is None or not isinstance(params, dict):
            return None
        line = self.sink.locate(where, False)[0]
        return Case(str(name), line, params, at, mocks, mock_all, period, signals, expect)

    def name(self, name: Any, where: DataPath, names: set[str]) -> str | None:
        """The case's name, added to ``names`` (the file's so far); None when it has none."""
        if not isinstance(name, str) or not name.strip():
            self.sink.error(where, "test-name", "a case needs a name")
            return None
        if NODE_SEPARATOR in name:
            # pytest splits a node id at every '::': `pytest FILE::a::b` looks for a case 'a'
            # holding 'b', so the case would be collected but never selected by its own id.
            apart = name.replace(NODE_SEPARATOR, ": ")
            self.sink.error(
                (*where, "name"),
                "test-name",
                f"a case name may not contain '{NODE_SEPARATOR}': {name!r}",
                f"a case is selected as FILE{NODE_SEPARATOR}NAME (pytest): e.g. {apart!r}",
            )
        if name in names:
            self.sink.error((*where, "name"), "test-name", f"two cases are named {name!r}")
        names.add(name)
        return name

    def check_params(self, raw: Any, where: DataPath, scheduled: bool) -> None:
        """Each param the case gives, bound as the run binds it (an unknown name, a value the
        param refuses), and each required one it leaves out: a finding at its place now, not a
        case that cannot run."""
        given = self.mapping(raw, where, "params")
        declared = self.params
        if given is None or declared is None or scheduled:
            return
        for name, value in given.items():
            param = declared.get(name)
            if param is None:
                self.sink.error(
                    (*where, name),
                    "test-param",
                    f"unknown param {name!r}",
                    did_you_mean(str(name), declared)
                    or (names_hint("declared", list(declared)) if declared else "")
                    or "the flow declares no params",
                    at_key=True,
                )
                continue
            try:  # defaults are not rendered: only what the case gives is bound
                bind_params({name: param}, {name: value}, lambda default: default)
            except ParamError as error:
                self.sink.error((*where, name), "test-param", "; ".join(error.problems))
        for name, param in declared.items():
            if name not in given and param.is_required:
                self.sink.error(
                    where if given else where[:-1],
                    "test-param",
                    f"missing required param {name!r}",
                    f"give it under params: {{{name}: ...}}",
                    at_key=True,
                )

    def unused(
        self, body: Mapping[str, Any], expect: Expect, where: DataPath, scheduled: bool
    ) -> None:
        """What a case may hold but would never use: a schedule case runs the flow at each
        tick of its period and counts the runs; any other case runs it once."""
        raw = body.get("expect") or {}
        if scheduled:
            if "at" in body:
                self.sink.error(
                    (*where, "at"),
                    "test-key",
                    "a schedule case starts at its schedule's from: at is not used",
                    at_key=True,
                )
            if "params" in body:
                # The service fires a tick with the flow's defaults (a schedule has no params
                # of its own): the case's would be silently ignored.
                self.sink.error(
                    (*where, "params"),
                    "test-key",
                    "a schedule case's runs take the flow's param defaults, as the scheduler's "
                    "do: params is not used",
                    "test params in a case of its own (with at:)",
                    at_key=True,
                )
            for key in ("status", "steps", "outputs"):
                if key in raw:
                    self.sink.error(
                        (*where, "expect", key),
                        "test-key",
                        f"a schedule case compares its runs and their order, not expect.{key}",
                        "test one run in a case of its own (with at:)",
                        at_key=True,
                    )
        elif expect.runs is not None:
            self.sink.error(
                (*where, "expect", "runs"),
                "test-key",
                "runs counts a schedule case's runs: this case runs the flow once",
                "give the case a schedule: {from: ..., to: ...}",
                at_key=True,
            )

    def expect(self, raw: Any, path: DataPath) -> Expect | None:
        body = self.mapping(raw, path, "expect")
        if body is None:
            return None
        self.keys(body, _EXPECT_KEYS, path, "expect")
        status = body.get("status")
        if status is not None and status not in RUN_STATUSES:
            self.sink.error(
                (*path, "status"),
                "test-status",
                f"{status!r} is not a run status",
                did_you_mean(str(status), RUN_STATUSES) or f"one of: {', '.join(RUN_STATUSES)}",
            )
        steps: dict[str, StepExpect] = {}
        raw_steps = body.get("steps") or {}
        if self.mapping(raw_steps, (*path, "steps"), "expect.steps") is not None:
            for step, spec in raw_steps.items():
                found = self.step_expect(step, spec, (*path, "steps", step))
                if found is not None:
                    steps[str(step)] = found
        order = body.get("order")
        if order is not None:
            if not isinstance(order, list):
                self.sink.error((*path, "order"), "test-type", "order must be a list of steps")
                order = None
            else:
                for i, step in enumerate(order):
                    if self.step(step, (*path, "order", i)) and step in order[:i]:
                        # Compared with the order steps *first* started: a second mention of
                        # one (a retry, another tick's run) can never match.
                        self.sink.error(
                            (*path, "order", i),
                            "test-order",
                            f"{step!r} is named twice: order is the order steps first started",
                            "name each step once",
                        )
        runs = body.get("runs")
        if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 0):
            self.sink.error((*path, "runs"), "test-type", "runs must be a number >= 0")
        outputs = self.run_outputs(body.get("outputs"), (*path, "outputs"))
        return Expect(
            status,
            steps,
            tuple(str(s) for s in order) if order is not None else None,
            runs,
            dict(outputs) if outputs is not None else None,
        )

    def run_outputs(self, outputs: Any, path: DataPath) -> Mapping[str, Any] | None:
        """``expect.outputs``: the run's outputs by key, each a key of the flow's ``outputs:``."""
        if outputs is None:
            return None
        if not isinstance(outputs, Mapping):
            self.sink.error(path, "test-type", "outputs must map the run's outputs to values")
            return None
        self.output_keys(outputs, path, None)
        return outputs


def read_cases(
    raw: Any, where: DataPath, reader: CaseReader, scheduled: bool, what: str
) -> list[Case] | None:
    """The cases of the list ``raw`` at ``where`` (a test file's ``cases``, a flow's
    ``tests``); None (a finding made) when it is not a non-empty list."""
    if raw is None:
        key = where[-1]
        message = f"no {key}: a list of cases, each with a name"
        hint = f"add {key}: with a case such as - {{name: runs, expect: {{status: succeeded}}}}"
        reader.sink.error(where, "test-cases", message, hint, at_key=True)
        return None
    if not isinstance(raw, list):
        reader.sink.error(where, "test-cases", f"{what} is a list of cases", at_key=True)
        return None
    if not raw:
        reader.sink.error(where, "test-cases", f"{what} is empty: add at least one case")
        return None
    cases: list[Case] = []
    names: set[str] = set()
    for index, item in enumerate(raw):
        case = reader.case(item, (*where, index), scheduled, names)
        if case is not None:
            cases.append(case)
    return cases
