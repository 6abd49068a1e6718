"""``wait:`` steps: validation (findings at line:col), expansion into a job spec, signal data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from flows_support import check, valid

from flows.expand.jobs import expand
from flows.expand.run_specs import compact_json
from flows.flowfile.dag import to_mermaid
from flows.flowfile.job_data import META_KEY, WAIT_KLASS
from flows.runs.signals import SignalRefused, approval, parse_data

GOOD = """\
version: 1
name: gate
queue: q
steps:
  child: {run: echo}
  approve:
    wait: {signal: approve, timeout: 1d, on_timeout: fail}
    needs: [child]
    outputs: [note]
  ship:
    needs: [approve]
    run: ./ship.sh "${{ steps.approve.outputs.note }}"
"""


def test_a_wait_step_validates_and_expands_into_a_job_no_worker_runs() -> None:
    flow = valid(GOOD)
    wait = flow.steps["approve"].wait
    assert wait is not None and (wait.signal, wait.timeout, wait.on_timeout) == (
        "approve",
        86400.0,
        "fail",
    )
    puts = expand(flow, run_id="r", logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    approve = next(p for p in puts if p.step == "approve")
    spec = approve.to_engine(compact_json)
    assert spec["klass"] == WAIT_KLASS
    assert spec["depends"] == ["r:child"]
    assert spec["wait"] == {
        "signal": "approve",
        "timeout": 86400.0,
        "on_timeout": "fail",
        "outputs": ["note"],
    }
    assert approve.data[META_KEY]["kind"] == "wait"
    assert "ttr" not in spec and "ttl" not in spec and "delay" not in spec
    ship = next(p for p in puts if p.step == "ship")
    assert ship.depends == ("r:approve",)
    assert ship.data[META_KEY]["upstream"] == {"approve": {"jids": ["r:approve"], "foreach": False}}
    assert "approve (wait for signal approve)" in to_mermaid(flow)


def test_a_wait_without_timeout_or_needs_is_fine_and_ignores_the_defaults() -> None:
    flow = valid(
        """\
        version: 1
        name: gate
        defaults: {ttl: 1h, heartbeat: 30s, timeout: 5m, retry: {attempts: 3}}
        steps:
          gate: {wait: {signal: go}}
        """
    )
    (put,) = expand(flow, run_id="r", logical_time=datetime(2026, 1, 1, tzinfo=UTC))
    spec = put.to_engine(compact_json)
    assert spec["wait"] == {"signal": "go", "on_timeout": "fail"}
    assert "ttl" not in spec and "ttr" not in spec and spec["retries"] == 0


BAD = [
    (
        "steps:\n  w:\n    wait: {signal: go}\n    run: echo\n",
        "wait-with-action",
        (4, 3),
        "a 'wait' step has no 'run'",
    ),
    (
        "steps:\n  w:\n    job: tasks.a\n    wait: {signal: go}\n",
        "wait-with-action",
        (4, 3),
        "a 'wait' step has no 'job'",
    ),
    ("steps:\n  w:\n    wait: {signal: 'not an id'}\n", "bad-format", (5, 20), "'not an id'"),
    ("steps:\n  w:\n    wait: {signal: go, timeout: soon}\n", "duration", (5, 33), "soon"),
    ("steps:\n  w:\n    wait: {signal: go, timeout: 0}\n", None, (5, 33), "must be > 0"),
    (
        "steps:\n  w:\n    wait: {signal: go, on_timeout: explode}\n",
        None,
        (5, 36),
        "fail, skip",
    ),
    ("steps:\n  w:\n    wait: {}\n", None, (5, 5), "signal"),
    ("steps:\n  w:\n    wait: {signal: go, colour: red}\n", None, (5, 24), "colour"),
    (
        "steps:\n  w:\n    wait: {signal: go}\n    retry: {attempts: 3}\n    if: 'true'\n",
        "wait-only",
        (4, 3),
        "'retry', 'if' do not apply to a 'wait' step",
    ),
    (
        "steps:\n  w:\n    wait: {signal: go}\n    foreach: {items: [1, 2]}\n",
        "wait-only",
        (4, 3),
        "'foreach' does not apply",
    ),
    (
        "steps:\n  w:\n    wait: {signal: go}\n    outputs: [note]\n"
        "  b:\n    needs: [w]\n    run: echo ${{ steps.w.outputs.nope }}\n",
        None,
        (9, 15),
        "declares no output 'nope'",
    ),
]


@pytest.mark.parametrize(("body", "code", "where", "words"), BAD)
def test_bad_waits_are_reported_at_their_line_and_col(
    body: str, code: str | None, where: tuple[int, int], words: str
) -> None:
    findings = [f for f in check("version: 1\nname: x\n" + body) if f.severity == "error"]
    assert len(findings) == 1, "\n".join(f.format() for f in findings)
    (finding,) = findings
    assert (finding.line, finding.col) == where, finding.format()
    assert words in finding.message, finding.format()
    if code is not None:
        assert finding.code == code


def test_approval_data_and_signal_data_text() -> None:
    assert approval(None, "ada") == {"note": "", "approved_by": "ada"}
    assert approval("ok", "ada") == {"note": "ok", "approved_by": "ada"}
    assert parse_data('{"note": "x", "n": 1}') == {"note": "x", "n": 1}
    for text in ("[1]", '"x"', "{", "NaN", '{"n": NaN}'):
        with pytest.raises(SignalRefused, match="--data"):
            parse_data(text)
