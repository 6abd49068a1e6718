"""Data between steps: what a flow job carries, and how the worker resolves it when it starts.

Expansion (:mod:`flows.expand.jobs`) resolves ``params``, ``run`` and the foreach variable;
references to other steps can only be known when the job starts, so they stay in the job data as
written. This module is the contract for the worker, and has no Redis in it.

**Job data.** A JSON object. The reserved key :data:`META_KEY` (``"_flows"``) holds::

    {"run": "<run id>", "flow": "<flow name>", "step": "<step id or hook name>",
     "index": <foreach item index>, "kind": "shell" | "python" | "wait",
     "upstream": {"<step id>": {"jids": ["<jid>", ...], "foreach": true | false}},
     "timeout": <seconds>, "heartbeat": <seconds>,
     "retry": {"attempts": n, "backoff": "fixed" | "exponential", "delay": s,
               "max_delay": s | null, "jitter": 0..1},
     "flow_dir": "<absolute folder of the flow file>",
     "if": {"expression": "<the step's if:>", "values": {"<reference>": <value>, ...}}}

``index``, ``upstream``, ``timeout`` and ``heartbeat`` are there only when the job has one
(no item index, no upstream step, no limit otherwise); ``retry`` only when the step has more
than one attempt: a job without retries never waits for a retry's delay (the engine fails it
at its first failure), so the worker's own default policy stands in for it.

A ``wait`` job (a ``wait:`` step) has klass :data:`WAIT_KLASS` and no payload: no worker runs
it. The engine completes it with a signal's data as its result (``lua/commands/wait.lua``), so
``steps.<wait>.outputs.<key>`` reads the signal's data like any step's outputs.

``fanout`` is there only for the jobs of a fan-out step (:mod:`flows.flowfile.fanout`): ``{"from":
"<producer step>", "output": "<key>", "as": "<item name>"}``; an ``upstream`` entry of a
fan-out step also has ``"fanout": {"from": "<producer jid>", "output": "<key>"}`` and lists its
template's jid (the worker finds the items: :meth:`FlowsMeta.expanded`). A foreach or matrix
step with no items is one job ``<run id>:<step>`` that the engine completes with the empty list;
its ``upstream`` entry has ``"empty": true``, and once that job completed the step has no jobs
to read (its outputs the empty list, its status success), as a fan-out with no items.

``if`` is there only for a step with a condition: ``values`` holds what expansion resolved (its
params, run fields and foreach variable, by reference text); its step references are keys of
``upstream``.

A Python job's klass is imported with ``flow_dir`` on ``sys.path`` (``job: tasks.load`` names
``tasks.py`` next to the flow file); a shell job's ``cwd`` is already absolute.

Everything else is the payload: a Python job's ``with``; a shell job's ``command``, ``cwd`` and
``env``. The payload may still hold ``${{ steps.<id>.outputs[.<key>...] }}`` and
``${{ steps.<id>.status }}``; every ``<id>`` named there is a key of ``upstream``, whose ``jids``
are that step's jobs (one, or a foreach or matrix step's items in order: ``foreach`` is then
true). Shell commands never hold them: expansion moves each into an environment variable
(:func:`env_name`), so a value can never be spliced into shell syntax.

**At start**, the worker:

1. ``meta = FlowsMeta.from_data(job.data)`` (None: not a flow job, run it as is);
2. fetches the state, stored result and history of every jid in ``meta.upstream_jids()``;
3. when the meta has ``if``: :func:`condition_holds` (false: complete the job as skipped,
   without running it; :class:`flows.flowfile.conditions.ConditionError` fails it, group
   ``flows-condition``);
   Before that, a fan-out step read upstream is :meth:`FlowsMeta.expanded` into its items
   (fetched too: :meth:`FlowsMeta.items_to_fetch`), and a fan-out item finds its item
   (:meth:`FlowsMeta.item`), passed to both calls;
4. ``payload = resolve_payload(job.data, {jid: UpstreamJob(state, result, skipped), ...})``
   (``skipped``: :func:`was_skipped` of its history), which drops the meta key, resolves every
   step reference (single pass) and, for shell jobs, turns env values into text;
   :class:`UnresolvedReference` means the job should fail (group ``flows-reference``), since
   retrying cannot help.

**Values.** ``steps.X.outputs`` is the result of X's job (a mapping); of a foreach step, the list
of its items' results in item order. A job that did not complete has null outputs. ``.key``
selects from a mapping (an error when a completed job's result lacks it, null from null); on a
foreach step it selects from each item: ``steps.load.outputs.rows`` is ``[rows of item 0, ...]``.
``steps.X.status`` is :func:`step_status` of X's jobs: success, failed, expired, pending,
upstream_failed or skipped.

**Shell outputs.** A shell job finds the path of a file in ``$FLOWS_OUTPUT``; what it writes
there as ``key=value`` lines (``key<<EOF`` ... ``EOF`` for several lines) becomes its outputs
(:func:`parse_output_file`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any, Final, TypeVar

from flows.flowfile.fanout import FANOUT_KEY, FanoutError, item_index, item_jids, items_of
from flows.flowfile.templates import STEPS, Reference, render, select, to_text
from scheduler.engine.envelope import ENVELOPE_KEY

# One fact, one place: the worker reads the same key (scheduler.worker.envelope).
META_KEY: Final = ENVELOPE_KEY
SHELL_KLASS: Final = "flows.runtime.tasks.shell"
"""The klass of every shell (``run:``) job."""
WAIT_KLASS: Final = "flows.wait"
"""The klass of every ``wait:`` job (never imported: no worker runs one)."""
ENV_PREFIX: Final = "FLOWS_"
"""Environment names starting with this are reserved for the runtime."""
CONDITION_KEY: Final = "if"
SECRETS_KEY: Final = "secrets"
CACHE_KEY: Final = "cache"
EMPTY_KEY: Final = "empty"
"""An ``upstream`` entry's flag: a foreach or matrix step with no items (:class:`Upstream`)."""
"""The meta's cache spec of a step with ``cache:`` (its key: :mod:`flows.expand.cache_keys`)."""
"""The meta's list of the flow's secret names (their values are resolved on the worker)."""
"""The meta key of a step's condition."""

COMPLETE_STATES: Final = frozenset({"complete"})
FAILED_STATES: Final = frozenset({"failed"})
ACTIVE_STATES: Final = frozenset({"waiting", "running", "scheduled", "stalled", "awaiting"})

_OUTPUT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ENV_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


class UnresolvedReference(KeyError):
    """A step reference that cannot be resolved from the upstream jobs' results."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unresolved reference"


@dataclass(frozen=True, slots=True)
class UpstreamJob:
    """What the worker read about one upstream job: its state, stored result (or None), and
    whether the engine skipped it (its trigger rule: complete without running)."""

    state: str
    result: Any = None
    skipped: bool = False


_Folder = TypeVar("_Folder", bound=PurePath)


def shell_cwd(flow_dir: _Folder, cwd: str | None) -> _Folder:
    """Where a shell job runs: its ``cwd`` relative to the flow file's folder (an absolute one
    as it is), else that folder."""
    return flow_dir if cwd is None else flow_dir / cwd


def was_skipped(history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a complete job's history says the engine skipped it rather than ran it (the
    latest of put, popped and skipped is skipped)."""
    for entry in reversed(history):
        what = entry.get("what")
        if what == "skipped":
            return True
        if what in ("popped", "put"):
            return False
    return False


@dataclass(frozen=True, slots=True)
class Upstream:
    """The jobs of one upstream step, in item order for a foreach step. A fan-out step
    (:mod:`flows.flowfile.fanout`) is known by its template's jid and ``fanout``: ``{"from":
    <producer jid>, "output": <key>}``, which tell where its items are
    (:meth:`FlowsMeta.expanded`)."""

    jids: tuple[str, ...]
    foreach: bool
    fanout: Mapping[str, str] | None = None
    empty: bool = False
    """A foreach or matrix step with no items: its one job (``jids``) completes with the empty
    list, and then the step has no jobs to read, as a fan-out with no items."""

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"jids": list(self.jids), "foreach": self.foreach}
        if self.fanout is not None:
            entry[FANOUT_KEY] = dict(self.fanout)
        if self.empty:
            entry[EMPTY_KEY] = True
        return entry

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Upstream:
        return cls(
            tuple(entry["jids"]),
            bool(entry["foreach"]),
            entry.get(FANOUT_KEY),
            bool(entry.get(EMPTY_KEY, False)),
        )


@dataclass(frozen=True, slots=True)
class FlowsMeta:
    """The parsed :data:`META_KEY` entry of a flow job's data."""

    run: str
    flow: str
    step: str
    index: int | None
    kind: str
    upstream: Mapping[str, Upstream]
    timeout: float | None
    heartbeat: float | None
    retry: Mapping[str, Any]
    flow_dir: str
    condition: Mapping[str, Any] | None = None
    fanout: Mapping[str, str] | None = None
    secrets: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FlowsMeta | None:
        """The meta of ``data``, or None when the job was not put by a flow."""
        raw = data.get(META_KEY)
        # The envelope is shared with plain jobs (pythonpath, retry, timeout): only a run id
        # makes it a flow job.
        if not isinstance(raw, Mapping) or "run" not in raw:
            return None
        upstream = {
            step: Upstream.from_json(entry) for step, entry in raw.get("upstream", {}).items()
        }
        return cls(
            run=raw["run"],
            flow=raw["flow"],
            step=raw["step"],
            index=raw.get("index"),
            kind=raw["kind"],
            upstream=upstream,
            timeout=raw.get("timeout"),
            heartbeat=raw.get("heartbeat"),
            retry=raw.get("retry", {}),
            flow_dir=raw.get("flow_dir", "."),
            condition=raw.get(CONDITION_KEY),
            fanout=raw.get(FANOUT_KEY),
            secrets=tuple(str(name) for name in raw.get(SECRETS_KEY) or ()),
        )

    def to_json(self) -> dict[str, Any]:
        meta = meta_json(
            self.run,
            self.flow,
            self.step,
            self.index,
            self.kind,
            self.upstream,
            self.timeout,
            self.heartbeat,
            self.retry,
            self.flow_dir,
        )
        if self.condition is not None:
            meta[CONDITION_KEY] = dict(self.condition)
        if self.fanout is not None:
            meta[FANOUT_KEY] = dict(self.fanout)
        if self.secrets:
            meta[SECRETS_KEY] = list(self.secrets)
        return meta

    def upstream_jids(self) -> list[str]:
        """Every jid whose state and result the worker must read before resolving (for a
        fan-out step, its template and its producer)."""
        jids = [jid for entry in self.upstream.values() for jid in entry.jids]
        jids += [entry.fanout["from"] for entry in self.upstream.values() if entry.fanout]
        return list(dict.fromkeys(jids))

    def expanded(self, jobs: Mapping[str, UpstreamJob]) -> FlowsMeta:
        """The meta with each upstream fan-out step's jobs as they are now, given ``jobs``
        (:meth:`upstream_jids`): its template while it exists (none when it completed with no
        items), else its items, one per item of the producer's output."""
        if not any(entry.fanout or entry.empty for entry in self.upstream.values()):
            return self
        upstream = dict(self.upstream)
        for step, entry in self.upstream.items():
            if entry.fanout is not None:
                upstream[step] = Upstream(_fanout_jobs(entry, jobs), True)
            elif entry.empty:
                upstream[step] = Upstream(_template_jobs(entry, jobs) or (), True)
        return replace(self, upstream=upstream)

    def item(self, jid: str, jobs: Mapping[str, UpstreamJob]) -> tuple[str, Any] | None:
        """(name, value) of the item of job ``jid`` of a fan-out step (None for other jobs):
        item ``i`` (the ``[i]`` of its jid) of the producer's output. Raises
        :class:`UnresolvedReference` when there is none."""
        if self.fanout is None:
            return None
        index = item_index(jid)
        producer = self.upstream.get(self.fanout["from"])
        if index is None or producer is None or not producer.jids:
            raise UnresolvedReference(f"job {jid} is the template of a fan-out: it never runs")
        found = jobs.get(producer.jids[0])
        output = self.fanout["output"]
        if found is None or found.state not in COMPLETE_STATES or found.result is None:
            raise UnresolvedReference(f"job {jid}: its producer {producer.jids[0]} has no outputs")
        try:
            items = items_of(_output_of(found.result, output), output)
        except FanoutError as error:
            raise UnresolvedReference(f"job {jid}: {error}") from None
        if index >= len(items):
            raise UnresolvedReference(f"job {jid}: the output {output} has {len(items)} items")
        return self.fanout["as"], items[index]

    def items_to_fetch(self, jobs: Mapping[str, UpstreamJob]) -> list[str]:
        """The item jids :meth:`expanded` names that ``jobs`` does not hold yet."""
        jids: list[str] = []
        for entry in self.upstream.values():
            if entry.fanout is not None:
                jids += (jid for jid in _fanout_jobs(entry, jobs) if jid not in jobs)
        return jids


def meta_json(
    run: str,
    flow: str,
    step: str,
    index: int | None,
    kind: str,
    upstream: Mapping[str, Upstream],
    timeout: float | None,
    heartbeat: float | None,
    retry: Mapping[str, Any],
    flow_dir: str,
) -> dict[str, Any]:
    """``FlowsMeta(...).to_json()`` without the object: expansion makes one per job.

    What is at its default is left out (see the module's docstring): every job of a run
    carries its meta, in its payload, its hash and every pop's reply."""
    meta: dict[str, Any] = {"run": run, "flow": flow, "step": step}
    if index is not None:
        meta["index"] = index
    meta["kind"] = kind
    if upstream:
        meta["upstream"] = {step: entry.to_json() for step, entry in upstream.items()}
    if timeout is not None:
        meta["timeout"] = timeout
    if heartbeat is not None:
        meta["heartbeat"] = heartbeat
    if int(retry.get("attempts") or 1) > 1:
        meta["retry"] = dict(retry)
    meta["flow_dir"] = flow_dir
    return meta


def step_status(jobs: Sequence[UpstreamJob]) -> str:
    """One word for a step from its jobs, the words of ``flows status``.

    ``failed`` if any job failed; ``expired`` if one expired; ``pending`` if any is still
    waiting or running (possible under ``one_failed``); ``upstream_failed`` if one is held back
    by a failed need (a dependent runs past it only then); ``skipped`` if all of them were
    skipped by their trigger rule; ``success`` if all completed (an empty foreach too).
    """
    states = {job.state for job in jobs}
    for state, word in _STATUS_BY_STATE:
        if state in states:
            return word
    if states <= COMPLETE_STATES:
        return "skipped" if jobs and all(job.skipped for job in jobs) else "success"
    return "pending"


_STATUS_BY_STATE: Final = (
    *((state, "failed") for state in sorted(FAILED_STATES)),
    ("expired", "expired"),
    *((state, "pending") for state in sorted(ACTIVE_STATES)),
    ("depends", "upstream_failed"),
)
"""Job states that decide a step's word, first match wins."""


Item = tuple[str, Any] | None
"""A fan-out item's name and value (:meth:`FlowsMeta.item`), or None."""


def _output_of(result: Any, output: str) -> Any:
    return result.get(output) if isinstance(result, Mapping) else None


def _template_jobs(entry: Upstream, jobs: Mapping[str, UpstreamJob]) -> tuple[str, ...] | None:
    """The jobs of a step known by its template while the template is there: none once it
    completed with no items, else the template; None when it is gone."""
    template = entry.jids[0]
    found = jobs.get(template)
    if found is None:
        return None
    if found.state in COMPLETE_STATES and not found.skipped:
        return ()  # no items: it completed with the empty list
    return (template,)


def _fanout_jobs(entry: Upstream, jobs: Mapping[str, UpstreamJob]) -> tuple[str, ...]:
    assert entry.fanout is not None
    template = entry.jids[0]
    kept = _template_jobs(entry, jobs)
    if kept is not None:
        return kept
    producer = jobs.get(entry.fanout["from"])
    if producer is None or producer.state not in COMPLETE_STATES:
        return ()
    output = entry.fanout["output"]
    try:
        count = len(items_of(_output_of(producer.result, output), output))
    except FanoutError:
        return ()
    return tuple(item_jids(template, count))


def _item_lookup(item: Item, reference: Reference) -> Any:
    """The value of a reference to a fan-out item (``f``, ``f.key``); UnresolvedReference for
    a key the item lacks."""
    assert item is not None
    try:
        return select(item[1], reference.path[1:], reference)
    except KeyError as error:
        raise UnresolvedReference(str(error.args[0])) from None


def resolve_payload(
    data: Mapping[str, Any],
    jobs: Mapping[str, UpstreamJob],
    item: Item = None,
    meta: FlowsMeta | None = None,
) -> dict[str, Any]:
    """The job's payload with every ``steps`` reference (and a fan-out item's name) resolved
    (see the module doc). ``meta``: ``FlowsMeta.from_data(data)``, when the caller has it
    already (a worker reads it once per job, not twice)."""
    if meta is None:
        meta = FlowsMeta.from_data(data)
    payload = {key: value for key, value in data.items() if key != META_KEY}
    if meta is None:
        return payload

    def lookup(reference: Reference) -> Any:
        if item is not None and reference.root == item[0]:
            return _item_lookup(item, reference)
        return _step_value(meta, jobs, reference)

    resolved: dict[str, Any] = render(payload, lookup)
    if meta.kind == "shell" and isinstance(resolved.get("env"), Mapping):
        resolved["env"] = {name: to_text(value) for name, value in resolved["env"].items()}
    return resolved


def condition_holds(meta: FlowsMeta, jobs: Mapping[str, UpstreamJob], item: Item = None) -> bool:
    """Whether the job's ``if`` holds (true without one). Raises
    :class:`flows.flowfile.conditions.ConditionError` when the expression cannot be evaluated, and
    :class:`UnresolvedReference` as :func:`resolve_payload` does."""
    if meta.condition is None:
        return True
    values: Mapping[str, Any] = meta.condition.get("values", {})

    def lookup(reference: Reference) -> Any:
        text = str(reference)
        if text in values:
            return values[text]
        if item is not None and reference.root == item[0]:
            return _item_lookup(item, reference)
        return _step_value(meta, jobs, reference)

    from flows.flowfile import (
        conditions,  # its parser's classes cost the readers of runs (flows status)
    )

    return conditions.holds(str(meta.condition.get("expression", "")), lookup)


def _step_value(meta: FlowsMeta, jobs: Mapping[str, UpstreamJob], reference: Reference) -> Any:
    if reference.root != STEPS or len(reference.path) < 3:
        raise UnresolvedReference(f"{reference}: only steps references are left to resolve")
    step, field, rest = reference.path[1], reference.path[2], reference.path[3:]
    upstream = meta.upstream.get(step)
    if upstream is None:
        raise UnresolvedReference(f"{reference}: step '{step}' is not upstream of this job")
    try:
        found = [jobs[jid] for jid in upstream.jids]
    except KeyError as missing:
        raise UnresolvedReference(f"{reference}: no state for job {missing}") from None
    if field == "status" and not rest:
        return step_status(found)
    if field != "outputs":
        raise UnresolvedReference(f"{reference}: expected outputs or status after the step")
    return _outputs(reference, upstream.foreach, found, rest)


def _outputs(
    reference: Reference, foreach: bool, jobs: list[UpstreamJob], keys: tuple[str, ...]
) -> Any:
    def one(job: UpstreamJob) -> Any:
        if job.state not in COMPLETE_STATES or job.result is None:
            return None
        try:
            return select(job.result, keys, reference)
        except KeyError as error:
            raise UnresolvedReference(str(error.args[0])) from None

    if foreach:
        return [one(job) for job in jobs]
    return one(jobs[0]) if jobs else None


def env_name(reference: Reference) -> str:
    """The environment variable that carries ``reference`` into a shell command.

    ``steps.extract-crm.outputs.uri`` → ``FLOWS_STEPS_EXTRACT_CRM_OUTPUTS_URI``.
    """
    return ENV_PREFIX + _ENV_UNSAFE.sub("_", "_".join(reference.path)).upper()


NUMBER_ENV_PREFIX: Final = ENV_PREFIX + "NUMBER_"
"""A template inside an arithmetic expansion (``$(( ${{ params.n }} * 10 ))``, and bash's
``((...))``, ``let`` and numeric tests in ``[[ ]]``) is carried by a variable of its own,
``FLOWS_NUMBER_<...>``: the shell evaluates the text it expands to there, and bash (``/bin/sh``
on some systems) runs the command of ``a[$(cmd)]``. The worker starts the
command only when each such variable holds an integer (:func:`number_problem`)."""
_INTEGER = re.compile(r"\s*[+-]?(?:0[xX][0-9A-Fa-f]+|[0-9]+)\s*")


def number_problem(name: str, value: str) -> str | None:
    """Why variable ``name`` (a :data:`NUMBER_ENV_PREFIX` one) may not reach an arithmetic
    expansion with ``value``, or None when it holds an integer (decimal, octal or hex)."""
    if _INTEGER.fullmatch(value):
        return None
    shown = repr(value if len(value) <= 80 else value[:80] + "...")
    return (
        f"${name} is {shown}: a value the shell evaluates as arithmetic ($((...)), ((...)), "
        "let, [[ -eq ]] and the like) must be an integer"
    )


def parse_output_file(text: str) -> dict[str, str]:
    """Outputs a shell step wrote to ``$FLOWS_OUTPUT``: ``key=value`` lines, ``key<<EOF`` blocks.

    Lines end at a newline only. Values are kept as written (no stripping); blank lines and
    ``#`` comments are skipped; a later key replaces an earlier one. Raises ValueError with the
    line number for anything else.
    """
    outputs: dict[str, str] = {}
    # Only a newline ends a line (and a CR before it goes): str.splitlines would also split on
    # U+2028, form feeds and the like, which a value taken from a param can carry, and a line
    # made so would set an output of its own.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, equals, value = line.partition("=")
        if not equals and "<<" in line:
            key, _, delimiter = line.partition("<<")
            block: list[str] = []
            while number < len(lines) and lines[number] != delimiter:
                block.append(lines[number])
                number += 1
            if number == len(lines):
                raise ValueError(f"line {number}: no closing {delimiter!r} for {key!r}")
            number += 1
            value = "\n".join(block)
        elif not equals:
            raise ValueError(f"line {number}: expected key=value, got {line!r}")
        if not _OUTPUT_KEY.fullmatch(key):
            raise ValueError(f"line {number}: {key!r} is not a valid output name")
        outputs[key] = value
    return outputs
