"""Expansion: a flow, params and a run id become put requests. Table-driven, no Redis."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePath
from textwrap import dedent
from typing import Any

import pytest
from flows_support import valid
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.expand.jobs import ExpansionError, JobSpec, expand
from flows.flowfile.job_data import META_KEY, SHELL_KLASS
from flows.flowfile.model import Flow
from flows.flowfile.params import ParamError

WHEN = datetime(2025, 1, 31, 2, 0, tzinfo=UTC)
RUN = "etl@2025-01-31T02:00:00Z"


def plan(text: str, **params: Any) -> list[JobSpec]:
    return expand(
        valid(text), run_id=RUN, logical_time=WHEN, params=params, flow_dir=PurePath("/srv/etl")
    )


def edges(puts: list[JobSpec]) -> dict[str, list[str]]:
    """Job ids without the run prefix, each with its depends (also without the prefix)."""
    cut = len(RUN) + 1
    return {p.jid[cut:]: [d[cut:] for d in p.depends] for p in puts}


HEAD = "version: 1\nname: etl\n"

GRAPHS = {
    "chain": (
        "steps:\n  a: {run: x}\n  b: {run: x, needs: [a]}\n  c: {run: x, needs: [b]}\n",
        {"a": [], "b": ["a"], "c": ["b"]},
    ),
    "diamond": (
        "steps:\n  top: {run: x}\n  left: {run: x, needs: top}\n"
        "  right: {run: x, needs: top}\n  bottom: {run: x, needs: [left, right]}\n",
        {"top": [], "left": ["top"], "right": ["top"], "bottom": ["left", "right"]},
    ),
    "written out of order": (
        "steps:\n  c: {run: x, needs: [b]}\n  b: {run: x, needs: [a]}\n  a: {run: x}\n",
        {"a": [], "b": ["a"], "c": ["b"]},
    ),
    "foreach fans out and in": (
        "steps:\n  split: {run: x}\n"
        "  work: {run: x, needs: [split], foreach: {items: [1, 2, 3]}}\n"
        "  join: {run: x, needs: [work]}\n",
        {
            "split": [],
            "work[0]": ["split"],
            "work[1]": ["split"],
            "work[2]": ["split"],
            "join": ["work[0]", "work[1]", "work[2]"],
        },
    ),
    "foreach after foreach waits for every item": (
        "steps:\n  a: {run: x, foreach: {items: [1, 2]}}\n"
        "  b: {run: x, needs: [a], foreach: {items: [1, 2]}}\n",
        {"a[0]": [], "a[1]": [], "b[0]": ["a[0]", "a[1]"], "b[1]": ["a[0]", "a[1]"]},
    ),
    # One job that the engine completes with no items, as a fan-out with none: b waits for it.
    "empty foreach": (
        "steps:\n  a: {run: x, foreach: {items: []}}\n  b: {run: x, needs: [a]}\n",
        {"a": [], "b": ["a"]},
    ),
    "empty matrix": (
        "steps:\n  a: {run: x, matrix: {k: []}}\n  b: {run: x, needs: [a]}\n",
        {"a": [], "b": ["a"]},
    ),
    "hooks depend on every job": (
        "steps:\n  a: {run: x}\n  b: {run: x, foreach: {items: [1, 2]}}\n"
        "hooks:\n  finally: {run: x}\n  on_failure: {run: x}\n  on_success: {run: x}\n",
        {
            "a": [],
            "b[0]": [],
            "b[1]": [],
            "on_success": ["a", "b[0]", "b[1]"],
            "on_failure": ["a", "b[0]", "b[1]"],
            "finally": ["a", "b[0]", "b[1]"],
        },
    ),
}


@pytest.mark.parametrize("name", GRAPHS)
def test_graph_shapes(name: str) -> None:
    text, expected = GRAPHS[name]
    assert edges(plan(HEAD + text)) == expected


def test_jids_are_deterministic() -> None:
    text = HEAD + GRAPHS["foreach fans out and in"][0]
    assert plan(text) == plan(text)
    assert plan(text)[1].jid == f"{RUN}:work[0]"


def test_trigger_rules_of_steps_and_hooks() -> None:
    puts = plan(
        HEAD
        + GRAPHS["hooks depend on every job"][0].replace(
            "{run: x}\n  b", "{run: x, trigger_rule: none_failed}\n  b", 1
        )
    )
    rules = {p.step: p.trigger for p in puts}
    assert rules == {
        "a": "none_failed",
        "b": "all_success",
        "on_success": "none_failed",
        "on_failure": "one_failed",
        "finally": "all_done",
    }


def test_defaults_are_applied() -> None:
    [put] = plan(
        HEAD
        + "queue: etl\ntags: [nightly]\n"
        + "defaults:\n  priority: 3\n  timeout: 10m\n  heartbeat: 30s\n"
        + "  retry: {attempts: 4, backoff: fixed, delay: 5s}\n"
        + "steps:\n  a: {job: tasks.a, tags: [extract], delay: 1m, retry: {attempts: 2}}\n"
    )
    assert (put.queue, put.priority, put.tags, put.retries, put.delay) == (
        "etl",
        3,
        ("nightly", "extract"),
        1,
        60.0,
    )
    meta = put.data[META_KEY]
    assert (meta["timeout"], put.ttr) == (600.0, 30.0)
    assert meta["retry"] == {
        "attempts": 2,
        "backoff": "fixed",
        "delay": 5.0,
        "max_delay": None,
        "jitter": 0.0,
    }
    assert (meta["timeout"], meta["heartbeat"], meta["flow_dir"]) == (600.0, 30.0, "/srv/etl")


TEMPLATED = (
    HEAD
    + """\
params:
  date: {type: date, default: "${{ run.logical_date }}"}
  regions: {type: array, items: {type: string}, default: [de, at]}
  limit: {type: int, default: 5}
steps:
  extract:
    job: tasks.extract
    with:
      date: "${{ params.date }}"
      regions: "${{ params.regions }}"
      label: "run ${{ run.id }} for ${{ params.regions }} (limit ${{ params.limit }})"
  load:
    job: tasks.load
    needs: [extract]
    foreach: {items: "${{ params.regions }}", as: region, max_parallel: 1}
    with: {region: "${{ region }}", uri: "${{ steps.extract.outputs.uri }}"}
  report:
    run: ./report.sh --day ${{ params.date }} --rows "${{ steps.load.outputs.rows }}"
    needs: [load]
    cwd: scripts
    env: {STATUS: "${{ steps.load.status }}", REGION_COUNT: "${{ params.limit }}"}
"""
)


def test_templates_resolved_at_expansion() -> None:
    extract, load0, load1, _ = plan(TEMPLATED, regions="fr,it")
    assert {k: v for k, v in extract.data.items() if k != META_KEY} == {
        "date": "2025-01-31",
        "regions": ["fr", "it"],
        "label": f'run {RUN} for ["fr","it"] (limit 5)',
    }
    assert (load0.data["region"], load1.data["region"]) == ("fr", "it")
    assert (load0.concurrency_key, load0.concurrency_limit) == (f"{RUN}:load", 1)


def test_step_references_are_left_for_the_worker() -> None:
    _, load0, _, report = plan(TEMPLATED)
    assert load0.data["uri"] == "${{ steps.extract.outputs.uri }}"
    assert load0.data[META_KEY]["upstream"] == {
        "extract": {"jids": [f"{RUN}:extract"], "foreach": False}
    }
    assert report.data[META_KEY]["upstream"] == {
        "load": {"jids": [f"{RUN}:load[0]", f"{RUN}:load[1]"], "foreach": True}
    }


def test_shell_steps_get_every_template_through_the_environment() -> None:
    *_, report = plan(TEMPLATED)
    assert report.klass == SHELL_KLASS
    assert report.data["command"] == (
        './report.sh --day "${FLOWS_PARAMS_DATE}" --rows "${FLOWS_STEPS_LOAD_OUTPUTS_ROWS}"'
    )
    assert report.data["env"] == {
        "STATUS": "${{ steps.load.status }}",
        "REGION_COUNT": "5",
        "FLOWS_PARAMS_DATE": "2025-01-31",
        "FLOWS_STEPS_LOAD_OUTPUTS_ROWS": "${{ steps.load.outputs.rows }}",
    }
    assert report.data["cwd"] == "/srv/etl/scripts"
    assert report.data[META_KEY]["kind"] == "shell"


def test_python_jobs_get_with_as_data() -> None:
    extract = plan(TEMPLATED)[0]
    assert extract.klass == "tasks.extract"
    assert set(extract.data) == {"date", "regions", "label", META_KEY}


def test_params_are_checked() -> None:
    with pytest.raises(ParamError, match="unknown param 'region' \\(did you mean 'regions'\\?\\)"):
        plan(TEMPLATED, region="de")
    with pytest.raises(ParamError, match="param 'limit': expected an integer"):
        plan(TEMPLATED, limit="many")


def test_reading_a_missing_key_of_an_object_param() -> None:
    text = HEAD + dedent(
        """\
        params:
          cfg: {type: object, default: {a: 1}}
        steps:
          s: {run: 'echo ${{ params.cfg.b }}'}
        """
    )
    with pytest.raises(ExpansionError, match=r"params\.cfg has no key 'b'"):
        plan(text)


# -- properties --------------------------------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> Flow:
    """A random DAG: each step needs some earlier ones; steps written in a shuffled order."""
    size = draw(st.integers(min_value=1, max_value=25))
    needs = [
        draw(st.lists(st.integers(0, index - 1), unique=True, max_size=4)) if index else []
        for index in range(size)
    ]
    foreach = [draw(st.integers(0, 3)) if draw(st.booleans()) else None for _ in range(size)]
    order = draw(st.permutations(range(size)))
    steps: dict[str, Any] = {}
    for index in order:
        step: dict[str, Any] = {"run": "x", "needs": [f"s{n}" for n in needs[index]]}
        if foreach[index] is not None:
            step["foreach"] = {"items": list(range(foreach[index]))}
        steps[f"s{index}"] = step
    return Flow.model_validate({"version": 1, "name": "p", "steps": steps})


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_dags_expand_in_topological_order(flow: Flow) -> None:
    puts = expand(flow, run_id="r", logical_time=WHEN)
    seen: set[str] = set()
    for put in puts:
        assert set(put.depends) <= seen, f"{put.jid} comes before one of {put.depends}"
        seen.add(put.jid)
    # A step with no items is one job (completed by the engine with none).
    expected = sum(
        max(1, len(step.foreach.items)) if step.foreach else 1 for step in flow.steps.values()
    )
    assert len(puts) == len(seen) == expected


def test_a_jobs_meta_and_spec_leave_out_what_is_at_its_default() -> None:
    # Every job carries its meta (in its spec, its hash, each pop's reply): a plain step's has
    # no nulls, no empty upstream and no retry policy it never uses (one attempt).
    first, second = plan(
        HEAD + "steps:\n  a: {job: tasks.a}\n"
        "  b: {job: tasks.b, needs: [a], with: {x: '${{ steps.a.outputs.x }}'}}\n"
    )
    assert first.data[META_KEY] == {
        "run": RUN,
        "flow": "etl",
        "step": "a",
        "kind": "python",
        "flow_dir": "/srv/etl",
    }
    assert set(second.data[META_KEY]) == {"run", "flow", "step", "kind", "upstream", "flow_dir"}
    spec = first.to_engine(lambda data: "{}")
    assert spec == {
        "jid": f"{RUN}:a",
        "queue": "default",
        "klass": "tasks.a",
        "data": "{}",
        "retries": 0,
        "trigger": "all_success",
    }
    assert second.to_engine(lambda data: "{}")["depends"] == [f"{RUN}:a"]
    # `flows plan --json` still shows every field.
    assert {"priority", "tags", "depends", "delay", "step", "index"} <= set(first.to_json())


def test_a_foreach_items_meta_keeps_its_index_and_retries_keep_their_policy() -> None:
    puts = plan(
        HEAD + "steps:\n  a:\n    job: tasks.a\n    foreach: {items: [x, y]}\n"
        "    retry: {attempts: 2}\n    timeout: 1m\n"
    )
    assert [p.data[META_KEY]["index"] for p in puts] == [0, 1]
    meta = puts[0].data[META_KEY]
    assert meta["retry"]["attempts"] == 2 and meta["timeout"] == 60.0
    assert "heartbeat" not in meta
