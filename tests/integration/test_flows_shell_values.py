"""Values in shell steps are data, however a run is started: `flows run`, `flows schedule
trigger`, the scheduler service. Real server, real worker, real /bin/sh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from flows.cli import main
from flows.runtime.worker_hook import prepare
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.worker import Worker

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "; touch PWNED",
    "it's ' ; touch PWNED ; '",
    'a " ; touch PWNED ; "',
    "line\ntouch PWNED",
]

FLOW = """\
version: 1
name: {name}
queue: {queue}
params:
  who: {{type: string, default: {who}}}
  items: {{type: array, items: {{type: string}}, default: {items}}}
steps:
  greet:
    run: printf '%s' "hello ${{{{ params.who }}}}" > greet.out
  each:
    foreach: {{items: "${{{{ params.items }}}}", as: x}}
    run: printf '%s' ${{{{ x }}}} > "item-$FLOWS_JID.out"
  produce:
    run: printf 'v<<END\\n%s\\nEND\\n' "$WHO" > "$FLOWS_OUTPUT"
    env: {{WHO: "${{{{ params.who }}}}"}}
  consume:
    needs: [produce]
    run: printf '%s' '${{{{ steps.produce.outputs.v }}}}' > consumed.out
  fields:
    run: printf '%s' ${{{{ run.flow }}}}/${{{{ run.id }}}} > fields.out
"""


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


def flows(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(folder: Path, name: str, who: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(
        FLOW.format(name=name, queue=name, who=json.dumps(who), items=json.dumps(HOSTILE))
    )
    return path


def check_outputs(folder: Path, who: str, run_id: str, flow: str) -> None:
    assert not (folder / "PWNED").exists()
    assert (folder / "greet.out").read_text() == f"hello {who}"
    assert sorted(p.read_text() for p in folder.glob("item-*.out")) == sorted(HOSTILE)
    assert (folder / "consumed.out").read_text() == who
    assert (folder / "fields.out").read_text() == f"{flow}/{run_id}"


@pytest.mark.parametrize("who", HOSTILE)
def test_flows_run_passes_params_items_outputs_and_run_fields_as_data(
    url: str, tmp_path: Path, who: str
) -> None:
    path = write(tmp_path, "inj", "unused")
    result = flows("run", str(path), "--redis", url, "-p", f"who={who}")
    assert result.exit_code == 0, result.output
    run_id = json.loads(flows("runs", "--redis", url, "--json", "--limit", "1").stdout)[0]["id"]
    check_outputs(tmp_path, who, run_id, "inj")


def test_plan_shows_variables_not_values(url: str, tmp_path: Path) -> None:
    path = write(tmp_path, "inj", "x")
    result = flows("plan", str(path), "--json", "-p", "who=$(touch PWNED)")
    greet = next(job for job in json.loads(result.stdout)["jobs"] if job["step"] == "greet")
    assert "PWNED" not in greet["data"]["command"]
    assert greet["data"]["env"]["FLOWS_PARAMS_WHO"] == "$(touch PWNED)"


def test_scheduled_and_triggered_runs_pass_values_as_data(url: str, tmp_path: Path) -> None:
    who = "$(touch PWNED); `touch PWNED` ' \" \n touch PWNED"
    folder = tmp_path / "pipelines"
    write(folder, "injsched", who)
    text = (folder / "injsched.yaml").read_text()
    (folder / "injsched.yaml").write_text(
        text.replace("params:", 'schedule: {cron: "*/5 * * * *"}\nparams:', 1)
    )
    now = 1_767_614_400.0  # a tick of */5
    once = ("scheduler", "--redis", url, "--flows-dir", str(folder), "--once", "--now")
    registered = flows(*once, str(now - 60))
    assert registered.exit_code == 0, registered.output
    fired = flows(*once, str(now + 1))
    assert "fired injsched" in fired.stdout, fired.output
    Worker(Client(url), ["injsched"], burst=True, prepare=prepare).run()
    runs = json.loads(flows("runs", "--redis", url, "--json", "--flow", "injsched").stdout)
    check_outputs(folder, who, runs[0]["id"], "injsched")
    # JSON, not text; the params the run was bound to, its defaults here
    assert runs[0]["params"] == {"who": who, "items": HOSTILE}
    assert runs[0]["queues"] == ["injsched"]

    for out in folder.glob("*.out"):
        out.unlink()
    triggered = flows("schedule", "trigger", "injsched", "--redis", url)
    assert triggered.exit_code == 0, triggered.output
    Worker(Client(url), ["injsched"], burst=True, prepare=prepare).run()
    check_outputs(folder, who, triggered.stdout.strip().splitlines()[-1], "injsched")


ARITHMETIC_FLOW = """\
version: 1
name: arith
queue: arith
params:
  n: {type: string, default: "4"}
steps:
  produce:
    run: printf 'n=%s\\n' "$N" > "$FLOWS_OUTPUT"
    env: {N: "${{ params.n }}"}
  times:
    needs: [produce]
    run: echo "$(( ${{ steps.produce.outputs.n }} * 10 ))/$(( ${{ params.n }} + 1 ))" > times.out
"""


@pytest.mark.parametrize("n", ["a[$(touch PWNED)]", "x[`touch PWNED`]", "HOME", "4; touch PWNED"])
def test_a_value_in_an_arithmetic_expansion_runs_only_as_an_integer(
    url: str, tmp_path: Path, n: str
) -> None:
    """Where /bin/sh is bash, an arithmetic expansion runs the command of `a[$(cmd)]` in the
    text a variable expands to: such a value fails the step before its command starts."""
    path = tmp_path / "arith.yaml"
    path.write_text(ARITHMETIC_FLOW)
    assert flows("run", str(path), "--redis", url).exit_code == 0
    assert (tmp_path / "times.out").read_text() == "40/5\n"
    (tmp_path / "times.out").unlink()
    result = flows("run", str(path), "--redis", url, "-p", f"n={n}")
    assert result.exit_code == 1, result.output
    run_id = json.loads(flows("runs", "--redis", url, "--json", "--limit", "1").stdout)[0]["id"]
    job = Client(url).jobs[f"{run_id}:times"]
    assert job.state == "failed" and job.failure is not None
    assert job.failure["group"] == "bad-value"
    assert job.failure["message"] == (
        f"$FLOWS_NUMBER_STEPS_PRODUCE_OUTPUTS_N is {n!r}: a value the shell evaluates as "
        "arithmetic ($((...)), ((...)), let, [[ -eq ]] and the like) must be an integer"
    )
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "times.out").exists()
