"""The Python client end to end, over the real embedded server (fixtures in tests/conftest.py).

Where time matters, every call passes ``now=`` explicitly (from ``T0``); nothing sleeps.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
import redis
from helpers import assert_unchanged

from scheduler import (
    Client,
    EngineError,
    FailedJobs,
    HasDependents,
    InvalidArgument,
    Job,
    JobNotFound,
    LockLost,
    RecurringJob,
    TooLarge,
    UnknownCommand,
    WrongState,
)
from scheduler.embedded import EmbeddedServer
from scheduler.engine.errors import ClientClosed, translate
from scheduler.engine.replies import as_list
from scheduler.engine.scripts import Engine

T0 = 1_700_000_000.0  # 22:13 UTC: T0 + a few hours stays within one day for the stats


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="worker-1")


@pytest.fixture
def other(engine: Engine) -> Client:
    """A second worker on the same namespace."""
    return Client.from_engine(engine, worker_name="worker-2")


def put(client: Client, queue: str = "q", **options: Any) -> str:
    options.setdefault("now", T0)
    return client.queues[queue].put("tasks.work", {"n": 1}, **options)


def pop_one(client: Client, queue: str = "q", now: float = T0) -> Job:
    jobs = client.queues[queue].pop(now=now)
    assert len(jobs) == 1, jobs
    return jobs[0]


# -- construction ---------------------------------------------------------------------------


def test_default_worker_name_is_host_and_pid(engine: Engine) -> None:
    assert Client.from_engine(engine).worker_name == f"{socket.gethostname()}-{os.getpid()}"


def test_default_client_uses_the_embedded_server() -> None:
    # conftest points $FLOWS_DATA_DIR into the session's temp dir and stops this server at the end.
    with Client(worker_name="w") as client:
        assert client.redis.ping()
        jid = client.queues["q"].put("k", {})
        assert client.jobs[jid].state == "waiting"
        client.jobs[jid].cancel()


def test_client_over_a_redis_client(redis_client: redis.Redis) -> None:
    client = Client(redis=redis_client, worker_name="w")
    assert client.redis is redis_client
    assert client.prefix == "ql:"
    assert client.engine.prefix is None
    jid = client.queues["q"].put("k", {})
    assert redis_client.exists(f"ql:j:{jid}")
    client.close()  # not ours: the connection stays usable, and so does the client
    assert redis_client.ping()
    assert client.jobs[jid].state == "waiting"


def test_a_closed_client_refuses_calls_instead_of_reconnecting(
    server: EmbeddedServer, redis_client: redis.Redis
) -> None:
    client = Client(server.url, worker_name="closing")
    jid = client.queues["q"].put("k", {})
    client.close()
    connected = len(redis_client.client_list())
    for call in (
        lambda: client.jobs.get(jid),
        lambda: client.queues["q"].put("k", {}),
        lambda: client.redis,
        lambda: client.events().subscribe(),
    ):
        with pytest.raises(ClientClosed, match=r"^this Client was closed: make a new one"):
            call()
    assert len(redis_client.client_list()) == connected
    client.close()  # twice is fine


def test_client_from_a_url(redis_client: redis.Redis) -> None:
    kwargs = redis_client.get_connection_kwargs()
    url = (
        f"unix://{kwargs['path']}"
        if kwargs.get("path")
        else f"redis://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    )
    with Client(url, worker_name="w") as client:
        jid = client.queues["q"].put("k", {"a": 1})
        assert client.jobs[jid].data == {"a": 1}


def test_client_refuses_bad_construction(redis_client: redis.Redis) -> None:
    raw = redis.Redis(
        connection_pool=redis.ConnectionPool(
            **{
                **redis_client.get_connection_kwargs(),
                "decode_responses": False,
            }
        )
    )
    with pytest.raises(ValueError, match="decode_responses"):
        Client(redis=raw)
    raw.close()
    with pytest.raises(ValueError, match="either url or redis"):
        Client("redis://localhost", redis=redis_client)
    for bad in ("", "a b", "{x}", "{x}: y:"):
        with pytest.raises(ValueError, match="namespace"):
            Client(redis=redis_client, namespace=bad)


# -- put, get, pop, complete ---------------------------------------------------------------------


def test_put_and_get_round_trip_every_field(client: Client) -> None:
    jid = client.queues["etl"].put(
        "tasks.extract",
        {"day": "2024-05-01"},
        priority=3,
        tags=["a", "b"],
        retries=2,
        jid="job-1",
        now=T0,
    )
    assert jid == "job-1"
    job = client.jobs["job-1"]
    assert (job.jid, job.klass, job.queue, job.state) == (
        "job-1",
        "tasks.extract",
        "etl",
        "waiting",
    )
    assert job.data == {"day": "2024-05-01"}
    assert (job.priority, job.retries, job.remaining) == (3, 2, 2)
    assert sorted(job.tags) == ["a", "b"]
    assert job.worker == ""
    assert job.failure is None and job.result is None and job.spawned_from_jid is None
    assert job.dependencies == [] and job.dependents == []  # {} from cjson becomes []
    assert job.tracked is False
    assert job.created == T0 and job.updated == T0
    assert job.history[0]["what"] == "put" and job.history[0]["q"] == "etl"
    assert "job-1" in repr(job)


def test_put_generates_a_uuid_jid_and_accepts_a_callable_klass(client: Client) -> None:
    jid = client.queues["q"].put(test_put_and_get_round_trip_every_field)
    assert len(jid) == 32 and int(jid, 16) >= 0
    assert client.jobs[jid].klass == f"{__name__}.test_put_and_get_round_trip_every_field"
    assert client.jobs[jid].data == {}


def test_get_of_a_missing_job(client: Client) -> None:
    assert client.jobs.get("nope") is None
    with pytest.raises(JobNotFound):
        client.jobs["nope"]


def test_multiget_skips_missing_jobs(client: Client) -> None:
    a, b = put(client), put(client)
    assert sorted(j.jid for j in client.jobs.multiget(a, "missing", b)) == sorted([a, b])
    assert client.jobs.multiget() == []


def test_pop_complete_with_result(client: Client) -> None:
    jid = put(client)
    job = pop_one(client, now=T0 + 5)
    assert (job.jid, job.state, job.worker) == (jid, "running", "worker-1")
    assert job.expires == T0 + 5 + 60
    assert job.ttl(now=T0 + 15) == 50
    assert job.complete(result={"rows": 42}, now=T0 + 10) == "complete"
    done = client.jobs[jid]
    assert done.state == "complete" and done.result == {"rows": 42}
    assert [h["what"] for h in done.history] == ["put", "popped", "done"]
    assert client.jobs.complete() == [jid]
    assert client.queues["q"].pop(now=T0 + 11) == []


def test_result_may_be_any_json_value(client: Client) -> None:
    put(client, jid="j")
    pop_one(client).complete(result=[1, "two", None], now=T0 + 1)
    assert client.jobs["j"].result == [1, "two", None]


def test_lower_priority_number_pops_first_then_insertion_order(client: Client) -> None:
    late = put(client, priority=5)
    first = put(client, priority=0)
    second = put(client, priority=0)
    urgent = put(client, priority=-3)
    queue = client.queues["q"]
    assert [j.jid for j in queue.peek(4, now=T0)] == [urgent, first, second, late]
    assert queue.jobs.waiting(now=T0) == [urgent, first, second, late]
    assert [j.jid for j in queue.pop(4, now=T0)] == [urgent, first, second, late]


def test_peek_changes_nothing(client: Client, redis_client: redis.Redis) -> None:
    put(client)
    with assert_unchanged(redis_client):
        [job] = client.queues["q"].peek(now=T0)
    assert job.state == "waiting"


def test_complete_into_a_next_queue_with_delay(client: Client) -> None:
    jid = put(client)
    job = pop_one(client)
    assert job.complete("later", delay=30, now=T0 + 1) == "scheduled"
    assert job.queue == "later"
    later = client.queues["later"]
    assert later.jobs.scheduled(now=T0 + 2) == [jid]
    assert later.pop(now=T0 + 30) == []
    assert [j.jid for j in later.pop(now=T0 + 31)] == [jid]


def test_complete_into_a_next_queue_with_depends(client: Client) -> None:
    blocker = put(client, queue="other")
    jid = put(client)
    assert pop_one(client).complete("next", depends=[blocker], now=T0 + 1) == "depends"
    assert client.queues["next"].jobs.depends(now=T0 + 1) == [jid]


# -- failures, retries, heartbeats -----------------------------------------------------------------


def test_fail_failed_and_unfail(client: Client) -> None:
    jid = put(client)
    job = pop_one(client)
    assert job.fail("io-error", "disk full", data={"n": 2}, now=T0 + 1) == jid
    assert client.failed(now=T0 + 1) == {"io-error": 1}
    page = client.jobs.failed("io-error", now=T0 + 1)
    assert isinstance(page, FailedJobs) and page.total == 1
    [failed] = page.jobs
    assert failed.state == "failed" and failed.data == {"n": 2}
    assert failed.failure is not None
    assert failed.failure["group"] == "io-error" and failed.failure["message"] == "disk full"
    assert client.failed("io-error", 0, 10, now=T0 + 1).total == 1
    assert client.unfail("q", "io-error", now=T0 + 2) == 1
    assert client.jobs[jid].state == "waiting"
    assert client.failed(now=T0 + 2) == {}


def test_fail_a_waiting_job(client: Client) -> None:
    jid = put(client)
    client.jobs[jid].fail("bad-input", "no such file", now=T0 + 1)
    assert client.jobs[jid].state == "failed"


def test_retry_uses_retries_then_fails(client: Client) -> None:
    jid = put(client, retries=1)
    job = pop_one(client, now=T0 + 1)
    assert job.retry(now=T0 + 2) == 0
    assert client.jobs[jid].state == "waiting"
    job = pop_one(client, now=T0 + 3)
    assert job.retry(group="flaky", message="gave up", now=T0 + 4) < 0
    failed = client.jobs[jid]
    assert failed.state == "failed"
    assert failed.failure is not None and failed.failure["group"] == "flaky"


def test_retry_defaults_the_failure_when_out_of_retries(client: Client) -> None:
    jid = put(client, retries=0)
    assert pop_one(client).retry(group="flaky", now=T0 + 1) < 0
    failure = client.jobs[jid].failure
    assert failure is not None and failure["group"] == "flaky" and failure["message"]


def test_retry_with_delay_schedules(client: Client) -> None:
    jid = put(client)
    pop_one(client).retry(delay=10, now=T0 + 1)
    assert client.queues["q"].jobs.scheduled(now=T0 + 2) == [jid]
    assert [j.jid for j in client.queues["q"].pop(now=T0 + 11)] == [jid]


def test_heartbeat_extends_the_lock(client: Client) -> None:
    put(client)
    job = pop_one(client, now=T0)
    assert job.heartbeat(now=T0 + 30) == T0 + 90
    assert job.expires == T0 + 90
    assert job.heartbeat({"progress": 0.5}, now=T0 + 40) == T0 + 100
    assert client.jobs[job.jid].data == {"progress": 0.5}


def test_timeout_takes_the_lock_away(client: Client) -> None:
    put(client)
    job = pop_one(client)
    job.timeout(now=T0 + 1)
    with pytest.raises(LockLost):
        job.heartbeat(now=T0 + 2)
    with pytest.raises(LockLost):
        job.complete(now=T0 + 2)


def test_an_expired_lock_is_reclaimed_by_another_worker(client: Client, other: Client) -> None:
    client.config["grace-period"] = 0
    put(client)
    stale = pop_one(client, now=T0)
    assert client.queues["q"].jobs.stalled(now=T0 + 61) == [stale.jid]
    taken = pop_one(other, now=T0 + 61)
    assert taken.jid == stale.jid and taken.worker == "worker-2"
    with pytest.raises(LockLost):
        stale.complete(now=T0 + 62)
    assert taken.complete(now=T0 + 62) == "complete"


# -- error mapping: each engine code raises its class --------------------------------------------


def test_complete_by_the_wrong_worker_is_lock_lost(client: Client, other: Client) -> None:
    jid = put(client)
    pop_one(client)
    imposter = other.jobs[jid]
    with pytest.raises(LockLost) as raised:
        imposter.complete(now=T0 + 1)
    assert raised.value.code == "LOCKLOST" and raised.value.command == "complete"


def test_complete_of_a_waiting_job_is_wrong_state(client: Client) -> None:
    job = client.jobs[put(client)]
    with pytest.raises(WrongState):
        job.complete(now=T0 + 1)


def test_unknown_jid_is_job_not_found(client: Client) -> None:
    with pytest.raises(JobNotFound):
        client.engine.call("complete", "missing", "worker-1", "q", "{}")
    with pytest.raises(JobNotFound):
        client.queues["q"].requeue("k", {}, jid="missing")
    with pytest.raises(JobNotFound):
        client.jobs.recurring("missing")


def test_bad_argument_is_invalid_and_changes_nothing(
    client: Client, redis_client: redis.Redis
) -> None:
    put(client)
    with assert_unchanged(redis_client):
        with pytest.raises(InvalidArgument) as raised:
            client.queues["q"].put("k", {}, priority="high")  # type: ignore[arg-type]
        assert "priority" in str(raised.value)
        with pytest.raises(InvalidArgument):
            client.queues["q"].put("k", {}, delay=-1)
        with pytest.raises(InvalidArgument):
            client.queues["q"].pop(now="yesterday")
        with pytest.raises(InvalidArgument):
            client.jobs.tagged("has space")


def test_oversized_id_is_too_large(client: Client, redis_client: redis.Redis) -> None:
    with assert_unchanged(redis_client), pytest.raises(TooLarge):
        client.queues["q"].put("k", {}, jid="x" * 1000)
    with assert_unchanged(redis_client), pytest.raises(TooLarge):
        client.queues["q"].put("k", {"blob": "x" * 600_000})


def test_unknown_command(client: Client) -> None:
    with pytest.raises(UnknownCommand):
        client.engine.call("no-such-command")


def test_every_code_has_a_distinct_engine_error_class() -> None:
    classes = [
        InvalidArgument,
        JobNotFound,
        WrongState,
        LockLost,
        HasDependents,
        TooLarge,
        UnknownCommand,
    ]
    assert len({cls.code for cls in classes}) == len(classes)
    assert all(issubclass(cls, EngineError) for cls in classes)
    for cls in [*classes, EngineError]:
        error = translate(redis.ResponseError(f"{cls.code} Cmd(): went wrong"), "cmd")
        assert type(error) is cls and str(error) == "Cmd(): went wrong"
    assert translate(redis.ResponseError("WRONGTYPE not ours")) is None


# -- dependencies and cancel -----------------------------------------------------------------------


def test_cancel_with_a_dependent_is_refused(client: Client, redis_client: redis.Redis) -> None:
    first = put(client)
    second = put(client, depends=[first])
    assert client.jobs[second].state == "depends"
    assert client.jobs[first].dependents == [second]
    with assert_unchanged(redis_client), pytest.raises(HasDependents):
        client.jobs[first].cancel()
    assert sorted(client.jobs.cancel(first, second)) == sorted([first, second])
    assert client.jobs.get(first) is None and client.jobs.get(second) is None


def test_cancel_one_job(client: Client) -> None:
    jid = put(client)
    assert client.jobs[jid].cancel() == [jid]
    assert client.jobs.get(jid) is None


def test_dependents_are_released_when_the_dependency_completes(client: Client) -> None:
    first = put(client)
    second = put(client, depends=[first])
    assert client.queues["q"].jobs.depends(now=T0) == [second]
    pop_one(client).complete(now=T0 + 1)
    assert client.jobs[second].state == "waiting"


def test_depend_and_undepend(client: Client) -> None:
    a, b = put(client), put(client)
    jid = put(client, depends=[a])
    job = client.jobs[jid]
    assert job.depend(b) is True
    assert sorted(client.jobs[jid].dependencies) == sorted([a, b])
    assert job.undepend(a) is True
    assert client.jobs[jid].dependencies == [b]
    assert job.undepend(all=True) is True
    assert client.jobs[jid].state == "waiting"
    with pytest.raises(WrongState):
        job.depend(a)


def test_delay_with_depends_counts_from_the_last_dependency(client: Client) -> None:
    first = put(client)
    jid = put(client, depends=[first], delay=30)
    assert client.jobs[jid].state == "depends"
    job = pop_one(client, now=T0 + 100)
    assert job.jid == first
    job.complete(now=T0 + 100)
    assert client.jobs[jid].state == "scheduled"
    assert client.queues["q"].pop(now=T0 + 129) == []
    assert pop_one(client, now=T0 + 130).jid == jid


# -- job management --------------------------------------------------------------------------------


def test_priority_setter_reorders_a_waiting_job(client: Client) -> None:
    a, b = put(client), put(client)
    job = client.jobs[b]
    job.priority = -1
    assert job.priority == -1 and client.jobs[b].priority == -1
    assert job.set_priority(-2, now=T0) == -2
    assert [j.jid for j in client.queues["q"].peek(2, now=T0)] == [b, a]


def test_tags(client: Client) -> None:
    a = put(client, tags=["red"])
    b = put(client)
    assert sorted(client.jobs[b].tag("red", "blue")) == ["blue", "red"]
    assert client.jobs[a].tag("blue") and sorted(client.jobs[a].tags) == ["blue", "red"]
    tagged = client.jobs.tagged("red")
    assert tagged.total == 2 and sorted(tagged.jids) == sorted([a, b])
    assert sorted(client.tags()) == ["blue", "red"]
    assert client.jobs[b].untag("red") == ["blue"]
    assert client.jobs.tagged("red").jids == [a]
    assert client.jobs.tagged("none") == (0, [])


def test_track_and_untrack(client: Client) -> None:
    jid = put(client)
    job = client.jobs[jid]
    assert job.track() is True and job.tracked
    assert client.jobs[jid].tracked is True
    tracked = client.jobs.tracked()
    assert [j.jid for j in tracked.jobs] == [jid] and tracked.expired == []
    assert job.untrack() is True and not job.tracked
    assert client.jobs.tracked().jobs == []


def test_tracked_job_whose_data_expired_is_listed_as_expired(client: Client) -> None:
    client.config["jobs-history-count"] = 0
    jid = put(client)
    client.jobs[jid].track()
    pop_one(client).complete(now=T0 + 1)  # retention drops it at once
    assert client.jobs.get(jid) is None
    assert client.jobs.tracked().expired == [jid]


def test_log_appends_to_history(client: Client) -> None:
    jid = put(client)
    client.jobs[jid].log("checkpoint", {"step": 3}, now=T0 + 1)
    entry = client.jobs[jid].history[-1]
    assert entry["what"] == "checkpoint" and entry["step"] == 3 and entry["when"] == T0 + 1


def test_job_requeue_moves_it(client: Client) -> None:
    jid = put(client, priority=4, tags=["x"])
    job = pop_one(client)
    assert job.requeue("elsewhere", now=T0 + 1) == jid
    moved = client.jobs[jid]
    assert (moved.queue, moved.state, moved.priority, moved.tags) == (
        "elsewhere",
        "waiting",
        4,
        ["x"],
    )
    assert client.queues["elsewhere"].jobs.waiting(now=T0 + 1) == [jid]


@pytest.mark.parametrize(
    ("how", "error"), [("requeue", WrongState), ("put", WrongState), ("cancel", JobNotFound)]
)
def test_a_worker_whose_job_was_taken_away_is_refused(
    client: Client, how: str, error: type[Exception]
) -> None:
    jid = put(client)
    job = pop_one(client)
    if how == "requeue":
        client.jobs[jid].requeue("elsewhere", now=T0 + 1)
    elif how == "put":
        put(client, jid=jid, now=T0 + 1)
    else:
        client.jobs[jid].cancel(now=T0 + 1)
    with pytest.raises(error):
        job.heartbeat(now=T0 + 2)
    with pytest.raises(error):
        job.complete(now=T0 + 2)
    with pytest.raises(error):
        client.engine.call("fail.held", jid, job.worker or client.worker_name, "g", "m", now=T0 + 2)


def test_queue_requeue_an_existing_job(client: Client) -> None:
    jid = put(client)
    assert client.queues["b"].requeue("other.klass", {"m": 1}, jid=jid, now=T0 + 1) == jid
    job = client.jobs[jid]
    assert (job.queue, job.klass, job.data) == ("b", "other.klass", {"m": 1})


def test_refresh(client: Client) -> None:
    jid = put(client)
    job = client.jobs[jid]
    pop_one(client)
    assert job.refresh(now=T0 + 1).state == "running"
    job.cancel()
    with pytest.raises(JobNotFound):
        job.refresh()


# -- queues ---------------------------------------------------------------------------------------


def test_queue_counts_length_pause(client: Client) -> None:
    queue = client.queues["q"]
    put(client)
    put(client)
    put(client, delay=100)
    pop_one(client)
    counts = queue.counts(now=T0 + 1)
    assert counts["name"] == "q"
    assert (counts["waiting"], counts["running"], counts["scheduled"]) == (1, 1, 1)
    assert queue.length(now=T0 + 1) == 3
    assert queue.paused() is False
    queue.pause()
    assert queue.paused() is True
    assert queue.pop(now=T0 + 2) == []
    queue.unpause()
    assert len(queue.pop(now=T0 + 2)) == 1
    assert [c["name"] for c in client.queues.counts(now=T0 + 2)] == ["q"]


def test_len_of_a_queue_uses_the_server_clock(client: Client) -> None:
    queue = client.queues["fresh"]
    queue.put("k", {})
    assert len(queue) == 1


def test_queue_forget(client: Client) -> None:
    put(client, queue="a")
    put(client, queue="b")
    client.queues["a"].forget()
    assert [c["name"] for c in client.queues.counts()] == ["b"]


def test_queue_jobs_by_state(client: Client) -> None:
    queue = client.queues["q"]
    running = put(client)
    pop_one(client, now=T0)
    scheduled = put(client, delay=1000)
    blocked = put(client, depends=[scheduled])
    assert queue.jobs.running(now=T0 + 1) == [running]
    assert queue.jobs.stalled(now=T0 + 1) == []
    assert queue.jobs.stalled(now=T0 + 500) == [running]
    assert queue.jobs.scheduled(now=T0 + 1) == [scheduled]
    assert queue.jobs.depends(now=T0 + 1) == [blocked]
    assert queue.jobs.recurring() == []
    many = [put(client) for _ in range(5)]
    assert queue.jobs.waiting(1, 2, now=T0 + 1) == many[1:3]


def test_stats(client: Client) -> None:
    put(client)
    pop_one(client, now=T0 + 10).complete(now=T0 + 40)
    stats = client.queues["q"].stats(now=T0 + 50)
    assert stats["wait"]["count"] == 1 and stats["wait"]["mean"] == 10
    assert stats["run"]["count"] == 1 and stats["run"]["mean"] == 30
    assert stats == client.queues["q"].stats(T0, now=T0 + 50)
    assert client.queues["q"].stats(T0 + 86400 * 3)["run"]["count"] == 0


def test_stats_default_to_today_by_the_server_clock(client: Client) -> None:
    client.queues["q"].put("k", {})
    client.queues["q"].pop()
    assert client.queues["q"].stats()["wait"]["count"] == 1


# -- recurring jobs -------------------------------------------------------------------------------


def test_recurring_job_lifecycle(client: Client) -> None:
    queue = client.queues["cron"]
    jid = queue.recur(
        "tasks.tick", {"k": 1}, 60, priority=2, tags=["t"], retries=1, jid="tick", now=T0
    )
    assert jid == "tick"
    recurring = client.jobs.recurring("tick")
    assert isinstance(recurring, RecurringJob)
    assert (recurring.klass, recurring.queue, recurring.interval) == ("tasks.tick", "cron", 60)
    assert (recurring.priority, recurring.retries, recurring.data) == (2, 1, {"k": 1})
    assert recurring.tags == ["t"] and "tick" in repr(recurring)
    assert queue.jobs.recurring() == ["tick"]
    [spawned] = queue.pop(now=T0)
    assert spawned.spawned_from_jid == "tick" and spawned.klass == "tasks.tick"
    assert spawned.tags == ["t"]
    assert queue.pop(now=T0 + 59) == []
    assert len(queue.pop(now=T0 + 60)) == 1

    recurring.update(priority=-1, interval=120, data={"k": 2}, klass="tasks.tock", now=T0 + 61)
    assert (recurring.priority, recurring.interval, recurring.klass) == (-1, 120, "tasks.tock")
    assert recurring.data == {"k": 2} and recurring.count == 2
    assert sorted(recurring.tag("u")) == ["t", "u"]
    assert recurring.untag("t") == ["u"]
    assert client.jobs.recurring("tick").tags == ["u"]
    recurring.cancel()
    with pytest.raises(JobNotFound):
        recurring.refresh()
    assert queue.jobs.recurring() == []


def test_recurring_with_offset_and_backlog(client: Client) -> None:
    queue = client.queues["cron"]
    queue.recur("k", {}, 10, 5, backlog=2, jid="r", now=T0)
    assert queue.pop(now=T0 + 4) == []
    assert client.jobs.recurring("r").backlog == 2
    # Long after: one child per missed interval, but at most `backlog` of them.
    assert [job.jid for job in queue.pop(10, now=T0 + 1000)] == ["r-1", "r-2"]


def test_recurring_update_moves_and_bounds(client: Client) -> None:
    client.queues["a"].recur("k", {}, 60, jid="r", now=T0)
    recurring = client.jobs.recurring("r")
    recurring.update(queue="b", retries=7, backlog=1, now=T0)
    assert (recurring.queue, recurring.retries, recurring.backlog) == ("b", 7, 1)
    assert client.queues["a"].jobs.recurring() == []
    assert client.queues["b"].jobs.recurring() == ["r"]
    [child] = client.queues["b"].pop(now=T0)
    assert child.retries == 7
    recurring.update(now=T0)  # nothing to change: just re-read
    with pytest.raises(InvalidArgument):
        recurring.update(interval=-5, now=T0)


# -- config and workers ---------------------------------------------------------------------------


def test_config_mapping(client: Client) -> None:
    config = client.config
    assert config["heartbeat"] == 60 and config["grace-period"] == 10
    config["heartbeat"] = 30
    assert config["heartbeat"] == 30
    config["q-heartbeat"] = 7.5
    assert config["q-heartbeat"] == 7.5
    config["note"] = "hello"
    assert config["note"] == "hello"
    everything = config.all()
    assert everything["heartbeat"] == 30 and everything["jobs-history"] == 604800
    assert "note" in config and len(config) == len(everything) and set(config) == set(everything)
    del config["heartbeat"]
    assert config["heartbeat"] == 60
    with pytest.raises(KeyError):
        config["no-such-option"]
    assert config.get("no-such-option", "x") == "x"


def test_queue_heartbeat_config_sets_the_lock(client: Client) -> None:
    client.config["q-heartbeat"] = 5
    put(client)
    assert pop_one(client, now=T0).expires == T0 + 5


def test_invalid_config_value(client: Client) -> None:
    with pytest.raises(InvalidArgument):
        client.config["heartbeat"] = "soon"


def test_workers(client: Client, other: Client) -> None:
    put(client)
    put(client)
    jid = pop_one(client, now=T0).jid
    other_jid = pop_one(other, now=T0 + 1).jid
    counts = client.workers.counts(now=T0 + 2)
    assert [w["name"] for w in counts] == ["worker-2", "worker-1"]
    assert counts[1]["jobs"] == 1 and counts[1]["stalled"] == 0
    assert client.workers.jobs("worker-1", now=T0 + 2) == {"jobs": [jid], "stalled": []}
    assert client.workers.jobs("worker-2", now=T0 + 2) == {"jobs": [other_jid], "stalled": []}
    assert client.workers.jobs("worker-2", now=T0 + 100) == {"jobs": [], "stalled": [other_jid]}
    client.deregister_workers("worker-1")
    assert [w["name"] for w in client.workers.counts(now=T0 + 2)] == ["worker-2"]
    client.deregister_workers()  # nothing to do


def test_workers_by_name_on_the_server_clock(client: Client) -> None:
    client.queues["q"].put("k", {})
    [job] = client.queues["q"].pop()
    assert client.workers["worker-1"] == {"jobs": [job.jid], "stalled": []}
    assert [w["name"] for w in client.workers] == ["worker-1"]
    assert client.workers["nobody"] == {"jobs": [], "stalled": []}


# -- pipelines, reloading, namespaces -------------------------------------------------------------


def test_pipeline_batches_calls_and_keeps_errors_in_their_slot(client: Client) -> None:
    pipe = client.engine.pipeline()
    for i in range(3):
        pipe.call("put", "w", "q", f"job-{i}", "k", "{}", 0, now=T0)
    pipe.call("complete", "missing", "w", "q", "{}", now=T0)
    pipe.call("put", "w", "q", "job-3", "k", "not json", 0, now=T0)
    assert len(pipe) == 5
    results = pipe.execute()
    assert results[:3] == ["job-0", "job-1", "job-2"]
    assert isinstance(results[3], JobNotFound)
    assert isinstance(results[4], InvalidArgument)
    assert client.queues["q"].length(now=T0) == 3
    assert pipe.execute() == []


@pytest.mark.parametrize("use_functions", [True, False], ids=["functions", "evalsha"])
def test_engine_reloads_after_a_flush(redis_client: redis.Redis, use_functions: bool) -> None:
    client = Client.from_engine(Engine(redis_client, use_functions=use_functions), worker_name="w")
    first = client.queues["q"].put("k", {})

    if use_functions:
        redis_client.function_flush()
    else:
        redis_client.script_flush()
    second = client.queues["q"].put("k", {})
    assert client.jobs[second].state == "waiting"

    if use_functions:
        redis_client.function_flush()
    else:
        redis_client.script_flush()
    pipe = client.engine.pipeline()
    pipe.call("get", first)
    pipe.call("pop", "q", "w", 2)
    got, popped = pipe.execute()
    assert Job.from_reply(client, got) is not None
    assert len(as_list(popped)) == 2
    assert len(client.queues["q"].jobs.running()) == 2


def test_namespaces_isolate_keys(
    engine: Engine, engine_ns: Engine, redis_client: redis.Redis
) -> None:
    plain = Client.from_engine(engine, worker_name="w")
    spaced = Client.from_engine(engine_ns, worker_name="w")
    assert spaced.prefix == "{test}:"
    jid = spaced.queues["q"].put("k", {"a": 1})
    assert plain.jobs.get(jid) is None
    assert plain.queues.counts() == []
    keys = [str(key) for key in redis_client.scan_iter()]
    assert keys and all(key.startswith("{test}:") for key in keys), keys
    assert spaced.jobs[jid].data == {"a": 1}
    assert [c["name"] for c in spaced.queues.counts()] == ["q"]

    by_name = Client(redis=redis_client, namespace="test")
    assert by_name.prefix == "{test}:" and by_name.jobs[jid].data == {"a": 1}
    by_prefix = Client(redis=redis_client, namespace="{test}:")  # as $FLOWS_NAMESPACE gives it
    assert by_prefix.prefix == "{test}:" and by_prefix.jobs[jid].data == {"a": 1}
    spaced.config["heartbeat"] = 5
    assert plain.config["heartbeat"] == 60


# -- decoding -------------------------------------------------------------------------------------


def test_job_accepts_empty_objects_where_lists_are_meant(client: Client) -> None:
    job = Job(
        client,
        {
            "jid": "j",
            "klass": "k",
            "state": "waiting",
            "queue": "q",
            "worker": "",
            "priority": 0,
            "expires": 0,
            "retries": 5,
            "remaining": 5,
            "data": "{}",
            "tags": {},
            "history": {},
            "failure": {},
            "dependents": {},
            "dependencies": {},
            "tracked": False,
            "spawned_from_jid": False,
        },
    )
    assert job.tags == [] and job.history == [] and job.dependents == []
    assert job.dependencies == [] and job.failure is None and job.spawned_from_jid is None
    assert job.result is None and job.created is None and job.updated is None


@pytest.mark.parametrize("use_functions", [True, False], ids=["functions", "evalsha"])
def test_a_pipelines_plain_reads_see_the_calls_queued_before_them(
    redis_client: redis.Redis, use_functions: bool
) -> None:
    engine = Engine(redis_client, use_functions=use_functions)
    client = Client.from_engine(engine, worker_name="w")
    client.queues["q"].put("k", {})
    for flushed in (False, True):
        if flushed:  # the calls go again after the reload, and so do the reads after them
            if use_functions:
                redis_client.function_flush()
            else:
                redis_client.script_flush()
        pipe = engine.pipeline()
        pipe.read("llen", "ql:q:q-fifo")
        pipe.call("pop", "q", "w", 1)
        pipe.read("llen", "ql:q:q-fifo")
        pipe.read("zcard", "ql:q:q-locks")
        pipe.call("put", "w", "q", f"again-{flushed}", "k", "{}", 0)
        before, popped, work, locks, put = pipe.execute()
        assert (before, work, locks, put) == (1, 0, 1 + flushed, f"again-{flushed}")
        assert len(as_list(popped)) == 1
