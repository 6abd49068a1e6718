"""Any mistake in a flow file gets findings, never a crash: a property test mutates the example
flows (keys deleted, renamed, misspelt, values retyped, steps removed, several at once) and
validates each mutant as `flows validate` does. Every outcome must be a valid flow or a list of
findings, and building a run of a valid mutant must succeed or refuse with a clear error."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flows.flowfile.params import ParamError
from flows.runs.build import FlowFile, build_run, parse_flow_text
from flows.validation.validate import InvalidFlow, validate_text
from scheduler.engine.errors import FlowsError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(p for p in EXAMPLES.glob("*.yaml") if not p.name.endswith(".test.yaml"))
SOURCES = {path.name: yaml.safe_load(path.read_text()) for path in FILES}

# Values a key may be retyped to: every YAML scalar type, a list, a mapping, nothing.
ODD_VALUES = st.sampled_from(
    [None, 0, -1, 3.5, True, "", "x", "${{ steps.nope.outputs.x }}", [], ["a"], {}, {"k": 1}]
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in the document (mapping keys and list indexes)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.append((*prefix, index))
            out += _paths(value, (*prefix, index))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _misspell(key: str, draw: st.DrawFn) -> str:
    if len(key) < 2:
        return key + "x"
    at = draw(st.integers(0, len(key) - 2))
    how = draw(st.sampled_from(["swap", "drop", "double"]))
    if how == "swap":
        return key[:at] + key[at + 1] + key[at] + key[at + 2 :]
    if how == "drop":
        return key[:at] + key[at + 1 :]
    return key[:at] + key[at] + key[at:]


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(sorted(SOURCES)))
    doc = copy.deepcopy(SOURCES[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        key = path[-1]
        kind = draw(st.sampled_from(["delete", "rename", "misspell", "retype", "drop-step"]))
        if kind == "drop-step" and isinstance(doc, dict) and isinstance(doc.get("steps"), dict):
            steps = doc["steps"]
            if steps:
                steps.pop(draw(st.sampled_from(sorted(steps))))
        elif kind == "retype":
            parent[key] = copy.deepcopy(draw(ODD_VALUES))  # never a shared list or mapping
        elif isinstance(parent, dict):
            value = parent.pop(key)
            if kind == "rename":
                parent[draw(st.sampled_from(["run", "job", "needs", "steps", "x", "with"]))] = value
            elif kind == "misspell":
                parent[_misspell(str(key), draw)] = value
        elif kind == "delete":
            del parent[key]
    return name, doc


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutants())
@example(  # an array param defaulting to null, fanned out over: valid, but no run can start
    (
        "fanout.yaml",
        {
            "version": 1,
            "name": "fanout",
            "params": {"shards": {"type": "array", "items": {"type": "int"}, "default": None}},
            "steps": {
                "square": {
                    "job": "tasks.square",
                    "foreach": {"items": "${{ params.shards }}", "as": "shard"},
                    "with": {"shard": "${{ shard }}"},
                }
            },
        },
    )
)
def test_a_mutated_flow_gets_findings_or_validates_never_a_crash(mutant: tuple[str, Any]) -> None:
    name, doc = mutant
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    file = str(EXAMPLES / name)
    result = validate_text(text, file=file, flow_dir=EXAMPLES, expand=True)
    assert result.ok == (result.flow is not None)
    for finding in result.findings:
        assert finding.message and finding.format()
    if not result.ok:
        assert any(f.severity == "error" for f in result.findings)
        if not validate_text(text, file=file, flow_dir=EXAMPLES).ok:
            with pytest.raises(InvalidFlow):
                parse_flow_text(text, file)
            return
        # A valid file whose run with the defaults would be refused (`expand`'s findings):
        # building that run refuses it too, saying why.
        with pytest.raises((ParamError, FlowsError)) as refused:
            build(parse_flow_text(text, file))
        assert str(refused.value)
        return
    try:
        build(parse_flow_text(text, file))
    except (ParamError, FlowsError) as refused:  # a required param, a limit: said clearly
        assert str(refused)


def build(flow_file: FlowFile) -> None:
    build_run(
        flow_file,
        run_id="mutant@1",
        logical_time=datetime(2026, 1, 1, tzinfo=UTC),
        params={},
        trigger="manual",
    )


def test_the_examples_themselves_validate() -> None:
    for path in FILES:
        result = validate_text(path.read_text(), file=str(path), flow_dir=EXAMPLES)
        assert result.ok, [f.format() for f in result.findings]
