"""Every command that acts or reports has --json for scripts: one JSON document on stdout."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from flows.cli import main
from flows.runs.read import list_runs
from scheduler.engine.client import Client

FLOW = """\
version: 1
name: js
queue: js
steps:
  a: {run: echo hi}
  b: {run: exit 3, needs: [a]}
"""


def flows(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args], env={"FLOWS_REDIS_URL": url})


def as_json(result: Result) -> object:
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_actions_and_runs_answer_in_json(url: str, client: Client, tmp_path: Path) -> None:
    path = tmp_path / "js.yaml"
    path.write_text(FLOW)
    ran = flows(url, "run", str(path), "--json")
    assert ran.exit_code == 1
    run = json.loads(ran.stdout)
    assert run["status"] == "failed"
    assert {s["step"]: s["status"] for s in run["steps"]} == {"a": "success", "b": "failed"}
    detached = as_json(flows(url, "run", str(path), "--json", "--detach", "--run-id", "js-2"))
    # The one shape of a run started, as the API answers every start.
    assert detached == {"id": "js-2", "jobs": 2, "flow": "js", "existed": False}
    again = as_json(flows(url, "run", str(path), "--json", "--detach", "--run-id", "js-2"))
    assert again == {"id": "js-2", "jobs": 2, "flow": "js", "existed": True}
    assert as_json(flows(url, "cancel", "js-2", "--json")) == {
        "runs": {"js-2": 2},
        "jobs": [],
    }
    retried = as_json(flows(url, "retry", run["id"], "--json", "--detach"))
    assert retried == {"run": run["id"], "retried": 1}
    jid = client.queues["side"].put("K", {})
    assert as_json(flows(url, "bury", jid, "--json")) == {"jid": jid, "queue": "side"}
    assert as_json(flows(url, "kick", "side", "--json")) == {"queue": "side", "kicked": 1}
    assert as_json(flows(url, "throttle", "set", "t", "2", "--json")) == {
        "throttle": "t",
        "limit": 2,
    }
    assert as_json(flows(url, "throttle", "unset", "t", "--json")) == {
        "throttle": "t",
        "lifted": True,
    }
    assert as_json(flows(url, "queue", "truncate", "side", "--yes", "--json")) == {
        "queue": "side",
        "removed": 1,
    }
    client.queues["side"].put("K", {}, jid="broken")
    client.queues["side"].pop()[0].fail("some-group", "it broke")
    assert as_json(flows(url, "unfail", "some-group", "-q", "js", "--json")) == {
        "group": "some-group",
        "queue": "js",
        "moved": 1,
    }
    # A group without failed jobs is refused (a typo), with --json as without.
    assert flows(url, "unfail", "nogroup", "-q", "js", "--json").exit_code == 1


def test_json_and_logs_together_are_refused_before_submitting(
    url: str, client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "js.yaml"
    path.write_text(FLOW)
    result = flows(url, "run", str(path), "--json", "--logs")
    assert result.exit_code == 2
    assert list_runs(client) == []  # nothing submitted
