"""Fan-out from outputs without Redis: expansion into one template job, the items of an output,
and how the worker finds an item and the jobs of a fan-out step it reads."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any

import pytest
from flows_support import valid

from flows.expand.jobs import expand
from flows.expand.run_specs import compact_json
from flows.flowfile.fanout import MAX_ITEMS, FanoutError, item_index, items_of, source_of
from flows.flowfile.job_data import (
    META_KEY,
    FlowsMeta,
    UnresolvedReference,
    UpstreamJob,
    condition_holds,
    resolve_payload,
)
from scheduler.engine import limits

RUN = "files@2026-01-01T00:00:00Z"
FLOW = """\
version: 1
name: files
steps:
  list:
    job: tasks.list_files
    outputs: [files]
  process:
    needs: [list]
    foreach: {items: "${{ steps.list.outputs.files }}", as: f, max_parallel: 4}
    job: tasks.process
    with: {name: "${{ f }}", size: "${{ f.size }}", run: "${{ run.id }}"}
  shell:
    needs: [list]
    foreach: {items: "${{ steps.list.outputs.files }}", as: f}
    run: wc -c ${{ f }}
  report:
    needs: [process]
    if: "length(steps.process.outputs) > 0"
    run: echo "${{ steps.process.outputs.lines }}"
"""


def jobs() -> dict[str, Any]:
    puts = expand(
        valid(FLOW),
        run_id=RUN,
        logical_time=datetime(2026, 1, 1, tzinfo=UTC),
        flow_dir=PurePath("/srv"),
    )
    return {put.jid.removeprefix(f"{RUN}:"): put for put in puts}


def test_a_fanout_step_is_one_template_job_with_its_source() -> None:
    puts = jobs()
    assert list(puts) == ["list", "process", "shell", "report"]
    process = puts["process"]
    assert process.fanout == (f"{RUN}:list", "files")
    assert process.depends == (f"{RUN}:list",)
    assert process.concurrency_key == f"{RUN}:process" and process.concurrency_limit == 4
    data = dict(process.data)
    meta = data.pop(META_KEY)
    assert data == {"name": "${{ f }}", "size": "${{ f.size }}", "run": RUN}
    assert meta["fanout"] == {"from": "list", "output": "files", "as": "f"}
    assert meta["upstream"] == {"list": {"jids": [f"{RUN}:list"], "foreach": False}}
    assert process.to_engine(compact_json)["fanout"] == {"from": f"{RUN}:list", "output": "files"}
    assert "fanout" not in puts["list"].to_engine(compact_json)
    # A shell step gets the item as a variable, like any other value.
    shell = dict(puts["shell"].data)
    assert shell["command"] == 'wc -c "${FLOWS_FOREACH_F}"'
    assert shell["env"]["FLOWS_FOREACH_F"] == "${{ f }}"
    # A reader of the step finds it by its template and its producer's output.
    upstream = puts["report"].data[META_KEY]["upstream"]
    assert upstream["process"] == {
        "jids": [f"{RUN}:process"],
        "foreach": True,
        "fanout": {"from": f"{RUN}:list", "output": "files"},
    }


def test_source_of() -> None:
    assert source_of("${{ steps.list.outputs.files }}") == source_of(
        " ${{steps.list.outputs.files}} "
    )
    assert source_of("${{ params.files }}") is None
    assert source_of(["${{ steps.list.outputs.files }}"]) is None
    assert source_of("${{ steps.list.outputs }}") is None


def test_items_of_follows_the_engine() -> None:
    assert items_of(["a", "b"], "files") == ["a", "b"]
    assert items_of('["a", 1]', "files") == ["a", 1]
    assert items_of({}, "files") == []
    assert len(items_of(list(range(MAX_ITEMS)), "files")) == MAX_ITEMS
    assert MAX_ITEMS == limits.MAX_FANOUT_ITEMS == 10_000
    for bad, message in [
        ({"a": 1}, "is dict, not a list"),
        (3, "is int, not a list"),
        ("a.csv", "text that is not a JSON array"),
        (None, 'no output "files"'),
        (list(range(MAX_ITEMS + 1)), "10001 items, more than the limit of 10000"),
    ]:
        with pytest.raises(FanoutError, match=message):
            items_of(bad, "files")


def test_item_index() -> None:
    assert item_index(f"{RUN}:process[12]") == 12
    assert item_index(f"{RUN}:process") is None


def upstream(result: Any, **more: UpstreamJob) -> dict[str, UpstreamJob]:
    return {f"{RUN}:list": UpstreamJob("complete", result), **more}


def test_an_item_finds_its_item_in_the_producers_output_when_it_starts() -> None:
    data = dict(jobs()["process"].data)
    meta = FlowsMeta.from_data(data)
    assert meta is not None
    found = upstream({"files": [{"size": 1}, {"size": 2}]})
    item = meta.item(f"{RUN}:process[1]", found)
    assert item == ("f", {"size": 2})
    assert resolve_payload(data, found, item) == {"name": {"size": 2}, "size": 2, "run": RUN}
    with pytest.raises(UnresolvedReference, match="template of a fan-out"):
        meta.item(f"{RUN}:process", found)
    with pytest.raises(UnresolvedReference, match="has 2 items"):
        meta.item(f"{RUN}:process[2]", found)


def test_a_reader_sees_the_items_or_the_template() -> None:
    meta = FlowsMeta.from_data(dict(jobs()["report"].data))
    assert meta is not None
    assert meta.upstream_jids() == [f"{RUN}:process", f"{RUN}:list"]
    items = [f"{RUN}:process[0]", f"{RUN}:process[1]"]
    # Expanded: the template is gone, the items are fetched and read in order.
    found = upstream({"files": ["a", "b"]})
    assert meta.items_to_fetch(found) == items
    found |= {items[0]: UpstreamJob("complete", {"lines": 3}), items[1]: UpstreamJob("waiting")}
    expanded = meta.expanded(found)
    assert expanded.upstream["process"].jids == tuple(items)
    data = {"x": "${{ steps.process.outputs.lines }}", META_KEY: expanded.to_json()}
    assert resolve_payload(data, found) == {"x": [3, None]}
    # No items: the template completed with []; failed: the template is the step.
    empty = upstream({"files": []}, **{f"{RUN}:process": UpstreamJob("complete", [])})
    assert meta.expanded(empty).upstream["process"].jids == ()
    failed = upstream({"files": 3}, **{f"{RUN}:process": UpstreamJob("failed")})
    assert meta.expanded(failed).upstream["process"].jids == (f"{RUN}:process",)


def test_an_items_condition_reads_its_item() -> None:
    flow = FLOW.replace(
        "    job: tasks.process\n", '    job: tasks.process\n    if: "f.size > 1"\n'
    )
    puts = expand(
        valid(flow),
        run_id=RUN,
        logical_time=datetime(2026, 1, 1, tzinfo=UTC),
        flow_dir=PurePath("/srv"),
    )
    meta = FlowsMeta.from_data(dict(puts[1].data))
    assert meta is not None and meta.condition is not None
    found = upstream({"files": [{"size": 1}, {"size": 2}]})
    holds = [condition_holds(meta, found, meta.item(f"{RUN}:process[{i}]", found)) for i in (0, 1)]
    assert holds == [False, True]
