"""`flows test`: the examples' test files (and a flow's own `tests:`) pass on the real engine; a
changed expectation fails with exit 1 and a readable diff; a test file or a flow's `tests:` with a
mistake gets file:line:col findings."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from cli_support import flows
from helpers import assert_unchanged

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _copy_examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_the_examples_test_files_pass(url: str, redis_client: redis.Redis) -> None:
    # Every case runs in a namespace of its own, removed afterwards.
    with assert_unchanged(redis_client):
        result = flows("test", str(EXAMPLES), "--redis", url)
    assert result.exit_code == 0, result.output
    assert "12 passed, 0 failed" in result.output
    names = ("etl.test.yaml", "approval.test.yaml", "nightly.test.yaml", "subflow.test.yaml")
    for name in (*names, "report.yaml"):
        assert f"{name}::" in result.output


def test_a_changed_expectation_fails_with_a_diff(url: str, tmp_path: Path) -> None:
    folder = _copy_examples(tmp_path)
    test_file = folder / "etl.test.yaml"
    text = test_file.read_text()
    assert "load: {status: success, attempts: 2}" in text
    changed = text.replace(
        "load: {status: success, attempts: 2}", "load: {status: success, attempts: 3}"
    )
    test_file.write_text(changed)
    result = flows("test", str(test_file), "-k", "fails once", "--redis", url)
    assert result.exit_code == 1
    out = result.output
    assert "etl.test.yaml::load fails once, then succeeds FAILED" in out
    assert "expect.steps.load.attempts: expected 3, got 2" in out
    assert '-       "attempts": 3' in out
    assert '+       "attempts": 2' in out
    assert "0 passed, 1 failed" in out
    assert "Traceback" not in out


def test_a_steps_diff_shows_only_the_outputs_named(url: str, tmp_path: Path) -> None:
    flow = tmp_path / "two.yaml"
    write = "echo x=1 >> $FLOWS_OUTPUT; echo unnamed=2 >> $FLOWS_OUTPUT"
    flow.write_text(
        f"version: 1\nname: two\nsteps:\n  a: {{run: '{write}'}}\n"
        f"  b: {{foreach: {{items: [1, 2]}}, run: '{write}'}}\n"
        "tests:\n  - name: it ends\n"
        "    expect: {steps: {a: {outputs: {x: '3'}}, b: {outputs: [{x: '1'}, {x: '3'}]}}}\n"
    )
    result = flows("test", str(flow), "--redis", url)
    assert result.exit_code == 1, result.output
    out = result.output
    assert 'expect.steps.a.outputs.x: expected "3", got "1"' in out
    assert '+         "x": "1"' in out
    assert "unnamed" not in out  # only what the expectation names is compared, and shown


def test_the_runs_outputs_are_compared_by_key(url: str, tmp_path: Path) -> None:
    folder = _copy_examples(tmp_path)
    flow = folder / "report.yaml"
    text = flow.read_text()
    assert 'outputs: {total: "40", day: "2026-11-01"}' in text
    flow.write_text(text.replace('outputs: {total: "40", day', 'outputs: {total: "41", day'))
    result = flows("test", str(flow), "-k", "TEN Times", "--redis", url)  # as pytest: any case
    assert result.exit_code == 1, result.output
    assert 'expect.outputs.total: expected "41", got "40"' in result.output
    assert "expect.outputs.day" not in result.output
    assert "how its jobs failed" not in result.output  # none did


def test_a_typo_in_an_expected_output_is_a_finding_not_got_null(
    url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # It read `expect.outputs.totl: expected "40", got null` once the case had run.
    folder = _copy_examples(tmp_path)
    flow = folder / "report.yaml"
    text = flow.read_text()
    flow.write_text(text.replace('outputs: {total: "40", day', 'outputs: {totl: "40", day'))
    with assert_unchanged(redis_client):
        result = flows("test", str(flow), "--redis", url)
    assert result.exit_code == 1, result.output
    assert "'totl' is not an output of the flow" in result.output
    assert "did you mean 'total'?" in result.output
    assert "got null" not in result.output and "Traceback" not in result.output
    assert result.stdout.splitlines()[-1] == "0 passed, 0 failed, 1 error in 1 file"


def test_a_failed_case_says_how_its_jobs_failed_as_text(url: str, tmp_path: Path) -> None:
    flow = tmp_path / "boom.yaml"
    flow.write_text(
        "version: 1\nname: boom\nsteps:\n"
        "  a: {run: 'printf \"bad \\033[2J thing\\n\"; exit 3'}\n"
        "tests:\n  - name: it works\n    expect: {status: succeeded}\n"
    )
    result = flows("test", str(flow), "--redis", url)
    assert result.exit_code == 1, result.output
    assert "how its jobs failed:" in result.output
    assert "step a (" in result.output and "exit-code-3: bad \\x1b[2J thing" in result.output
    assert "\x1b[2J" not in result.output


def test_a_python_exception_is_named_once_in_how_its_job_failed(url: str, tmp_path: Path) -> None:
    (tmp_path / "boomtasks.py").write_text("def boom(job):\n    raise RuntimeError('kaboom')\n")
    flow = tmp_path / "pyboom.yaml"
    flow.write_text(
        "version: 1\nname: pyboom\nsteps:\n"
        "  a: {job: boomtasks.boom, retry: {attempts: 1}}\n"
        "tests:\n  - name: it works\n    expect: {status: succeeded}\n"
    )
    result = flows("test", str(flow), "--redis", url)
    assert result.exit_code == 1, result.output
    assert "): RuntimeError: kaboom\n" in result.output
    assert "RuntimeError: RuntimeError" not in result.output


def test_a_changed_expectation_in_a_flows_own_tests_fails_with_a_diff(
    url: str, tmp_path: Path
) -> None:
    folder = _copy_examples(tmp_path)
    flow = folder / "report.yaml"
    text = flow.read_text()
    assert 'outputs: {total: "40"}' in text
    flow.write_text(text.replace('outputs: {total: "40"}', 'outputs: {total: "41"}'))
    result = flows("test", str(folder), "-k", "ten times", "--redis", url)
    assert result.exit_code == 1, result.output
    out = result.output
    assert "report.yaml::the total is ten times the orders FAILED" in out
    assert 'expect.steps.count.outputs.total: expected "41", got "40"' in out
    assert '-         "total": "41"' in out
    assert '+         "total": "40"' in out
    assert "0 passed, 1 failed" in out
    assert "Traceback" not in out


def test_a_flows_own_tests_with_mistakes_get_findings(url: str, tmp_path: Path) -> None:
    """As for a test file, in `flows test` and in `flows validate` alike: the cases are part of
    the flow file."""
    flow = tmp_path / "report.yaml"
    text = (EXAMPLES / "report.yaml").read_text()
    cut = text.index("tests:")
    flow.write_text(
        text[:cut] + "tests:\n"
        "  - name: typos\n"
        "    mock: {cont: {exit: 2}}\n"
        "    expect: {status: faild, steps: {count: {attemps: 1}}}\n"
    )
    line = text[:cut].count("\n") + 1  # the line of `tests:`
    for args in (("test", str(flow), "--redis", url), ("validate", str(flow))):
        result = flows(*args)
        assert result.exit_code == 1, result.output
        out = result.output
        assert f"{flow}:{line + 2}:12: error: 'cont' is not a step of the flow" in out
        assert "hint: did you mean 'count'?" in out
        assert f"{flow}:{line + 3}:22: error: 'faild' is not a run status" in out
        assert f"{flow}:{line + 3}:45: error: unknown key 'attemps'" in out
        assert "Traceback" not in out


def test_a_flow_file_without_tests_is_no_test(url: str) -> None:
    result = flows("test", str(EXAMPLES / "shell.yaml"), "--redis", url)
    assert result.exit_code == 1
    assert "has no tests: section" in result.output
    assert "hint: add a tests: section, or cases in shell.test.yaml beside it" in result.output


def test_a_flow_file_with_a_test_file_beside_it_points_there(url: str) -> None:
    """`flows test etl.yaml` is the first thing a newcomer types: the cases are in
    etl.test.yaml beside it, and the hint says so with the command that runs them."""
    result = flows("test", str(EXAMPLES / "etl.yaml"), "--redis", url)
    assert result.exit_code == 1
    beside = EXAMPLES / "etl.test.yaml"
    assert f"hint: its cases are in {beside}: flows test {beside}" in result.output
    assert "Traceback" not in result.output


def test_a_test_file_with_mistakes_gets_findings(url: str, tmp_path: Path) -> None:
    folder = _copy_examples(tmp_path)
    bad = folder / "bad.test.yaml"
    bad.write_text(
        "flow: etl.yaml\n"
        "cases:\n"
        "  - name: typos\n"
        "    mock:\n"
        "      lod: {outputs: {}}\n"
        "    expect:\n"
        "      status: succeded\n"
        "      steps: {load: {status: success, attemps: 2}}\n"
    )
    result = flows("test", str(bad), "--redis", url)
    assert result.exit_code == 1
    out = result.output
    assert f"{bad}:5:7: error: 'lod' is not a step of the flow" in out
    assert "hint: did you mean 'load'?" in out
    assert f"{bad}:7:15: error: 'succeded' is not a run status" in out
    assert f"{bad}:8:39: error: unknown key 'attemps' in the expectation of step 'load'" in out
    assert "Traceback" not in out


def test_a_flow_file_that_is_not_utf8_is_a_finding(url: str, tmp_path: Path) -> None:
    """Read as flows validate reads it: a finding at the byte, not an unexpected error."""
    flow = tmp_path / "latin.yaml"
    flow.write_bytes(
        b"version: 1\nname: latin\nsteps:\n  a: {run: echo caf\xe9}\n"
        b"tests:\n  - {name: once, expect: {status: succeeded}}\n"
    )
    beside = tmp_path / "latin2.yaml"
    beside.write_bytes(flow.read_bytes().replace(b"tests:", b"x-tests:").replace(b"  - {", b"#"))
    test_file = tmp_path / "latin2.test.yaml"
    test_file.write_text("flow: latin2.yaml\ncases: [{name: once}]\n")
    for given, shown in ((flow, flow), (test_file, beside)):
        result = flows("test", str(given), "--redis", url)
        assert result.exit_code == 1, result.output
        assert f"{shown}:4:20: error: the file is not UTF-8 text (byte 49)" in result.output
        assert "unexpected error" not in result.output


def test_a_test_file_without_cases_says_so_at_its_list(url: str, tmp_path: Path) -> None:
    folder = _copy_examples(tmp_path)
    empty = folder / "empty.test.yaml"
    empty.write_text("flow: etl.yaml\ncases: []\n")
    result = flows("test", str(empty), "--redis", url)
    assert result.exit_code == 1
    said = f"{empty}:2:8: error: a test file's cases is empty: add at least one case"
    assert said in result.output


def test_what_a_case_would_never_use_is_a_finding(url: str, tmp_path: Path) -> None:
    """A stub for a wait step, a signal to a step without wait:, a schedule case's at: and
    run expectations, a run case's runs: each would pass unnoticed."""
    folder = _copy_examples(tmp_path)
    bad = folder / "unused.test.yaml"
    bad.write_text(
        "flow: approval.yaml\n"
        "cases:\n"
        "  - name: stubbed wait\n"
        "    mock: {approve: {outputs: {note: x}}}\n"
        "    signals: {build: {}}\n"
        "    expect: {runs: 1}\n"
    )
    nightly = folder / "unused-nightly.test.yaml"
    nightly.write_text(
        "flow: nightly.yaml\n"
        "cases:\n"
        "  - name: a week\n"
        '    at: "2026-03-01T00:00:00Z"\n'
        '    schedule: {from: "2026-03-01T00:00:00Z", to: "2026-03-08T00:00:00Z"}\n'
        "    mock: all\n"
        "    expect: {runs: 7, status: succeeded}\n"
    )
    result = flows("test", str(bad), str(nightly), "--redis", url)
    assert result.exit_code == 1
    out = result.output
    assert f"{bad}:4:12: error: 'approve' is a wait step: it takes a signal, not a stub" in out
    assert f"{bad}:5:15: error: 'build' is not a wait step" in out
    assert f"{bad}:6:14: error: runs counts a schedule case's runs" in out
    assert f"{nightly}:4:5: error: a schedule case starts at its schedule's from" in out
    assert f"{nightly}:7:23: error: a schedule case compares its runs" in out


def test_a_signal_lacking_a_declared_output_is_a_finding(url: str, tmp_path: Path) -> None:
    """The engine refuses such a signal: said at its place before any case runs, in a test
    file and in a flow's own tests: (so by flows validate too), not as a case that could not
    run with the engine's words."""
    folder = _copy_examples(tmp_path)
    bad = folder / "lacking.test.yaml"
    bad.write_text(
        "flow: approval.yaml\n"
        "cases:\n"
        "  - name: no note\n"
        "    mock: all\n"
        "    signals: {approve: {approved_by: ada}}\n"
        "    expect: {status: succeeded}\n"
    )
    result = flows("test", str(bad), "--redis", url)
    assert result.exit_code == 1
    assert result.output.splitlines()[:2] == [
        f"{bad}:5:15: error: the signal to 'approve' lacks 'note': the wait declares the "
        "outputs note",
        "    hint: give each: signals: {approve: {note: ...}}",
    ]
    assert "could not run" not in result.output and "WaitSignal" not in result.output
    own = folder / "own.yaml"
    own.write_text(
        "version: 1\nname: own\nsteps:\n"
        "  gate: {wait: {signal: go}, outputs: [ticket, note]}\n"
        "tests:\n"
        "  - name: t\n"
        "    signals: {gate: {}}\n"
        "    expect: {status: succeeded}\n"
    )
    checked = flows("validate", str(own))
    assert checked.exit_code == 1
    assert (
        f"{own}:7:15: error: the signal to 'gate' lacks 'ticket', 'note': the wait declares "
        "the outputs ticket, note"
    ) in checked.output


def test_a_schedule_in_error_is_one_finding_not_two(url: str, tmp_path: Path) -> None:
    """An outage written as a mapping is said once, in the file's words; the case stays a
    schedule case, so its runs: is not a second finding."""
    folder = _copy_examples(tmp_path)
    bad = folder / "outage.test.yaml"
    bad.write_text(
        "flow: nightly.yaml\n"
        "cases:\n"
        "  - name: down a day\n"
        "    schedule:\n"
        '      from: "2026-03-01T00:00:00Z"\n'
        '      to: "2026-03-08T00:00:00Z"\n'
        '      outage: {from: "2026-03-02T00:00:00Z", to: "2026-03-03T00:00:00Z"}\n'
        "    mock: all\n"
        "    expect: {runs: 6}\n"
    )
    result = flows("test", str(bad), "--redis", url)
    assert result.exit_code == 1
    findings = [line for line in result.output.splitlines() if ": error: " in line]
    assert findings == [
        f"{bad}:7:15: error: outage is one text, FROM/TO: two ISO 8601 times joined by '/', "
        'e.g. "2026-03-01T02:30:00Z/2026-03-01T07:30:00Z"'
    ]


def test_flows_validate_reads_a_test_file_as_flows_test_does(tmp_path: Path) -> None:
    """Not as a flow (whose version, name and steps it lacks): its own mistakes only."""
    folder = _copy_examples(tmp_path)
    bad = folder / "bad.test.yaml"
    bad.write_text("flow: etl.yaml\ncases:\n  - name: x\n    mock: {lod: {outputs: {}}}\n")
    result = flows("validate", str(bad), str(folder / "etl.test.yaml"))
    assert result.exit_code == 1
    assert f"{bad}:4:12: error: 'lod' is not a step of the flow" in result.output
    assert "version" not in result.output and "1 error in 2 files" in result.output


def test_the_exit_code_of_the_command(url: str, tmp_path: Path) -> None:
    """The installed command, as CI runs it: 0 when passing, 1 when a case fails."""
    folder = _copy_examples(tmp_path)
    for name in folder.glob("*.test.yaml"):
        if name.name != "files.test.yaml":
            name.unlink()
    test_file = (folder / "files.test.yaml").rename(folder / "files.test.yml")  # either suffix
    command = [str(Path(sys.executable).parent / "flows"), "test", str(folder), "--redis", url]
    # Without --redis: a private server of its own, started and removed by the command.
    ok = subprocess.run(
        command[:3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    test_file.write_text(test_file.read_text().replace("rows: 6", "rows: 7"))
    failed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 1
    assert "expect.steps.total.outputs.rows: expected 7, got 6" in failed.stdout


def test_the_scheduler_service_does_not_read_test_files_as_flows() -> None:
    from scheduler.service.scanning import flow_files

    names = {path.name for path in flow_files(EXAMPLES)}
    assert "nightly.yaml" in names
    assert not [name for name in names if name.endswith(".test.yaml")]


@pytest.mark.slow  # two real pytest processes, each starting a private server
def test_pytest_collects_the_test_files(tmp_path: Path) -> None:
    """The `pytest11` plugin: a project's own pytest runs its flow tests, a case per item (a
    flow's own `tests:` too)."""
    folder = _copy_examples(tmp_path)
    for name in folder.glob("*.test.yaml"):
        if name.name != "files.test.yaml":
            name.unlink()
    test_file = (folder / "files.test.yaml").rename(folder / "files.test.yml")  # either suffix
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)]
    passed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "3 passed" in passed.stdout
    test_file.write_text(test_file.read_text().replace("rows: 6", "rows: 7"))
    failed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    assert "expect.steps.total.outputs.rows: expected 7, got 6" in failed.stdout
    assert "files.test.yml::one count per listed file" in failed.stdout
    assert "2 passed" in failed.stdout  # report.yaml's own cases


def test_a_k_that_selects_no_case_is_a_usage_error(url: str, redis_client: redis.Redis) -> None:
    # As pytest's -k: selecting nothing is a mistake (a typo), not "0 passed".
    with assert_unchanged(redis_client):
        result = flows("test", str(EXAMPLES), "-k", "nomatch", "--redis", url)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '-k': no case name contains 'nomatch'" in result.output
    assert "passed" not in result.output


def test_a_printed_case_id_runs_that_case_alone(url: str) -> None:
    # As pytest takes FILE::NAME: it read "Path '...::...' does not exist".
    etl = f"{EXAMPLES / 'etl.test.yaml'}::load fails once, then succeeds"
    report = f"{EXAMPLES / 'report.yaml'}::a failed count leaves no summary"
    result = flows("test", etl, report, report, "--redis", url)  # named twice, runs once
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"{etl} PASSED", f"{report} PASSED", "2 passed, 0 failed"]


def test_verbose_says_the_virtual_time_as_a_duration(url: str) -> None:
    # A month of nights was "2596501s virtual".
    month = f"{EXAMPLES / 'nightly.test.yaml'}::a month of nights across the DST change"
    result = flows("test", month, "-v", "--redis", url)
    assert result.exit_code == 0, result.output
    line = result.stdout.splitlines()[0]
    assert re.fullmatch(re.escape(month) + r" PASSED \(\d+\.\d\ds, 4w2d(\d+[hms])* virtual\)", line)


def test_a_case_id_named_in_a_folder_named_too_runs_every_case(url: str, tmp_path: Path) -> None:
    flow = tmp_path / "two.yaml"
    flow.write_text(
        "version: 1\nname: two\nsteps:\n  a: {run: 'true'}\n"
        "tests:\n  - name: one\n    mock: all\n  - name: two\n    mock: all\n"
    )
    result = flows("test", str(tmp_path), f"{flow}::one", "--redis", url)
    assert result.exit_code == 0, result.output
    assert "2 passed, 0 failed" in result.output


def test_a_case_id_naming_no_case_is_a_usage_error_naming_the_cases(
    url: str, redis_client: redis.Redis
) -> None:
    test_file = EXAMPLES / "etl.test.yaml"
    with assert_unchanged(redis_client):
        result = flows("test", f"{test_file}::load fails once", "--redis", url)
        folder = flows("test", f"{EXAMPLES}::load", "--redis", url)
        missing = flows("test", f"{EXAMPLES / 'nope.test.yaml'}::load", "--redis", url)
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())  # click wraps the message
    assert (
        f"{test_file} has no case 'load fails once' "
        "(did you mean 'load fails once, then succeeds'?); its cases: "
        "'load fails once, then succeeds', 'every step really runs', "
        "'a load that keeps failing fails the run, notify runs anyway'"
    ) in out
    assert "passed" not in result.output and "Traceback" not in result.output
    assert folder.exit_code == 2, folder.output
    assert "a case id is FILE::NAME, and" in folder.output and "is not a file" in folder.output
    assert missing.exit_code == 2, missing.output
    assert "nope.test.yaml' does not exist" in " ".join(missing.output.split())


def test_findings_end_with_the_summary_line_flows_validate_ends_with(
    url: str, tmp_path: Path
) -> None:
    (tmp_path / "flow.yaml").write_text("version: 1\nname: f\nsteps:\n  a: {run: echo hi}\n")
    bad = tmp_path / "bad.test.yaml"
    for statuses, errors in ((("succeded",), "1 error"), (("succeded", "faild"), "2 errors")):
        steps = ", ".join(f"a: {status}" for status in statuses[1:])
        bad.write_text(
            "flow: flow.yaml\ncases:\n  - name: typo\n"
            f"    expect: {{status: {statuses[0]}, steps: {{{steps}}}}}\n"
        )
        result = flows("test", str(bad), "--redis", url)
        assert result.exit_code == 1, result.output
        assert result.stdout.splitlines()[-1] == f"0 passed, 0 failed, {errors} in 1 file"


def test_a_path_too_long_for_the_system_does_not_exist(tmp_path: Path) -> None:
    # The system refuses to look it up (ENAMETOOLONG): not there, as for any missing path.
    long = tmp_path / ("p" * 300)
    for arg in (str(long), f"{long}::a case"):
        result = flows("test", arg)
        assert result.exit_code == 2, result.output
        assert "does not exist" in result.stderr


LOUD = """\
version: 1
name: loud
steps:
  speak: {job: loudtasks.speak}
  echo: {run: 'echo shell said so; echo on stderr >&2', needs: [speak]}
tests:
  - name: it ends
    expect: {status: STATUS}
"""


def _loud_flow(tmp_path: Path, status: str) -> Path:
    (tmp_path / "loudtasks.py").write_text(
        "import sys\n\ndef speak(job):\n    print('python said so')\n"
        "    print('python warned', file=sys.stderr)\n"
    )
    flow = tmp_path / "loud.yaml"
    flow.write_text(LOUD.replace("STATUS", status))
    return flow


def test_a_real_steps_output_is_kept_per_step_not_mixed_with_the_case_lines(
    url: str, tmp_path: Path
) -> None:
    # A Python step's print() went to the terminal among the case lines; a shell step's was lost.
    flow = _loud_flow(tmp_path, "succeeded")
    quiet = flows("test", str(flow), "--redis", url)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.output.splitlines() == [f"{flow}::it ends PASSED", "1 passed, 0 failed"]
    shown = flows("test", str(flow), "-v", "--redis", url)
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "captured output:" in out
    assert re.search(r"^      \S+ speak \| python said so$", out, re.M), out
    assert re.search(r"^      \S+ speak ! python warned$", out, re.M), out
    assert re.search(r"^      \S+ echo \| shell said so$", out, re.M), out
    assert re.search(r"^      \S+ echo \| on stderr$", out, re.M), out  # one pipe, in order


def test_a_failed_case_shows_its_real_steps_output(url: str, tmp_path: Path) -> None:
    flow = _loud_flow(tmp_path, "failed")
    result = flows("test", str(flow), "--redis", url)
    assert result.exit_code == 1, result.output
    out = result.output
    failure = out.index("_____ ")
    assert "python said so" not in out[:failure]
    assert "captured output:" in out[failure:]
    assert re.search(r"^      \S+ speak \| python said so$", out, re.M), out
    assert re.search(r"^      \S+ echo \| shell said so$", out, re.M), out


@pytest.mark.slow  # a real pytest process and its private server
def test_pytest_shows_a_failed_cases_real_step_output_as_captured_output(tmp_path: Path) -> None:
    flow = _loud_flow(tmp_path, "failed")
    env = {k: v for k, v in os.environ.items() if k != "FLOWS_REDIS_URL"}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(flow)]
    failed = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    out = failed.stdout
    # Even with -s (pytest captures nothing): the step's lines are its own section.
    assert "python said so" not in out[: out.index("FAILURES")]
    assert "Captured output call" in out
    assert re.search(r"^speak \| python said so$", out, re.M), out
    assert re.search(r"^echo \| shell said so$", out, re.M), out


def test_a_folder_without_tests_says_how_to_write_one(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text("version: 1\nname: hello\nsteps:\n  a: {run: echo}\n")
    result = flows("test", str(tmp_path))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no test files (*.test.yaml, *.test.yml) or flow files with tests: in {tmp_path}"
        ": write NAME.test.yaml beside NAME.yaml, with flow: NAME.yaml and cases: "
        "(see Flow tests in the docs)\n"
    )


def test_a_child_runs_output_is_labelled_as_flows_logs_labels_it(url: str, tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(
        "version: 1\nname: child\nsteps:\n  count: {run: 'echo counted'}\n"
    )
    flow = tmp_path / "parent.yaml"
    flow.write_text(
        "version: 1\nname: parent\nsteps:\n  report: {flow: child.yaml}\n"
        "tests:\n  - name: it ends\n    expect: {status: succeeded}\n"
    )
    result = flows("test", str(flow), "-v", "--redis", url)
    assert result.exit_code == 0, result.output
    assert re.search(r"^      \S+ report/count \| counted$", result.output, re.M), result.output
