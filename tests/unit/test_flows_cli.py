"""``flows validate``, ``plan``, ``graph``, ``schema`` via click's runner: output, exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from textwrap import dedent

import click
import pytest
from click.testing import CliRunner

from flows.cli import main

GOOD = """\
version: 1
name: etl
params:
  regions: {type: array, default: [de, at]}
steps:
  extract: {run: echo extract}
  load:
    job: tasks.load
    needs: [extract]
    foreach: {items: "${{ params.regions }}", as: region}
    with: {region: "${{ region }}"}
  notify: {run: echo done, needs: [load], trigger_rule: all_done, delay: 30s}
"""

BAD = """\
version: 1
name: etl
steps:
  extract: {run: echo}
  load:
    run: echo
    need: [extract]
"""

UNCHECKED = "; job modules not imported (--check-imports)"
"""How a success ends when a Python step's module was not imported."""
NOT_A_FLOW = "not a flow file: a flow file is a YAML mapping with steps: (version, name, steps...)"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in {"good": GOOD, "bad": BAD}.items():
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(dedent(text))
    return paths


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_validate_clean_file_exits_0(files: dict[str, Path]) -> None:
    code, out, _ = invoke("validate", str(files["good"]))
    assert (code, out) == (0, f"no problems in 1 file{UNCHECKED}\n")


def test_validate_says_nothing_of_imports_without_python_steps(tmp_path: Path) -> None:
    flow = tmp_path / "shell.yaml"
    flow.write_text("version: 1\nname: shell\nsteps:\n  a: {run: echo}\n")
    assert invoke("validate", str(flow)) == (0, "no problems in 1 file\n", "")
    with_job = tmp_path / "py.yaml"
    with_job.write_text("version: 1\nname: py\nsteps:\n  a: {job: os.getcwd}\n")
    assert invoke("validate", "--check-imports", str(with_job), str(flow)) == (
        0,
        "no problems in 2 files\n",
        "",
    )


def test_validate_a_folder_checks_its_flow_files_as_the_scheduler_reads_them(
    files: dict[str, Path], tmp_path: Path
) -> None:
    # files: good.yaml and bad.yaml; beside them, what the scheduler's --flows-dir skips too
    (tmp_path / "good.test.yaml").write_text("flow: good.yaml\ncases: []\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.yaml").write_text("not: a flow\n")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "also.yml").write_text(dedent(GOOD))
    code, out, _ = invoke("validate", str(tmp_path))
    assert code == 1
    assert out.count(f"{files['bad']}:") >= 1 and out.endswith(" in 3 files\n"), out
    assert "hidden" not in out and ".test.yaml" not in out
    (tmp_path / "bad.yaml").unlink()
    assert invoke("validate", str(tmp_path), str(files["good"])) == (
        0,
        f"no problems in 2 files{UNCHECKED}\n",
        "",
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = invoke("validate", str(empty))
    assert code == 2 and f"no flow files (*.yaml, *.yml) in folder {empty}" in err


def test_validate_reports_findings_and_exits_1(files: dict[str, Path]) -> None:
    code, out, _ = invoke("validate", str(files["good"]), str(files["bad"]))
    assert code == 1
    assert out == (
        f"{files['bad']}:7:5: error: unknown key 'need' in steps.load\n"
        "    hint: did you mean 'needs'?\n"
        "1 error in 2 files\n"
    )


def test_validate_json(files: dict[str, Path]) -> None:
    code, out, _ = invoke("validate", "--format", "json", str(files["bad"]))
    report = json.loads(out)
    assert code == 1
    assert (report["errors"], report["warnings"]) == (1, 0)
    assert report["findings"] == [
        {
            "file": str(files["bad"]),
            "line": 7,
            "col": 5,
            "severity": "error",
            "code": "unknown-key",
            "message": "unknown key 'need' in steps.load",
            "hint": "did you mean 'needs'?",
        }
    ]
    assert report["imports_checked"] is False


def test_validate_json_says_whether_job_modules_were_imported(tmp_path: Path) -> None:
    """Before, only the text output said that job modules went unimported: a CI job reading
    the JSON could not tell a flow whose modules import from one never tried."""
    flow = tmp_path / "py.yaml"
    flow.write_text("version: 1\nname: py\nsteps:\n  a: {job: os.getcwd}\n")
    for flags, checked in (([], False), (["--check-imports"], True)):
        code, out, _ = invoke("validate", "--format", "json", *flags, str(flow))
        assert code == 0
        assert json.loads(out)["imports_checked"] is checked


@pytest.mark.parametrize(
    "args",
    [["validate"], ["validate", "missing.yaml"], ["validate", "--format", "xml", "x.yaml"]],
)
def test_validate_usage_errors_exit_2(args: list[str]) -> None:
    assert invoke(*args)[0] == 2


@pytest.mark.parametrize(
    "args",
    [["run"], ["plan"], ["graph"], ["validate"], ["validate", "pipelines/pipeline.yaml"], ["test"]],
)
def test_a_misspelt_flow_file_is_answered_with_the_one_likely_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "pipeline.yaml").write_text(dedent(GOOD))
    (tmp_path / "pipelines" / "pipeline.test.yaml").write_text("flow: pipeline.yaml\ncases: []\n")
    typo = "pipelines/pipline.test.yaml" if args == ["test"] else "pipelines/pipline.yaml"
    code, out, err = invoke(*args, typo)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith(
        f"'{typo}' does not exist (did you mean '{typo.replace('pipline', 'pipeline')}'?)"
    ), err
    code, _, err = invoke(*args, "elsewhere/nothing.yaml")
    assert code == 2 and err.splitlines()[-1].endswith("'elsewhere/nothing.yaml' does not exist.")
    code, _, err = invoke(*args, "p" * 300)  # a name the system will not look up: no hint
    assert code == 2 and err.splitlines()[-1].endswith("does not exist."), err


@pytest.mark.parametrize("command", ["run", "plan", "graph"])
def test_a_flow_test_file_given_as_a_flow_points_at_flows_test(
    tmp_path: Path, command: str
) -> None:
    # Its cases: and flow: read as a flow made five findings, one a "did you mean 'steps'?".
    cases = tmp_path / "etl.test.yaml"
    cases.write_text("flow: etl.yaml\ncases: []\n")
    code, out, err = invoke(command, str(cases))
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        f"Error: Invalid value for 'FILE': {str(cases)!r} is a flow test file, not a flow: "
        f"run its cases with flows test {cases}"
    )


def test_validate_check_imports(tmp_path: Path) -> None:
    flow = tmp_path / "f.yaml"
    flow.write_text("version: 1\nname: f\nsteps:\n  a: {job: nowhere.run}\n")
    # Said "no problems" alone, and then `flows run` refused the module.
    assert invoke("validate", str(flow)) == (0, f"no problems in 1 file{UNCHECKED}\n", "")
    code, out, _ = invoke("validate", "--check-imports", str(flow))
    assert code == 1
    assert "job 'nowhere.run' does not import: ModuleNotFoundError" in out


def test_validate_check_imports_finds_modules_where_a_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Getting started's layout: the flow in pipelines/, its module in myapp/ beside it, run
    from the project's folder. `flows run` and a worker started there import it, so
    --check-imports does too; a module in neither place is named with both."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the folder first
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "myapp_of_a_cli_test").mkdir()
    (tmp_path / "myapp_of_a_cli_test" / "tasks.py").write_text("def shout(job):\n    return 1\n")
    flow = Path("pipelines") / "hello.yaml"
    flow.write_text(
        "version: 1\nname: hello\nsteps:\n"
        "  shout: {job: myapp_of_a_cli_test.tasks.shout}\n"
        "  other: {job: nowhere_of_a_cli_test.run}\n"
    )
    code, out, _ = invoke("validate", "--check-imports", str(flow))
    assert code == 1
    assert out == (
        f"{flow}:5:16: error: job 'nowhere_of_a_cli_test.run' does not import: "
        "ModuleNotFoundError: No module named 'nowhere_of_a_cli_test'\n"
        "    hint: make 'nowhere_of_a_cli_test' importable from the flow file's folder or the "
        "working directory\n"
        "1 error in 1 file\n"
    )


def test_plan_table(files: dict[str, Path]) -> None:
    code, out, _ = invoke(
        "plan", str(files["good"]), "--logical-time", "2025-01-31", "-p", "regions=fr,it"
    )
    assert code == 0, out
    run = "etl@20250131T000000Z"
    assert f"4 jobs of run {run}" in out
    rows = [line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["extract", "default", "flows.runtime.tasks.shell", "", "", "all_success"],
        ["load[0]", "default", "tasks.load", "extract", "", "all_success"],
        ["load[1]", "default", "tasks.load", "extract", "", "all_success"],
        ["notify", "default", "flows.runtime.tasks.shell", "load[0], load[1]", "30s", "all_done"],
    ]
    # a time to the minute, as `flows backfill --from` takes it
    code, out, _ = invoke("plan", str(files["good"]), "--logical-time", "2025-01-31T02:30")
    assert code == 0, out
    assert "4 jobs of run etl@20250131T023000Z" in out


def test_plan_table_shows_a_fanout_from_an_output() -> None:
    code, out, _ = invoke(
        "plan", str(Path(__file__).resolve().parents[2] / "examples" / "files.yaml")
    )
    assert code == 0, out
    rows = [line.split("│")[1:-1] for line in out.splitlines() if line.startswith("│")]
    assert [row[0].strip() for row in rows] == ["list", "count[*] (items: list.files)", "total"]


def test_plan_json(files: dict[str, Path]) -> None:
    code, out, _ = invoke("plan", str(files["good"]), "--json", "--run-id", "r1")
    plan = json.loads(out)
    assert code == 0
    assert plan["run_id"] == "r1"
    assert [job["jid"] for job in plan["jobs"]] == [
        "r1:extract",
        "r1:load[0]",
        "r1:load[1]",
        "r1:notify",
    ]
    assert plan["jobs"][3]["depends"] == ["r1:load[0]", "r1:load[1]"]
    assert plan["jobs"][3]["delay"] == 30.0


def test_plan_bad_param_is_a_usage_error(files: dict[str, Path]) -> None:
    code, _, err = invoke("plan", str(files["good"]), "-p", "region=de")
    assert code == 2
    assert "unknown param 'region' (did you mean 'regions'?)" in err


def test_plan_of_an_invalid_file_prints_findings_and_exits_1(files: dict[str, Path]) -> None:
    code, out, err = invoke("plan", str(files["bad"]))
    assert (code, out) == (1, "")
    assert "unknown key 'need' in steps.load" in err


def test_graph_mermaid(files: dict[str, Path]) -> None:
    code, out, _ = invoke("graph", str(files["good"]))
    assert code == 0
    assert out == (
        "flowchart LR\n"
        '    s0["extract"]\n'
        '    s1[["load (foreach region)"]]\n'
        '    s2["notify [all_done]"]\n'
        "    s0 --> s1\n"
        "    s1 --> s2\n"
    )


def test_graph_dot(files: dict[str, Path]) -> None:
    code, out, _ = invoke("graph", "--format", "dot", str(files["good"]))
    assert code == 0
    assert out.startswith('digraph "etl" {\n')
    assert '    "extract" -> "load";\n' in out
    assert '"load" [label="load (foreach region)", shape=box3d];' in out


def test_graph_shows_hooks(tmp_path: Path) -> None:
    flow = tmp_path / "h.yaml"
    flow.write_text("version: 1\nname: h\nsteps:\n  a: {run: x}\nhooks:\n  on_failure: {run: x}\n")
    code, out, _ = invoke("graph", str(flow))
    assert code == 0
    assert '    h0(["on_failure [one_failed]"])\n    s0 -.-> h0\n' in out


def test_schema_is_json(files: dict[str, Path]) -> None:
    code, out, _ = invoke("schema")
    assert code == 0
    assert json.loads(out)["title"] == "redis-flows flow file"


def _help_lines(*command: str) -> str:
    code, out, _ = invoke(*command, "--help")
    assert code == 0
    return out


@pytest.mark.parametrize("command", ["run", "plan"])
def test_run_and_plan_describe_params_run_id_and_logical_time_alike(command: str) -> None:
    out = " ".join(_help_lines(command).split())
    assert "an array as a,b,c or a JSON list" in out
    assert "--run-id ID" in out and "--logical-time" in out


def test_every_option_and_command_has_help() -> None:
    """Each command's --help describes it and every option it takes."""

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        assert command.help, f"flows {' '.join(path)} has no description"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"flows {' '.join(path)} {param.opts[0]} has no help"
        if isinstance(command, click.Group):  # listed, so the lazy group loads every command
            context = click.Context(command)
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None, f"flows {' '.join((*path, name))} is listed but missing"
                walk(sub, (*path, name))

    walk(main, ())


def test_a_python_file_is_not_a_flow_file_not_a_yaml_error(tmp_path: Path) -> None:
    # It read "YAML syntax: mapping values are not allowed", hint: quote a value with ': '.
    module = tmp_path / "mytasks.py"
    module.write_text("def speak(job):\n    print('said: so')\n    return {'a': 1}\n")
    said = (
        f"{module}:1:1: error: {NOT_A_FLOW}\n"
        "    hint: a Python step names a function of it in a flow file: job: mytasks.<function>\n"
        "1 error in 1 file\n"
    )
    assert invoke("validate", str(module)) == (1, said, "")
    code, out, err = invoke("run", str(module), "--redis", "unix:///nonexistent/flows.sock")
    assert (code, out) == (1, "")
    assert err.startswith(said), err
    # Whatever its text: one that reads as YAML (a string) is no flow file either.
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n")
    code, out, _ = invoke("validate", str(other))
    assert code == 1
    assert out.startswith(
        f"{other}:1:1: error: {NOT_A_FLOW}\n    hint: write the flow in a .yaml"
    ), out


def test_a_yaml_file_that_is_not_a_mapping_is_not_a_flow_file(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    code, out, _ = invoke("validate", str(listed))
    assert code == 1
    assert out.startswith(f"{listed}:1:1: error: {NOT_A_FLOW}, found a list\n"), out
