"""``matrix``: validation, expansion (the product, its job ids) and what it shares with foreach."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from flows_support import check, one, valid

from flows.cli import main
from flows.expand.jobs import ExpansionError, expand
from flows.flowfile.dag import to_mermaid

T = datetime(2026, 11, 1, tzinfo=UTC)

FLOW = """\
version: 1
name: m
params:
  regions: {{type: array, default: [de, at]}}
  region: {{type: string, default: de}}
steps:
  grid:
    matrix: {matrix}
    job: tasks.load
    with: {{region: "${{{{ matrix.region }}}}", kind: "${{{{ matrix.kind }}}}"}}
  report:
    needs: [grid]
    run: echo "${{{{ steps.grid.outputs }}}}"
"""


def test_the_product_in_axis_order_with_readable_ids() -> None:
    flow = valid(FLOW.format(matrix="{region: '${{ params.regions }}', kind: [full, delta]}"))
    puts = expand(flow, run_id="r", logical_time=T)
    grid = [p for p in puts if p.step == "grid"]
    assert [p.jid for p in grid] == [
        "r:grid[region=de,kind=full]",
        "r:grid[region=de,kind=delta]",
        "r:grid[region=at,kind=full]",
        "r:grid[region=at,kind=delta]",
    ]
    assert [p.index for p in grid] == [0, 1, 2, 3]
    assert grid[1].data["region"] == "de" and grid[1].data["kind"] == "delta"
    report = next(p for p in puts if p.step == "report")
    assert report.depends == tuple(p.jid for p in grid)  # fan-in: every combination
    # Its outputs are read as a list, in combination order; the value reaches the shell as data.
    assert report.data["_flows"]["upstream"]["grid"] == {
        "jids": [p.jid for p in grid],
        "foreach": True,
    }


def test_values_that_are_not_plain_appear_by_position_and_reach_shells_as_variables() -> None:
    text = FLOW.format(matrix="{region: ['a b', 'x]y'], kind: [1, true]}")
    text = text.replace("job: tasks.load", "run: ./load.sh ${{ matrix.region }}")
    with_line = '    with: {region: "${{ matrix.region }}", kind: "${{ matrix.kind }}"}\n'
    text = text.replace(with_line, "")
    puts = expand(valid(text), run_id="r", logical_time=T)
    grid = [p for p in puts if p.step == "grid"]
    assert [p.jid for p in grid] == [
        "r:grid[region=#0,kind=1]",
        "r:grid[region=#0,kind=true]",
        "r:grid[region=#1,kind=1]",
        "r:grid[region=#1,kind=true]",
    ]
    assert grid[0].data["command"] == './load.sh "${FLOWS_MATRIX_REGION}"'
    assert grid[0].data["env"]["FLOWS_MATRIX_REGION"] == "a b"


@pytest.mark.parametrize(
    ("matrix", "code", "message"),
    [
        ("{region: [de, de]}", "matrix", "matrix axis 'region' has the value de more"),
        ("{region: de}", "schema", "a matrix axis must be a list"),
        ("{a: [1,2,3,4,5,6,7,8,9,10], b: [1,2,3,4,5,6,7,8,9,10], c: [1,2,3,4,5,6,7,8,9,10], "
         "d: [1,2,3,4,5,6,7,8,9,10], e: [1, 2]}", "matrix", "20,000 combinations"),
        ("{region: '${{ params.region }}'}", "matrix",
         "matrix.region must be a list: params.region is of type string"),
        ("{region: '${{ steps.report.outputs }}'}", "matrix",
         "matrix.region cannot read 'steps.report.outputs'"),
    ],
)  # fmt: skip
def test_bad_matrices_are_reported_where_they_are(matrix: str, code: str, message: str) -> None:
    # (the step's templates read matrix.kind, an axis these matrices lack: reported apart)
    findings = [f for f in check(FLOW.format(matrix=matrix)) if f.code != "template"]
    assert len(findings) == 1, [f.format() for f in findings]
    assert message in findings[0].message
    assert findings[0].line == 8


def test_an_axis_from_an_output_points_at_a_foreach_over_it() -> None:
    text = FLOW.format(matrix="{region: '${{ steps.list.outputs.regions }}'}").replace(
        "steps:\n", "steps:\n  list: {run: 'true', outputs: [regions]}\n"
    )
    [finding] = [f for f in check(text) if f.code == "matrix"]
    assert finding.hint == (
        "a matrix's axes are fixed at submit; a foreach takes its items from an output when "
        'its step completes: foreach: {items: "${{ steps.list.outputs.regions }}"}'
    )


def test_an_output_inside_a_foreach_list_points_at_the_items_themselves() -> None:
    text = FLOW.format(matrix="{region: [de]}").replace(
        "    run: echo", "    foreach: {items: ['${{ steps.grid.outputs }}']}\n    run: echo"
    )
    [finding] = [f for f in check(text) if f.code == "foreach-items"]
    assert finding.hint == (
        "give the output as the items themselves, not inside a list: "
        'items: "${{ steps.grid.outputs }}"'
    )


def test_reading_an_axis_it_does_not_have_names_the_axes() -> None:
    text = FLOW.format(matrix="{region: [de], kind: [full]}").replace("matrix.kind", "matrix.knd")
    finding = one(text, "template")
    assert finding.message == "'matrix.knd' names no axis of the matrix of step 'grid'"
    assert finding.hint == "did you mean 'kind'?"
    assert (finding.line, finding.col) == (10, 51)


def test_matrix_outside_a_matrix_step_and_with_foreach_are_refused() -> None:
    text = FLOW.format(matrix="{region: [de], kind: [full]}").replace(
        'echo "', 'echo "${{ matrix.region }}'
    )
    assert "step 'report' uses 'matrix.region' but has no matrix" in one(text, "template").message
    both = FLOW.format(matrix="{region: [de], kind: [full]}").replace(
        "    job: tasks.load", "    foreach: {items: [1]}\n    job: tasks.load"
    )
    assert any("'foreach' or 'matrix', not both" in f.message for f in check(both))


def test_an_axis_from_a_param_with_a_repeated_value_fails_expansion() -> None:
    flow = valid(FLOW.format(matrix="{region: '${{ params.regions }}', kind: [full]}"))
    with pytest.raises(ExpansionError, match=r"matrix\.region: a value is there twice"):
        expand(flow, run_id="r", logical_time=T, params={"regions": ["de", "de"]})


def test_a_condition_reads_the_matrix_and_the_graph_shows_the_axes() -> None:
    text = FLOW.format(matrix="{region: [de, at], kind: [full]}").replace(
        "    job: tasks.load", "    if: matrix.region != 'at'\n    job: tasks.load"
    )
    flow = valid(text)
    puts = expand(flow, run_id="r", logical_time=T)
    conditions = [p.data["_flows"]["if"] for p in puts if p.step == "grid"]
    assert [c["values"] for c in conditions] == [{"matrix.region": "de"}, {"matrix.region": "at"}]
    assert "grid (matrix region x kind) if matrix.region != 'at'" in to_mermaid(flow)


def test_plan_shows_each_combination_and_its_condition(tmp_path: Path) -> None:
    text = FLOW.format(matrix="{region: [de, at], kind: [full]}").replace(
        "    job: tasks.load", "    if: matrix.region != 'at'\n    job: tasks.load"
    )
    path = tmp_path / "m.yaml"
    path.write_text(text)
    args = ["plan", str(path), "--run-id", "m@20261101T000000Z"]
    planned = CliRunner().invoke(main, [*args, "--json"])
    assert planned.exit_code == 0, planned.output
    jids = [job["jid"] for job in json.loads(planned.stdout)["jobs"]]
    assert jids[:2] == [
        "m@20261101T000000Z:grid[region=de,kind=full]",
        "m@20261101T000000Z:grid[region=at,kind=full]",
    ]
    table = CliRunner().invoke(main, args)
    assert table.output.count("all_success, if matrix.region != 'at'") == 2, table.output
