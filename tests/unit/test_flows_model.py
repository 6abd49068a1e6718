"""The model: defaults, inherited settings, the generated JSON Schema."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from flows_support import valid
from pydantic import ValidationError

from flows.flowfile.durations import DURATION_PATTERN
from flows.flowfile.model import Flow, Retry, json_schema, settings_for


def test_defaults_of_an_empty_step() -> None:
    flow = valid("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    step = flow.steps["a"]
    assert (step.needs, step.trigger_rule, step.foreach, step.delay) == (
        [],
        "all_success",
        None,
        None,
    )
    assert flow.schedule is None
    assert flow.hooks.defined() == []


def test_models_are_frozen() -> None:
    flow = valid("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    with pytest.raises(ValidationError):
        flow.steps["a"].run = "rm -rf /"  # type: ignore[misc]


def test_strict_numbers_are_not_read_from_text() -> None:
    with pytest.raises(ValidationError, match="valid integer"):
        Retry.model_validate({"attempts": "3"})


def test_needs_may_be_one_id() -> None:
    flow = valid("version: 1\nname: x\nsteps:\n  a: {run: echo}\n  b: {run: echo, needs: a}\n")
    assert flow.steps["b"].needs == ["a"]


def test_settings_inherit_from_defaults_field_by_field() -> None:
    flow = valid(
        """\
        version: 1
        name: x
        queue: etl
        tags: [etl]
        defaults:
          timeout: 30m
          priority: 5
          retry: {attempts: 4, backoff: fixed, delay: 30s}
        steps:
          a: {run: echo, tags: [extract, etl], retry: {attempts: 2}, queue: fast}
          b: {run: echo, priority: -1, timeout: 1m}
        """
    )
    a, b = (settings_for(flow, flow.steps[s]) for s in "ab")
    assert (a.queue, a.priority, a.tags, a.timeout) == ("fast", 5, ("etl", "extract"), 1800)
    assert (a.retry.attempts, a.retry.backoff, a.retry.delay) == (2, "fixed", 30)
    assert (b.queue, b.priority, b.timeout, b.retry.attempts) == ("etl", -1, 60, 4)


def test_queue_falls_back_to_default() -> None:
    flow = valid("version: 1\nname: x\nsteps:\n  a: {run: echo}\n")
    assert settings_for(flow, flow.steps["a"]).queue == "default"


def test_param_is_required_exactly_without_default() -> None:
    flow = valid(
        """\
        version: 1
        name: x
        params:
          a: {type: string}
          b: {type: string, default: x}
          c: {type: string, required: false}
          d: {type: int, default: null}
        steps:
          s: {run: echo}
        """
    )
    assert [p.is_required for p in flow.params.values()] == [True, False, False, False]


def test_json_schema_comes_from_the_model() -> None:
    schema = json_schema()
    step = schema["$defs"]["Step"]
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert step["additionalProperties"] is False
    assert "with" in step["properties"] and "with_" not in step["properties"]
    assert step["properties"]["trigger_rule"]["enum"] == [
        "all_success",
        "all_done",
        "one_failed",
        "none_failed",
    ]
    timeout = json.dumps(step["properties"]["timeout"])
    assert json.dumps(DURATION_PATTERN)[1:-1] in timeout
    assert "description" in step["properties"]["needs"]
    assert schema["required"] == ["version", "name", "steps"]


def test_flows_schema_command_prints_the_same_schema() -> None:
    from flows.cli import main

    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == json_schema()


def test_flow_validates_from_plain_data() -> None:
    flow = Flow.model_validate({"version": 1, "name": "x", "steps": {"a": {"job": "m.f"}}})
    assert flow.steps["a"].job == "m.f"
