"""The worker's liveness lease (lua/include/lease.lua): a worker paused longer than its lease
loses its jobs to other workers within seconds, and when it wakes up it stops what it was
running instead of finishing a job another worker has taken."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from test_worker import (
    Processes,
    history,
    in_process_worker,
    put,
    raw_job,
    read_marks,
    wait_for,
    wait_marks,
    wait_state,
)

from flows.testing.clock import Clock, ClockedEngine
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine
from scheduler.worker import Worker, leases


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="test-client")


@pytest.fixture
def procs(server: EmbeddedServer, tmp_path: Path, redis_client: redis.Redis) -> Iterator[Processes]:
    processes = Processes(server, tmp_path)
    try:
        yield processes
    finally:
        processes.close()


def test_a_worker_paused_past_its_lease_gives_way_to_another(
    client: Client, procs: Processes, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    # A 60 s lock: without the lease the job would wait that long (plus the grace period).
    jid = put(client, "q", "busy_first_attempt", {"marks": str(marks), "seconds": 60})
    paused = procs.worker(["q"], name="paused")
    wait_marks(marks, "started", timeout=20)
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        procs.worker(["q"], name="other")
        wait_marks(marks, "started", count=2, timeout=20)
        wait_state(client, jid, "complete", timeout=10)
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    wait_for(
        lambda: "stopping (lock-lost)" in procs.log(paused), 15, "the paused worker to stop the job"
    )
    # Its lease thread says so on its own wake-up, which may come just after the slot's line:
    # "and its jobs were taken back", or "it held no jobs" when the lock-lost message woke the
    # listener first and the job had stopped by then (the threads run in either order).
    lapsed = "worker paused: its lease lapsed"
    try:
        wait_for(lambda: lapsed in procs.log(paused), 15, "the paused worker to see it lapse")
    except AssertionError as missed:  # what it said instead
        raise AssertionError(f"{missed}; its log:\n{procs.log(paused)[-3000:]}") from None
    job = client.jobs[jid]
    assert (job.state, job.lost) == ("complete", 1)
    [reclaimed] = history(job, "reclaimed")
    assert reclaimed["worker"] == "paused"
    assert [entry["worker"] for entry in history(job, "done")] == ["other"]
    assert read_marks(marks, "finished") == []  # the first run never finished


def test_a_job_locked_to_a_live_worker_that_does_not_hold_it_runs_again_in_seconds(
    client: Client, engine: Engine
) -> None:
    with in_process_worker(engine, ["q"], name="live"):
        wait_for(lambda: engine.redis.zscore("ql:leases", "live"), 10, "the worker's lease")
        jid = put(client, "other", "echo", {"value": 1})
        # A pop as the worker whose reply never reached it (lost in a failover): the job is
        # locked to the live worker for its 60 s lock, yet the worker does not hold it.
        lost_reply = Client.from_engine(engine, worker_name="live").queues["other"].pop()
        assert [job.jid for job in lost_reply] == [jid]
        # Given back by the worker's next lease renewal, every few seconds, not when its lock
        # runs out: the lock's end would write 'timed-out', not 'returned', and count it lost.
        # The timeouts only stop a hung wait.
        job = wait_state(client, jid, "waiting", timeout=45)
        assert [entry["worker"] for entry in history(job, "returned")] == ["live"]
        assert (job.remaining, job.lost) == (job.retries, 0)
        with in_process_worker(engine, ["other"], name="next"):
            wait_state(client, jid, "complete", timeout=45)


def test_a_stopping_worker_does_not_wait_for_its_listener_to_look_again(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flows run` stops its worker when the run ends: the listener of lock-lost messages is
    woken then, not at its next look (made an hour here, so only the wake-up can end it)."""
    monkeypatch.setattr(leases, "LISTEN_LOOK", 3600.0)
    with in_process_worker(engine, ["q"], name="stops") as worker:
        wait_for(lambda: worker.keeper._pubsub is not None, 10, "the listener to subscribe")
        listener = next(t for t in threading.enumerate() if t.name == "flows-listener")
    listener.join(15)  # the worker has stopped (in_process_worker checked it)
    assert not listener.is_alive()


def test_a_job_popped_by_a_starved_worker_is_not_given_back_before_it_is_held(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The worker's own parts driven step by step on a virtual clock: its fetch has the pop's
    reply, but the process, starved of CPU, has not made the job a held one when its lease is
    renewed 1.2 s and 2.5 s later (the renewals do not name it): the engine leaves it to the
    worker. A job whose pop's reply was lost before that fetch still goes back."""
    clock = Clock(1_700_000_000.0)
    client = Client.from_engine(ClockedEngine(redis_client, "ql:", clock), worker_name="starved")
    worker = Worker(client, ["q"], sandbox_root=tmp_path, lease_seconds=5)
    lost = put(client, "q", "echo", {"value": 1})
    jid = put(client, "q", "echo", {"value": 2})
    worker.keeper.register()  # renewal 1
    # A pop as the worker whose reply never reached it: that fetch is over.
    assert [job.jid for job in client.queues["q"].pop()] == [lost]
    clock.advance(0.1)
    with worker.held.fetching():
        [raw] = worker.slots.fetcher.pop(1)
        clock.advance(1.2)
        worker.keeper.renew_lease()  # names neither
        clock.advance(1.3)
        worker.keeper.renew_lease()
        assert (client.jobs[jid].state, client.jobs[jid].worker) == ("running", "starved")
        # While a fetch sent before the lost job was found unnamed is in flight, that job may
        # be the fetch's too: it stays until the fetch is over.
        assert client.jobs[lost].state == "running"
        active = worker.slots.hold(raw, time.monotonic())
    assert active is not None and active.ctx.jid == jid
    clock.advance(1.1)
    worker.keeper.renew_lease()  # names the job held; the lost one goes back
    job = client.jobs[jid]
    assert (job.state, job.worker) == ("running", "starved")
    assert history(job, "returned") == []
    returned = client.jobs[lost]
    assert (returned.state, returned.remaining, returned.lost) == ("waiting", returned.retries, 0)
    assert [entry["worker"] for entry in history(returned, "returned")] == ["starved"]


def test_a_broken_payload_whose_fail_is_refused_leaves_the_fetch_s_other_jobs_held(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A fetch's broken payload is failed as its jobs are taken in; when the server refuses that
    fail (full: at maxmemory), the jobs of the fetch taken in before it are still the worker's
    to run (not held for ever, heartbeated but never started), and the broken one, not held, goes
    back to its queue to be failed by the next pop."""
    clock = Clock(1_700_000_000.0)
    client = Client.from_engine(ClockedEngine(redis_client, "ql:", clock), worker_name="full")
    worker = Worker(client, ["q"], sandbox_root=tmp_path, lease_seconds=5)
    good = put(client, "q", "echo", {"value": 1})
    broken = put(client, "q", "echo", {"value": 2})
    redis_client.hset(f"ql:j:{broken}", "data", "{not json")
    worker.keeper.register()
    limit = redis_client.config_get("maxmemory")["maxmemory"]
    with worker.held.fetching():
        raws = worker.slots.fetcher.pop(2)
        redis_client.config_set("maxmemory", 1)
        try:
            actives = [worker.slots.hold(raw, time.monotonic()) for raw in raws]
        finally:
            redis_client.config_set("maxmemory", limit)
    assert [active.ctx.jid if active else None for active in actives] == [good, None]
    assert list(worker.held.jobs) == [good]
    clock.advance(1)
    worker.keeper.renew_lease()
    clock.advance(1.1)
    worker.keeper.renew_lease()
    job = raw_job(client.engine, broken)
    assert (job["state"], job["history"][-1]["what"]) == ("waiting", "returned")
    assert client.jobs[good].state == "running"
