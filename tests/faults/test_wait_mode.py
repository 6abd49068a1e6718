"""The mode that waits for replicas (``?wait=1``) against a master that has none, as a master cut
off from its replicas by a partition: nothing it hands out runs, and once a replica is back every
job runs once. Real servers, a real worker thread."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fault_tasks
import pytest
from fault_support import Valkey, wait_until

from scheduler.engine.client import Client
from scheduler.engine.connections import Durability
from scheduler.engine.errors import NotReplicated
from scheduler.worker import Worker

WAIT = "?wait=1&wait_timeout=0.2"


@pytest.fixture
def master(servers: list[Valkey], tmp_path: Path) -> Valkey:
    server = Valkey(tmp_path / "master", tcp=True)
    servers.append(server)
    return server


def test_an_inbox_read_that_is_not_replicated_raises(master: Valkey) -> None:
    engine = Client(master.url() + WAIT).engine
    assert engine.command("BLPOP", "inbox", 0.05, writes=True) is None  # nothing taken
    master.admin().rpush("inbox", "[]")
    with pytest.raises(NotReplicated, match="BLPOP"):
        engine.command("BLPOP", "inbox", 0.05, writes=True)


def test_a_master_without_replicas_gives_no_job_to_a_worker_until_one_is_back(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    plain = Client(master.url())
    jids = [plain.queues["q"].put("builtins.print", {}) for _ in range(5)]
    worker = Worker(Client(master.url() + WAIT, worker_name="w1"), ["q"], poll_interval=0.1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        time.sleep(3)  # the worker polls and is refused: real time, as a partition lasts
        # Nothing ran: every pop was followed by a WAIT that no replica answered.
        states = {plain.jobs[jid].state for jid in jids}
        assert not states & {"complete", "failed"}, states
        replica = Valkey(tmp_path / "replica", tcp=True)
        servers.append(replica)
        replica.replica_of(master)
        deadline = time.monotonic() + 15
        while {plain.jobs[jid].state for jid in jids} != {"complete"}:
            assert time.monotonic() < deadline, {plain.jobs[jid].state for jid in jids}
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(15)
    # Each ran once, after the replica was back: a refused pop's jobs came back to the queue.
    for jid in jids:
        history = [entry["what"] for entry in plain.jobs[jid].history]
        assert history.count("done") == 1, history


def test_ticks_fire_in_wait_mode_whenever_the_server_has_replicas(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    from scheduler.engine.connections import TICK_DURABILITY
    from scheduler.service.schedules import Schedules

    client = Client(master.url())
    assert Schedules(client)._fire_engine() is client.engine  # no replica: nothing to wait for
    replica = Valkey(tmp_path / "replica", tcp=True)
    servers.append(replica)
    replica.replica_of(master)
    firing = Schedules(client)._fire_engine()
    assert firing.durability == TICK_DURABILITY
    assert client.engine.durability is None  # the service's other calls are left as they were
    firing.call("config.set", "probe", "1")  # replicated: acknowledged
    replica.stop()
    with pytest.raises(NotReplicated):
        firing.call("config.set", "probe", "2")


def test_doctor_reports_a_master_with_replicas_that_writes_without_them(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    import json

    from fault_support import invoke

    code, output = invoke(["doctor", "--redis", master.url()])
    assert (code, "min-replicas" in output) == (0, False)  # no replica: nothing to say
    replica = Valkey(tmp_path / "replica", tcp=True)
    servers.append(replica)
    replica.replica_of(master)
    code, output = invoke(["doctor", "--redis", master.url()])
    assert code == 0  # the namespace is consistent: the advice does not fail the check
    assert "min-replicas-to-write is 0" in " ".join(output.split())
    assert "min-replicas-max-lag 10" in " ".join(output.split())
    code, output = invoke(["doctor", "--redis", master.url(), "--json"])
    [advice] = json.loads(output)["server"]
    assert "1 replica(s)" in advice
    master.admin().config_set("min-replicas-to-write", 1)
    master.admin().config_set("min-replicas-max-lag", 10)
    code, output = invoke(["doctor", "--redis", master.url(), "--json"])
    assert json.loads(output)["server"] == []


def test_a_master_short_of_min_replicas_refuses_writes_with_a_clear_error(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    from helpers import assert_unchanged, snapshot

    from scheduler.engine.backoff import transient
    from scheduler.engine.faults import ServerWithoutReplicas

    client = Client(master.url())
    assert client.queues["q"].peek() == []  # the engine is loaded while writes are taken
    master.admin().config_set("min-replicas-to-write", 1)
    before = snapshot(master.admin())
    with pytest.raises(ServerWithoutReplicas, match="min-replicas-to-write") as refused:
        client.queues["q"].put("k", {})
    assert "'put' was not run" in str(refused.value)
    assert transient(refused.value)
    assert_unchanged(master.admin(), before)
    assert client.queues["q"].counts()["waiting"] == 0  # reads work


def test_a_write_a_replica_acknowledges_late_is_reconciled_not_reported_lost(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    import os
    import signal

    replica = Valkey(tmp_path / "replica", tcp=True)
    servers.append(replica)
    replica.replica_of(master)
    client = Client(master.url() + "?wait=1&wait_timeout=0.3")
    client.queues["q"].put("k", {}, jid="first")  # the engine loaded, the replica in step
    # The replica stalls past wait_timeout (a lagging replica, a partition healed before any
    # failover): the first WAIT says 0, a later one on the same connection says 1.
    os.kill(replica.process.pid, signal.SIGSTOP)
    threading.Timer(1.0, os.kill, (replica.process.pid, signal.SIGCONT)).start()
    started = time.monotonic()
    assert client.queues["q"].put("k", {}, jid="late") == "late"
    assert time.monotonic() - started >= 0.9
    deadline = time.monotonic() + 5
    while replica.admin().exists("ql:j:late") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)


@dataclass(frozen=True)
class Gated:
    """A job running on worker ``w1`` in ``?wait=1`` mode, past its gate once the test opens
    it (``fault_tasks.gate``), on a master with ``replica``; ``plain`` reads without waiting."""

    replica: Valkey
    plain: Client
    jid: str
    worker: Worker


@contextmanager
def gated_job(
    master: Valkey, servers: list[Valkey], tmp_path: Path, *, fail: bool = False, **options: Any
) -> Iterator[Gated]:
    """A replica of ``master`` caught up, a gated job put (one that raises past its gate when
    ``fail``, with no retries), and worker ``w1`` (``options``) in a thread waiting for one
    replica's acknowledgement, yielded once the job runs; the worker is stopped and joined at
    the end."""
    replica = Valkey(tmp_path / "replica", tcp=True)
    servers.append(replica)
    replica.replica_of(master)
    plain = Client(master.url())
    jid = plain.queues["q"].put("fault_tasks.gated_in_process", {"fail": fail}, retries=0)
    fault_tasks.runs.clear()
    fault_tasks.gate.clear()
    durable = Client(master.url(), worker_name="w1", durability=Durability(1, 0.2, 0.3))
    worker = Worker(durable, ["q"], poll_interval=0.1, **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: fault_tasks.runs == [jid], 15, "the job to start")
        yield Gated(replica, plain, jid, worker)
    finally:
        worker.stop()
        thread.join(40)
    assert not thread.is_alive()


def cut_and_heal(master: Valkey, gated: Gated, ended: str) -> None:
    """The gated job ends (in state ``ended``) while a partition cuts ``master`` off, then the
    partition heals: the job's outcome reaches the promoted replica only if its worker sends
    it again."""
    replica, plain, jid = gated.replica, gated.plain, gated.jid
    # The cut: the replica is promoted with the job running, locked to w1 (its pop was
    # acknowledged); what the old master takes from now on, no replica has.
    replica.admin().replicaof("no", "one")
    fault_tasks.gate.set()
    wait_until(lambda: plain.jobs[jid].state == ended, 15, "the outcome on the master")
    # The heal: the old master becomes a replica of the new one (its outcome is wiped) and, so
    # that the worker's URL reaches the new master's data, is promoted back.
    master.admin().replicaof("127.0.0.1", replica.port)
    wait_until(lambda: plain.jobs[jid].state == "running", 15, "the new master's data")
    master.admin().replicaof("no", "one")
    replica.replica_of(master)
    wait_until(lambda: plain.jobs[jid].state == ended, 15, "the outcome sent again")


def ran_once(gated: Gated, ended: str = "complete") -> None:
    """The job ran once and its outcome was recorded once (``done``, or ``failed``)."""
    recorded = {"complete": "done", "failed": "failed"}[ended]
    assert fault_tasks.runs == [gated.jid]
    history = [entry["what"] for entry in gated.plain.jobs[gated.jid].history]
    assert history.count(recorded) == 1 and "returned" not in history, history


def test_a_complete_no_replica_acknowledged_is_sent_again_not_run_again(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    """A partition cuts the master off while a worker runs a job it popped there (replicated):
    the job's complete runs on the cut-off master alone (NotReplicated), and the promoted
    replica still has the job running, locked to the worker. The worker keeps holding the job
    and sends its complete again until the new master has it: the job runs once, not handed back
    by the worker's lease renewals and run again."""
    with gated_job(master, servers, tmp_path) as gated:
        cut_and_heal(master, gated, "complete")
    ran_once(gated)


def test_a_fail_no_replica_acknowledged_is_sent_again_not_run_again(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    """The same cut with a job that fails: its fail, sent at once rather than batched, ran on
    the cut-off master alone. It let go of the job, which the promoted replica handed out again
    to fail a second time; now it is held and sent again as a complete is."""
    with gated_job(master, servers, tmp_path, fail=True) as gated:
        cut_and_heal(master, gated, "failed")
    ran_once(gated, "failed")


def test_a_worker_stopping_gives_up_on_a_complete_no_replica_acknowledges(
    master: Valkey, servers: list[Valkey], tmp_path: Path
) -> None:
    """The complete of a job that ran is sent again while no replica acknowledges it, but a
    worker told to stop waits for it only its shutdown grace, not the time a running job gets
    to stop after it (kill_after)."""
    with gated_job(master, servers, tmp_path, shutdown_grace=0.5, kill_after=30) as gated:
        gated.replica.stop()  # from now on no write is acknowledged
        fault_tasks.gate.set()
        complete = lambda: gated.plain.jobs[gated.jid].state == "complete"  # noqa: E731
        wait_until(complete, 15, "the complete on the master")
        resent = lambda: any(a.resends for a in gated.worker.held.all())  # noqa: E731
        wait_until(resent, 15, "the complete again")
        stopped = time.monotonic()
    # Half a second of grace, where kill_after would be 30 s: 10 s tells them apart.
    assert time.monotonic() - stopped < 10


def test_a_complete_sent_again_after_it_ran_is_refused_and_the_job_let_go(
    master: Valkey, servers: list[Valkey], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The replica only lagged (a partition healed before any failover): the complete raised
    NotReplicated, yet ran and reached the replica. Sent again, it is refused (the job is
    complete): the worker lets the job go, which ran once and completed once."""
    with gated_job(master, servers, tmp_path) as gated:
        os.kill(gated.replica.process.pid, signal.SIGSTOP)
        try:
            fault_tasks.gate.set()
            resent = lambda: any(a.resends for a in gated.worker.held.all())  # noqa: E731
            wait_until(resent, 15, "a resend")
        finally:
            os.kill(gated.replica.process.pid, signal.SIGCONT)
        wait_until(lambda: not gated.worker.held.jobs, 15, "the job let go")
    ran_once(gated)
    assert "its complete, sent again, was refused: the first one had run" in caplog.text
