"""``flows queue stats|truncate|drop``, ``kick``, ``bury``, ``delete``, ``throttle(s)`` and
``flows jobs --state buried|parked`` through click's runner against the session's real server."""

from __future__ import annotations

import json

import redis
from cli_support import flows
from click.testing import CliRunner
from helpers import assert_unchanged

from flows.cli import main
from scheduler.engine.client import Client


def test_bury_list_and_kick(url: str, client: Client) -> None:
    queue = client.queues["q"]
    for n in range(3):
        queue.put("K", {}, jid=f"j{n}")
    assert flows("bury", "j0", "-m", "later", "--redis", url).exit_code == 0
    [held] = queue.pop()
    held.bury("bad input")
    listed = json.loads(
        flows("jobs", "--state", "buried", "-q", "q", "--json", "--redis", url).output
    )
    assert [job["jid"] for job in listed] == ["j0", "j1"]
    assert "j0" in flows("jobs", "--state", "buried", "--redis", url).output
    result = flows("kick", "q", "--count", "5", "--redis", url)
    assert result.exit_code == 0 and "2 job(s) kicked" in result.output
    assert queue.jobs.buried() == []


def test_kick_a_runs_step_puts_back_its_buried_items_as_the_engine_allows(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    """``flows kick --step RUN:STEP``: every buried item of the step waits again in one call;
    a step with none buried, an unknown run or step, and a target that names no step are
    refused with the engine's words, changing nothing."""
    run = "kr@2026-01-01T00:00:00"  # a run id with ':' in it: the step is after the last one
    jobs = [
        {"jid": f"{run}:load[{i}]", "queue": "kq", "klass": "K", "data": "{}"} for i in range(3)
    ] + [{"jid": f"{run}:side", "queue": "kq", "klass": "K", "data": "{}"}]
    client.engine.call("flow.submit", run, json.dumps({"flow": "f"}), json.dumps(jobs))
    client.jobs[f"{run}:load[0]"].bury("bad input")
    client.jobs[f"{run}:load[2]"].bury("bad input")
    with assert_unchanged(redis_client):
        waiting = flows("kick", "--step", f"{run}:side", "--redis", url)
        assert waiting.exit_code == 1
        assert (
            f"step side of run {run} has status waiting: kick is not allowed (allowed: none)"
            in waiting.output
        )
        unknown = flows("kick", "--step", f"{run}:nope", "--redis", url)
        assert unknown.exit_code == 1 and (
            f"run {run} has no step 'nope' (its steps: load, side)" in unknown.output
        )
        missing = flows("kick", "--step", "nope:load", "--redis", url)
        assert missing.exit_code == 1 and "no run nope" in missing.output
        bare = flows("kick", "--step", "load", "--redis", url)
        assert bare.exit_code == 2 and "name a run's step as RUN:STEP" in bare.output
        both = flows("kick", "kq", "--step", f"{run}:load", "--redis", url)
        assert both.exit_code == 2 and "--step kicks a run's step" in both.output
    kicked = flows("kick", "--step", f"{run}:load", "--json", "--redis", url)
    assert kicked.exit_code == 0, kicked.output
    assert json.loads(kicked.output) == {
        "run": run,
        "step": "load",
        "kicked": 2,
        "jobs": [f"{run}:load[0]", f"{run}:load[2]"],
    }
    assert [client.jobs[f"{run}:load[{i}]"].state for i in range(3)] == ["waiting"] * 3
    again = flows("kick", "--step", f"{run}:load", "--redis", url)
    assert again.exit_code == 1 and "kick is not allowed" in again.output


def test_kick_named_jobs_checks_every_one_first(
    url: str, client: Client, redis_client: redis.Redis
) -> None:
    for jid, queue in (("a", "q"), ("b", "q"), ("c", "side"), ("w", "q")):
        client.queues[queue].put("K", {}, jid=jid)
    for jid in "abc":
        client.jobs[jid].bury()
    with assert_unchanged(redis_client):
        refused = flows("kick", "--job", "a", "--job", "w", "--redis", url)
        assert refused.exit_code == 1
        assert "Job w is not buried: waiting; nothing kicked" in refused.output
        missing = flows("kick", "-j", "nope", "--redis", url)
        assert missing.exit_code == 1 and "Job nope does not exist" in missing.output
        both = flows("kick", "q", "--job", "a", "--redis", url)
        assert both.exit_code == 2 and "not both" in both.output
        counted = flows("kick", "--job", "a", "--count", "2", "--redis", url)
        assert counted.exit_code == 2 and "--count" in counted.output
        neither = flows("kick", "--redis", url)
        assert neither.exit_code == 2 and "--job JID" in neither.output
        bad = flows("kick", "--job", "a b", "--redis", url)
        assert bad.exit_code == 2 and "job id 'a b'" in bad.output
    kicked = flows("kick", "-j", "c", "-j", "a", "--json", "--redis", url)
    assert kicked.exit_code == 0 and json.loads(kicked.output) == {"kicked": 2, "jobs": ["c", "a"]}
    assert [client.jobs[jid].state for jid in "abc"] == ["waiting", "buried", "waiting"]
    assert client.queues["side"].statistics()["calls"]["kick"] == 1
    text = flows("kick", "--job", "b", "--redis", url)
    assert text.exit_code == 0 and "kicked 1 job(s): b" in text.output
    [entry] = json.loads(flows("audit", "--json", "-n", "1", "--redis", url).output)
    assert (entry["via"], entry["action"], entry["target"]) == ("cli", "kick", "--job b")


def test_queue_stats_table_and_json(url: str, client: Client) -> None:
    queue = client.queues["q"]
    queue.put("K", {}, jid="a")
    queue.put("K", {}, jid="b", delay=60)
    [job] = queue.pop()
    job.complete()
    stats = json.loads(flows("queue", "stats", "q", "--json", "--redis", url).output)
    assert stats["tasks"]["delayed"] == 1 and stats["tasks"]["done"] == 1
    assert stats["calls"]["put"] == 2 and stats["calls"]["take"] == 1
    text = flows("queue", "stats", "q", "--redis", url).output
    assert "delayed" in text and "calls today" in text and "release" in text


def test_truncate_and_drop_refuse_with_a_running_job_then_work(url: str, client: Client) -> None:
    queue = client.queues["q"]
    for n in range(3):
        queue.put("K", {}, jid=f"j{n}")
    [job] = queue.pop()
    refused = flows("queue", "truncate", "q", "--yes", "--redis", url)
    assert refused.exit_code == 1 and "running" in refused.output
    assert flows("queue", "drop", "q", "--yes", "--redis", url).exit_code == 1
    job.complete()
    aborted = CliRunner().invoke(main, ["queue", "truncate", "q", "--redis", url], input="n\n")
    assert aborted.exit_code == 1 and queue.length() == 2
    result = flows("queue", "drop", "q", "--truncate", "--yes", "--redis", url)
    assert result.exit_code == 0, result.output
    assert "2 job(s) removed" in result.output
    assert "q" not in [c["name"] for c in client.queues.counts()]


def test_delete_refuses_a_running_job(url: str, client: Client) -> None:
    queue = client.queues["q"]
    queue.put("K", {}, jid="a")
    queue.put("K", {}, jid="b")
    queue.pop()
    refused = flows("delete", "a", "b", "--redis", url)
    assert refused.exit_code == 1 and "orphan" in refused.output
    assert "deleted 1 job(s): b" in flows("delete", "b", "--redis", url).output


def test_throttles(url: str, client: Client) -> None:
    assert flows("throttle", "set", "api", "2", "--redis", url).exit_code == 0
    assert client.throttles["api"] == 2
    client.queues["q"].put("K", {}, throttle="api")
    client.queues["q"].pop()
    info = json.loads(flows("throttles", "--json", "--redis", url).output)
    assert info == {"api": {"limit": 2, "running": 1, "parked": 0}}
    assert "api" in flows("throttles", "--redis", url).output
    assert "limit lifted" in flows("throttle", "unset", "api", "--redis", url).output
    assert "had no limit" in flows("throttle", "unset", "api", "--redis", url).output
    assert "api" not in client.throttles


def test_queues_and_job_show_the_extensions(url: str, client: Client) -> None:
    queue = client.queues["q"]
    queue.put("K", {}, jid="a", concurrency_key="k", ttl=60, ttr=30)
    queue.put("K", {}, jid="b", concurrency_key="k")
    queue.pop(2)
    counts = json.loads(flows("queues", "--json", "--redis", url).output)
    assert counts[0]["parked"] == 1
    shown = json.loads(flows("job", "a", "--json", "--redis", url).output)
    assert (shown["ttl"], shown["ttr"], shown["concurrency_key"]) == (60, 30, "k")
    assert json.loads(flows("job", "b", "--json", "--redis", url).output)["parked"] == (
        "concurrency_key"
    )
    table = flows("job", "a", "--redis", url).output
    assert "concurrency key" in table and "ttr (s)" in table


def test_pause_holds_the_queues_jobs_and_unpause_hands_them_out(url: str, client: Client) -> None:
    client.queues["q"].put("t.f", {}, jid="p0")
    paused = flows("queue", "pause", "q", "--json", "--redis", url)
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.output) == {"queue": "q", "paused": True}
    assert client.queues["q"].pop() == []  # held while paused
    said = flows("explain", "p0", "--redis", url).output
    assert "flows queue unpause q" in said  # the sentence names a command that exists
    assert flows("queue", "unpause", "q", "--redis", url).output.strip() == "queue q unpaused"
    [popped] = client.queues["q"].pop()
    assert popped.jid == "p0"


def test_a_worker_on_a_paused_queue_says_so(url: str, client: Client) -> None:
    """A worker started on a paused queue (and unfail filling one) notes it on stderr, with the
    command that lifts it: else its jobs just wait, with no word why."""
    client.queues["held"].put("t.f", {}, jid="h0")
    assert flows("queue", "pause", "held", "--redis", url).exit_code == 0
    note = "note: queue 'held' is paused: its jobs wait until `flows queue unpause held`"
    worker = flows("worker", "-q", "held,other", "--burst", "--processes", "0", "--redis", url)
    assert worker.exit_code == 0, worker.output
    assert note in worker.stderr and "'other'" not in worker.stderr
    assert client.jobs["h0"].state == "waiting"  # paused: not handed out
    client.queues["broken"].put("t.f", {}, jid="b0")
    client.queues["broken"].pop()[0].fail("some-group", "it broke")
    unfail = flows("unfail", "some-group", "-q", "held", "--redis", url)
    assert unfail.exit_code == 0, unfail.output
    assert note in unfail.stderr
    assert flows("queue", "unpause", "held", "--redis", url).exit_code == 0
    worker = flows("worker", "-q", "held", "--burst", "--processes", "0", "--redis", url)
    assert "note:" not in worker.stderr
