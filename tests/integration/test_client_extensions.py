"""The Python client's side of the Tarantool-queue extensions and unique puts: put options and
the result of a unique put, Job.release/touch/bury/kick/delete, client.jobs.kick,
Queue.kick/truncate/drop/statistics, client.throttles. Time is passed explicitly."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from flows.expand.jobs import expand
from flows.runs.build import assemble_run
from flows.runs.submit import submit
from flows.validation.validate import validate_text
from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound, WrongState
from scheduler.engine.queue import PutResult
from scheduler.engine.scripts import Engine

T0 = 1_699_923_600.0


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="w1")


def test_put_options_show_on_the_job_and_survive_a_requeue(client: Client) -> None:
    queue = client.queues["q"]
    jid = queue.put(
        "K",
        {},
        jid="a",
        ttl=30,
        ttr=5,
        concurrency_key="k",
        concurrency_limit=2,
        throttle="t",
        now=T0,
    )
    assert isinstance(jid, PutResult) and jid == "a" and jid.created
    job = client.jobs["a"]
    assert (job.time_to_live, job.deadline, job.ttr) == (30, T0 + 30, 5)
    assert (job.concurrency_key, job.concurrency_limit, job.throttle, job.parked) == (
        "k",
        2,
        "t",
        None,
    )
    job.requeue("other", now=T0 + 1)
    moved = client.jobs["a"]
    assert (moved.queue, moved.time_to_live, moved.ttr, moved.concurrency_key) == (
        "other",
        30,
        5,
        "k",
    )
    plain = client.jobs[queue.put("K", {}, now=T0)]
    assert (plain.time_to_live, plain.ttr, plain.concurrency_key, plain.throttle) == (
        None,
        None,
        None,
        None,
    )


def test_a_unique_put_says_whether_it_wrote_the_job(client: Client) -> None:
    queue = client.queues["q"]
    assert queue.put("K", {"v": 1}, jid="a", unique=True, now=T0).created
    again = queue.put("K", {"v": 2}, jid="a", unique=True, now=T0 + 1)
    assert again == "a" and not again.created
    assert client.jobs["a"].data == {"v": 1}
    assert queue.put("K", {"v": 3}, jid="a", now=T0 + 2).created  # plain put: moved (qless)
    assert client.jobs["a"].data == {"v": 3}


def test_release_touch_and_bury_from_the_worker(client: Client) -> None:
    queue = client.queues["q"]
    queue.put("K", {}, jid="a", ttr=10, now=T0)
    [job] = queue.pop(now=T0)
    assert job.touch(20, now=T0 + 1) == T0 + 30 and job.ttr == 30
    assert job.release(5, now=T0 + 2) == "scheduled"
    assert queue.pop(now=T0 + 6) == []
    [job] = queue.pop(now=T0 + 7)
    assert job.bury("later", now=T0 + 8) == "buried"
    assert queue.jobs.buried(now=T0 + 8) == ["a"]
    assert queue.kick(5, now=T0 + 9) == 1
    assert client.jobs["a"].state == "waiting"


def test_kick_named_buried_jobs_from_the_client_and_the_job(client: Client) -> None:
    queue = client.queues["q"]
    for jid in ("a", "b", "w"):
        queue.put("K", {}, jid=jid, now=T0)
    for jid in ("a", "b"):
        client.jobs[jid].bury(now=T0 + 1)
    with pytest.raises(WrongState, match="Job w is not buried: waiting"):
        client.jobs.kick("a", "w", now=T0 + 2)
    with pytest.raises(JobNotFound, match="nope"):
        client.jobs.kick("a", "nope", now=T0 + 2)
    assert queue.jobs.buried(now=T0 + 2) == ["a", "b"]  # a refused list kicks none
    assert client.jobs.kick() == []
    assert client.jobs.kick("b", now=T0 + 3) == ["b"]
    job = client.jobs["a"]
    assert job.kick(now=T0 + 4) == "waiting" and job.state == "waiting"
    assert client.jobs["a"].history[-1]["what"] == "kicked"
    with pytest.raises(WrongState, match="not buried: waiting"):
        job.kick(now=T0 + 5)
    assert queue.statistics(now=T0 + 5)["calls"]["kick"] == 2


def test_delete_truncate_drop_and_statistics(client: Client) -> None:
    queue = client.queues["q"]
    for n in range(5):
        queue.put("K", {}, jid=f"j{n}", now=T0)
    [running] = queue.pop(now=T0)
    with pytest.raises(WrongState):
        running.delete(now=T0)
    assert client.jobs.delete("j1", "nope", now=T0) == ["j1"]
    with pytest.raises(WrongState):
        queue.truncate(now=T0)
    running.complete(now=T0 + 1)
    assert queue.truncate(batch=2, now=T0 + 1) == 3  # batches of 2 until none are left
    stats = queue.statistics(now=T0 + 1)
    assert stats["tasks"]["total"] == 0 and stats["tasks"]["done"] == 1
    assert stats["calls"]["delete"] == 4 and stats["calls"]["put"] == 5
    assert queue.statistics(T0 - 86400, now=T0 + 1)["calls"]["put"] == 0  # the day before
    queue.drop(now=T0 + 1)
    assert "q" not in [c["name"] for c in client.queues.counts(now=T0 + 1)]
    with pytest.raises(JobNotFound):
        queue.drop(now=T0 + 1)


def test_throttles_as_a_mapping(client: Client) -> None:
    client.throttles["api"] = 1
    assert client.throttles["api"] == 1 and list(client.throttles) == ["api"]
    queue = client.queues["q"]
    queue.put("K", {}, jid="a", throttle="api", now=T0)
    queue.put("K", {}, jid="b", throttle="api", now=T0)
    assert [job.jid for job in queue.pop(2, now=T0)] == ["a"]
    assert queue.jobs.parked(now=T0) == ["b"]
    assert client.jobs["b"].parked == "throttle"
    assert client.throttles.info("api") == {"api": {"limit": 1, "running": 1, "parked": 1}}
    del client.throttles["api"]
    assert "api" not in client.throttles and len(client.throttles) == 0
    with pytest.raises(KeyError):
        del client.throttles["api"]
    with pytest.raises(KeyError):
        client.throttles["api"]
    assert [job.jid for job in queue.pop(2, now=T0)] == ["b"]


def test_a_flow_run_carries_heartbeat_max_parallel_ttl_and_throttle(
    client: Client, tmp_path: Path
) -> None:
    text = (
        "version: 1\nname: etl\ndefaults: {heartbeat: 30s}\nsteps:\n"
        "  load:\n    job: tasks.load\n    ttl: 10m\n    throttle: api\n"
        "    foreach: {items: [de, at, ch], max_parallel: 2}\n"
    )
    result = validate_text(text, file="etl.yaml")
    assert result.flow is not None
    requests = expand(
        result.flow, run_id="etl-1", logical_time=datetime.now(UTC), params={}, flow_dir=tmp_path
    )
    assert submit(client, assemble_run("etl-1", "etl", requests, params={})).created
    jobs = client.jobs.multiget(*(request.jid for request in requests))
    assert {
        (j.ttr, j.time_to_live, j.throttle, j.concurrency_key, j.concurrency_limit) for j in jobs
    } == {(30, 600, "api", "etl-1:load", 2)}
    assert len(client.queues["default"].pop(3)) == 2  # max_parallel
