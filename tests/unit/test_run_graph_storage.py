"""A run's graph as the run record keeps it (defaults left out) and as every reader gets it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import PurePath

from flows_support import valid

from flows.expand.jobs import expand
from flows.runs.graph import STEP_DEFAULTS, full_graph, run_graph, stored_graph, stored_run_graph
from flows.runs.read import run_record

FLOW = """\
version: 1
name: shapes
steps:
  plain: {run: echo}
  after: {run: echo, needs: [plain], trigger_rule: all_done}
  each: {job: tasks.each, needs: [plain], foreach: {items: [1, 2]}}
  grid: {job: tasks.grid, matrix: {a: [1, 2], b: [x]}}
  gate: {wait: {signal: go}, needs: [after]}
  maybe: {run: echo, if: "${{ steps.plain.status == 'success' }}", needs: [plain]}
"""


def graph() -> dict[str, object]:
    flow = valid(FLOW)
    jobs = expand(
        flow, run_id="r", logical_time=datetime(2026, 1, 1, tzinfo=UTC), flow_dir=PurePath("/f")
    )
    return run_graph(jobs, flow)


def test_the_stored_graph_leaves_out_defaults_and_reads_back_whole() -> None:
    whole = graph()
    stored = stored_graph(whole)
    steps = stored["steps"]
    assert steps["plain"] == {"kind": "run"}  # a shell step: `job` is the default kind
    assert steps["after"] == {"needs": ["plain"], "kind": "run", "trigger_rule": "all_done"}
    assert steps["each"] == {"needs": ["plain"], "items": 2, "foreach": True}
    assert steps["grid"]["matrix"] is True and steps["grid"]["items"] == 2
    assert steps["gate"]["kind"] == "wait" and steps["gate"]["wait"]["signal"] == "go"
    assert "if" in steps["maybe"]
    # Read back whole: every field of every entry, the defaults filled in, in one order.
    defaults = {key: list(v) if isinstance(v, tuple) else v for key, v in STEP_DEFAULTS.items()}
    assert full_graph(stored) == whole
    assert whole["steps"]["plain"] == {**defaults, "kind": "run"}
    assert whole["steps"]["after"] == {
        **defaults,
        "needs": ["plain"],
        "kind": "run",
        "trigger_rule": "all_done",
    }
    assert all(list(entry) == list(STEP_DEFAULTS) for entry in whole["steps"].values())


def test_a_record_s_graph_is_whole_for_every_reader() -> None:
    whole = graph()
    record = run_record({"id": "r", "graph": json.dumps(stored_graph(whole))})
    assert record["graph"] == whole
    # A record written before the graph was stored compact reads the same.
    assert run_record({"id": "r", "graph": json.dumps(whole)})["graph"] == whole
    # Anything that is not a graph is left as it is.
    assert run_record({"id": "r", "graph": "[1]"})["graph"] == [1]
    assert full_graph({"steps": {"x": "not an entry"}}) == {"steps": {"x": "not an entry"}}


def test_a_default_looking_value_of_another_type_is_kept() -> None:
    # An item count of 1 is not `foreach: true`, and `items: True` is not a count of one.
    stored = stored_graph({"steps": {"s": {"items": True, "foreach": 1, "needs": []}}})
    assert stored == {"steps": {"s": {"items": True, "foreach": 1}}}


def test_a_step_with_no_items_has_an_item_count_of_0() -> None:
    """A foreach over an empty list and a matrix with an empty axis: one job each (the engine
    completes it with the empty list), yet no items, as the graph says from the submit on."""
    flow = valid(
        "version: 1\nname: none\nsteps:\n"
        "  each: {run: echo, foreach: {items: []}}\n"
        "  grid: {run: echo, matrix: {a: []}}\n"
    )
    jobs = expand(
        flow, run_id="r", logical_time=datetime(2026, 1, 1, tzinfo=UTC), flow_dir=PurePath("/f")
    )
    steps = stored_graph(run_graph(jobs, flow))["steps"]
    assert (steps["each"]["items"], steps["grid"]["items"]) == (0, 0)
    assert full_graph({"steps": steps})["steps"]["each"]["foreach"] is True


def test_unknown_fields_and_non_list_needs_are_kept() -> None:
    stored = stored_graph({"steps": {"s": {"extra": None, "needs": "", "kind": "job"}}})
    assert stored == {"steps": {"s": {"extra": None, "needs": ""}}}


def test_the_stored_graph_is_made_as_the_whole_one_stored() -> None:
    """A run's record is built with the stored entries made directly: the same entries, fields
    and order as the whole graph's with its defaults left out, with the flow or without."""
    flow = valid(
        "version: 1\nname: shapes\nsteps:\n"
        "  list: {job: tasks.list, outputs: [files]}\n"
        "  each: {job: tasks.each, needs: [list],\n"
        '         foreach: {items: "${{ steps.list.outputs.files }}"}}\n'
        "  after: {run: echo, needs: [each, list], trigger_rule: all_done}\n"
        "hooks:\n  finally: {run: echo done}\n"
    )
    jobs = expand(
        flow, run_id="r", logical_time=datetime(2026, 1, 1, tzinfo=UTC), flow_dir=PurePath("/f")
    )
    each = {"needs": ["list"], "foreach": True, "fanout": "list"}
    after = {"needs": ["each", "list"], "trigger_rule": "all_done"}
    last = {"needs": ["list", "each", "after"], "trigger_rule": "all_done"}
    assert stored_run_graph(jobs, flow) == {
        "steps": {
            "list": {},
            "each": each,
            "after": {"needs": ["each", "list"], "kind": "run", "trigger_rule": "all_done"},
            "finally": {**last, "hook": True},
        }
    }
    assert stored_run_graph(jobs) == {
        "steps": {"list": {}, "each": each, "after": after, "finally": last}
    }
    # The stored entries' fields in the order of the whole ones (the record's text is compared).
    assert [list(e) for e in stored_run_graph(jobs, flow)["steps"].values()] == [
        [],
        ["needs", "foreach", "fanout"],
        ["needs", "kind", "trigger_rule"],
        ["needs", "trigger_rule", "hook"],
    ]
