"""Flow test cases on the virtual clock: stubs per attempt (exit codes, durations past the
timeout, skips), a real step stopped at its timeout, retry delays passed without waiting, a wait
that nobody signals, and params the flow refuses, each reported, never raised."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from textwrap import dedent

import redis
from helpers import assert_unchanged

from flows.cli.preview import build
from flows.runs.build import read_flow_file
from flows.runs.service_source import definition_of
from flows.testing.session import private_server, run_files
from flows.validation.validate import validate_file
from scheduler.cron.preview import parse_period

FLOW = """\
version: 1
name: steps
params:
  n: {type: int, default: 1}
steps:
  slow:
    run: sleep 30
    timeout: 1s
    retry: {attempts: 2, delay: 10m, max_delay: 1h, jitter: 0}
  flaky:
    run: echo flaky
    timeout: 5m
    retry: {attempts: 3, delay: 1m, backoff: fixed, jitter: 0}
  after:
    needs: [slow, flaky]
    trigger_rule: all_done
    run: echo after
  gate:
    wait: {signal: go}
"""


def write(tmp_path: Path, cases: str) -> Path:
    (tmp_path / "steps.yaml").write_text(FLOW)
    test = tmp_path / "steps.test.yaml"
    test.write_text("flow: steps.yaml\ncases:\n" + dedent(cases))
    return test


def test_the_private_server_keeps_neither_a_file_nor_latency_figures() -> None:
    """``flows test``'s own server: its data and figures go with it, so it writes no
    append-only file, records no latency histogram per command and keeps no slow log."""
    with private_server() as server:
        assert server.config_get("appendonly")["appendonly"] == "no"
        assert server.config_get("latency-tracking")["latency-tracking"] == "no"
        slowlog = server.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
        assert slowlog == "-1"


def test_stubs_timeouts_and_delays(redis_client: redis.Redis, tmp_path: Path) -> None:
    test = write(
        tmp_path,
        """\
        - name: mixed
          signals: {gate: {ok: true}}
          mock:
            flaky: [{exit: 3}, {duration: 10m}, {outputs: {n: 1}, duration: 2m}]
          expect:
            status: failed
            steps:
              slow: {status: failed, attempts: 2}
              flaky: {status: success, attempts: 3, outputs: {n: 1}}
              after: success
              gate: success
        """,
    )
    started = time.monotonic()
    session = run_files(redis_client, [test])
    assert session.findings == []
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None
    # The real step really ran twice (stopped at its 1 s timeout), retried after 10 min of
    # virtual time; flaky's second attempt timed out after 5 min and its retries waited 1 min.
    assert case.observed.virtual_seconds >= 600
    # on the virtual clock: far less real time passed than the case's (steps' real work only)
    assert time.monotonic() - started < case.observed.virtual_seconds / 4


def test_a_wait_nobody_signals_and_params_the_flow_refuses(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    test = write(
        tmp_path,
        """\
        - name: never signaled
          mock: all
          expect: {status: running, steps: {gate: awaiting}}
        - name: skipped by its stub
          mock: {slow: {skip: true}, flaky: {outputs: {}}}
          signals: {gate: {}}
          expect: {status: succeeded, steps: {slow: skipped}}
        """,
    )
    session = run_files(redis_client, [test])
    reports = {case.case: case for case in session.cases}
    assert reports["never signaled"].passed, reports["never signaled"].failure
    assert reports["skipped by its stub"].passed, reports["skipped by its stub"].failure
    # Params the run would refuse are the file's finding, at their place: no case runs.
    test = write(
        tmp_path,
        """\
        - name: bad params
          params: {n: many}
          expect: {status: succeeded}
        """,
    )
    session = run_files(redis_client, [test])
    assert session.cases == []
    assert [(f.line, f.col, f.message) for f in session.findings] == [
        (4, 15, "param 'n': expected an integer, got 'many'")
    ]


QUARTERLY = """\
version: 1
name: quarterly
schedule:
  cron: "*/15 * * * *"
  timezone: Europe/Berlin
steps:
  tick:
    run: echo tick
"""


def test_a_schedule_across_both_dst_nights_fires_the_exact_ticks(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Every quarter hour in Berlin: the 23-hour spring day fires 92 times (the gap's ticks are
    the 03:00 tick), the 25-hour autumn day 100 (an every-hour expression fires the repeated
    hour twice), and an outage of almost two hours under catch-up latest fires one late run."""
    (tmp_path / "quarterly.yaml").write_text(QUARTERLY)
    test = tmp_path / "quarterly.test.yaml"
    test.write_text(
        dedent(
            """\
            flow: quarterly.yaml
            cases:
              - name: spring
                schedule: {from: "2026-03-28T23:00:00Z", to: "2026-03-29T22:00:00Z"}
                mock: all
                expect: {runs: 92}
              - name: autumn
                schedule: {from: "2026-10-24T22:00:00Z", to: "2026-10-25T23:00:00Z"}
                mock: all
                expect: {runs: 100}
              - name: two hours down
                schedule:
                  from: "2026-01-10T00:00:00Z"
                  to: "2026-01-10T06:00:00Z"
                  outage: "2026-01-10T01:00:00Z/2026-01-10T02:50:00Z"
                mock: all
                expect: {runs: 17}
            """
        )
    )
    session = run_files(redis_client, [test])
    assert session.findings == []
    assert {c.case: c.failure for c in session.cases} == {
        "spring": [],
        "autumn": [],
        "two hours down": [],
    }


HOURLY = """\
version: 1
name: hourly
schedule:
  cron: "0 * * * *"
  catchup: {{policy: all}}
  overlap: {overlap}
steps:
  a:
    run: "true"
"""


def test_catch_up_meets_the_overlap_policy_as_the_service_does(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Five hours down under catch-up all: the five missed ticks fire in one tick of the
    service, so under skip the first runs and the others are skipped, under buffer_one the
    second fires when the first run ends (the service looks every second: at once here), not
    at the next fire time, and under allow all five run."""
    fired = {}
    for overlap in ("skip", "buffer_one", "allow"):
        (tmp_path / "hourly.yaml").write_text(HOURLY.format(overlap=overlap))
        test = tmp_path / "hourly.test.yaml"
        test.write_text(
            dedent(
                """\
                flow: hourly.yaml
                cases:
                  - name: five hours down
                    schedule:
                      from: "2026-03-01T00:00:00Z"
                      to: "2026-03-01T12:00:00Z"
                      outage: "2026-03-01T02:30:00Z/2026-03-01T07:30:00Z"
                    mock: all
                """
            )
        )
        [case] = run_files(redis_client, [test]).cases
        assert case.observed is not None
        fired[overlap] = [time.strftime("%H", time.gmtime(t)) for t in case.observed.ticks]
    before, after = ["00", "01", "02"], ["08", "09", "10", "11"]
    assert fired == {
        "skip": [*before, "03", *after],
        "buffer_one": [*before, "03", "04", *after],
        "allow": [*before, "03", "04", "05", "06", "07", *after],
    }


def test_an_outage_from_a_tick_misses_it_in_the_service_and_in_the_preview(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Down from 03:00 sharp: the service does not tick at 03:00, so on its return at 05:30
    catch-up fires 03:00 too, and `--after-outage` says the same (it took the tick at FROM
    for one fired before the outage)."""
    (tmp_path / "hourly.yaml").write_text(HOURLY.format(overlap="allow"))
    period = "2026-03-01T03:00:00Z/2026-03-01T05:30:00Z"
    test = tmp_path / "hourly.test.yaml"
    test.write_text(
        dedent(
            f"""\
            flow: hourly.yaml
            cases:
              - name: down from a tick
                schedule:
                  from: "2026-03-01T00:00:00Z"
                  to: "2026-03-01T07:00:00Z"
                  outage: "{period}"
                mock: all
            """
        )
    )
    [case] = run_files(redis_client, [test]).cases
    assert case.observed is not None
    fired = [time.strftime("%H", time.gmtime(t)) for t in case.observed.ticks]
    assert fired == ["00", "01", "02", "03", "04", "05", "06"]
    flow = read_flow_file(tmp_path / "hourly.yaml")
    plan = build(definition_of(flow), 0.0, None, parse_period(period)).outage
    assert plan is not None
    assert [time.strftime("%H", time.gmtime(t.instant)) for t, _ in plan.fires] == [
        "03",
        "04",
        "05",
    ]
    assert plan.missed == 3


def test_a_result_the_engine_refuses_fails_its_step_at_once_as_a_worker_does(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A step whose result the engine would refuse (a number past a double's range, Infinity
    to the engine; the runner's check refuses it first now) fails in ``bad-result`` on its
    first attempt, as under a worker; before, the refusal was taken for a lost lock and the
    step ran again when its lock ran out, retry after retry."""
    module = f"huge_{uuid.uuid4().hex[:8]}"  # imported modules are cached
    (tmp_path / f"{module}.py").write_text("def huge(job):\n    return {'value': 10**400}\n")
    (tmp_path / "huge.yaml").write_text(
        "version: 1\nname: huge\nsteps:\n"
        f"  huge:\n    job: {module}.huge\n"
        "    retry: {attempts: 3, delay: 1m, backoff: fixed, jitter: 0}\n"
    )
    test = tmp_path / "huge.test.yaml"
    test.write_text(
        "flow: huge.yaml\ncases:\n"
        "  - name: refused\n"
        "    expect: {status: failed, steps: {huge: {status: failed, attempts: 1}}}\n"
    )
    session = run_files(redis_client, [test])
    assert session.findings == []
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None
    [failure] = case.observed.failures
    assert (
        ':huge): bad-result: the job\'s result cannot be stored: Complete(): Arg "result" at '
        "value: an integer of the order of 1e400, past what JSON readers hold"
    ) in failure


REFUSED_TASKS = """\
from scheduler.worker import ReleaseJob, RetryJob


def bad_release(job):
    raise ReleaseJob(delay=-5)


def bad_delay(job):
    raise RetryJob("try again", delay=-1)
"""


def test_an_outcome_the_engine_refuses_fails_its_step_at_once_as_a_worker_does(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A step that releases itself and one that retries, each with a negative delay: each
    report is refused for what it says, not for a lost lock, and
    the step fails in ``bad-outcome`` on its first attempt, the case's failure saying what the
    engine refused and why, as under a worker. Before, the driver took the refusal for a lost
    lock: the job stayed running until its lock ran out and ran again, to be refused again,
    and the case said its worker was lost."""
    module = f"refused_{uuid.uuid4().hex[:8]}"  # imported modules are cached
    (tmp_path / f"{module}.py").write_text(REFUSED_TASKS)
    (tmp_path / "refused.yaml").write_text(
        "version: 1\nname: refused\nsteps:\n"
        f"  release:\n    job: {module}.bad_release\n"
        f"  retry:\n    job: {module}.bad_delay\n"
        "    retry: {attempts: 3, delay: 1m, backoff: fixed, jitter: 0}\n"
    )
    test = tmp_path / "refused.test.yaml"
    test.write_text(
        "flow: refused.yaml\ncases:\n"
        "  - name: refused\n"
        "    expect:\n"
        "      status: failed\n"
        "      steps:\n"
        "        release: {status: failed, attempts: 1}\n"
        "        retry: {status: failed, attempts: 1}\n"
    )
    session = run_files(redis_client, [test])
    assert session.findings == []
    [case] = session.cases
    assert case.passed, case.failure
    assert case.observed is not None
    failures = sorted(case.observed.failures)
    assert len(failures) == 2
    assert ":release): bad-outcome: the job's release was refused: Release(): " in failures[0]
    assert '"delay"' in failures[0]
    assert ":retry): bad-outcome: the job's retry was refused: Retry(): " in failures[1]
    assert '"delay"' in failures[1]


def test_a_job_handed_over_by_its_own_call_reports_nothing(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A sub-flow step's job ends once its child run is started: the call that starts it hands
    the job over, and no report is sent. The driver counted it as a report all the same, and
    the round trip's replies no longer matched its reports: the case could not run
    (``zip() argument 2 is shorter than argument 1``)."""
    (tmp_path / "child.yaml").write_text(
        "version: 1\nname: child\nparams:\n  n: {type: int}\nsteps:\n"
        '  double:\n    run: echo "twice=$((N * 2))" >> "$FLOWS_OUTPUT"\n'
        '    env: {N: "${{ params.n }}"}\n'
        'outputs:\n  twice: "${{ steps.double.outputs.twice }}"\n'
    )
    (tmp_path / "parent.yaml").write_text(
        "version: 1\nname: parent\nsteps:\n"
        "  sub:\n    flow: child.yaml\n    with: {n: 21}\n    outputs: [twice]\n"
        "  publish:\n    needs: [sub]\n"
        '    run: echo "total=${{ steps.sub.outputs.twice }}" >> "$FLOWS_OUTPUT"\n'
    )
    test = tmp_path / "parent.test.yaml"
    test.write_text(
        "flow: parent.yaml\ncases:\n"
        "  - name: handed over\n"
        "    expect:\n"
        "      status: succeeded\n"
        "      steps:\n"
        "        sub: {status: success, outputs: {twice: 42}}\n"
        "        publish: {status: success, outputs: {total: 42}}\n"
    )
    session = run_files(redis_client, [test])
    assert session.findings == []
    [case] = session.cases
    assert case.passed, case.failure


def test_a_hook_is_stubbed_and_expected_by_its_name(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A flow's hooks run as jobs of the run, so a case must be able to stub one (a hook that
    posts to a chat must not post from CI) and to expect it. Its name was 'not a step of the
    flow' in mock:, expect: and order: alike, and only `mock: all` kept it from running."""
    posted = tmp_path / "posted"
    flow = (
        "version: 1\nname: hooked\nsteps:\n  load: {run: exit 3}\n"
        f"hooks:\n  on_failure: {{run: touch {posted}}}\n  finally: {{run: 'true'}}\n"
    )
    case = (
        "  - name: the alert is stubbed\n"
        "    mock: {on_failure: {outputs: {sent: 1}}}\n"
        "    expect:\n"
        "      status: failed\n"
        "      steps: {on_failure: {status: success, outputs: {sent: 1}}, finally: success}\n"
        "      order: [load, on_failure]\n"
    )
    (tmp_path / "hooked.yaml").write_text(flow)
    test = tmp_path / "hooked.test.yaml"
    test.write_text("flow: hooked.yaml\ncases:\n" + case)
    own = tmp_path / "own.yaml"
    own.write_text(flow.replace("name: hooked", "name: own") + "tests:\n" + case)
    session = run_files(redis_client, [test, own])
    assert session.findings == []
    assert {c.nodeid: c.failure for c in session.cases} == {
        f"{test}::the alert is stubbed": [],
        f"{own}::the alert is stubbed": [],
    }
    assert not posted.exists()


CHILD = """\
version: 1
name: report
params:
  orders: {type: int, default: 3}
steps:
  count:
    run: echo "total=$(( ${{ params.orders }} * 10 ))" >> "$FLOWS_OUTPUT"
    outputs: [total]
  sign:
    needs: [count]
    wait: {signal: signed}
    outputs: [by]
  summary:
    needs: [sign]
    run: echo "summary ${{ steps.count.outputs.total }} by ${{ steps.sign.outputs.by }}"
outputs:
  total: "${{ steps.count.outputs.total }}"
"""

PARENT = """\
version: 1
name: parent
steps:
  orders:
    run: echo "count=4" >> "$FLOWS_OUTPUT"
    outputs: [count]
  report:
    flow: report.yaml
    with: {orders: "${{ steps.orders.outputs.count }}"}
    needs: [orders]
  again:
    flow: report.yaml
    needs: [report]
outputs:
  total: "${{ steps.report.outputs.total }}"
"""


def parent_test(tmp_path: Path, cases: str) -> Path:
    """A test file of PARENT (beside its child, CHILD) with ``cases`` (indented as written)."""
    (tmp_path / "report.yaml").write_text(CHILD)
    (tmp_path / "parent.yaml").write_text(PARENT)
    test = tmp_path / "parent.test.yaml"
    test.write_text("flow: parent.yaml\ncases:\n" + dedent(cases))
    return test


def test_a_child_runs_steps_are_stubbed_signaled_and_expected_by_their_labels(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A sub-flow step's child run has steps of its own: a case names them as `flows logs`
    labels them (`report/count`). They were 'not a step of the flow': a case could only stub
    the whole sub-flow step, or let every child step really run."""
    test = parent_test(
        tmp_path,
        """\
              - name: the child's count stubbed
                mock:
                  report/count: {outputs: {total: "99"}}
                  again/count: {outputs: {total: "1"}}
                signals:
                  report/sign: {by: ann}
                  again/sign: {by: bob}
                expect:
                  status: succeeded
                  outputs: {total: "99"}
                  steps:
                    report/count: {status: success, attempts: 1, outputs: {total: "99"}}
                    report/sign: {status: success, outputs: {by: ann}}
                    report/summary: success
                    again/summary: success
                    again: success
                  order: [orders, report, report/count, report/summary, again, again/count]
              - name: the child's count fails
                mock:
                  report/count: [{exit: 3}]
                expect:
                  status: failed
                  steps: {report/count: failed, report/summary: upstream_failed, report: failed}
              - name: a changed expectation of a child step fails
                mock: {report/count: {outputs: {total: "99"}}}
                signals: {report/sign: {by: ann}}
                expect:
                  steps: {report/summary: failed}
        """,
    )
    session = run_files(redis_client, [test])
    assert session.findings == []
    failures = {c.nodeid.rpartition("::")[2]: c.failure for c in session.cases}
    assert failures["the child's count stubbed"] == []
    assert failures["the child's count fails"] == []
    diff = "\n".join(failures["a changed expectation of a child step fails"])
    assert "report/summary" in diff and "failed" in diff and "success" in diff


def test_a_child_steps_label_with_a_mistake_is_a_finding(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    test = parent_test(
        tmp_path,
        """\
              - name: mistakes
                mock: {report/cuont: {exit: 1}, report/sign: {outputs: {by: x}}}
                signals: {report/summary: {}}
                expect:
                  steps: {again/count: success, report/count: {outputs: {totl: 1}}}
        """,
    )
    with assert_unchanged(redis_client):
        session = run_files(redis_client, [test])
    said = [(f.line, f.message, f.hint) for f in session.findings]
    assert said == [
        (4, "'report/cuont' is not a step of the flow", "did you mean 'report/count'?"),
        (
            4,
            "'report/sign' is a wait step: it takes a signal, not a stub",
            "give its data under signals: {report/sign: {...}}",
        ),
        (
            5,
            "'report/summary' is not a wait step: only a step with wait: takes a signal",
            "wait steps: again/sign, report/sign",
        ),
        (7, "'totl' is not an output of step 'report/count'", "did you mean 'total'?"),
    ]


def test_a_flows_own_tests_name_a_child_runs_steps_as_a_test_file_does(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    (tmp_path / "report.yaml").write_text(CHILD)
    own = tmp_path / "parent.yaml"
    own.write_text(
        PARENT
        + "tests:\n"
        + "  - name: stubbed\n"
        + "    mock: {report/count: {outputs: {total: '7'}}, again: {outputs: {total: '1'}}}\n"
        + "    signals: {report/sign: {by: ann}}\n"
        + "    expect: {outputs: {total: '7'}, steps: {report/summary: success}}\n"
        + "  - name: a mistake\n"
        + "    mock: {report/cuont: {exit: 1}}\n"
    )
    assert [f.message for f in validate_file(own).findings] == [
        "'report/cuont' is not a step of the flow"
    ]
    own.write_text(own.read_text().rsplit("  - name: a mistake", 1)[0])
    assert validate_file(own).findings == []
    [case] = run_files(redis_client, [own]).cases
    assert case.failure == []
