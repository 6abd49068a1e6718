"""The shared step cache: a step whose work (command, resolved inputs, key, declared files) was
completed within its ttl completes at once from any worker with that result, as `cached`;
changed inputs, a changed file, an expired ttl or `flows cache clear` run it again."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from flows.cli import main
from flows.runs.build import FlowFile, build_run, read_flow_file
from flows.runs.read import load_run
from flows.runs.submit import submit
from flows.runtime.worker_hook import prepare
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.explain import explain
from scheduler.engine.scripts import Engine, qless_bundle
from scheduler.worker import Worker

FLOW = """\
version: 1
name: cached
queue: cq
params:
  day: {type: string, default: "2026-11-01"}
steps:
  count:
    run: |
      echo ran >> "$COUNTER"
      echo "n=$(wc -l < "$COUNTER")" >> "$FLOWS_OUTPUT"
    env: {COUNTER: "COUNTER_FILE", DAY: "${{ params.day }}"}
    cache: {key: v1, ttl: 1h, files: [input.txt]}
  after:
    needs: [count]
    run: echo "n=${{ steps.count.outputs.n }}" >> "$FLOWS_OUTPUT"
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "input.txt").write_text("a\n")
    text = FLOW.replace("COUNTER_FILE", str(tmp_path / "counter.txt"))
    (tmp_path / "cached.yaml").write_text(text)
    return tmp_path


def work_run(
    client: Client, source: FlowFile, run_id: str, params: dict[str, Any] | None = None
) -> None:
    """Run ``run_id`` of ``source`` (its logical time 2026-11-01), worked to its end by a real
    burst worker on queue ``cq``."""
    built = build_run(
        source,
        run_id=run_id,
        logical_time=datetime(2026, 11, 1, tzinfo=UTC),
        params=params or {},
        trigger="manual",
    )
    submit(client, built)
    Worker(client, ["cq"], burst=True, prepare=prepare, lease_seconds=0).run()


def run_once(url: str, folder: Path, worker: str, day: str = "2026-11-01") -> str:
    """One run, worked to its end by a real worker named ``worker``; its id."""
    client = Client(url, worker_name=worker)
    source = read_flow_file(folder / "cached.yaml")
    run_id = f"cached@{worker}-{day}-{len(list(folder.glob('*')))}-{datetime.now(UTC):%H%M%S%f}"
    work_run(client, source, run_id, {"day": day})
    return run_id


def statuses(url: str, run_id: str) -> dict[str, str]:
    view = load_run(Client(url), run_id)
    assert view is not None and view.status == "succeeded"
    return {step.step: step.status for step in view.steps}


def ran(folder: Path) -> int:
    return len((folder / "counter.txt").read_text().splitlines())


def test_a_second_worker_takes_the_result_from_the_cache(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    url = server.url
    first = run_once(url, folder, "worker-a")
    assert statuses(url, first) == {"count": "success", "after": "success"}
    second = run_once(url, folder, "worker-b")
    assert statuses(url, second) == {"count": "cached", "after": "success"}
    assert ran(folder) == 1  # the command ran once
    client = Client(url)
    job = client.jobs.get(f"{second}:count")
    assert job is not None and job.result == {"n": "1"}
    after = client.jobs.get(f"{second}:after")
    assert after is not None and after.result == {"n": "1"}  # downstream read the cached output
    why = explain(client, f"{second}:count")
    assert why is not None and why.reason == "cached"
    assert why.sentence.startswith(f"It completed from the step cache with the result of {first}")
    logs = CliRunner().invoke(main, ["logs", second, "count", "--redis", url])
    assert f"cached: the result of {first}:count (run {first}" in logs.output


def test_changed_inputs_files_or_a_clear_run_it_again(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    url = server.url
    run_once(url, folder, "w1")
    other_day = run_once(url, folder, "w2", day="2026-11-02")  # an input changed
    assert statuses(url, other_day)["count"] == "success"
    (folder / "input.txt").write_text("b\n")  # a declared file changed
    changed = run_once(url, folder, "w3")
    assert statuses(url, changed)["count"] == "success"
    assert ran(folder) == 3
    again = run_once(url, folder, "w4")
    assert statuses(url, again)["count"] == "cached"

    listed = CliRunner().invoke(main, ["cache", "list", "--json", "--redis", url])
    entries = json.loads(listed.output)
    assert len(entries) == 3 and {e["state"] for e in entries} == {"complete"}
    assert {e["status"] for e in entries} == {"fresh"}
    cleared = CliRunner().invoke(main, ["cache", "clear", "--redis", url])
    assert "removed 3 cache entries" in cleared.output
    after_clear = run_once(url, folder, "w5")
    assert statuses(url, after_clear)["count"] == "success"
    assert ran(folder) == 4


def test_an_entry_older_than_its_ttl_is_not_used(engine_ns: object) -> None:
    """At the engine: a producer completed more than ttl seconds ago is a miss."""
    from scheduler.engine.scripts import Engine

    assert isinstance(engine_ns, Engine)
    t0 = 1_700_000_000.0
    call = engine_ns.call
    call("worker.register", "w", "{}", now=t0)
    for jid in ("a", "b", "c"):
        call("put", "w", "q", jid, "K", "{}", 0, now=t0)
    call("pop", "q", "w", 1, now=t0)
    assert json.loads(call("cache.use", "a", "w", "q", "k1", 60, 1, now=t0)) == {"hit": False}
    call("complete", "a", "w", "q", "", "result", '{"n": 1}', now=t0 + 1)
    call("pop", "q", "w", 1, now=t0 + 30)
    hit = json.loads(call("cache.use", "b", "w", "q", "k1", 60, 1, now=t0 + 30))
    assert hit == {"hit": True, "from": "a", "run": ""}
    assert json.loads(call("get", "b", now=t0 + 30))["state"] == "complete"
    # cache.list says what cache.use does: fresh until ttl seconds after the completion.
    assert [e["status"] for e in json.loads(call("cache.list", now=t0 + 60.9))] == ["fresh"]
    assert [e["status"] for e in json.loads(call("cache.list", now=t0 + 61))] == ["expired"]
    call("pop", "q", "w", 1, now=t0 + 100)
    assert json.loads(call("cache.use", "c", "w", "q", "k1", 60, 1, now=t0 + 100)) == {"hit": False}
    # The job runs again; the entry keeps the completed result until it completes.
    (entry,) = json.loads(call("cache.list", now=t0 + 100))
    assert (entry["jid"], entry["state"], entry["status"]) == ("a", "complete", "expired")
    call("complete", "c", "w", "q", "", "result", '{"n": 2}', now=t0 + 101)
    (entry,) = json.loads(call("cache.list", now=t0 + 101))
    assert (entry["jid"], entry["state"], entry["status"]) == ("c", "complete", "fresh")


def _racing(call: Any, t0: float, *jids: str, ttl: float = 60) -> None:
    """Jobs ``jids`` put, popped by worker ``w`` and missing key ``k`` in that order."""
    call("worker.register", "w", "{}", now=t0)
    for jid in jids:
        call("put", "w", "q", jid, "K", "{}", 0, now=t0)
    call("pop", "q", "w", len(jids), now=t0)
    for i, jid in enumerate(jids):
        miss = json.loads(call("cache.use", jid, "w", "q", "k", ttl, 1, now=t0 + i))
        assert miss == {"hit": False}


def _entry(call: Any, now: float) -> tuple[str, str]:
    (entry,) = json.loads(call("cache.list", now=now))
    return entry["jid"], entry["status"]


def test_of_two_racing_claims_the_first_to_succeed_is_the_entry(engine_ns: Engine) -> None:
    """Two workers miss one key: the later claim names the entry, but the earlier job
    completes and the later one fails. The completed result is the entry (before, the failed
    job's claim was, and the good result was lost to the cache); a third job hits it."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _racing(call, t0, "early", "late")
    assert _entry(call, t0 + 2) == ("late", "running")
    call("complete", "early", "w", "q", "", "result", '{"n": 1}', now=t0 + 3)
    assert _entry(call, t0 + 3) == ("early", "fresh")
    call("fail", "late", "w", "boom", "it broke", now=t0 + 4)
    assert _entry(call, t0 + 4) == ("early", "fresh")
    call("put", "w", "q", "third", "K", "{}", 0, now=t0 + 5)
    call("pop", "q", "w", 1, now=t0 + 5)
    hit = json.loads(call("cache.use", "third", "w", "q", "k", 60, 1, now=t0 + 5))
    assert hit == {"hit": True, "from": "early", "run": ""}
    assert json.loads(call("get", "third", now=t0 + 5))["result"] == '{"n": 1}'


def test_a_later_success_does_not_replace_the_first(engine_ns: Engine) -> None:
    """Both racing jobs succeed: the first to complete stays the entry, whichever claimed
    last; the other's completion changes nothing of it."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _racing(call, t0, "early", "late")
    call("complete", "late", "w", "q", "", "result", '{"n": 2}', now=t0 + 3)
    assert _entry(call, t0 + 3) == ("late", "fresh")
    entry_before = engine_ns.redis.hgetall(f"{engine_ns.key_prefix}cache:k")
    call("complete", "early", "w", "q", "", "result", '{"n": 1}', now=t0 + 4)
    assert engine_ns.redis.hgetall(f"{engine_ns.key_prefix}cache:k") == entry_before
    # No claim is left on a job that completed.
    assert engine_ns.redis.hget(f"{engine_ns.key_prefix}j:early", "cclaim") is None


def test_a_claim_that_fails_never_takes_the_place_of_a_completed_result(
    engine_ns: Engine,
) -> None:
    """A job of a shorter ttl misses a result older than its ttl and runs, then fails: the
    result stays the entry, for a step of a longer ttl to hit (before, the failed claim had
    replaced it). A cleared entry is not made again by a job that was running."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _racing(call, t0, "old", ttl=3600)
    call("complete", "old", "w", "q", "", "result", '{"n": 1}', now=t0 + 1)
    _racing(call, t0 + 100, "short", ttl=60)
    assert _entry(call, t0 + 100) == ("old", "fresh")  # fresh for its own ttl, 3600
    call("fail", "short", "w", "boom", "it broke", now=t0 + 101)
    assert _entry(call, t0 + 101) == ("old", "fresh")
    call("put", "w", "q", "long", "K", "{}", 0, now=t0 + 102)
    call("pop", "q", "w", 1, now=t0 + 102)
    hit = json.loads(call("cache.use", "long", "w", "q", "k", 3600, 1, now=t0 + 102))
    assert hit == {"hit": True, "from": "old", "run": ""}

    _racing(call, t0 + 200, "cleared", ttl=60)
    assert call("cache.clear", now=t0 + 201) == 1
    call("complete", "cleared", "w", "q", "", "result", "{}", now=t0 + 202)
    assert json.loads(call("cache.list", now=t0 + 202)) == []


def test_the_list_shows_an_entry_past_its_ttl_as_expired(
    server: EmbeddedServer, engine: Engine
) -> None:
    """`flows cache list` renders the engine's status: an entry made long ago with a short ttl is
    expired (not used), one with a ttl still running is fresh; clear forgets either."""
    t0 = 1_700_000_000.0  # 2023: long before the server's clock
    call = engine.call
    call("worker.register", "w", "{}", now=t0)
    for jid, key, ttl in (("old", "short", 60), ("kept", "long", 1e10)):
        call("put", "w", "q", jid, "K", "{}", 0, now=t0)
        call("pop", "q", "w", 1, now=t0)
        assert json.loads(call("cache.use", jid, "w", "q", key, ttl, 1, now=t0)) == {"hit": False}
        call("complete", jid, "w", "q", "", "result", "{}", now=t0 + 1)
    listed = CliRunner().invoke(main, ["cache", "list", "--json", "--redis", server.url])
    statuses = {e["jid"]: (e["state"], e["status"]) for e in json.loads(listed.output)}
    assert statuses == {"old": ("complete", "expired"), "kept": ("complete", "fresh")}
    shown = CliRunner().invoke(main, ["cache", "list", "--redis", server.url])
    rows = {
        line.split("│")[2].strip(): line.split("│")[3].strip()
        for line in shown.output.splitlines()
        if line.count("│") > 3
    }
    assert rows == {"old": "expired", "kept": "fresh"}
    both = CliRunner().invoke(main, ["cache", "clear", "", "--redis", server.url])
    assert both.exit_code == 1
    assert "2 entries have a key starting so (long, short): give more of the one" in both.output
    cleared = CliRunner().invoke(main, ["cache", "clear", "short", "--redis", server.url])
    assert "removed 1 cache entry" in cleared.output
    left = CliRunner().invoke(main, ["cache", "list", "--json", "--redis", server.url])
    assert [e["jid"] for e in json.loads(left.output)] == ["kept"]
    # For scripts, as every command that acts: one JSON document.
    again = CliRunner().invoke(main, ["cache", "clear", "long", "--json", "--redis", server.url])
    assert (again.exit_code, json.loads(again.output)) == (0, {"removed": 1})


def test_clear_goes_through_every_entry_not_a_first_page(
    server: EmbeddedServer, engine: Engine
) -> None:
    """Past the engine's page of 1,000 entries a call: a key's start finds the oldest entry,
    and a clear of all forgets every one."""
    t0 = 1_700_000_000.0
    call = engine.call
    call("worker.register", "w", "{}", now=t0)
    count = 1_050
    pipe = engine.pipeline()
    for i in range(count):
        pipe.call("put", "w", "q", f"j{i}", "K", "{}", 0, now=t0 + i)
    pipe.execute()
    for _ in range(2):
        call("pop", "q", "w", 1000, now=t0 + count)
    pipe = engine.pipeline()
    for i in range(count):  # key0000 is the oldest: outside the newest 1,000
        pipe.call("cache.use", f"j{i}", "w", "q", f"key{i:04d}", 3600, 1, now=t0 + count)
    assert all(json.loads(r) == {"hit": False} for r in pipe.execute())
    one = CliRunner().invoke(main, ["cache", "clear", "key0000", "--redis", server.url])
    assert (one.exit_code, one.output) == (0, "removed 1 cache entry\n"), one.output
    every = CliRunner().invoke(main, ["cache", "clear", "--json", "--redis", server.url])
    assert json.loads(every.output) == {"removed": count - 1}
    assert json.loads(call("cache.list", 0, 1000)) == []


CHAIN = """\
version: 1
name: chain
queue: cq
steps:
  a:
    run: echo "v=1" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
  b:
    needs: [a]
    run: echo "v=${{ steps.a.outputs.v }}2" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
  c:
    needs: [b]
    foreach: {items: [x, y]}
    run: echo "v=${{ steps.b.outputs.v }}${{ item }}" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
  d:
    run: echo "v=d" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
"""


def test_a_chain_of_cached_steps_ends_in_the_call_of_its_first_hit(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    (tmp_path / "chain.yaml").write_text(CHAIN)
    client = Client(server.url, worker_name="w")
    source = read_flow_file(tmp_path / "chain.yaml")
    ids = []
    for n in range(2):
        run_id = f"chain@{n}"
        work_run(client, source, run_id)
        ids.append(run_id)
    view = load_run(client, ids[1])
    assert view is not None and view.status == "succeeded"
    assert {s.step: s.status for s in view.steps} == dict.fromkeys("abcd", "cached")
    results = [job.outputs for step in view.steps for job in step.jobs]
    assert results == [{"v": "1"}, {"v": "12"}, {"v": "12x"}, {"v": "12y"}, {"v": "d"}]
    # One first step was taken by a worker; the engine completed the rest in that call.
    jids = [job.jid for step in view.steps for job in step.jobs]
    popped = {
        job.jid.split(":")[-1]
        for job in client.jobs.multiget(*jids)
        if any(entry.get("what") == "popped" for entry in job.history)
    }
    assert len(popped) == 1 and popped <= {"a", "d"}


def test_a_cached_step_run_again_for_real_is_no_longer_cached(
    server: EmbeddedServer, redis_client: redis.Redis, folder: Path
) -> None:
    """A re-run of a step that came from the cache and this time ran (its entry cleared) is
    a success of its own: not `cached`, and not explained as the producer's result."""
    url = server.url
    first = run_once(url, folder, "w1")
    second = run_once(url, folder, "w2")
    assert statuses(url, second)["count"] == "cached"
    CliRunner().invoke(main, ["cache", "clear", "--redis", url])
    rerun = CliRunner().invoke(main, ["rerun", second, "count", "--detach", "--redis", url])
    assert rerun.exit_code == 0, rerun.output
    Worker(Client(url, worker_name="w3"), ["cq"], burst=True, prepare=prepare).run()
    assert ran(folder) == 2  # it did run this time
    assert statuses(url, second) == {"count": "success", "after": "success"}
    why = explain(Client(url), f"{second}:count")
    assert why is not None and why.reason == "complete", why
    assert first not in why.sentence


NOTIFIED = """\
version: 1
name: told
queue: cq
steps:
  a:
    run: echo "x=1" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
  b:
    needs: [a]
    run: echo "y=${{ steps.a.outputs.x }}" >> "$FLOWS_OUTPUT"
    cache: {ttl: 1h}
    notify:
      - on: [success]
        webhook: {url: "https://hooks.example.com/flows"}
"""


def test_a_step_the_chain_completes_from_the_cache_tells_its_success(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A cached step completed in the call of an earlier step's hit writes its `success`
    notification as one its own worker completes does."""
    (tmp_path / "told.yaml").write_text(NOTIFIED)
    client = Client(server.url, worker_name="w")
    source = read_flow_file(tmp_path / "told.yaml")
    for n in range(2):
        work_run(client, source, f"told@{n}")
    view = load_run(client, "told@1")
    assert view is not None and {s.step: s.status for s in view.steps} == {
        "a": "cached",
        "b": "cached",
    }
    told = [fields for _, fields in redis_client.xrange("ql:notify:outbox") or [] if fields]
    assert [(e["kind"], e["jid"]) for e in told] == [
        ("success", "told@0:b"),
        ("success", "told@1:b"),
    ]


def test_clear_of_every_entry_gets_past_entries_that_left_redis(
    server: EmbeddedServer, engine: Engine, redis_client: redis.Redis
) -> None:
    """An entry whose hash left Redis (its ttl plus a day passed) stays listed in the index
    until something takes it out; a clear of all must not stop at a first page of such and
    leave the live entries behind, saying it removed nothing."""
    t0 = 1_700_000_000.0
    call = engine.call
    call("worker.register", "w", "{}", now=t0)
    count = 1_001
    pipe = engine.pipeline()
    for i in range(count):
        pipe.call("put", "w", "q", f"j{i}", "K", "{}", 0, now=t0 + i)
    pipe.execute()
    for _ in range(2):
        call("pop", "q", "w", 1000, now=t0 + count)
    pipe = engine.pipeline()
    for i in range(count):  # made at once: key1000 is the last in the index
        pipe.call("cache.use", f"j{i}", "w", "q", f"key{i:04d}", 60, 1, now=t0 + count)
    assert all(json.loads(r) == {"hit": False} for r in pipe.execute())
    # The oldest 1,000 expired in Redis (60 s plus a day after they were made).
    redis_client.delete(*(f"ql:cache:key{i:04d}" for i in range(count - 1)))
    every = CliRunner().invoke(main, ["cache", "clear", "--json", "--redis", server.url])
    assert json.loads(every.output) == {"removed": 1}
    assert redis_client.exists("ql:cache:key1000") == 0
    assert redis_client.exists("ql:caches") == 0


def test_a_miss_takes_keys_whose_entry_left_redis_out_of_the_index(
    engine: Engine, redis_client: redis.Redis
) -> None:
    """The index of entries (`P caches`) does not keep every key ever made: a miss takes the
    oldest keys whose entry expired out of it."""
    t0 = 1_700_000_000.0
    call = engine.call
    call("worker.register", "w", "{}", now=t0)
    for i in range(4):
        call("put", "w", "q", f"j{i}", "K", "{}", 0, now=t0)
    call("pop", "q", "w", 4, now=t0)
    for i in range(3):
        call("cache.use", f"j{i}", "w", "q", f"key{i}", 60, 1, now=t0 + i)
    redis_client.delete("ql:cache:key0", "ql:cache:key1")  # expired in Redis
    assert json.loads(call("cache.use", "j3", "w", "q", "key3", 60, 1, now=t0 + 3)) == {
        "hit": False
    }
    assert redis_client.zrange("ql:caches", 0, -1) == ["key2", "key3"]


def _claim(engine_ns: Engine, jid: str) -> str | None:
    return engine_ns.redis.hget(f"{engine_ns.key_prefix}j:{jid}", "cclaim")


@pytest.mark.parametrize("first", ["fail", "running"])
def test_a_job_put_again_as_an_uncached_step_does_not_repoint_the_entry(
    engine_ns: Engine, first: str
) -> None:
    """A cached step's job misses and fails (or is still running), another job of the key
    completes and is the entry; the first jid is then put again as a step that is not cached
    and completes once the entry's result is older than its ttl. The entry stays the cached
    job's: before, the claim left on the first job (`cclaim`) made its new, uncached result
    the entry, for the next job of the key to take."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _racing(call, t0, "first")
    if first == "fail":
        call("fail", "first", "w", "boom", "it broke", now=t0 + 1)
        assert _claim(engine_ns, "first") is None  # a failed job's claim means nothing
    _racing(call, t0 + 2, "second")
    call("complete", "second", "w", "q", "", "result", '{"n": 2}', now=t0 + 3)
    assert _entry(call, t0 + 3) == ("second", "fresh")
    call("put", "w", "q", "first", "K", "{}", 0, now=t0 + 100)  # a put over the job
    assert _claim(engine_ns, "first") is None
    call("pop", "q", "w", 1, now=t0 + 100)  # no cache.use: its step is not cached now
    call("complete", "first", "w", "q", "", "result", '{"n": 99}', now=t0 + 101)
    assert _entry(call, t0 + 101) == ("second", "expired")


def test_a_claim_goes_when_its_job_stops_running_without_completing(engine_ns: Engine) -> None:
    """A retry, a release and a bury leave no claim on the job: its next start claims again
    (cache.use), and until then nothing of it is the key's."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _racing(call, t0, "retried", "released", "buried")
    call("retry", "retried", "q", "w", 0, now=t0 + 3)
    call("release", "released", "w", 0, now=t0 + 3)
    call("bury", "buried", "w", "later", now=t0 + 3)
    for jid in ("retried", "released", "buried"):
        assert _claim(engine_ns, jid) is None, jid
    call("pop", "q", "w", 2, now=t0 + 4)
    assert json.loads(call("cache.use", "retried", "w", "q", "k", 60, 2, now=t0 + 4)) == {
        "hit": False
    }
    assert _claim(engine_ns, "retried") == "k 60"


# The first two steps of CHAIN, as flow `pair`: `a`, and `b` needing it, both cached.
CHAIN_OF_TWO = CHAIN.split("  c:\n")[0].replace("name: chain", "name: pair")


def test_a_cached_result_nested_deeper_than_a_result_may_is_not_copied(
    server: EmbeddedServer, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A result kept before the nesting limits is never a hit: neither the worker's own
    cache.use nor the chain it completes copies it into another job; the step runs instead."""
    (tmp_path / "pair.yaml").write_text(CHAIN_OF_TWO)
    client = Client(server.url, worker_name="w")
    source = read_flow_file(tmp_path / "pair.yaml")
    deep = '{"v":' + "[" * 70 + "]" * 70 + "}"  # deeper than a result's 64 levels
    for n in range(3):
        run_id = f"pair@{n}"
        work_run(client, source, run_id)
        if n == 0:  # as an older version kept them
            redis_client.hset("ql:j:pair@0:b", "result", deep)
        if n == 1:
            redis_client.hset("ql:j:pair@0:a", "result", deep)
    chained = load_run(client, "pair@1")
    assert chained is not None and chained.status == "succeeded"
    assert {s.step: s.status for s in chained.steps} == {"a": "cached", "b": "success"}
    assert client.jobs["pair@1:b"].result == {"v": "12"}
    hit = load_run(client, "pair@2")
    assert hit is not None and hit.status == "succeeded"
    assert {s.step: s.status for s in hit.steps} == {"a": "success", "b": "success"}
    assert client.jobs["pair@2:a"].result == {"v": "1"}


def _produced(engine_ns: Engine, t0: float) -> None:
    """Job ``a`` misses key ``k`` (ttl 3600) and completes at ``t0 + 1`` with ``{"n": 1}``: the
    key's entry, fresh."""
    call = engine_ns.call
    _racing(call, t0, "a", ttl=3600)
    call("complete", "a", "w", "q", "", "result", '{"n": 1}', now=t0 + 1)
    assert _entry(call, t0 + 1) == ("a", "fresh")


def _next_one_misses(engine_ns: Engine, now: float) -> None:
    """The next job of key ``k`` runs: the entry's result is gone, whatever its job holds now;
    the entry names the job that runs instead, and its success is the key's result."""
    call = engine_ns.call
    call("put", "w", "q", "next", "K", "{}", 0, now=now)
    call("pop", "q", "w", 1, now=now)
    assert json.loads(call("cache.use", "next", "w", "q", "k", 3600, 1, now=now)) == {"hit": False}
    assert json.loads(call("get", "next", now=now))["state"] == "running"
    assert _entry_of(call, "k", now) == ("next", "running")
    call("complete", "next", "w", "q", "", "result", '{"n": 3}', now=now + 1)
    assert _entry_of(call, "k", now + 1) == ("next", "fresh")


def _entry_of(call: Any, key: str, now: float) -> tuple[str, str]:
    (entry,) = [e for e in json.loads(call("cache.list", now=now)) if e["key"] == key]
    return entry["jid"], entry["status"]


@pytest.mark.parametrize("dialect", ["ours", "qless"])
def test_an_entry_whose_job_is_put_again_uncached_stands_for_nothing(
    engine_ns: Engine, dialect: str
) -> None:
    """The entry's own job is put again (a re-run, a new run reusing its run id, qless's put
    over the jid) as a step that is not cached and completes with another result. The entry
    stood for the result it was made from, not for whatever its jid holds now: it reads
    `gone`, and the next job of the key runs (before, it took the unrelated result as a hit)."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _produced(engine_ns, t0)
    if dialect == "qless":
        bundle = engine_ns.redis.script_load(qless_bundle())
        prefix = engine_ns.key_prefix.encode()
        again = [("put", "w", "q", "a", "K", "{}", 0), ("pop", "q", "w", 1)]
        for command, *args in again:
            engine_ns.redis.evalsha(bundle, 1, prefix, command, t0 + 10, *args)
        done = ("complete", t0 + 11, "a", "w", "q", "{}", "result", '{"n": 99}')
        engine_ns.redis.evalsha(bundle, 1, prefix, *done)
    else:
        call("put", "w", "q", "a", "K", "{}", 0, now=t0 + 10)  # a put over the job
        call("pop", "q", "w", 1, now=t0 + 10)  # no cache.use: its step is not cached now
        call("complete", "a", "w", "q", "", "result", '{"n": 99}', now=t0 + 11)
    (entry,) = json.loads(call("cache.list", now=t0 + 12))
    assert (entry["jid"], entry["state"], entry["status"]) == ("a", "complete", "gone")
    assert entry.get("completed") is None
    _next_one_misses(engine_ns, t0 + 12)


def test_an_entry_whose_job_completes_under_another_key_stands_for_nothing(
    engine_ns: Engine,
) -> None:
    """The entry's job is put again as a step of another key and completes: it is that key's
    entry now, and the first key's entry stands for nothing (before, both keys hit the new
    result)."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _produced(engine_ns, t0)
    call("put", "w", "q", "a", "K", "{}", 0, now=t0 + 10)
    call("pop", "q", "w", 1, now=t0 + 10)
    assert json.loads(call("cache.use", "a", "w", "q", "k2", 3600, 1, now=t0 + 10)) == {
        "hit": False
    }
    call("complete", "a", "w", "q", "", "result", '{"n": 99}', now=t0 + 11)
    assert _entry_of(call, "k", t0 + 12) == ("a", "gone")
    assert _entry_of(call, "k2", t0 + 12) == ("a", "fresh")
    _next_one_misses(engine_ns, t0 + 12)
    call("put", "w", "q", "other", "K", "{}", 0, now=t0 + 20)
    call("pop", "q", "w", 1, now=t0 + 20)
    hit = json.loads(call("cache.use", "other", "w", "q", "k2", 3600, 1, now=t0 + 20))
    assert hit == {"hit": True, "from": "a", "run": ""}
    assert json.loads(call("get", "other", now=t0 + 20))["result"] == '{"n": 99}'


def test_an_entry_whose_job_was_deleted_stands_for_nothing(engine_ns: Engine) -> None:
    """The entry's job is deleted: the entry is `gone`; a new job of the same jid (a run id used
    again) that completes with a result of its own is not the key's result either (before, the
    next job of the key took it)."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _produced(engine_ns, t0)
    assert call("delete", "a", now=t0 + 5) == ["a"]
    assert _entry(call, t0 + 5) == ("a", "gone")
    call("put", "w", "q", "a", "K", "{}", 0, now=t0 + 10)  # a new job, the same jid
    call("pop", "q", "w", 1, now=t0 + 10)
    call("complete", "a", "w", "q", "", "result", '{"n": 99}', now=t0 + 11)
    assert _entry(call, t0 + 12) == ("a", "gone")
    _next_one_misses(engine_ns, t0 + 12)


def test_an_entry_whose_job_changed_after_it_completed_stands_for_nothing(
    engine_ns: Engine,
) -> None:
    """A tag added to the entry's job after it completed moves its `updated`, the completion
    the entry recorded: the entry no longer vouches for the job, and the key runs once more
    (before, the tag also made the old result fresh again for another `ttl`)."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _produced(engine_ns, t0)
    call("tag", "add", "a", "later", now=t0 + 5)
    assert _entry(call, t0 + 6) == ("a", "gone")
    _next_one_misses(engine_ns, t0 + 6)


def test_a_hit_takes_the_result_the_entry_was_made_from(engine_ns: Engine) -> None:
    """The hit path as it was: the entry records the completion it stands for (its job's
    `updated` then), listed as `completed`, and the next job of the key takes that result; its
    job put again as the same cached step and succeeding again is the entry once more, of its
    new result."""
    t0 = 1_700_000_000.0
    call = engine_ns.call
    _produced(engine_ns, t0)
    entry = engine_ns.redis.hgetall(f"{engine_ns.key_prefix}cache:k")
    assert entry["jid"] == "a" and float(entry["completed"]) == t0 + 1
    (listed,) = json.loads(call("cache.list", now=t0 + 2))
    assert (listed["status"], listed["completed"]) == ("fresh", t0 + 1)
    call("put", "w", "q", "b", "K", "{}", 0, now=t0 + 2)
    call("pop", "q", "w", 1, now=t0 + 2)
    hit = json.loads(call("cache.use", "b", "w", "q", "k", 3600, 1, now=t0 + 2))
    assert hit == {"hit": True, "from": "a", "run": ""}
    assert json.loads(call("get", "b", now=t0 + 2))["result"] == '{"n": 1}'
    # A re-run of the same cached step: a claim, then its new result is the entry.
    call("put", "w", "q", "a", "K", "{}", 0, now=t0 + 10)
    call("pop", "q", "w", 1, now=t0 + 10)
    assert json.loads(call("cache.use", "a", "w", "q", "k", 3600, 2, now=t0 + 10)) == {"hit": False}
    assert _entry(call, t0 + 10) == ("a", "running")
    call("complete", "a", "w", "q", "", "result", '{"n": 2}', now=t0 + 11)
    assert _entry(call, t0 + 11) == ("a", "fresh")
    call("put", "w", "q", "c", "K", "{}", 0, now=t0 + 12)
    call("pop", "q", "w", 1, now=t0 + 12)
    hit = json.loads(call("cache.use", "c", "w", "q", "k", 3600, 1, now=t0 + 12))
    assert hit == {"hit": True, "from": "a", "run": ""}
    assert json.loads(call("get", "c", now=t0 + 12))["result"] == '{"n": 2}'


def test_a_chained_step_does_not_take_an_entry_that_stands_for_nothing(
    server: EmbeddedServer, engine: Engine, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A hit completes the cached steps it releases in the same call only from entries that
    still stand for their result: the producer of `b`'s entry was put again as an uncached job
    and completed with another result, so the next run's `b` runs (before, the chain completed
    it with that result)."""
    (tmp_path / "pair.yaml").write_text(CHAIN_OF_TWO)
    client = Client(server.url, worker_name="w")
    source = read_flow_file(tmp_path / "pair.yaml")
    for n in range(2):
        if n == 1:  # pair@0:b put over as a plain job, completed with something else
            klass = json.loads(engine.call("get", "pair@0:b"))["klass"]
            engine.call("put", "w", "other", "pair@0:b", klass, "{}", 0)
            engine.call("pop", "other", "w", 1)
            engine.call("complete", "pair@0:b", "w", "other", "", "result", '{"v": "99"}')
        work_run(client, source, f"pair@{n}")
    view = load_run(client, "pair@1")
    assert view is not None and view.status == "succeeded"
    assert {s.step: s.status for s in view.steps} == {"a": "cached", "b": "success"}
    assert client.jobs["pair@1:b"].result == {"v": "12"}
