"""Sub-flows at validation: a parent is validated with its children (findings name the child file),
``with`` checked against the child's params, cycles across files and the depth limit refused;
expansion makes the step one sub-flow job; the child's ``outputs:`` resolve from its jobs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest

from flows.expand.flow_outputs import outputs_record, resolve_outputs, upstream_jids
from flows.expand.jobs import expand_run
from flows.expand.run_specs import job_objects
from flows.flowfile.findings import Finding
from flows.flowfile.job_data import UpstreamJob
from flows.flowfile.model import Flow
from flows.flowfile.subflow_job import MAX_DEPTH, SUBFLOW_KLASS, child_run_id
from flows.runs.build import build_run, read_flow_file
from flows.validation.validate import validate_file

REPORT = """\
version: 1
name: report
queue: reports
params:
  day: {type: date}
  limit: {type: int, default: 10}
steps:
  count:
    run: echo "total=3" >> "$FLOWS_OUTPUT"
    outputs: [total]
outputs:
  total: "${{ steps.count.outputs.total }}"
  day: "${{ params.day }}"
"""

PARENT = """\
version: 1
name: parent
steps:
  process:
    run: echo n=1 >> "$FLOWS_OUTPUT"
  child:
    flow: report.yaml
    with: {day: "${{ run.logical_date }}", limit: 5}
    needs: [process]
  use:
    needs: [child]
    run: echo "${{ steps.child.outputs.total }}"
outputs:
  total: "${{ steps.child.outputs.total }}"
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text))
    return path


def findings(path: Path) -> list[Finding]:
    return validate_file(path).findings


def only(path: Path, code: str) -> Finding:
    found = [f for f in findings(path) if f.code == code]
    assert len(found) == 1, "\n".join(f.format() for f in findings(path))
    return found[0]


def test_a_parent_and_its_child_validate_together(tmp_path: Path) -> None:
    write(tmp_path, "report.yaml", REPORT)
    parent = write(tmp_path, "parent.yaml", PARENT)
    result = validate_file(parent)
    assert result.ok, "\n".join(f.format() for f in result.findings)
    assert result.flow is not None and result.flow.steps["child"].is_subflow


def test_a_child_file_of_any_name_validates(tmp_path: Path) -> None:
    """``r.yml`` is as good a file name as ``report.yaml``."""
    write(tmp_path, "r.yml", REPORT)
    parent = write(tmp_path, "parent.yaml", PARENT.replace("report.yaml", "r.yml"))
    result = validate_file(parent)
    assert result.ok, "\n".join(f.format() for f in result.findings)


def test_a_missing_child_file_is_named_where_the_step_names_it(tmp_path: Path) -> None:
    parent = write(tmp_path, "parent.yaml", PARENT.replace("report.yaml", "reprot.yaml"))
    finding = only(parent, "subflow-file")
    assert (finding.file, finding.line, finding.col) == (str(parent), 7, 11)
    assert finding.message.startswith("step 'child': sub-flow file 'reprot.yaml' not found")
    assert "relative to the folder of parent.yaml" in finding.hint


@pytest.mark.parametrize("written", ["reprot.yaml", "sub/reprot.yaml"])
def test_a_misspelt_child_file_is_answered_with_the_one_likely_meant(
    tmp_path: Path, written: str
) -> None:
    meant = written.replace("reprot", "report")
    write(tmp_path, meant, REPORT)
    parent = write(tmp_path, "parent.yaml", PARENT.replace("report.yaml", written))
    assert only(parent, "subflow-file").hint == (
        f"did you mean '{meant}'? (the path is relative to the folder of parent.yaml)"
    )


def test_the_child_findings_name_the_child_file(tmp_path: Path) -> None:
    write(tmp_path, "sub/report.yaml", REPORT.replace("needs: []", "").replace("count:", "cnt:"))
    parent = write(tmp_path, "parent.yaml", PARENT.replace("report.yaml", "sub/report.yaml"))
    found = findings(parent)
    child = [f for f in found if f.file == str(tmp_path / "sub" / "report.yaml")]
    assert [f.code for f in child] == ["template"]
    assert (child[0].line, child[0].col) == (12, 11)
    assert "names no step 'count'" in child[0].message
    summary = only(parent, "subflow-invalid")
    assert (summary.line, summary.col) == (7, 11)
    assert "has 1 error(s)" in summary.message


def test_with_is_checked_against_the_child_params(tmp_path: Path) -> None:
    write(tmp_path, "report.yaml", REPORT)
    text = PARENT.replace(
        'with: {day: "${{ run.logical_date }}", limit: 5}', 'with: {dya: 1, limit: "5"}'
    )
    parent = write(tmp_path, "parent.yaml", text)
    prefix = "step 'child': sub-flow report.yaml "
    found = {
        f.message.removeprefix(prefix): f for f in findings(parent) if f.code == "subflow-param"
    }
    unknown = found["has no param 'dya'"]
    assert (unknown.line, unknown.col, unknown.hint) == (8, 12, "did you mean 'day'?")
    wrong = found[
        "step 'child': param 'limit' of sub-flow report.yaml: expected an integer, got"
        " the string '5'"
    ]
    assert (wrong.line, wrong.col) == (8, 27)
    assert found["needs param(s) day"].line == 8
    assert len(found) == 3


def test_a_cycle_across_files_names_the_chain(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "version: 1\nname: a\nsteps:\n  go:\n    flow: b.yaml\n")
    write(tmp_path, "b.yaml", "version: 1\nname: b\nsteps:\n  back:\n    flow: a.yaml\n")
    found = findings(a)
    cycle = [f for f in found if f.code == "subflow-cycle"]
    assert len(cycle) == 1
    assert cycle[0].file == str(tmp_path / "b.yaml") and (cycle[0].line, cycle[0].col) == (5, 11)
    assert cycle[0].message == "step 'back': sub-flows form a cycle: a.yaml → b.yaml → a.yaml"
    # the parent's step says its child is invalid
    assert [(f.file, f.line) for f in found if f.code == "subflow-invalid"] == [(str(a), 5)]


def test_a_flow_naming_itself_is_a_cycle(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", "version: 1\nname: a\nsteps:\n  again:\n    flow: a.yaml\n")
    assert only(a, "subflow-cycle").message == (
        "step 'again': sub-flows form a cycle: a.yaml → a.yaml"
    )


def test_sub_flows_nest_at_most_the_depth_limit(tmp_path: Path) -> None:
    for level in range(MAX_DEPTH + 1):
        write(
            tmp_path,
            f"l{level}.yaml",
            f"version: 1\nname: l{level}\nsteps:\n  down:\n    flow: l{level + 1}.yaml\n",
        )
    write(
        tmp_path, f"l{MAX_DEPTH + 1}.yaml", "version: 1\nname: leaf\nsteps:\n  a: {run: 'true'}\n"
    )
    # l0 → ... → l5 is 5 deep and fine; from l0, l5's own child l6 is one too many
    assert validate_file(tmp_path / "l1.yaml").ok
    found = [f for f in findings(tmp_path / "l0.yaml") if f.code == "subflow-depth"]
    assert len(found) == 1 and found[0].file == str(tmp_path / "l5.yaml")
    assert found[0].message.startswith(f"step 'down': sub-flows nest more than {MAX_DEPTH} deep")
    assert "l0.yaml → l1.yaml → l2.yaml → l3.yaml → l4.yaml → l5.yaml → l6.yaml" in found[0].message


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("{flow: r.yaml, run: echo}", "cannot have run"),
        ("{flow: r.yaml, foreach: {items: [1]}}", "cannot have foreach"),
        ("{flow: r.yaml, env: {A: b}}", "cannot have env"),
        ("{flow: '${{ params.f }}.yaml'}", "templates are not expanded in steps.s.flow"),
    ],
)
def test_a_sub_flow_step_is_a_flow_run_and_nothing_else(
    tmp_path: Path, step: str, message: str
) -> None:
    write(tmp_path, "r.yaml", "version: 1\nname: r\nsteps:\n  a: {run: 'true'}\n")
    parent = write(tmp_path, "p.yaml", f"version: 1\nname: p\nsteps:\n  s: {step}\n")
    errors = [f for f in findings(parent) if f.severity == "error"]
    assert errors and message in errors[0].message, [f.format() for f in errors]
    assert (errors[0].line, errors[0].file) == (4, str(parent))


def test_flow_outputs_templates_are_checked(tmp_path: Path) -> None:
    text = REPORT.replace("steps.count.outputs.total", "steps.count.outputs.totl")
    path = write(tmp_path, "report.yaml", text)
    finding = only(path, "template")
    assert (finding.line, finding.col) == (12, 11)
    assert finding.message == "'steps.count.outputs.totl': step 'count' declares no output 'totl'"


def test_the_step_expands_to_one_sub_flow_job(tmp_path: Path) -> None:
    write(tmp_path, "report.yaml", REPORT)
    source = read_flow_file(write(tmp_path, "parent.yaml", PARENT))
    moment = datetime(2026, 3, 1, 2, tzinfo=UTC)
    built = build_run(source, run_id="parent@1", logical_time=moment, params={}, trigger="manual")
    jobs = job_objects(built.request.jobs_json())
    job = next(j for j in jobs if j["jid"] == "parent@1:child")
    assert job["klass"] == SUBFLOW_KLASS
    data = __import__("json").loads(job["data"])
    assert data["flow"] == str(tmp_path / "report.yaml")
    assert data["params"] == {"day": "2026-03-01", "limit": 5}
    assert data["logical_time"] == moment.isoformat()
    # the local worker of the parent takes the child's jobs too
    assert built.queues == ("default", "reports")
    assert child_run_id("parent@1", "child") == "parent@1.child"


def test_the_child_outputs_resolve_from_its_jobs(tmp_path: Path) -> None:
    flow = Flow.model_validate(__import__("yaml").safe_load(REPORT))
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    expansion = expand_run(flow, run_id="c", logical_time=moment, params={"day": "2026-03-01"})
    record = outputs_record(flow, expansion)
    assert record is not None and upstream_jids(record) == ["c:count"]
    jobs = {"c:count": UpstreamJob("complete", {"total": "3"})}
    assert resolve_outputs("c", record, jobs) == {"total": "3", "day": "2026-03-01"}


def test_the_outputs_of_a_step_with_no_items_are_the_empty_list() -> None:
    text = """\
    version: 1
    name: none
    params:
      files: {type: array, default: []}
    outputs:
      names: "${{ steps.each.outputs.name }}"
    steps:
      each:
        foreach: {items: "${{ params.files }}", as: f}
        run: echo "${{ f }}"
        outputs: [name]
    """
    flow = Flow.model_validate(__import__("yaml").safe_load(dedent(text)))
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    record = outputs_record(flow, expand_run(flow, run_id="c", logical_time=moment))
    assert record is not None and upstream_jids(record) == ["c:each"]
    jobs = {"c:each": UpstreamJob("complete", [])}
    assert resolve_outputs("c", record, jobs) == {"names": []}


def test_what_the_parent_reads_of_the_step_must_be_a_child_output(tmp_path: Path) -> None:
    write(tmp_path, "report.yaml", REPORT)
    text = PARENT.replace(
        'run: echo "${{ steps.child.outputs.total }}"',
        'run: echo "${{ steps.child.outputs.totl }}"',
    )
    parent = write(tmp_path, "parent.yaml", text)
    finding = only(parent, "subflow-output")
    assert (finding.line, finding.col) == (12, 16)
    assert finding.message == (
        "'steps.child.outputs.totl': sub-flow report.yaml has no output 'totl'"
    )
    assert finding.hint == "did you mean 'total'?"


def test_outputs_a_sub_flow_step_declares_must_be_the_child_outputs(tmp_path: Path) -> None:
    write(tmp_path, "report.yaml", REPORT)
    text = PARENT.replace(
        "    needs: [process]\n", "    needs: [process]\n    outputs: [total, rows]\n", 1
    )
    parent = write(tmp_path, "parent.yaml", text)
    finding = only(parent, "subflow-output")
    assert (finding.line, finding.col) == (10, 22)
    assert finding.message == (
        "step 'child' declares output 'rows', which sub-flow report.yaml does not give"
    )
    assert finding.hint == "its outputs: total, day"
