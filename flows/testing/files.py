"""Reading flow tests into cases; every mistake a finding with its place.

Cases live in a test file (``*.test.yaml``, naming its flow) or in a flow file's own ``tests:``
section (the same list as ``cases:``, the flow being the file itself). A case's shape is
:mod:`flows.flowfile.cases`.

```yaml
flow: etl.yaml                    # the flow under test, relative to this file
cases:
  - name: load fails once, then succeeds
    params: {date: "2026-11-01"}
    at: "2026-11-01T03:00:00Z"    # the virtual clock's start (default: 2026-01-01T00:00:00Z)
    mock:                         # a step's stub, or a list of them (one per attempt)
      extract_orders: {outputs: {rows: 3}}
      load: [{fail: timeout}, {outputs: {}}]
    expect:
      status: succeeded
      steps: {load: {status: success, attempts: 2}}
      order: [extract_orders, load]
  - name: a month of ticks
    schedule: {from: "2026-03-01T00:00:00Z", to: "2026-04-01T00:00:00Z"}
    mock: all
    expect: {runs: 31}
```

Reading only files: no engine, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from flows.flowfile.cases import Case, CaseReader, read_cases
from flows.flowfile.findings import (
    Finding,
    FindingSink,
    did_you_mean,
    names_hint,
    path_meant,
    sort_findings,
)
from flows.flowfile.subflow_files import child_jobs
from flows.flowfile.yaml_reader import load_file, load_yaml
from flows.runs.build import FlowFile, read_flow_file
from flows.validation.validate import InvalidFlow, subflow_outputs

SUFFIX: Final = ".test.yaml"
SUFFIXES: Final = (SUFFIX, ".test.yml")
"""What a flow test file's name ends with (the scheduler service and ``flows validate DIR``
leave both out as no flows)."""
_TOP_KEYS: Final = ("flow", "cases")
_TESTS_KEY: Final = re.compile(r"^tests\s*:", re.MULTILINE)
_STEPS_KEY: Final = re.compile(r"^steps\s*:", re.MULTILINE)
_STARTS_WITH: Final = "a test file starts with 'flow: etl.yaml' (its flow) and 'cases:'"


@dataclass(frozen=True)
class TestFile:
    file: str
    flow: FlowFile
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class Reading:
    """A test file read: ``test`` is None when it has errors (``findings``)."""

    test: TestFile | None
    findings: list[Finding]


def read_test_file(path: Path) -> Reading:
    """The cases at ``path`` with the flow they test, or every finding in them: a test file's
    (``*.test.yaml``, naming its flow) or a flow file's own ``tests:`` section."""
    if not path.name.endswith(SUFFIXES):
        return _read_flow_tests(path)
    shown = str(path)
    loaded = load_file(path, shown)
    if loaded.data is None or loaded.findings:
        return Reading(None, sort_findings([_as_test_file(f) for f in loaded.findings]))
    data = loaded.data
    sink = FindingSink(shown, loaded.source_map.locate)
    reader = CaseReader(sink, [])
    reader.keys(data, _TOP_KEYS, (), "a test file")
    flow_name = data.get("flow")
    if not isinstance(flow_name, str) or not flow_name.strip():
        sink.error(("flow",), "test-flow", "a test file names its flow: `flow: etl.yaml`")
        return Reading(None, sort_findings(sink.findings))
    flow_path = path.parent / flow_name
    if flow_path.name.endswith(SUFFIXES):
        message = f"{flow_name!r} is a flow test file: flow: names the flow the cases test"
        hint = f"e.g. flow: {flow_path.name.split('.test.')[0]}.yaml"
        sink.error(("flow",), "test-flow", message, hint)
        return Reading(None, sort_findings(sink.findings))
    if not flow_path.is_file():
        meant = path_meant(flow_name, path.parent)
        hint = f"did you mean '{meant}'?" if meant else ""
        sink.error(("flow",), "test-flow", f"no flow file {flow_name!r} beside {path.name}", hint)
        return Reading(None, sort_findings(sink.findings))
    try:
        flow_file = read_flow_file(flow_path)
    except InvalidFlow as invalid:
        return Reading(None, sort_findings([*sink.findings, *invalid.findings]))
    _know_flow(reader, flow_file)
    scheduled = flow_file.flow.schedule is not None
    cases = read_cases(data.get("cases"), ("cases",), reader, scheduled, "a test file's cases")
    if cases is None or sink.has_errors:
        return Reading(None, sort_findings(sink.findings))
    return Reading(TestFile(shown, flow_file, tuple(cases)), sort_findings(sink.findings))


def _as_test_file(finding: Finding) -> Finding:
    """The YAML reader's words for a file with no mapping at its top say what a flow starts
    with: a test file starts otherwise."""
    if finding.code == "yaml-empty":
        return replace(finding, hint=_STARTS_WITH)
    if finding.code == "yaml-top-level":
        found = finding.message.rpartition(", found ")[2]
        message = f"the top level must be a mapping of keys (flow, cases), found {found}"
        return replace(finding, message=message, hint=_STARTS_WITH)
    return finding


def _know_flow(reader: CaseReader, flow_file: FlowFile) -> None:
    """Tell ``reader`` what the flow under test has, to check the cases against: its steps and
    hooks (which run as jobs of the run too: a hook posting to a chat really posts unless
    stubbed), then its child runs' jobs by their labels (``report/count``)."""
    flow = flow_file.flow
    reader.steps = [*flow.steps, *(name for name, _ in flow.hooks.defined())]
    reader.set_waits({name: s.outputs for name, s in flow.steps.items() if s.wait is not None})
    reader.params = flow.params
    steps = {name: step.outputs for name, step in flow.steps.items()}
    reader.set_outputs(list(flow.outputs or {}), steps, subflow_outputs(flow, flow_file.flow_dir))
    reader.add_children(child_jobs(flow, flow_file.flow_dir))


def _read_flow_tests(path: Path) -> Reading:
    """A flow file's own cases (its ``tests:``). Validating the flow checks them (a mistake is
    an :class:`InvalidFlow` finding); they are read again here, from the same text, into cases."""
    shown = str(path)
    try:
        flow_file = read_flow_file(path)
    except InvalidFlow as invalid:
        return Reading(None, sort_findings(invalid.findings))
    loaded = load_yaml(flow_file.text, shown)
    sink = FindingSink(shown, loaded.source_map.locate)
    if loaded.data is None or "tests" not in loaded.data:
        stem = path.name.removesuffix(path.suffix)
        named = [path.with_name(stem + suffix) for suffix in SUFFIXES]
        beside = next((file for file in named if file.is_file()), named[0])
        hint = (
            f"its cases are in {beside}: flows test {beside}"
            if beside.is_file()
            else f"add a tests: section, or cases in {beside.name} beside it"
        )
        message = "the flow file has no tests: section (nor is it *.test.yaml)"
        sink.error((), "test-cases", message, hint)
        return Reading(None, sort_findings(sink.findings))
    reader = CaseReader(sink, [])
    _know_flow(reader, flow_file)
    scheduled = flow_file.flow.schedule is not None
    cases = read_cases(loaded.data["tests"], ("tests",), reader, scheduled, "tests")
    if cases is None or sink.has_errors:
        return Reading(None, sort_findings(sink.findings))
    return Reading(TestFile(shown, flow_file, tuple(cases)), sort_findings(sink.findings))


def split_case_id(arg: str) -> tuple[Path, str | None]:
    """``FILE::NAME``, a case's id as ``flows test`` and pytest print it, as ``(FILE, NAME)``;
    a path as ``(path, None)``. A case's name has no ``::`` (a finding), so an id splits at its
    last one; a path that exists is a path, ``::`` in it or not."""
    file, sep, name = arg.rpartition("::")
    if not sep or exists(Path(arg)):
        return Path(arg), None
    return Path(file), name


def exists(path: Path) -> bool:
    """Whether ``path`` exists; one the system will not look up (a name too long for it) does
    not."""
    try:
        return path.exists()
    except OSError:
        return False


def missing_case(reading: Reading, names: Collection[str]) -> str | None:
    """What is wrong with naming the cases ``names`` of the file read (None: it has them all,
    or it has findings of its own, which say what is wrong instead)."""
    if reading.test is None:
        return None
    cases = [case.name for case in reading.test.cases]
    for name in names:
        if name not in cases:
            close = did_you_mean(name, cases)
            listed = names_hint("its cases", [repr(case) for case in cases])
            return (
                f"{reading.test.file} has no case {name!r}"
                + (f" ({close})" if close else "")
                + f"; {listed}"
            )
    return None


def has_tests(path: Path) -> bool:
    """Whether ``path`` is a flow file with a top-level ``tests:`` section (a look at its text,
    enough to collect it: reading it says what is wrong with it). A flow has ``steps:`` too: the
    pytest plugin looks at every YAML file of a project, and a CI or tool config with a
    ``tests:`` key of its own is no flow test to fail. A file not UTF-8 is looked at all the
    same: reading it says so, rather than its cases vanishing."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return False
    return _TESTS_KEY.search(text) is not None and _STEPS_KEY.search(text) is not None


def find_test_files(paths: Sequence[Path]) -> list[Path]:
    """The test files named, and under the folders named (hidden folders left out) the test
    files and the flow files with a ``tests:`` section."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*.y*ml"))
                if not any(part.startswith(".") for part in p.relative_to(path).parts)
                and p.suffix in (".yaml", ".yml")
                and (p.name.endswith(SUFFIXES) or has_tests(p))
            )
        else:
            found.append(path)
    return found
