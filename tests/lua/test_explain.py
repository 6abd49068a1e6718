"""job.explain: every state the engine has gets its reason and its sentence, each built here
with the engine's own calls at explicit times (scheduler/engine/explain.py words them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lua_support import T0

from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument
from scheduler.engine.explain import REASONS, explain, wait_line
from scheduler.engine.scripts import Engine


class World:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.client = Client.from_engine(engine, worker_name="w1")

    def call(self, command: str, *args: Any, now: float = T0) -> Any:
        return self.engine.call(command, *args, now=now)

    def put(self, jid: str, *options: Any, queue: str = "q", delay: float = 0) -> None:
        self.call("put", "w1", queue, jid, "K", "{}", delay, *options)

    def listen(self, worker: str = "w1", queues: tuple[str, ...] = ("q",), now: float = T0) -> None:
        self.call("worker.register", worker, json.dumps({"queues": list(queues)}), now=now)

    def pop(self, queue: str = "q", worker: str = "w1", now: float = T0) -> list[str]:
        return [j["jid"] for j in json.loads(self.call("pop", queue, worker, 10, now=now))]

    def facts(self, jid: str, now: float = T0) -> dict[str, Any]:
        found = explain(self.client, jid, now=now)
        assert found is not None
        return found.facts

    def why(self, jid: str, now: float = T0) -> tuple[str, str]:
        found = explain(self.client, jid, now=now)
        assert found is not None
        return found.reason, found.sentence


@pytest.fixture
def world(engine_ns: Engine) -> World:
    return World(engine_ns)


def check(world: World, jid: str, reason: str, text: str, now: float = T0) -> None:
    got_reason, sentence = world.why(jid, now)
    assert got_reason == reason
    assert sentence == text


def test_waiting_jobs(world: World) -> None:
    world.put("a")
    check(
        world,
        "a",
        "no-worker",
        "No live worker listens on its queue q; none has ever registered for it "
        "(start one: flows worker -q q).",
    )
    world.listen(now=T0)
    check(
        world,
        "a",
        "queued",
        "It is waiting its turn in queue q: 0 job(s) ahead, 1 live worker(s) listening.",
    )
    # The worker falls silent (past worker-silent-after, 60 s).
    check(
        world,
        "a",
        "no-worker",
        "No live worker listens on its queue q; the last one, w1, was seen "
        "2023-11-14 01:00:00 UTC (10m ago).",
        now=T0 + 600,
    )
    world.call("pause", "q")
    check(world, "a", "queue-paused", "Its queue q is paused (flows queue unpause q).")


def test_a_worker_that_stopped_or_aged_out_is_still_named_as_the_last_one(world: World) -> None:
    """A worker that stops cleanly deregisters, and one silent past max-worker-age is pruned:
    either way its registration is gone, and its queues keep it as their last worker."""
    world.put("a")
    world.put("b", queue="r")
    world.listen("w1", ("q", "r"), now=T0)
    world.call("worker.deregister", "w1", now=T0 + 5)  # a burst worker's clean stop
    check(
        world,
        "a",
        "no-worker",
        "No live worker listens on its queue q; the last one, w1, was seen "
        "2023-11-14 01:00:05 UTC (3s ago).",
        now=T0 + 8,
    )
    assert world.facts("b", now=T0 + 8)["last"] == "w1"
    # A worker registered since (now silent) was seen after it: it is the last one.
    world.listen("w2", ("q",), now=T0 + 10)
    assert world.facts("a", now=T0 + 100)["last"] == "w2"
    assert world.facts("b", now=T0 + 100)["last"] == "w1"
    # w2 ages out: pruned by the next listing, it is kept as q's last worker.
    world.call("config.set", "max-worker-age", 50)
    assert world.call("worker.list", now=T0 + 100) == "[]"
    assert world.call("worker.info", "w2", now=T0 + 100) == "{}"
    facts = world.facts("a", now=T0 + 100)
    assert (facts["last"], facts["last_seen"]) == ("w2", T0 + 10)
    # A worker pruned later but seen earlier does not replace the one seen last.
    world.listen("w0", ("q",), now=T0 + 2)
    world.call("config.set", "max-worker-age", 0)
    world.call("workers", now=T0 + 200)
    assert world.facts("a", now=T0 + 200)["last"] == "w2"


def test_a_full_queue(world: World) -> None:
    world.listen()
    world.call("config.set", "q-max-concurrency", 1)
    world.put("a")
    world.put("b")
    assert world.pop() == ["a"]
    check(world, "b", "queue-full", "Its queue q runs at its max-concurrency (1 of 1).")


def test_parked_on_a_concurrency_key_and_a_throttle(world: World) -> None:
    world.listen()
    world.put("a", "concurrency_key", "acct-1")
    world.put("b", "concurrency_key", "acct-1")
    world.call("throttle.set", "api", 1)
    world.put("c", "throttle", "api")
    world.put("d", "throttle", "api")
    assert world.pop() == ["a", "c"]
    check(
        world,
        "b",
        "concurrency-key",
        "It is parked: its concurrency key 'acct-1' allows 1 at once, held by a.",
    )
    check(
        world,
        "d",
        "throttle",
        "It is parked on the throttle 'api': limit 1, 1 running, held by c.",
    )


def test_running_stalled_scheduled_and_retry_delay(world: World) -> None:
    world.listen()
    world.put("a", "retries", 2)
    assert world.pop() == ["a"]
    check(
        world,
        "a",
        "running",
        "It is running on worker w1, its lock valid until 2023-11-14 01:01:00 UTC (1m from now).",
    )
    check(
        world,
        "a",
        "stalled",
        "Its worker w1 stopped renewing its lock, which ran out at 2023-11-14 01:01:00 UTC "
        "(1m ago): the next pop or housekeeping gives it to another worker.",
        now=T0 + 120,
    )
    world.call("retry", "a", "q", "w1", 30, "timeout", "took too long", now=T0 + 10)
    check(
        world,
        "a",
        "retry-delay",
        "Attempt 2 waits for its retry delay after a failure (timeout): due at "
        "2023-11-14 01:00:40 UTC (30s from now).",
        now=T0 + 10,
    )
    world.put("later", delay=3600)
    check(
        world,
        "later",
        "scheduled",
        "It is scheduled: due at 2023-11-14 02:00:00 UTC (1h from now).",
    )
    world.put("soon", "ttl", 300)
    check(
        world,
        "soon",
        "queued",
        "It is waiting its turn in queue q: 0 job(s) ahead, 1 live worker(s) listening. "
        "It must start by 2023-11-14 01:05:00 UTC (5m from now) or it expires.",
    )


def test_a_retry_whose_delay_passed_is_explained_as_waiting(world: World) -> None:
    """Once its delay passed, a retry is due: what holds it is what holds a waiting job, until
    pop or housekeeping promotes it and after."""
    world.listen()
    world.put("a", "retries", 2)
    assert world.pop() == ["a"]
    world.call("retry", "a", "q", "w1", 30, "timeout", "took too long", now=T0 + 10)
    no_worker = (
        "No live worker listens on its queue q; the last one, w1, was seen "
        "2023-11-14 01:00:10 UTC (9m ago)."
    )
    check(world, "a", "no-worker", no_worker, now=T0 + 600)
    facts = world.facts("a", now=T0 + 600)
    assert facts["state"] == "scheduled" and facts["due"] == T0 + 40 and "until" not in facts
    # Due at its time exactly, as Queue.promote counts it; the worker is still live then.
    check(
        world,
        "a",
        "queued",
        "It is waiting its turn in queue q: 0 job(s) ahead, 1 live worker(s) listening.",
        now=T0 + 40,
    )
    # Promoted by housekeeping, it says the same.
    world.call("maintain", "q", now=T0 + 600)
    assert world.facts("a", now=T0 + 600)["state"] == "waiting"
    check(world, "a", "no-worker", no_worker, now=T0 + 600)


def test_a_due_scheduled_job_counts_the_jobs_it_will_queue_behind(world: World) -> None:
    world.put("later", delay=3600)
    check(
        world,
        "later",
        "no-worker",
        "No live worker listens on its queue q; none has ever registered for it "
        "(start one: flows worker -q q).",
        now=T0 + 3600,
    )
    world.put("first", delay=60)  # due before it: promoted before it
    world.put("urgent", "priority", -1)
    world.put("same", "priority", 0)
    world.put("behind", "priority", 1)
    world.put("low-due", "priority", 1, delay=30)  # due first, but of a lower priority
    world.listen(now=T0 + 3600)
    check(
        world,
        "later",
        "queued",
        "It is waiting its turn in queue q: 3 job(s) ahead, 1 live worker(s) listening.",
        now=T0 + 3600,
    )
    world.call("maintain", "q", now=T0 + 3600)
    assert world.facts("later", now=T0 + 3600)["state"] == "waiting"
    check(
        world,
        "later",
        "queued",
        "It is waiting its turn in queue q: 3 job(s) ahead, 1 live worker(s) listening.",
        now=T0 + 3600,
    )


def test_a_job_past_its_ttl_deadline_is_about_to_expire(world: World) -> None:
    world.listen()
    world.put("soon", "ttl", 300)
    world.put("held", "ttl", 300, delay=60)  # scheduled: its deadline counts from its delay
    world.put("kept", "ttl", 300)
    world.call("bury", "kept", "w1", "bad input file")
    check(
        world,
        "kept",
        "buried",
        "It is buried (bad input file): it runs again only when it is kicked (flows kick "
        "--job kept, or its queue's longest-buried jobs: flows kick q). It must start by "
        "2023-11-14 01:05:00 UTC (5m from now) or it expires.",
    )
    expiring = (
        "It did not start before its ttl deadline, 2023-11-14 01:05:00 UTC (0s ago): the next "
        "pop or housekeeping expires it."
    )
    check(world, "soon", "expiring", expiring, now=T0 + 300)
    check(world, "kept", "expiring", expiring, now=T0 + 300)
    check(
        world,
        "held",
        "expiring",
        "It did not start before its ttl deadline, 2023-11-14 01:06:00 UTC (1m ago): the next "
        "pop or housekeeping expires it.",
        now=T0 + 420,
    )
    world.call("maintain", "q", now=T0 + 420)
    for jid in ("soon", "held", "kept"):
        check(world, jid, "expired", "It expired: it did not start before its ttl deadline.")


def test_dependencies_upstream_failure_and_endings(world: World) -> None:
    world.listen()
    world.put("a", "retries", 0)
    world.put("b", "depends", json.dumps(["a"]))
    check(
        world,
        "b",
        "dependencies",
        "It waits for its dependencies (trigger rule all_success): a (waiting).",
    )
    assert world.pop() == ["a"]
    world.call("fail", "a", "w1", "boom", "ValueError: no rows")
    check(world, "a", "failed", "It failed in group boom: ValueError: no rows")
    check(
        world,
        "b",
        "upstream-failed",
        "An upstream job will not complete by itself: a (failed); under its trigger rule "
        "all_success it does not run until that one is put back (flows retry, or flows kick for "
        "a buried one) and succeeds.",
    )
    # Held back by a job held back itself: upstream_failed, as the run's read says of it.
    world.put("b2", "depends", json.dumps(["b"]), "trigger", "none_failed")
    check(
        world,
        "b2",
        "upstream-failed",
        "An upstream job will not complete by itself: b (upstream_failed); under its trigger "
        "rule none_failed it does not run until that one is put back (flows retry, or flows "
        "kick for a buried one) and succeeds.",
    )
    world.put("c")
    assert world.pop() == ["c"]
    world.call("complete", "c", "w1", "q", "{}")
    check(world, "c", "complete", "It completed.")
    world.put("d")
    world.put("d2", "depends", json.dumps(["d"]))  # all_success: skipped when d is skipped
    world.put("c2")
    world.put("alarm", "depends", json.dumps(["c2"]), "trigger", "one_failed")
    assert world.pop() == ["d", "c2"]
    world.call("complete", "d", "w1", "q", "", "skipped", "its if: condition is false")
    check(world, "d", "skipped", "It was skipped (its if: condition is false).")
    check(world, "d2", "skipped", "It was skipped (trigger rule all_success: d was skipped).")
    world.call("complete", "c2", "w1", "q", "{}")
    check(
        world, "alarm", "skipped", "It was skipped (trigger rule one_failed: no dependency failed)."
    )
    world.put("e")
    world.call("bury", "e", "w1", "bad input file")
    check(
        world,
        "e",
        "buried",
        "It is buried (bad input file): it runs again only when it is kicked (flows kick "
        "--job e, or its queue's longest-buried jobs: flows kick q).",
    )
    # A buried dependency holds its dependents back as a failed one does (upstream_failed).
    world.put("g", "depends", json.dumps(["e"]))
    check(
        world,
        "g",
        "upstream-failed",
        "An upstream job will not complete by itself: e (buried); under its trigger rule "
        "all_success it does not run until that one is put back (flows retry, or flows kick for "
        "a buried one) and succeeds.",
    )
    world.put("f", "ttl", 5)
    world.call("maintain", "q", 100, now=T0 + 10)
    check(world, "f", "expired", "It expired: it did not start before its ttl deadline.", T0 + 10)


def test_a_step_completed_from_the_cache(world: World) -> None:
    world.listen()
    world.put("p")
    world.put("c")
    assert world.pop() == ["p", "c"]
    assert json.loads(world.call("cache.use", "p", "w1", "q", "k", 3600, 1)) == {"hit": False}
    world.call("complete", "p", "w1", "q", "", "result", '{"n": 1}')
    reply = json.loads(world.call("cache.use", "c", "w1", "q", "k", 3600, 1))
    assert reply["hit"] is True
    check(
        world,
        "c",
        "cached",
        "It completed from the step cache with the result of p (its logs have the lines).",
    )


def _submit(world: World, run_id: str, *jobs: dict[str, Any], now: float = T0) -> None:
    assert (
        world.call(
            "flow.submit", run_id, json.dumps({"flow": "f"}), json.dumps(list(jobs)), now=now
        )
        == "submitted"
    )


def _job(jid: str, **extra: Any) -> dict[str, Any]:
    return {"jid": jid, "queue": "q", "klass": "K", "data": "{}", **extra}


def test_a_wait_and_a_sub_flow_step(world: World) -> None:
    _submit(
        world,
        "r@1",
        _job("r@1:gate", wait={"signal": "approve", "timeout": 3600, "on_timeout": "fail"}),
        _job("r@1:step", klass="flows.runtime.subflow.run"),
    )
    check(
        world,
        "r@1:gate",
        "awaiting",
        "It awaits the signal 'approve' since 2023-11-14 01:00:00 UTC (0s ago), until "
        "2023-11-14 02:00:00 UTC (1h from now).",
    )
    assert world.pop(now=T0 + 1) == ["r@1:step"]
    child = json.dumps([{"jid": "r@1.step:x", "queue": "c", "klass": "K", "data": "{}"}])
    run = json.dumps({"flow": "c", "parent_run": "r@1", "parent_step": "step"})
    reply = world.call("subflow.wait", "r@1:step", "w1", "q", "r@1.step", run, child, now=T0 + 1)
    assert reply == "waiting"
    check(world, "r@1:step", "child-run", "It waits for its child run r@1.step to end.", T0 + 1)


def test_a_wait_past_its_timeout_is_about_to_time_out(world: World) -> None:
    _submit(
        world,
        "r@1",
        _job("r@1:gate", wait={"signal": "approve", "timeout": 3600, "on_timeout": "fail"}),
        _job("r@1:opt", wait={"signal": "extra", "timeout": 60, "on_timeout": "skip"}),
        _job("r@1:free", wait={"signal": "any"}),
    )
    check(
        world,
        "r@1:gate",
        "timed-out",
        "Its wait for the signal 'approve' timed out at 2023-11-14 02:00:00 UTC (0s ago): the "
        "scheduler's next housekeeping fails it (on_timeout fail); a signal before then still "
        "completes it.",
        now=T0 + 3600,
    )
    check(
        world,
        "r@1:opt",
        "timed-out",
        "Its wait for the signal 'extra' timed out at 2023-11-14 01:01:00 UTC (59m ago): the "
        "scheduler's next housekeeping skips it (on_timeout skip); a signal before then still "
        "completes it.",
        now=T0 + 3600,
    )
    # `flows status` words a wait from the same reply, in the same words.
    lines = {
        T0 + 57: "awaiting signal 'extra', times out (skip) in 3s",
        T0 + 63: "awaiting signal 'extra', timed out 3s ago: the scheduler's next housekeeping "
        "skips it (on_timeout skip); a signal before then still completes it",
    }
    for moment, line in lines.items():
        assert wait_line(world.facts("r@1:opt", moment), moment) == line
    assert wait_line(world.facts("r@1:gate", T0 + 60), T0 + 60) == (
        "awaiting signal 'approve', times out (fail) in 59m"
    )
    assert wait_line(world.facts("r@1:free", T0 + 60), T0 + 60) == "awaiting signal 'any'"
    assert json.loads(world.call("wait.sweep", now=T0 + 3600)) == {"failed": 1, "skipped": 1}
    check(
        world,
        "r@1:gate",
        "failed",
        'It failed in group wait-timeout: no signal "approve" came within 3600 seconds of the '
        "wait becoming ready",
        now=T0 + 3600,
    )
    assert wait_line(world.facts("r@1:gate", T0 + 3600), T0 + 3600) is None


def test_every_reason_has_a_sentence_and_a_test() -> None:
    """Each reason the engine gives is built and checked above (named in a check() call)."""
    source = Path(__file__).read_text()
    untested = [r for r in REASONS if f'"{r}",' not in source and f', "{r}", ' not in source]
    assert untested == []


def test_a_missing_job_and_bad_input(world: World) -> None:
    assert explain(world.client, "nope", now=T0) is None
    with pytest.raises(InvalidArgument):
        world.call("job.explain", "")
    with pytest.raises(InvalidArgument):
        world.call("job.explain", "a", "b")
