"""Bad command-line arguments: a clear one-line error (usage errors exit 2, refused values 1),
never a traceback, and not one key of the namespace changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_unchanged
from refusal_support import refused

from flows.cli import main
from scheduler.engine.client import Client

LONG = "j" * 257

# (arguments, a piece of the error message); "{flow}" is a valid flow file, "{dir}" a folder,
# "{binary}" a file that is not UTF-8 text.
CASES: list[tuple[list[str], str]] = [
    (["job", "a b"], "a b"),
    (["job", ""], "job id is empty"),
    (["job", LONG], "256"),
    (["job", "x-history"], "reserved"),
    (["job", "nul\x01l"], "control"),
    (["cancel", "a b"], "a b"),
    (["cancel", "waiting", "x-history"], "no job or run 'x-history'"),
    (["retry", "a b"], "a b"),
    (["retry", "no-such-run-or-job"], "no-such-run-or-job"),
    (["unfail", "boom", "-q", "a b"], "queue"),
    (["unfail", "a b", "-q", "q"], "group"),
    (["unfail", "boom", "-q", "q", "--count", "-1"], "count"),
    (["unfail", "boom", "-q", "q", "--count", "nan"], "count"),
    (["failed", "a b"], "group"),
    (["jobs", "--state", "bogus"], "bogus"),
    (["jobs", "--queue", "a b"], "queue"),
    (["jobs", "--limit", "0"], "limit"),
    (["jobs", "--limit", "inf"], "limit"),
    (["queues", "--bogus"], "bogus"),
    (["runs", "--limit", "-5"], "-5"),
    (["runs", "--limit", "nan"], "nan"),
    (["status", "a b"], "a b"),
    (["worker", "-q", ""], "queue"),
    (["worker", "-q", "q", "--threads", "0"], "threads"),
    (["worker", "-q", "q", "--processes", "-1"], "processes"),
    (["worker", "-q", "q", "--processes", "100000"], "100000 is not in the range 0<=x<=1024"),
    (["worker", "-q", "q", "--strategy", "random"], "random"),
    (["worker", "-q", "q", "--shutdown-grace", "nan"], "finite"),
    (["worker", "-q", "q", "--shutdown-grace", "inf"], "finite"),
    (["worker", "-q", "q", "--shutdown-grace", "-1"], "shutdown-grace"),
    (["run", "{flow}", "--threads", "0", "--detach"], "threads"),
    (["run", "missing.yaml"], "missing.yaml"),
    (["run", "{flow}", "-p", "noequals"], "noequals"),
    (["run", "{flow}", "--redis", "ftp://host"], "unsupported Redis URL"),
    (["run", "{flow}", "--redis", "redis://host:notaport"], "invalid Redis URL"),
    (["run", "{flow}", "--namespace", "a b"], "namespace"),
    (["scheduler", "--flows-dir", "missing-folder"], "missing-folder"),
    (["scheduler"], "--flows-dir"),
    (["scheduler", "--flows-dir", "{dir}", "--now", "1"], "--once"),
    (["scheduler", "--flows-dir", "{dir}", "--once", "--now", "nan"], "finite"),
    (["scheduler", "--flows-dir", "{dir}", "--once", "--now", "-inf"], "now"),
    (["scheduler", "--flows-dir", "{dir}", "--tick-interval", "nan"], "finite"),
    (["scheduler", "--flows-dir", "{dir}", "--tick-interval", "0"], "tick-interval"),
    (["schedule", "pause", "no-such-schedule"], "no-such-schedule"),
    (["schedule", "show", "nightly", "--skips", "1000"], "skips"),
    (["server", "start", "--appendfsync", "sometimes"], "sometimes"),
    (["worker", "-q", "q", "--namespace", "a,,b"], "distinct, non-empty namespaces"),
    (["worker", "-q", "q", "--namespace", "a,a"], "distinct, non-empty namespaces"),
    (["scheduler", "--flows-dir", "{dir}", "--namespace", "a,"], "distinct, non-empty"),
    (["queues", "--redis", "redis+sentinel://127.0.0.1:26379"], "/<service name>"),
    (["queues", "--redis", "redis+cluster://127.0.0.1:port"], "host:port, got '127.0.0.1:port'"),
    (["queues", "--redis", "redis+cluster://:secret@127.0.0.1:0"], "host:port"),
    (["queues", "--redis", "redis://127.0.0.1:1/0?wait=many"], "wait=<replicas"),
    (["queues", "--redis", "redis://127.0.0.1:1/0?wait=1&wait_timeout=0"], "wait_timeout"),
    (["run", "{flow}", "--run-id", "evil/../good", "--detach"], 'may not hold "/"'),
    (["run", "{flow}", "--run-id", "..", "--detach"], 'nor be "." or ".."'),
    (["run", "{flow}", "--run-id", "csi\u009b2J", "--detach"], "control character"),
    (["job", "x/../../runs/r"], 'may not hold "/"'),
    (["ui", "--port", "0", "--log-level", "LOUD"], "'LOUD' is not a log level"),
    (["scheduler", "--flows-dir", "{dir}", "--once", "--log-level", "LOUD"], "not a log level"),
    (["ui", "--port", "0", "--token-file", "{binary}"], "is not UTF-8 text"),
    (["worker", "-q", "q", "--metrics-port", "1", "--metrics-token-file", "{binary}"], "not UTF-8"),
    (["scheduler", "--flows-dir", "{dir}", "--once", "--id", "a\x1b[2J"], "--id"),
    (["scheduler", "--flows-dir", "{dir}", "--once", "--source", "a\x1b[2J"], "control"),
    (["scheduler", "--health", "--id", "a\x07"], "service id 'a\\x07' contains white"),
    (["worker", "-q", "q", "--name", "my worker"], "worker name 'my worker' contains white"),
    (["throttle", "set", "a b", "3"], "throttle name 'a b'"),
    (["throttle", "unset", "a b"], "throttle name 'a b'"),
    (["queues", "--namespace", "n" * 300], "--namespace': namespace is 300 bytes"),
    (["queues", "--namespace", "a\x1b[2J"], "namespace 'a\\x1b[2J' contains white space"),
    (["queues", "--namespace", "n" * 255], "its key prefix ({NAME}:) is 258 bytes"),
    (["schedule", "show", "a b"], "schedule name 'a b' contains white space"),
    (["schedule", "trigger", "a\x1b[2J"], "schedule name 'a\\x1b[2J' contains white space"),
    (["backfills", "a b"], "backfill id 'a b' contains white space"),
    (["cancel", "--backfill", "a b"], "backfill id 'a b' contains white space"),
    (["runs", "--flow", "a b"], "flow name 'a b' contains white space"),
    (["backfill", LONG * 2, "--from", "2020-01-01", "--to", "2020-01-02"], "no such file"),
]


@pytest.mark.parametrize("args", [c[0] for c in CASES], ids=[" ".join(c[0])[:40] for c in CASES])
def test_bad_arguments_are_refused_clearly_and_change_nothing(
    args: list[str], cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    expected = dict((tuple(a), e) for a, e in CASES)[tuple(args)]
    flow = tmp_path / "good.yaml"
    flow.write_text("version: 1\nname: good\nqueue: q\nsteps:\n  a: {job: tasks.a}\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" * 16)
    places = {"{flow}": flow, "{dir}": tmp_path, "{binary}": binary}
    argv = [str(places.get(a, a)) for a in args]
    output = refused(cli, populated.redis, argv, (1, 2))
    assert expected.lower() in output.lower(), output
    assert len(output.splitlines()) <= 12, output


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (["dya=1", "who=a"], "unknown param 'dya' (did you mean 'day'?)"),
        (["count=abc", "who=a"], "param 'count': expected an integer, got 'abc'"),
        (["day=x"], "missing required param 'who' (give it with -p who=...)"),
        (
            ["who=a\udcffb"],
            "param 'who': text with a lone surrogate (\"a\\udcffb\"), which is not UTF-8 text",
        ),
    ],
)
def test_plan_and_run_answer_a_bad_param_alike(
    assignments: list[str], message: str, cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    flow = tmp_path / "p.yaml"
    flow.write_text(
        "version: 1\nname: p\nqueue: q\n"
        "params:\n  day: {type: string, default: x}\n  count: {type: int, default: 1}\n"
        "  who: {type: string}\n"
        "steps:\n  a: {run: echo hi}\n"
    )
    given = [part for assignment in assignments for part in ("-p", assignment)]
    answers = []
    for extra in (["plan"], ["run", "--detach"]):
        with assert_unchanged(populated.redis):
            result = cli.invoke(main, [*extra, str(flow), *given])
        answers.append((result.exit_code, result.output.splitlines()[-1]))
    assert answers[0] == answers[1] == (2, f"Error: Invalid value for '-p': {message}")


HUGE = "x" * 100_000


@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "--limit", HUGE],
        ["explain", "waiting", HUGE],
        ["cache", "clear", HUGE],
        ["sources", "remove", HUGE],
    ],
    ids=lambda args: " ".join(args)[:30],
)
def test_a_huge_value_is_quoted_cut_short(
    args: list[str], cli: CliRunner, populated: Client
) -> None:
    """A value pasted by mistake (a file's content) is not echoed whole: the error stays a line
    to read, however long what was typed."""
    output = refused(cli, populated.redis, args, (1, 2))
    assert len(output) < 2500, output[:300]
    assert "more characters" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Each of 11 processes gets its name with ".<index>": "w" * 254 + ".10" is 257 bytes.
        (
            ["worker", "-q", "q", "--name", "w" * 254, "--processes", "11"],
            "'--name': worker name is 257 bytes, more than the limit of 256 bytes "
            "(with the '.10' the last of 11 processes adds)",
        ),
        (
            ["worker", "-q", "q", "--name", "w" * 256, "--processes", "2"],
            "'--name': worker name is 258 bytes",
        ),
        (
            ["worker", "-q", "q", "--prepare", "nope.module"],
            "'--prepare': 'nope.module' is not of the form module:function",
        ),
        (["worker", "-q", "q", "--prepare", ":prepare"], "not of the form module:function"),
        (["worker", "-q", "q", "--prepare", "hooks:"], "not of the form module:function"),
    ],
)
def test_a_worker_refuses_at_start_what_its_processes_would_stop_over(
    args: list[str], message: str, cli: CliRunner, populated: Client
) -> None:
    """A name its processes' suffixes push past the limit, or a hook not named module:function,
    is a usage error before any process starts, not a pool whose processes stop."""
    output = refused(cli, populated.redis, args, (2,))
    assert message in output, output
    assert len(output.splitlines()) <= 4, output


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("x" * 5000, "expected an integer, got '" + "x" * 40 + "'... (5,000 characters)"),
        ("9" * 5000, "an integer of 5,000 digits, past what JSON readers hold"),
    ],
)
def test_a_long_param_value_is_quoted_short_with_its_length(
    value: str, says: str, cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    """It was echoed whole (up to the 2,000 characters of an error's line); an integer past
    what Python reads from text was "expected an integer"."""
    flow = tmp_path / "p.yaml"
    flow.write_text(
        "version: 1\nname: p\nqueue: q\nparams:\n  n: {type: int, default: 1}\n"
        "steps:\n  a: {run: echo hi}\n"
    )
    for command in (["plan"], ["run", "--detach"]):
        output = refused(cli, populated.redis, [*command, str(flow), "-p", f"n={value}"], (2,))
        assert f"param 'n': {says}" in output, output
        assert len(output) < 400, output
