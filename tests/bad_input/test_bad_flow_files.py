"""Bad flow files: ``flows run FILE --detach`` names the problem (file:line:col) and exits 1, and
not one key of the namespace changes. The same files through ``flows validate`` exit 1 too.

The corpus covers YAML that does not parse or traps (tabs, duplicate keys, unquoted times,
aliases), the schema (unknown keys, wrong types, bad names and ids), the graph (cycles, unknown
needs), templates, schedules (cron and time zone strings that do not parse, bad policies) and
the engine's size limits (65 tags, a 600 KB payload, data nested 10,000 deep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_unchanged

from flows.cli import main
from scheduler.engine.client import Client

HEAD = "version: 1\nname: bad\nqueue: q\n"
STEP = "steps:\n  a: {job: tasks.a}\n"

CASES: dict[str, tuple[str | bytes, str]] = {
    # name: (file text, a piece of the error message)
    "empty": ("", "empty"),
    "not-yaml": ("version: 1\nname: [unclosed\n", "bad.yaml:"),
    "not-a-mapping": ("- just\n- a list\n", "mapping"),
    "tab-indent": (HEAD + "steps:\n\ta: {job: tasks.a}\n", "bad.yaml:"),
    "duplicate-key": (HEAD + "name: again\n" + STEP, "duplicate key"),
    "unknown-key": (HEAD + STEP + "stepz: {}\n", "unknown key 'stepz'"),
    "missing-name": ("version: 1\n" + STEP, "name"),
    "bad-name": ("version: 1\nname: Has Space\n" + STEP, "name"),
    "version-2": ("version: 2\nname: bad\n" + STEP, "version"),
    "no-steps": (HEAD + "steps: {}\n", "steps"),
    "step-id-separator": (HEAD + "steps:\n  'a:b': {job: tasks.a}\n", "a:b"),
    "job-not-dotted": (HEAD + "steps:\n  a: {job: tasks}\n", "job"),
    "cycle": (
        HEAD + "steps:\n  a: {job: tasks.a, needs: [b]}\n  b: {job: tasks.b, needs: [a]}\n",
        "cycle",
    ),
    "unknown-need": (HEAD + "steps:\n  a: {job: tasks.a, needs: [nope]}\n", "nope"),
    "bad-priority": (HEAD + "steps:\n  a: {job: tasks.a, priority: 2000000}\n", "priority"),
    "priority-nan": (HEAD + "steps:\n  a: {job: tasks.a, priority: .nan}\n", "priority"),
    "int-tag-on-text": (HEAD + "steps:\n  a: {job: tasks.a, priority: !!int etl}\n", "!!int"),
    "float-tag-on-text": (HEAD + "steps:\n  a: {job: tasks.a, delay: !!float soon}\n", "!!float"),
    "negative-delay": (HEAD + "steps:\n  a: {job: tasks.a, delay: -5}\n", "delay"),
    "delay-not-a-duration": (HEAD + "steps:\n  a: {job: tasks.a, delay: soon}\n", "delay"),
    "ttl-past-a-century": (HEAD + "steps:\n  a: {job: tasks.a, ttl: 99999999999w}\n", "ttl"),
    "integer-of-5000-digits": (
        HEAD + "steps:\n  a: {job: tasks.a, with: {n: " + "9" * 5000 + "}}\n",
        "bad.yaml:5:31: error: steps.a.with.n: 999999999999... (5,000 characters) is an "
        "integer past what JSON",
    ),
    "infinite-timeout": (HEAD + "steps:\n  a: {job: tasks.a, timeout: .inf}\n", "timeout"),
    "bad-trigger": (HEAD + "steps:\n  a: {job: tasks.a, trigger_rule: sometimes}\n", "trigger"),
    "unknown-template": (
        HEAD + "steps:\n  a: {job: tasks.a, with: {x: '${{ nope.x }}'}}\n",
        "nope",
    ),
    "if-syntax": (HEAD + "steps:\n  a: {job: tasks.a, if: 'true &&'}\n", "expected a value"),
    "deadline-zero": (HEAD + "deadline: 0\n" + STEP, "deadline"),
    "step-deadline-text": (HEAD + "steps:\n  a: {job: tasks.a, deadline: soon}\n", "deadline"),
    "notify-unknown-channel": (
        HEAD + STEP + "notify:\n  - {on: [failure], pager: {url: 'http://x'}}\n",
        "unknown key 'pager'",
    ),
    "notify-no-channel": (HEAD + STEP + "notify:\n  - on: [failure]\n", "exactly one channel"),
    "notify-two-channels": (
        HEAD + STEP + "notify:\n  - {slack: {url: 'http://a/b'}, webhook: {url: 'http://a/c'}}\n",
        "not webhook and slack",
    ),
    "notify-malformed-url": (
        HEAD + STEP + "notify:\n  - webhook: {url: 'localhost:9000/hook'}\n",
        "malformed URL 'localhost:9000/hook'",
    ),
    "notify-url-with-password": (
        HEAD + STEP + "notify:\n  - webhook: {url: 'https://bob:pa55@hooks.example.com/x'}\n",
        "URL 'https://***@hooks.example.com/x' holds a user or password",
    ),
    "notify-smtp-url-with-login": (
        HEAD + STEP + "notify:\n  - email: {to: [a@b.org], smtp: 'smtps://u:pw@mail:465'}\n",
        "name a secret holding user:password with login: NAME",
    ),
    "notify-smtp-url": (
        HEAD + STEP + "notify:\n  - email: {to: [a@b.org], smtp: 'http://mail:25'}\n",
        "smtp://",
    ),
    "notify-bad-address": (
        HEAD + STEP + "notify:\n  - email: {to: [nobody], smtp: 'smtp://mail:25'}\n",
        "not an email address",
    ),
    "notify-unknown-event": (
        HEAD + STEP + "notify:\n  - {on: [crash], slack: {url: 'http://a/b'}}\n",
        "crash",
    ),
    "notify-login-in-clear": (
        HEAD
        + STEP
        + "notify:\n  - email: {to: [a@b.org], smtp: 'smtp://mail.example.com:25',"
        + " starttls: false, login: SMTP_LOGIN}\n",
        "would send the login in clear",
    ),
    "notify-bad-secret-name": (
        HEAD + STEP + "notify:\n  - webhook: {url: 'http://a/b', secret: 'my secret'}\n",
        "secret",
    ),
    "wait-with-run": (HEAD + "steps:\n  a: {run: echo, wait: {signal: go}}\n", "has no 'run'"),
    "wait-on-timeout": (
        HEAD + "steps:\n  a: {wait: {signal: go, on_timeout: later}}\n",
        "on_timeout",
    ),
    "wait-timeout-zero": (HEAD + "steps:\n  a: {wait: {signal: go, timeout: 0s}}\n", "timeout"),
    "if-eval": (HEAD + "steps:\n  a: {job: tasks.a, if: \"eval('1')\"}\n", "unknown function"),
    "if-unknown-param": (HEAD + "steps:\n  a: {job: tasks.a, if: params.go}\n", "param 'go'"),
    "if-type": (HEAD + "steps:\n  a: {job: tasks.a, if: length(5) > 1}\n", "length()"),
    "if-not-upstream": (
        HEAD + "steps:\n  a: {job: tasks.a}\n  b: {job: tasks.b, if: steps.a.status == 'x'}\n",
        "does not depend on 'a'",
    ),
    "cron-61": (HEAD + "schedule: {cron: '61 * * * *'}\n" + STEP, "61"),
    "cron-words": (HEAD + "schedule: {cron: 'every day at noon'}\n" + STEP, "expected 5"),
    "cron-empty": (HEAD + "schedule: {cron: ''}\n" + STEP, "cron"),
    "cron-a-mapping": (
        HEAD + "schedule: {cron: {a: 1}}\n" + STEP,
        'schedule.cron: expected a cron string such as "0 3 * * *", or a list of them',
    ),
    "needs-a-mapping": (
        HEAD + "steps:\n  a: {job: tasks.a}\n  b: {job: tasks.b, needs: {a: 1}}\n",
        "steps.b.needs: expected a step id such as 'extract', or a list of step ids, got a mapping",
    ),
    "cron-range-backwards": (
        HEAD + "schedule: {cron: '30-10 * * * *'}\n" + STEP,
        "minute field: the range 30-10 runs backwards",
    ),
    "cron-hour-range-backwards": (
        HEAD + "schedule: {cron: ['0 3 * * *', '* 5-2 * * *']}\n" + STEP,
        "hour field: the range 5-2 runs backwards",
    ),
    "timezone": (
        HEAD + "schedule: {cron: '0 2 * * *', timezone: Mars/Olympus}\n" + STEP,
        "Mars/Olympus",
    ),
    "timezone-path": (
        HEAD + "schedule: {cron: '0 2 * * *', timezone: ../../etc/passwd}\n" + STEP,
        "time zone",
    ),
    "catchup-policy": (
        HEAD + "schedule: {cron: '0 2 * * *', catchup: {policy: most}}\n" + STEP,
        "policy",
    ),
    "overlap": (HEAD + "schedule: {cron: '0 2 * * *', overlap: never}\n" + STEP, "overlap"),
    "too-many-tags": (
        HEAD + "tags: [" + ", ".join(f"t{i}" for i in range(65)) + "]\n" + STEP,
        "65 tags",
    ),
    "tag-with-space": (HEAD + "tags: ['a b']\n" + STEP, "tags"),
    "megabyte-payload": (
        HEAD + "steps:\n  a: {job: tasks.a, with: {blob: '" + "x" * 600_000 + "'}}\n",
        "more than the limit of 524288",
    ),
    "nested-10000": (
        HEAD + "steps:\n  a: {job: tasks.a, with: {d: " + "[" * 10_000 + "]" * 10_000 + "}}\n",
        "nesting",
    ),
    "heartbeat-not-shorter": (
        HEAD + "steps:\n  a: {job: tasks.a, timeout: 10s, heartbeat: 1m}\n",
        "heartbeat",
    ),
    "foreach-not-a-list": (
        HEAD + "steps:\n  a: {job: tasks.a, foreach: {items: 5}}\n",
        "items",
    ),
    # Only expanding the flow shows these: flows validate does, as flows run does.
    "foreach-over-a-param-of-10001": (
        HEAD
        + "params:\n  many: {type: array, default: ["
        + ", ".join("1" * 10_001)
        + "]}\nsteps:\n  a: {job: tasks.a, foreach: {items: '${{ params.many }}', as: it},"
        " with: {n: '${{ it }}'}}\n",
        "10001 items; the limit is 10000",
    ),
    "matrix-over-params-of-10201": (
        HEAD
        + "params:\n  few: {type: array, default: ["
        + ", ".join(map(str, range(101)))
        + "]}\nsteps:\n  a: {job: tasks.a,"
        + " matrix: {x: '${{ params.few }}', y: '${{ params.few }}'}}\n",
        "more than 10000 combinations",
    ),
    "matrix-over-a-param-with-a-value-twice": (
        HEAD
        + "params:\n  twice: {type: array, default: [de, de]}\n"
        + "steps:\n  a: {job: tasks.a, matrix: {x: '${{ params.twice }}'}}\n",
        "a value is there twice",
    ),
    "a-param-default-over-the-payload-limit": (
        HEAD
        + "params:\n  blob: {type: string, default: '"
        + "x" * 600_000
        + "'}\nsteps:\n  a: {job: tasks.a, with: {blob: '${{ params.blob }}'}}\n",
        "more than the limit of 524288",
    ),
    "plain-key-over-1024": (
        HEAD + "steps:\n  " + "b" * 1100 + ": {job: tasks.a}\n",
        "a plain key is 1,100 characters; YAML allows at most 1,024",
    ),
    "question-key-10000": (
        HEAD + "steps:\n  ? " + "a" * 10_000 + "\n  : {job: tasks.a}\n",
        "(10,002 characters) is longer than 64 characters",
    ),
    "not-utf-8": ((HEAD + STEP).encode() + b"description: caf\xe9\n", "bad.yaml:6:17:"),
    "scheduled-over-4-mib": (
        HEAD + "schedule: {cron: '0 2 * * *'}\n" + STEP + ("#" * 99 + "\n") * 45_000,
        "bad.yaml:4:1: error: the flow file is 4,500,",
    ),
    "over-10-mb": (HEAD + STEP + ("#" * 99 + "\n") * 110_000, "the limit is 10,485,760"),
    "literal-foreach-of-10001": (
        HEAD
        + "steps:\n  a: {job: tasks.a, foreach: {items: ["
        + ", ".join("1" * 10_001)
        + "], as: it}, with: {n: '${{ it }}'}}\n",
        "more than 10000 foreach items",
    ),
}

# One finding each, told in a few hundred characters (a long key is not quoted whole).
SINGLE = ("plain-key-over-1024", "question-key-10000", "literal-foreach-of-10001")

# Where flows validate reports the expansion cases (line:col of the value to change).
PLACES = {
    "matrix-over-a-param-with-a-value-twice": (
        "bad.yaml:7:33: error: steps.a.matrix.x: a value is there twice\n"
        "    hint: a run would be refused: an axis's values name its jobs, so make them distinct"
    ),
    "matrix-over-params-of-10201": "bad.yaml:7:29: error: steps.a.matrix: more than 10000",
    "foreach-over-a-param-of-10001": "bad.yaml:7:38: error: steps.a.foreach.items: 10001 items",
    "a-param-default-over-the-payload-limit": "bad.yaml:7:27: error: step 'a': Arg \"data\" is 600",
    "cron-range-backwards": (
        "bad.yaml:4:18: error: '30-10 * * * *': minute field: the range 30-10 runs backwards "
        "(a range does not wrap around)\n    hint: write it as two ranges: 30-59,0-10"
    ),
    "cron-hour-range-backwards": "bad.yaml:4:32: error: '* 5-2 * * *': hour field: the range",
}


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_flows_run_refuses_a_bad_file_and_changes_nothing(
    name: str, cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    text, expected = CASES[name]
    path = _write(tmp_path / "bad.yaml", text)
    with assert_unchanged(populated.redis):
        result = cli.invoke(main, ["run", str(path), "--detach"])
    assert result.exit_code == 1, result.output
    assert expected.lower() in result.output.lower(), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", list(CASES))
def test_flows_validate_reports_a_bad_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything flows run refuses, flows validate reports (with the same words)."""
    text, expected = CASES[name]
    _write(tmp_path / "bad.yaml", text)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["validate", "bad.yaml"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert expected.lower() in result.output.lower(), result.output
    if name in PLACES:
        assert PLACES[name] in result.output, result.output
    if name in SINGLE:
        assert "1 error in 1 file" in result.output and len(result.output) < 600, result.output


def test_bad_params_are_refused_and_change_nothing(
    cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        HEAD + "params:\n  day: {type: date}\n  n: {type: int, default: 1}\n"
        "  r: {type: number, default: 0.5}\n"
        "steps:\n  a: {job: tasks.a, with: {d: '${{ params.day }}', n: '${{ params.n }}'}}\n"
    )
    for args, expected in [
        (["-p", "day=not-a-date"], "day"),
        (["-p", "day=2026-01-01", "-p", "n=NaN"], "n"),
        (["-p", "day=2026-01-01", "-p", "n=1e999"], "n"),
        (["-p", "day=2026-01-01", "-p", "r=nan"], "param 'r': NaN, which is no JSON number"),
        (["-p", "day=2026-01-01", "-p", "r=1e999"], "param 'r': a number past what JSON"),
        (["-p", "day=2026-01-01", "-p", "unknown=1"], "unknown"),
        (["-p", "noequals"], "noequals"),
        ([], "day"),  # required, no default
    ]:
        with assert_unchanged(populated.redis):
            result = cli.invoke(main, ["run", str(path), "--detach", *args])
        assert result.exit_code in (1, 2), (args, result.output)
        assert expected in result.output, (args, result.output)


def test_a_typo_in_a_step_that_another_step_reads_gives_findings_not_a_crash(
    tmp_path: Path,
) -> None:
    from flows.validation.validate import validate_file

    path = tmp_path / "typo.yaml"
    path.write_text(
        "version: 1\nname: typo\nsteps:\n"
        "  extract:\n    rnu: echo rows=3 >> $FLOWS_OUTPUT\n    outputs: [rows]\n"
        "  load:\n    run: echo ${{ steps.extract.outputs.rows }}\n"
    )
    messages = [f.message for f in validate_file(path).findings]
    assert "unknown key 'rnu' in steps.extract" in messages
    assert "step 'load' reads steps.extract.outputs but does not depend on 'extract'" in messages


def test_validating_a_parent_counts_its_sub_flows_file_and_findings(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text(
        "version: 1\nname: parent\nsteps:\n  child:\n    flow: child.yaml\n"
    )
    (tmp_path / "child.yaml").write_text("version: 1\nname: child\nsteps:\n  a:\n    rnu: x\n")
    parent = str(tmp_path / "parent.yaml")
    result = CliRunner().invoke(main, ["validate", parent])
    assert result.exit_code == 1
    assert f"{tmp_path / 'child.yaml'}:5:5: error: unknown key 'rnu' in steps.a" in result.output
    assert result.output.splitlines()[-1] == "2 errors in 2 files"
    report = json.loads(CliRunner().invoke(main, ["validate", parent, "--format", "json"]).output)
    assert report["files"] == [parent, str(tmp_path / "child.yaml")]
    assert report["errors"] == 2


def test_a_flow_file_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    """A pull request's files are read by CI's `flows validate flows/*.yaml`: one that is a
    pipe or a link to a device is refused, not read (a pipe would block it forever, /dev/zero
    fill its memory)."""
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    named = [str(tmp_path / name) for name in ("pipe.yaml", "zero.yaml")]
    done = subprocess.run(
        [str(Path(sys.executable).with_name("flows")), "validate", *named],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    for path in named:
        assert f"{path}:1:1: error: the file is not a regular file" in done.stdout
