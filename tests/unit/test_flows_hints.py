"""Every kind of hint ``flows validate`` gives, applied: the file it gives has that finding gone
and no new one. Each case is a file with one problem, the hint it must get, and the file with
the hint applied as a user would."""

from __future__ import annotations

from textwrap import dedent
from typing import NamedTuple

import pytest
from flows_support import check


class Case(NamedTuple):
    code: str
    hint: str  # the hint given, exactly
    bad: str
    fixed: str  # ``bad`` with the hint applied


HEAD = "version: 1\nname: x\n"

CASES = {
    "unknown need, close to a step": Case(
        "unknown-need",
        "did you mean 'flaky'?",
        "steps:\n  flaky: {run: 'true'}\n  b: {run: 'true', needs: [flakey]}\n",
        "steps:\n  flaky: {run: 'true'}\n  b: {run: 'true', needs: [flaky]}\n",
    ),
    "reference to a step not needed, next to a misspelled need": Case(
        "template",
        "add it to needs: needs: [count, flaky]",
        "steps:\n  count: {run: 'true'}\n  flaky: {run: 'true'}\n"
        "  b: {run: 'echo ${{ steps.flaky.status }}', needs: [count, flakey]}\n",
        "steps:\n  count: {run: 'true'}\n  flaky: {run: 'true'}\n"
        "  b: {run: 'echo ${{ steps.flaky.status }}', needs: [count, flaky]}\n",
    ),
    "reference to a step that runs after the reader": Case(
        "template",
        "a step reads only steps that run before it: remove the reference, or read it in a step "
        "that needs 'b'",
        "steps:\n  a: {run: 'echo ${{ steps.b.outputs.x }}'}\n  b: {run: 'true', needs: [a]}\n",
        "steps:\n  a: {run: 'echo'}\n  b: {run: 'true', needs: [a]}\n",
    ),
    "step needing itself": Case(
        "self-need",
        "remove 'a' from its needs",
        "steps:\n  a: {run: 'true', needs: [a]}\n",
        "steps:\n  a: {run: 'true', needs: []}\n",
    ),
    "cycle": Case(
        "cycle",
        "'a -> b' reads 'a needs b'; remove one of these needs",
        "steps:\n  a: {run: 'true', needs: [b]}\n  b: {run: 'true', needs: [a]}\n",
        "steps:\n  a: {run: 'true', needs: [b]}\n  b: {run: 'true'}\n",
    ),
    "unknown param": Case(
        "template",
        "did you mean 'date'?",
        "params: {date: {type: date}}\nsteps:\n  a: {run: 'echo ${{ params.dte }}'}\n",
        "params: {date: {type: date}}\nsteps:\n  a: {run: 'echo ${{ params.date }}'}\n",
    ),
    "unknown run field": Case(
        "template",
        "did you mean 'logical_date'?",
        "steps:\n  a: {run: 'echo ${{ run.logical_day }}'}\n",
        "steps:\n  a: {run: 'echo ${{ run.logical_date }}'}\n",
    ),
    "unknown root": Case(
        "template",
        "did you mean 'params'?",
        "params: {d: {type: string}}\nsteps:\n  a: {run: 'echo ${{ param.d }}'}\n",
        "params: {d: {type: string}}\nsteps:\n  a: {run: 'echo ${{ params.d }}'}\n",
    ),
    "unknown step field": Case(
        "template",
        "did you mean 'outputs'?",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'echo ${{ steps.a.output.x }}', needs: [a]}\n",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'echo ${{ steps.a.outputs.x }}', needs: [a]}\n",
    ),
    "misspelled declared output": Case(
        "template",
        "did you mean 'csv'?",
        "steps:\n  a: {run: 'true', outputs: [csv, rows]}\n"
        "  b: {run: 'echo ${{ steps.a.outputs.cvs }}', needs: [a]}\n",
        "steps:\n  a: {run: 'true', outputs: [csv, rows]}\n"
        "  b: {run: 'echo ${{ steps.a.outputs.csv }}', needs: [a]}\n",
    ),
    "undeclared output": Case(
        "template",
        "add 'uri' to steps.a.outputs (declared: csv)",
        "steps:\n  a: {run: 'true', outputs: [csv]}\n"
        "  b: {run: 'echo ${{ steps.a.outputs.uri }}', needs: [a]}\n",
        "steps:\n  a: {run: 'true', outputs: [csv, uri]}\n"
        "  b: {run: 'echo ${{ steps.a.outputs.uri }}', needs: [a]}\n",
    ),
    "unknown key": Case(
        "unknown-key",
        "did you mean 'needs'?",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'true', need: [a]}\n",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'true', needs: [a]}\n",
    ),
    "misspelled duration": Case(
        "duration",
        "did you mean '5m'?",
        "steps:\n  a: {run: 'true', timeout: 5 min}\n",
        "steps:\n  a: {run: 'true', timeout: 5m}\n",
    ),
    "cwd reading a step": Case(
        "template",
        "pass the value through env instead",
        "steps:\n  a: {run: 'true'}\n"
        "  b: {run: 'ls', needs: [a], cwd: '${{ steps.a.outputs.d }}'}\n",
        "steps:\n  a: {run: 'true'}\n"
        "  b: {run: 'ls \"$D\"', needs: [a], env: {D: '${{ steps.a.outputs.d }}'}}\n",
    ),
    "reserved env name": Case(
        "reserved-env",
        "rename the variable",
        "steps:\n  a: {run: 'true', env: {FLOWS_X: '1'}}\n",
        "steps:\n  a: {run: 'true', env: {X: '1'}}\n",
    ),
    "with on a shell step": Case(
        "job-only",
        "move the values into 'env' (or into the command)",
        "steps:\n  a: {run: 'true', with: {x: 1}}\n",
        "steps:\n  a: {run: 'true', env: {x: '1'}}\n",
    ),
    "both run and job": Case(
        "both-actions",
        "keep 'run' for a shell command or 'job' for a Python callable",
        "steps:\n  a: {run: 'true', job: m.f}\n",
        "steps:\n  a: {run: 'true'}\n",
    ),
    "step reading its own outputs": Case(
        "template",
        "a step can only read upstream steps",
        "steps:\n  a: {run: 'echo ${{ steps.a.outputs.x }}'}\n",
        "steps:\n  a: {run: 'echo'}\n",
    ),
    "foreach items over the outputs of a step not needed": Case(
        "foreach-items",
        "add it to needs: needs: [a]",
        "steps:\n  a: {run: 'true'}\n"
        "  b: {run: 'true', foreach: {items: '${{ steps.a.outputs.list }}'}}\n",
        "steps:\n  a: {run: 'true'}\n"
        "  b: {run: 'true', needs: [a], foreach: {items: '${{ steps.a.outputs.list }}'}}\n",
    ),
    "foreach over a param that is not an array": Case(
        "foreach-items",
        "declare params.regions with 'type: array'",
        "params: {regions: {type: string, default: de}}\n"
        "steps:\n  a: {run: 'true', foreach: {items: '${{ params.regions }}'}}\n",
        "params: {regions: {type: array, default: [de]}}\n"
        "steps:\n  a: {run: 'true', foreach: {items: '${{ params.regions }}'}}\n",
    ),
    "param default reading a param": Case(
        "template",
        "use run.id, run.flow, run.logical_date or run.logical_time",
        "params:\n  a: {type: string, default: x}\n"
        "  b: {type: string, default: '${{ params.a }}'}\nsteps:\n  s: {run: 'true'}\n",
        "params:\n  a: {type: string, default: x}\n"
        "  b: {type: string, default: '${{ run.id }}'}\nsteps:\n  s: {run: 'true'}\n",
    ),
    "base-60 time": Case(
        "yaml-trap",
        "quote it: '2:00'",
        "params: {t: {type: string, default: 2:00}}\nsteps:\n  a: {run: 'true'}\n",
        "params: {t: {type: string, default: '2:00'}}\nsteps:\n  a: {run: 'true'}\n",
    ),
    "octal": Case(
        "yaml-trap",
        "quote it: '0123'",
        "steps:\n  a: {run: 'true', queue: 0123}\n",
        "steps:\n  a: {run: 'true', queue: '0123'}\n",
    ),
    "number where text is expected": Case(
        "wrong-type",
        "quote it: '123'",
        "steps:\n  a: {run: 'true', queue: 123}\n",
        "steps:\n  a: {run: 'true', queue: '123'}\n",
    ),
    "template where nothing is rendered": Case(
        "template-place",
        "templates are read in run, with, env, cwd, foreach.items and param defaults",
        "params: {q: {type: string}}\nsteps:\n  a: {run: 'true', tags: ['${{ params.q }}']}\n",
        "params: {q: {type: string}}\nsteps:\n  a: {run: 'true', env: {Q: '${{ params.q }}'}}\n",
    ),
    "malformed template": Case(
        "template-syntax",
        "write ${{ params.name }}",
        "params: {x: {type: int}}\nsteps:\n  a: {run: 'echo ${{ params.x + 1 }}'}\n",
        "params: {x: {type: int}}\nsteps:\n  a: {run: 'echo ${{ params.x }}'}\n",
    ),
    "unknown time zone": Case(
        "schedule",
        "did you mean 'Europe/Berlin'?",
        "schedule: {cron: '0 12 * * *', timezone: Europe/Berln}\nsteps:\n  a: {run: 'true'}\n",
        "schedule: {cron: '0 12 * * *', timezone: Europe/Berlin}\nsteps:\n  a: {run: 'true'}\n",
    ),
    "fire time in a daylight-saving change": Case(
        "schedule",
        "pick a time outside the daylight-saving change, or use timezone UTC, if that is not what "
        "you want",
        "schedule: {cron: '30 2 * * 0', timezone: Europe/Berlin}\nsteps:\n  a: {run: 'true'}\n",
        "schedule: {cron: '30 2 * * 0', timezone: UTC}\nsteps:\n  a: {run: 'true'}\n",
    ),
    "misspelled choice": Case(
        "bad-value",
        "did you mean 'all_success'?",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'true', needs: [a], trigger_rule: all_sucess}\n",
        "steps:\n  a: {run: 'true'}\n  b: {run: 'true', needs: [a], trigger_rule: all_success}\n",
    ),
    "param default of the wrong type": Case(
        "param-default",
        "change the default, or the type (int)",
        "params: {n: {type: int, default: abc}}\nsteps:\n  a: {run: 'true'}\n",
        "params: {n: {type: int, default: 3}}\nsteps:\n  a: {run: 'true'}\n",
    ),
    "no action": Case(
        "missing-action",
        "add 'run: <shell command>' or 'job: <module>.<callable>',"
        " or 'flow: <file>' for a sub-flow",
        "steps:\n  a: {queue: q}\n",
        "steps:\n  a: {queue: q, run: 'true'}\n",
    ),
    "step id like a generated job id": Case(
        "generated-id",
        "rename the step; ids may use letters, digits, '_' and '-'",
        "steps:\n  a[0]: {run: 'true'}\n",
        "steps:\n  a_0: {run: 'true'}\n",
    ),
    "step id of a hook": Case(
        "reserved-id",
        "rename the step, or move it under hooks: finally:",
        "steps:\n  a: {run: 'true'}\n  finally: {run: 'true'}\n",
        "steps:\n  a: {run: 'true'}\nhooks:\n  finally: {run: 'true'}\n",
    ),
    "reserved key in with": Case(
        "reserved-key",
        "rename the key",
        "steps:\n  a: {job: m.f, with: {_flows: 1}}\n",
        "steps:\n  a: {job: m.f, with: {flows: 1}}\n",
    ),
    "foreach variable named like a root": Case(
        "reserved-name",
        "pick another name, e.g. 'item' or 'region'",
        "steps:\n  a: {run: 'true', foreach: {items: [1], as: params}}\n",
        "steps:\n  a: {run: 'true', foreach: {items: [1], as: region}}\n",
    ),
    "env on a job step": Case(
        "shell-only",
        "pass a Python job its inputs through 'with'",
        "steps:\n  a: {job: m.f, env: {A: b}}\n",
        "steps:\n  a: {job: m.f, with: {A: b}}\n",
    ),
    "required param with a default": Case(
        "required-default",
        "remove 'required: true', or remove the default",
        "params: {a: {type: string, required: true, default: x}}\nsteps:\n  s: {run: 'true'}\n",
        "params: {a: {type: string, default: x}}\nsteps:\n  s: {run: 'true'}\n",
    ),
    "required param of a scheduled flow": Case(
        "schedule-param",
        "give it a default (scheduled runs use the defaults), or set 'required: false'",
        "params: {a: {type: string}}\nschedule: {cron: '0 12 * * *'}\nsteps:\n  s: {run: 'true'}\n",
        "params: {a: {type: string, default: x}}\nschedule: {cron: '0 12 * * *'}\n"
        "steps:\n  s: {run: 'true'}\n",
    ),
    "foreach items that are text": Case(
        "foreach-items",
        "write the items as a YAML list, or declare an array param and reference it",
        "steps:\n  a: {run: 'true', foreach: {items: abc}}\n",
        "steps:\n  a: {run: 'true', foreach: {items: [abc]}}\n",
    ),
    "queue set twice": Case(
        "queue-twice",
        "set the queue in one place",
        "queue: a\ndefaults: {queue: b}\nsteps:\n  s: {run: 'true'}\n",
        "queue: b\nsteps:\n  s: {run: 'true'}\n",
    ),
    "heartbeat not shorter than the timeout": Case(
        "heartbeat",
        "make the heartbeat a fraction of the timeout (e.g. a tenth)",
        "steps:\n  a: {run: 'true', heartbeat: 10m, timeout: 1m}\n",
        "steps:\n  a: {run: 'true', heartbeat: 6s, timeout: 1m}\n",
    ),
    "duplicate key": Case(
        "yaml-duplicate-key",
        "rename or remove one of them",
        "steps:\n  a: {run: 'true'}\n  a: {run: 'false'}\n",
        "steps:\n  a: {run: 'true'}\n",
    ),
}


def _key(finding: object) -> tuple[str, str]:
    return (finding.code, finding.message)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", CASES)
def test_a_hint_applied_removes_its_finding_and_adds_none(name: str) -> None:
    case = CASES[name]
    before = check(HEAD + dedent(case.bad))
    given = [f for f in before if f.code == case.code and f.hint == case.hint]
    assert given, "\n".join(f.format() for f in before)
    after = check(HEAD + dedent(case.fixed))
    left = {_key(f) for f in before} - {_key(f) for f in given}
    assert {_key(f) for f in after} <= left, "\n".join(f.format() for f in after)
