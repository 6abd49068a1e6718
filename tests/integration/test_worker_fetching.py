"""How a worker takes jobs: prefetch and batched completes for quick jobs, hand-back on stop,
a clean sandbox per run (scheduler/worker/fetching.py, batching.py)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import worker_tasks
from test_worker import history, in_process_worker, put, wait_marks, wait_state

from scheduler.engine.client import Client
from scheduler.engine.errors import LockLost
from scheduler.engine.job import Job
from scheduler.engine.scripts import Engine, EnginePipeline
from scheduler.worker import Worker, batching, fetching


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="test-client")


def burst(engine: Engine, queues: list[str]) -> Worker:
    """A burst worker run to its end in a thread (signal handlers stay the test runner's)."""
    worker = Worker(Client.from_engine(engine, worker_name="w1"), queues, burst=True)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    thread.join(30)
    assert codes == [0], "the burst worker did not end cleanly"
    return worker


def test_quick_jobs_are_popped_several_at_a_time_and_completed_in_batches(
    client: Client, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    popped: list[int] = []
    flushed: list[int] = []
    pop, deliver = fetching.Fetcher.pop, batching.Batcher._deliver

    def counting_pop(
        self: fetching.Fetcher, count: int, send: fetching.Send | None = None
    ) -> list[fetching.Raw]:
        jobs = pop(self, count, send)
        popped.append(len(jobs))
        return jobs

    def counting_deliver(
        self: batching.Batcher, batch: list[batching.Completion], texts: Any
    ) -> None:
        flushed.append(len(batch))
        deliver(self, batch, texts)

    monkeypatch.setattr(fetching.Fetcher, "pop", counting_pop)
    monkeypatch.setattr(batching.Batcher, "_deliver", counting_deliver)
    jids = [put(client, "q", "echo", {"value": n}) for n in range(300)]
    worker = burst(engine, ["q"])
    assert all(client.jobs[jid].state == "complete" for jid in jids)
    assert [client.jobs[jid].result for jid in jids[:3]] == [0, 1, 2]
    assert worker.processed == 300
    assert max(popped) > 1, popped  # one slot, several jobs per pop once jobs proved quick
    assert max(flushed) > 1, flushed  # several completes per round trip


def test_stopping_hands_back_jobs_popped_ahead_without_using_a_retry(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    worker_tasks.GATE.clear()
    try:
        with in_process_worker(engine, ["warm", "q"], threads=2, shutdown_grace=30) as worker:
            warm = [put(client, "warm", "echo", {"value": n}) for n in range(20)]
            for jid in warm:  # quick jobs: the worker now pops ahead of its free slots
                wait_state(client, jid, "complete")
            client.queues["q"].pause()
            blocked = [put(client, "q", "blocked", {"marks": str(marks)}) for _ in range(3)]
            client.queues["q"].unpause()
            wait_marks(marks, "started", 2)
            worker.stop()
            # The third job was popped with the second and never started: it goes back at once.
            wait_state(client, blocked[2], "waiting")
            worker_tasks.GATE.set()  # the two running jobs finish within the grace period
    finally:
        worker_tasks.GATE.set()
    for jid in blocked[:2]:
        assert client.jobs[jid].state == "complete"
    held_back = client.jobs[blocked[2]]
    assert held_back.remaining == held_back.retries  # no retry used
    assert [entry["what"] for entry in held_back.history][-2:] == ["popped", "released"]
    assert history(held_back, "released")[0]["worker"] == "w1"


def test_every_run_starts_in_an_empty_sandbox(client: Client, engine: Engine) -> None:
    jids = [put(client, "q", "litter") for _ in range(3)]
    burst(engine, ["q"])
    assert [client.jobs[jid].result for jid in jids] == [[], [], []]


def test_a_job_from_a_lean_pop_reads_its_details_when_first_asked(
    client: Client, engine: Engine
) -> None:
    jid = client.queues["q"].put("k.x", {"a": 1}, tags=["t"])
    [raw] = json.loads(engine.call("pop.lean", "q", "w1", 1))
    job = Job(client, raw)
    assert (job.jid, job.data, job.tags) == (jid, {"a": 1}, ["t"])
    assert (job.state, job.worker) == ("running", "w1")
    assert "history" not in vars(job)
    assert [entry["what"] for entry in job.history] == ["put", "popped"]
    assert job.failure is None and job.dependents == [] and job.created is not None


def test_a_job_popped_again_by_its_worker_runs_once_from_the_buffer(
    client: Client, engine: Engine
) -> None:
    """A lock lapsed while w1 held the job popped ahead, and the engine gave the job to w1
    again: the slots start the later copy alone, and a stop hands back neither (the earlier
    copy's release would hand back the job the later one runs)."""
    jid = client.queues["q"].put("k.x", {})
    [first] = json.loads(engine.call("pop.lean", "q", "w1", 1))
    client.jobs[jid].timeout()  # its lock lapsed ...
    [second] = json.loads(engine.call("pop.lean", "q", "w1", 1))  # ... and w1 has it again
    worker = Worker(Client.from_engine(engine, worker_name="w1"), ["q"], burst=True)
    earlier = worker.slots.hold(first, asked=time.monotonic())
    later = worker.slots.hold(second, asked=time.monotonic())
    assert earlier is not None and later is not None
    worker.slots.buffer.extend([earlier, later])
    assert worker.slots.next_job() is later  # the earlier copy is passed over, not started
    assert not worker.slots.buffer and not earlier.taken
    worker.slots.buffer.append(earlier)  # as if still buffered when the worker stops
    worker.slots.give_back_buffer()
    assert (client.jobs[jid].state, client.jobs[jid].worker) == ("running", "w1")


def test_a_job_held_past_its_lock_is_not_started(client: Client, engine: Engine) -> None:
    """A worker paused while it held a job popped ahead must not run it once another has it."""
    jid = client.queues["q"].put("k.x", {})
    [raw] = json.loads(engine.call("pop.lean", "q", "w1", 1))
    client.jobs[jid].timeout()  # w1's lock is taken away ...
    engine.call("pop.lean", "q", "w2", 1)  # ... and w2 runs the job now
    worker = Worker(Client.from_engine(engine, worker_name="w1"), ["q"], burst=True)
    held = worker.slots.hold(raw, asked=time.monotonic() - 3600)  # popped an hour ago, then paused
    assert held is not None
    worker.slots.buffer.append(held)
    assert worker.slots.next_job() is None  # not started; nothing else to do in a burst
    assert not worker.held.jobs
    assert client.jobs[jid].worker == "w2"


def test_pending_completes_go_with_the_next_pop_in_one_engine_call(
    client: Client,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    jids = [client.queues["q"].put("k.x", {}) for _ in range(4)]
    held = json.loads(engine.call("pop.lean", "q", "w1", 3))
    client.jobs[held[2]["jid"]].timeout()  # w1's lock on the third is gone: refused alone
    batcher = batching.Batcher(engine, "w1")
    replies: list[Any] = []
    for raw in held:
        batcher.add(raw["jid"], "q", "", replies.append)
    trips: list[str] = []
    call, execute = Engine.call, EnginePipeline.execute

    def counted_call(self: Engine, command: str, *args: Any, **options: Any) -> Any:
        trips.append("call")
        return call(self, command, *args, **options)

    def counted_execute(self: EnginePipeline) -> list[Any]:
        trips.append("pipeline")
        return execute(self)

    monkeypatch.setattr(Engine, "call", counted_call)
    monkeypatch.setattr(EnginePipeline, "execute", counted_execute)
    with caplog.at_level(logging.INFO, logger="flows.worker"):
        reply = batcher.flush_and_call("pop.lean", "q", "w1", 1)
        assert caplog.records == []  # not on the way to the popped job: logged after it
        batcher.log_done()
    assert trips == ["call"]  # complete.pop
    # The timed-out job is waiting again, like the fourth: the pop takes one of them.
    assert [raw["jid"] in (held[2]["jid"], jids[3]) for raw in json.loads(reply)] == [True]
    assert replies[:2] == ["complete", "complete"]
    assert isinstance(replies[2], LockLost)
    assert [r.getMessage() for r in caplog.records] == [
        f"2 jobs done: {held[0]['jid']} {held[1]['jid']}"
    ]
    trips.clear()
    assert len(json.loads(batcher.flush_and_call("pop.lean", "q", "w1", 1))) == 1
    assert trips == ["call"]  # nothing pending: a plain call


def test_only_the_first_pop_of_a_fetch_goes_with_the_completes(
    client: Client, engine: Engine
) -> None:
    jid = client.queues["b"].put("k.x", {})
    fetcher = fetching.Fetcher(
        Client.from_engine(engine, worker_name="w1"), ["a", "b"], "ordered", 1.0
    )
    sent: list[str] = []

    def send(command: str, *args: Any) -> Any:
        sent.append(args[0])
        return engine.call(command, *args)

    assert [raw["jid"] for raw in fetcher.pop(2, send)] == [jid]
    assert sent == ["a"]  # queue a through `send`; queue b as a plain call


def test_a_chain_runs_in_order_each_link_popped_with_the_complete_before_it(
    client: Client, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log"
    jids: list[str] = []
    for n in range(20):
        depends = jids[-1:] or None
        jids.append(put(client, "q", "record", {"log": str(log), "tag": str(n)}, depends=depends))
    calls: list[str] = []
    call = Engine.call

    def counted_call(self: Engine, command: str, *args: Any, **options: Any) -> Any:
        calls.append(command)
        return call(self, command, *args, **options)

    monkeypatch.setattr(Engine, "call", counted_call)
    burst(engine, ["q"])
    assert log.read_text().split() == [str(n) for n in range(20)]
    for jid in jids:
        job = client.jobs[jid]
        assert job.state == "complete"
        assert [entry["what"] for entry in job.history] == ["put", "popped", "done"]
    # Every link after the first came with its dependency's complete, none by a pop of its own.
    assert calls.count("complete.pop") >= 19
    assert calls.count("pop.lean") <= 1 + calls.count("await"), calls


def test_a_job_popped_with_a_complete_while_the_worker_stops_goes_back_unrun(
    client: Client, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log"
    first = put(client, "q", "record", {"log": str(log), "tag": "first"})
    second = put(client, "q", "record", {"log": str(log), "tag": "second"}, depends=[first])
    worker = Worker(Client.from_engine(engine, worker_name="w1"), ["q"], burst=True)
    joined = batching.Batcher._complete_and_pop

    def stopping_meanwhile(self: batching.Batcher, *args: Any) -> Any:
        reply = joined(self, *args)
        worker.stop()  # between the engine handing the job over and the slot taking it
        return reply

    monkeypatch.setattr(batching.Batcher, "_complete_and_pop", stopping_meanwhile)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    thread.join(30)
    assert codes == [0]
    assert log.read_text().split() == ["first"]
    assert client.jobs[first].state == "complete"
    handed_back = client.jobs[second]
    assert handed_back.state == "waiting"
    assert handed_back.remaining == handed_back.retries  # no retry used
    assert [entry["what"] for entry in handed_back.history][-2:] == ["popped", "released"]


def test_a_chain_logs_its_jobs_done_a_few_lines_at_a_time_not_a_line_per_link(
    client: Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    jids: list[str] = []
    for _ in range(40):
        jids.append(put(client, "q", "echo", depends=jids[-1:] or None))
    with caplog.at_level(logging.INFO, logger="flows.worker"):
        began = time.monotonic()
        burst(engine, ["q"])
        looks = (time.monotonic() - began) / 0.5  # the monitor's looks while the chain ran
    lines = [r.getMessage() for r in caplog.records if " done: " in r.getMessage()]
    assert sorted(jid for line in lines for jid in line.split(": ", 1)[1].split()) == sorted(jids)
    # Each link's complete goes with the pop of the next: nothing wakes the monitor, which
    # writes the line for all the jobs done since its last look (one a look at most, and one
    # at the end), however fast or slow the machine runs the links.
    assert len(lines) <= looks + 2, (looks, lines)
