"""Running one flow test case against the real engine, on a virtual clock.

A case gets its own namespace on the server and a :class:`~flows.testing.clock.Clock`. The run is
built and submitted as ``flows run`` does; a schedule is registered and fired by the real
scheduler service (:class:`~scheduler.service.loop.SchedulerService`), whose ``tick(now)`` is
given the clock's time. Jobs are popped, prepared (upstream outputs, ``if:``) and run by the
worker's own runner: a stubbed step runs :func:`flows.testing.stub.play` in its place, any other
step really runs (shell or Python), what it writes kept as its step log, as a worker keeps it
(shown with a failed case, not among the case lines). Their outcomes go back through the
engine calls a worker makes. The clock never waits: when nothing can run now it jumps to the
next moment something can (a job's end, a retry's delay, a scheduled job, a wait's timeout, a
heartbeat, the next tick), and the housekeeping that promotes due jobs and times out waits runs
at that moment. A schedule case's run records age out as the service's retention ages them, on
the virtual clock (:mod:`flows.testing.aging`).

A schedule case shares round trips with the service it drives (``ClockedEngine``'s rider and
read-ahead), the calls and their order unchanged: the worker's pop of the queues rides after the
service's fire batch, and the service's due read of the next tick after the driver's reports of
this moment. So a tick of a one-step run takes two round trips, not five; one when the run's
first job is a stub that ends at once, played while the server fires the tick before
(:meth:`_Driver.foresee`): its report and the reads of what comes next ride after the pops.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import json
import math
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import redis

from flows.expand.run_specs import job_objects
from flows.flowfile.cases import Case, Stub
from flows.flowfile.job_data import CACHE_KEY, META_KEY, FlowsMeta, UnresolvedReference
from flows.flowfile.subflow_job import MAX_DEPTH
from flows.runs.build import build_run
from flows.runs.logs import StepLine, tree_label
from flows.runs.read import RunView, load_run, run_outputs
from flows.runs.service_source import FlowsSource, definition_of
from flows.runs.submit import submit
from flows.runtime.tasks import KILL_GRACE_SECONDS
from flows.runtime.worker_hook import prepare
from flows.testing.aging import Aging
from flows.testing.ahead import AheadSource, builds_alike_ahead
from flows.testing.clock import Call, Clock, ClockedEngine, RiderPipeline
from flows.testing.files import TestFile
from flows.testing.stub import STUB_KEY, STUB_KLASS
from scheduler import secrets
from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, JobNotFound, carrying_given
from scheduler.engine.job import Job
from scheduler.engine.scripts import EnginePipeline
from scheduler.service.housekeeping import maintain_queues
from scheduler.service.loop import SchedulerService
from scheduler.service.records import RunRequest
from scheduler.service.schedules import Schedules
from scheduler.worker import FailJob, HandedOver, SkipJob, capture, runner, sessions
from scheduler.worker.capture import LogShipper, capturing
from scheduler.worker.context import JobContext
from scheduler.worker.envelope import BrokenPayload, split
from scheduler.worker.outcomes import TimeoutInterrupt
from scheduler.worker.reporting import (
    REFUSED_GROUPS,
    lock_lost,
    refused,
    refuses_result,
    result_refused,
)

_ITEM: Final = re.compile(r"\[[^\]]*\]")
"""A foreach item's or matrix cell's index in a label (``count[0]``, ``grid[region=de]``)."""
WORKER: Final = "flows-test"
MAX_STEPS: Final = 5_000_000
"""Loop rounds one case may take before it is reported stuck (a runaway, not a real flow)."""
POP_COUNT: Final = 100
STOP_GRACE: Final = 10.0
STUCK_ROUNDS: Final = 10_000
BEATS_PER_TRIP: Final = 5_000
"""Heartbeats sent in one round trip at most as the clock passes them (`_Driver.beat_until`)."""
PING_INTERVAL: Final = 3600.0
"""Virtual seconds between the scheduler service's health pings: nothing in a case reads them,
and one a tick was a twentieth of a minutely schedule's time."""
RETENTION_INTERVAL: Final = 3600.0
"""Virtual seconds between the service's retention calls (:mod:`flows.testing.aging`): its own
300 s would be a round trip every fifth minutely tick; runs outlive ``jobs-history`` by an hour
at most."""


class CaseError(Exception):
    """The case could not be run as written (a param the flow refuses, a stuck loop...)."""


REAL_STEP_LIMIT: Final = 600.0
"""Wall seconds a real step without a ``timeout:`` may take in a test before it is stopped."""
SIGNAL_CHECK: Final = 0.1
"""Wall seconds at most between the main thread's looks for a signal another thread took while a
real step runs (:func:`_wait_for`)."""


def run_for_real(ctx: JobContext, logs: LogShipper) -> tuple[runner.Outcome, float]:
    """Run the step's own function as a worker's slot does, stopped (as a timeout) past its
    ``timeout:`` of wall time; the outcome and the seconds it took. What it writes (print,
    logging, a command's output) is its step log, as in a worker: queued on ``logs``."""
    limit = ctx.options.timeout or REAL_STEP_LIMIT
    done: list[runner.Outcome] = []
    # Per thread: a case's own lines, and those of anything else running meanwhile, stay where
    # they went.
    capture.install()
    running = threading.Lock()  # held until the step's thread is done with it
    running.acquire()

    def slot() -> None:
        ctx.thread_id = threading.get_ident()
        try:
            with capturing(ctx, logs):
                done.append(runner.run(ctx))
        finally:
            running.release()

    started = time.monotonic()
    thread = threading.Thread(
        target=carrying_given(slot), name=f"flows-test-{ctx.jid}", daemon=True
    )
    try:
        thread.start()  # a signal may land in the start, the step already running: stopped too
        ended = _wait_for(running, started + limit)
    except KeyboardInterrupt:  # Ctrl-C of `flows test`: the step's processes end with it
        try:
            ctx.request_stop("interrupted")  # a shell step's: SIGTERM, then SIGKILL after 5 s
            if not ctx.interrupt_thread:
                # A command started but not yet told how to stop (its thread between starting
                # it and registering its stop) is stopped by its thread when it registers.
                thread.join(KILL_GRACE_SECONDS + 1.0)
        except KeyboardInterrupt:  # Ctrl-C again meanwhile: SIGKILL now, none left behind
            ctx.request_stop("interrupted", now=True)
        finally:
            sessions.kill_all()  # any command still there (or starting) ends with this process
        raise
    if not ended:
        ctx.request_stop("timeout")  # a shell step's process group is killed
        if ctx.interrupt_thread and ctx.thread_id is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(ctx.thread_id), ctypes.py_object(TimeoutInterrupt)
            )
        thread.join(STOP_GRACE)
        return runner.stopped(ctx, "timeout"), limit
    return done[0] if done else runner.failure("flows-test", "the step ended without an outcome"), (
        time.monotonic() - started
    )


def _wait_for(running: threading.Lock, deadline: float) -> bool:
    """Whether the step's thread let go of ``running`` before ``deadline`` (monotonic).

    The wait wakes every :data:`SIGNAL_CHECK` seconds. The kernel may hand a signal sent to the
    process to any thread that does not block it (the step's thread takes one still pending
    when it unblocks signals, as it does after starting a command), and Python runs the handler
    in the main thread only when that thread next runs: a lock it waits on is woken by none
    but its own signals, so one wait for the whole step slept through SIGTERM until the step
    ended. A bare lock, not ``Thread.join``: an interrupted join takes a live thread for ended
    on Python 3.11, and the stop that follows waits for the thread with it."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if running.acquire(timeout=min(left, SIGNAL_CHECK)):
            return True


@dataclass
class Observed:
    """What happened in a case, in the shape ``expect:`` is written in."""

    run_id: str | None = None
    status: str | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    runs: int | None = None
    outputs: dict[str, Any] | None = None
    """The run's outputs (the flow's ``outputs:``), read when the case compares them; None
    when it does not, or a step they read has no result."""
    failures: list[str] = field(default_factory=list)
    """How each failed job failed, a line each: what a failed case says besides the diff."""
    ticks: list[float] = field(default_factory=list)
    """A schedule case's fired ticks (epoch seconds), in firing order."""
    seconds: float = 0.0
    virtual_seconds: float = 0.0
    output: list[StepLine] = field(default_factory=list)
    """What the real (unstubbed) steps wrote, step by step: their step logs."""
    round_trips: int = 0
    """The round trips of the case's engine calls and reads."""


_FORESEEABLE: Final = frozenset(
    {"jid", "data", "queue", "klass", "priority", "retries", "tags", "trigger", "notify"}
)
"""The fields of a job's spec that :meth:`_Driver.foresee` knows how the engine hands back
(any other, such as a delay, a throttle or a time to live, can change what a pop hands out)."""


@dataclass(frozen=True)
class _Foreseen:
    """The first job of a tick's run built ahead, as its pop will hand it out (``known``),
    and how it ends, played before the run is fired."""

    run_id: str
    job: Job
    known: tuple[Any, ...]
    outcome: runner.Outcome
    step: str
    masks: int
    """The secret values masked when it was played (its result's masking)."""


def _known(job: Job) -> tuple[Any, ...]:
    """What a job's outcome is made of, as a pop hands it out (its lock's time aside)."""
    return (
        job.jid,
        job.klass,
        job.queue,
        job.data,
        job.retries,
        job.remaining,
        job.lost,
        job.runs,
        job.ttr,
        job.throttle,
        job.concurrency_key,
    )


@dataclass(order=True)
class _Running:
    """A job started at virtual time, ending at ``end`` with ``outcome``."""

    end: float
    seq: int
    job: Job = field(compare=False)
    outcome: runner.Outcome = field(compare=False)
    beat: float = field(compare=False, default=math.inf)
    lock: float = field(compare=False, default=30.0)


class _Driver:
    def __init__(self, client: Client, clock: Clock, test: TestFile, case: Case, sandbox: Path):
        self.client = client
        assert isinstance(client.engine, ClockedEngine)
        self.engine = client.engine
        self.prefix = client.prefix
        self.clock = clock
        self.test = test
        self.case = case
        self.flow_name = test.flow.flow.name
        self.sandbox = sandbox
        self.running: list[_Running] = []
        self.seq = itertools.count()
        self.order: list[str] = []
        self.signaled: set[str] = set()
        self.still = 0
        self.outbox = self.engine.pipeline()
        self.reported: list[tuple[Job, runner.Outcome]] = []  # per report queued there
        self.due_limit = 0  # the service's page of due schedules (a schedule case's)
        self.buffered = 0  # ticks held back for a run to end (overlap buffer_one), last read
        self.rider_queues: list[str] = []
        self.foreseeing = True
        self.foreseen: _Foreseen | None = None  # the next tick's first job, played ahead
        self.rode: tuple[_Foreseen, Call | None, bool] | None = None  # its report, sent
        self.queues_read: list[str] | None = None  # the queues, read with a fire batch
        self.logs = LogShipper(self.engine)  # sent after each real step, no thread of its own
        self.logged: list[tuple[str, int]] = []  # (jid, attempt) of each real run that wrote
        self.child_prefixes: dict[str, str] = {}  # a child run's id: its label's parent steps

    # -- jobs ----------------------------------------------------------------------------------

    def queues(self) -> list[str]:
        return _queue_names(self.engine.call("queues"))

    def start_ready(self, queues: list[str]) -> int:
        """Pop and start every job that can start now; how many started. A worker's pop
        (``pop.lean``: what running a job needs, its history and the rest read if asked)."""
        started = 0
        ridden = self.ridden_pops()
        for queue in [*queues, *(q for q in ridden if q not in queues)]:
            while True:
                raw = ridden.pop(queue, None)
                if raw is None:
                    raw = self.engine.call("pop.lean", queue, WORKER, POP_COUNT)
                raws = json.loads(raw)
                jobs = [Job(self.client, raw) for raw in raws]
                for job in jobs:
                    self.start(job)
                started += len(jobs)
                if len(jobs) < POP_COUNT:
                    break
        return started

    def ride_pops(self, queues: list[str], *, ahead: bool = False, again: bool = False) -> None:
        """Pop ``queues`` (and read the next tick) in the round trip of the service's next fire
        batch: right after the fire, as a worker waiting on them would. ``ahead``: nothing runs
        and nothing else can start (:func:`_run_schedule` knows): if the batch fires the run
        whose first job was foreseen (:meth:`foresee`), that job's report and the reads of
        :meth:`next_event` go in the same round trip (:meth:`settle_ahead`), after a read of
        the queues if they are read ``again`` after this fire (:attr:`queues_read`)."""
        self.rider_queues = list(queues)
        self.rode = None
        self.queues_read = None

        def rider(pipe: RiderPipeline) -> None:
            for queue in queues:
                pipe.call("pop.lean", queue, WORKER, POP_COUNT)
            pipe.read("zrange", f"{self.prefix}schedules", 0, 0, "withscores")
            if ahead:
                self.ride_ahead(pipe, queues, again=again)

        self.engine.rider = rider
        self.engine.rider_replies = None

    def ride_ahead(self, pipe: RiderPipeline, queues: list[str], *, again: bool) -> None:
        """Queue the foreseen job's report and the next event's reads on ``pipe`` when its one
        fire is the foreseen run's, on time: the pops before them hand out that job alone (the
        queues are empty, nothing else is due), and nothing happens between its pop and its
        report but what the client does (a stub with nothing to read, played ahead)."""
        foreseen, self.foreseen = self.foreseen, None
        fires = pipe.fire_calls()
        if foreseen is None or len(fires) != 1 or foreseen.job.queue not in queues:
            return
        if secrets.remembered() != foreseen.masks:
            return  # a step resolved a secret since: its result may be masked otherwise now
        # name, hash, expected, next, action, tick, skips, run id, run, jobs (no cancel)
        fire = fires[0]
        if len(fire) != 10 or fire[4] != "fire" or fire[7] != foreseen.run_id or fire[3] == "":
            return
        upcoming = float(fire[3])  # where the fire moves the schedule: its next tick
        if upcoming <= self.clock.now:
            return  # a catch-up: the service fires again in this tick
        if again:
            pipe.call("queues")
        self.report(foreseen.job, foreseen.outcome, pipe)
        due = self.queue_event_reads(pipe, queues, ticks=True, due_at=upcoming)
        self.rode = (foreseen, due, again)

    def foresee(self, run: RunRequest | None) -> None:
        """Play the first job of ``run`` (a tick's, built ahead) before it is fired, when how it
        ends is known without the engine: the run hands out that one job first, a stub (for
        its first attempt) that ends at once, with nothing to read (no upstream step, secret
        or cache). Done while the server fires the tick before (``meanwhile``): never raises,
        a job it cannot foresee is started when it is popped."""
        self.foreseen = None
        if run is None or self.case.signals or not self.foreseeing:
            return
        try:
            self.foreseen = self._foreseen(run)
        except Exception:  # its pop starts it as any other, and says what is wrong
            return

    def _foreseen(self, run: RunRequest) -> _Foreseen | None:
        ready = [spec for spec in job_objects(run.jobs_json()) if not spec.get("depends")]
        if len(ready) != 1 or not ready[0].keys() <= _FORESEEABLE or "retries" not in ready[0]:
            return None
        spec = ready[0]
        job = Job(self.client, {**spec, "remaining": spec["retries"], "runs": 1, "worker": WORKER})
        meta = FlowsMeta.from_data(job.data)
        if meta is None or meta.flow != self.flow_name or meta.secrets or meta.upstream:
            return None
        stub = self.case.stub(meta.step, 1)
        if stub is None or stub.duration != 0 or job.data[META_KEY].get(CACHE_KEY):
            return None
        try:
            user_data, options = split(job.data)
        except BrokenPayload:
            return None
        known, masks = _known(job), secrets.remembered()
        ctx = JobContext(job=job, data=user_data, options=options, sandbox=self.sandbox)
        outcome, _ = self.outcome_of(ctx, meta.step)
        if outcome.kind not in ("complete", "skip"):
            return None
        return _Foreseen(run.run_id, job, known, outcome, meta.step, masks)

    def settle_ahead(self, queues: list[str]) -> tuple[float, float, bool] | None:
        """After a fire batch that took the foreseen job's report along (:meth:`ride_ahead`):
        the next event, as :meth:`next_event` says it; None when the pops handed out anything
        but that job (the fire did not fire its run: the report was refused, changing
        nothing), and the pops are started the ordinary way."""
        rode, self.rode = self.rode, None
        replies = self.engine.rider_replies
        if rode is None or not replies:
            return None
        foreseen, due, again = rode
        count = len(queues)
        pops = replies[:count]
        for reply in pops:
            if isinstance(reply, Exception):
                raise reply
        if again:  # read right after the pops, as the tick would read them after its fire
            self.queues_read = _queue_names(replies[count + 1])
        at = count + 1 + again  # the report's reply: after the pops and the reads
        jobs = [Job(self.client, raw) for reply in pops for raw in json.loads(reply)]
        if len(jobs) != 1 or _known(jobs[0]) != foreseen.known:
            if not isinstance(replies[at], EngineError):  # never: a fault of the driver
                raise CaseError(
                    f"the report of {foreseen.job.jid} sent with its tick's fire was taken, "
                    f"but the pop handed out {len(jobs)} job(s), not that one alone"
                )
            self.reported = []
            self.engine.rider_replies = replies[: count + 1]
            return None
        self.engine.rider_replies = None
        self.order.append(foreseen.step)
        self.reported = [(jobs[0], foreseen.outcome)]
        self.judge([replies[at]])
        return self.events(replies[at + 1 :], queues, ticks=True, due=due)

    def upcoming(self) -> float | None:
        """The next tick as read right after the fire (the rider's read), if it was."""
        replies = self.engine.rider_replies
        if not replies or isinstance(replies[len(self.rider_queues)], Exception):
            return None
        return _first_score(replies[len(self.rider_queues)])

    def ridden_pops(self) -> dict[str, Any]:
        """The replies of the pops that rode along (queue → reply), taken once."""
        replies, self.engine.rider_replies = self.engine.rider_replies, None
        if not replies:
            return {}
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return dict(zip(self.rider_queues, replies[: len(self.rider_queues)], strict=True))

    def label_of(self, jid: str, meta: FlowsMeta | None) -> str | None:
        """The name a case gives the job: its step for the flow under test, its label in the
        parent's run for a child run's (``report/count``, foreach items' indices left out);
        None for a job of no flow or of a run the case did not start."""
        if meta is None:
            return None
        if meta.flow == self.flow_name:
            return meta.step
        prefix = self.child_prefixes.get(meta.run)
        if prefix is None:  # one read per child run: its parent steps up to the case's run
            prefix = _ITEM.sub("", tree_label(self.client, jid)).rpartition("/")[0]
            self.child_prefixes[meta.run] = prefix
        return f"{prefix}/{meta.step}" if prefix else None

    def start(self, job: Job) -> None:
        meta = FlowsMeta.from_data(job.data)
        label = self.label_of(job.jid, meta)
        if label is not None:
            self.order.append(label)
        try:
            user_data, options = split(job.data)
        except BrokenPayload as error:
            self.report(job, runner.failure("broken-payload", str(error)))
            return
        ctx = JobContext(job=job, data=user_data, options=options, sandbox=self.sandbox)
        outcome, duration = self.outcome_of(ctx, label)
        now = self.clock.now
        # Heartbeated at a third of the lock the engine gave, as a worker does.
        lock = job.expires - now if job.expires > now else 30.0
        entry = _Running(now + duration, next(self.seq), job, outcome, now + lock / 3, lock)
        heapq.heappush(self.running, entry)

    def outcome_of(self, ctx: JobContext, label: str | None) -> tuple[runner.Outcome, float]:
        """How the job of ``ctx`` (named ``label`` in the case) ends and how long it takes: its
        stub played, or the step really run (in an empty folder of its own; a stub needs
        none)."""
        stub = self.case.stub(label, ctx.attempt) if label is not None else None
        duration = 0.0
        try:
            prepared = True
            try:
                prepare(ctx)
            except FailJob as fail:
                # A stub needs no inputs: an unresolved reference does not stop a mocked step.
                if stub is None or fail.group != "flows-reference":
                    raise
                prepared = False
            if stub is not None:
                outcome, duration = self.play(ctx, stub, prepared)
            else:
                ctx.sandbox = Path(tempfile.mkdtemp(dir=self.sandbox))
                outcome, duration = self.run_for_real(ctx)
        except FailJob as fail:
            outcome = runner.failure(fail.group, fail.message)
        except SkipJob as skip:
            outcome = runner.skipped(skip.message)
        except HandedOver as handed:  # the step's cache completed it
            outcome = runner.Outcome("handed", message=handed.message)
        except Exception as error:
            outcome = runner.failure("prepare-error", f"{type(error).__name__}: {error}")
        return outcome, duration

    def run_for_real(self, ctx: JobContext) -> tuple[runner.Outcome, float]:
        """:func:`run_for_real`, its lines stored before its outcome is reported, as a
        worker stores them."""
        try:
            return run_for_real(ctx, self.logs)
        finally:
            if self.logs.pending:
                self.logged.append((ctx.jid, ctx.log_attempt))
                self.logs.flush()

    def output(self) -> list[StepLine]:
        """The lines the real steps wrote, run by run (the first :data:`joblogs.PAGE` of each),
        labelled as `flows logs` labels them in the case's run (a child run's under its step)."""
        lines: list[StepLine] = []
        for jid, attempt in self.logged:
            try:
                page = joblogs.read(self.engine, jid, attempt)
            except JobNotFound:
                continue
            label = tree_label(self.client, jid) or jid
            lines += (StepLine(label, jid, attempt, line) for line in page.lines)
        return lines

    def play(self, ctx: JobContext, stub: Stub, prepared: bool) -> tuple[runner.Outcome, float]:
        timeout = ctx.options.timeout
        if timeout is not None and stub.duration > timeout:
            return runner.stopped(ctx, "timeout"), timeout
        if stub.skip:
            return runner.skipped("stubbed: skip"), stub.duration
        ctx.job.klass = STUB_KLASS
        ctx.data = {
            STUB_KEY: {"outputs": stub.outputs, "fail": stub.fail, "exit": stub.exit},
        }
        return runner.run(ctx), stub.duration

    def report(self, job: Job, outcome: runner.Outcome, pipe: EnginePipeline | None = None) -> None:
        """The outcome, queued to be sent as a worker sends it (:meth:`flush`, or with the reads
        of :meth:`next_event`: one round trip for a moment's reports and what follows; or on
        ``pipe``, a tick's fire batch, when it was foreseen)."""
        pipe = self.outbox if pipe is None else pipe
        call = pipe.call
        queued = len(pipe)
        if outcome.kind == "complete":
            args: list[Any] = ["result", outcome.result] if outcome.result else []
            call("complete", job.jid, WORKER, job.queue, "", *args)
        elif outcome.kind == "retry":
            call("retry", job.jid, job.queue, WORKER, outcome.delay, outcome.group, outcome.message)
        elif outcome.kind == "fail":
            call("fail.held", job.jid, WORKER, outcome.group, outcome.message)
        elif outcome.kind == "skip":
            call("complete", job.jid, WORKER, job.queue, "", "skipped", outcome.message)
        elif outcome.kind == "release":
            call("release", job.jid, WORKER, outcome.delay)
        elif outcome.kind == "bury":
            call("bury", job.jid, WORKER, outcome.message)
        # Handed over (a sub-flow's child started, a cache hit) or lost: the job's own call
        # took it, nothing is sent; each report sent is remembered with its job.
        if len(pipe) > queued:
            self.reported.append((job, outcome))

    def flush(self, reads: int = 0) -> list[Any]:
        """Send the queued reports (and the ``reads`` queued after them); the reads' replies.
        A refused report is judged as a worker judges it (:mod:`scheduler.worker.reporting`):
        refused for a lost lock, it is dropped (someone else's job now); refused for what it
        said, the job fails at once, since its next run's would be refused too: a complete
        refused for its result in ``bad-result``, any other outcome (a retry, fail, skip,
        release or bury) in ``bad-outcome``, the message naming what the engine refused and
        why.
        """
        replies = self.outbox.execute()
        self.judge(replies[: len(replies) - reads])
        return replies[len(replies) - reads :]

    def judge(self, reports: list[Any]) -> None:
        """The replies to the reports sent (:meth:`flush`), judged as a worker judges them."""
        sent, self.reported = self.reported, []
        for (job, outcome), reply in zip(sent, reports, strict=True):
            if not isinstance(reply, Exception):
                continue
            if not isinstance(reply, EngineError):
                raise reply
            if lock_lost(reply):
                continue
            if outcome.kind != "complete":
                failed = refused(outcome, reply)
            elif refuses_result(reply):
                failed = result_refused(reply)
            else:
                continue  # an engine fault, not this job's: a worker leaves it to its lock
            with suppress(EngineError):  # its lock lost meanwhile
                self.engine.call("fail.held", job.jid, WORKER, failed.group, failed.message)

    def finish_due(self) -> int:
        """Report every running job whose end has come (queued: :meth:`flush`)."""
        done = 0
        while self.running and self.running[0].end <= self.clock.now:
            entry = heapq.heappop(self.running)
            self.report(entry.job, entry.outcome)
            done += 1
        return done

    def beat(self) -> None:
        """Heartbeat the jobs still running whose time for it has come, as a worker does."""
        for entry in self.running:
            if entry.beat <= self.clock.now and entry.end > self.clock.now:
                with suppress(EngineError):  # a lost lock: its report is refused later
                    self.engine.call("heartbeat", entry.job.jid, WORKER)
                entry.beat = self.clock.now + entry.lock / 3

    def beat_until(self, moment: float) -> None:
        """Send, in one round trip and each at its time, the heartbeats the running jobs make
        before ``moment``, the next event (:meth:`next_event`): nothing else happens in
        between, so the clock need not stop at each (a day-long stub took 4,320 rounds of
        the loop)."""
        # In time order across the jobs, merged as they come: a year-long stub owes 1.6
        # million of them, sent in pipelines of BEATS_PER_TRIP.
        due = [(e.beat, e.seq, e) for e in self.running if e.beat < min(moment, e.end)]
        if not due:  # most moments of most cases: no pipeline to make
            return
        heapq.heapify(due)
        pipe = self.engine.pipeline()
        while due:
            at, seq, entry = heapq.heappop(due)
            pipe.call("heartbeat", entry.job.jid, WORKER, now=at)
            entry.beat = at + entry.lock / 3
            if entry.beat < min(moment, entry.end):
                heapq.heappush(due, (entry.beat, seq, entry))
            if len(pipe) >= BEATS_PER_TRIP or not due:
                for reply in pipe.execute():
                    # An engine refusal is a lost lock: the job's report is refused later.
                    if isinstance(reply, Exception) and not isinstance(reply, EngineError):
                        raise reply
                pipe = self.engine.pipeline()

    def send_signals(self) -> int:
        if not self.case.signals:
            return 0
        sent = 0
        for jid in map(str, self.client.redis.zrange(f"{self.prefix}awaiting", 0, -1)):
            if jid in self.signaled:
                continue
            job = self.client.jobs.get(jid)
            meta = FlowsMeta.from_data(job.data) if job is not None else None
            label = self.label_of(jid, meta)
            if label is None or label not in self.case.signals:
                continue
            data = json.dumps(dict(self.case.signals[label]))
            self.engine.call("wait.signal", jid, data, WORKER)
            self.signaled.add(jid)
            sent += 1
        return sent

    def next_event(
        self, queues: list[str], *, ticks: bool, due_at: float | None = None
    ) -> tuple[float, float, bool]:
        """The earliest moment after now at which a job can move, the next tick's (inf: none),
        and whether a job can start right now (waiting in a queue, or a wait to signal). One
        round trip: the engine's indexes are scored by these times. ``due_at``: the service's
        due read at that time goes last in it, read ahead for its tick then."""
        # After the reports queued at this moment, in their round trip.
        reports = len(self.outbox)
        due = self.queue_event_reads(self.outbox, queues, ticks=ticks, due_at=due_at)
        replies = self.flush(reads=len(self.outbox) - reports)
        return self.events(replies, queues, ticks=ticks, due=due)

    def queue_event_reads(
        self, pipe: EnginePipeline, queues: list[str], *, ticks: bool, due_at: float | None
    ) -> Call | None:
        """Queue :meth:`next_event`'s reads on ``pipe``; the due read among them, if any."""
        for queue in queues:  # its waiting jobs' two keys (lua/include/work.lua): either exists
            pipe.read("exists", f"{self.prefix}q:{queue}-work", f"{self.prefix}q:{queue}-fifo")
        for queue in queues:
            pipe.read("zrange", f"{self.prefix}q:{queue}-scheduled", 0, 0, "withscores")
            pipe.read("zrange", f"{self.prefix}q:{queue}-locks", 0, 0, "withscores")
        pipe.read("zrange", f"{self.prefix}awaiting", 0, 0, "withscores")
        if self.case.signals:  # how many wait: only a case that signals them asks
            pipe.read("zcard", f"{self.prefix}awaiting")
        if ticks:
            pipe.read("zrange", f"{self.prefix}schedules", 0, 0, "withscores")
            pipe.read("zcard", f"{self.prefix}schedules-buffered")
        if due_at is None:
            return None
        due: Call = ("schedule.due", (0, self.due_limit), due_at)
        pipe.call(due[0], *due[1], now=due_at)
        return due

    def events(
        self, replies: list[Any], queues: list[str], *, ticks: bool, due: Call | None
    ) -> tuple[float, float, bool]:
        """:meth:`next_event`'s answer from the replies of its reads."""
        if due is not None and not isinstance(reply := replies.pop(), Exception):
            self.engine.read_ahead(due, reply)
        # Heartbeats are no events (beat_until sends them on the way), nor are the locks they
        # renew: every job locked in a case's namespace is one of these running ones.
        times = [e.end for e in self.running]
        ours = {e.job.jid for e in self.running}
        tick = math.inf
        if ticks:
            self.buffered = int(replies.pop())
            tick = _first_score(replies.pop())
        awaiting = int(replies.pop()) if self.case.signals else 0
        waiting = sum(int(n) for n in replies[: len(queues)])
        for index, reply in enumerate(replies[len(queues) :]):
            locks = index % 2 == 1  # per queue: its scheduled jobs, then its locks
            if not (locks and reply and _first_member(reply) in ours):
                times.append(_first_score(reply))
        later = [t for t in times if math.isfinite(t)]
        # A wait to signal: one the case names, awaiting, not signaled yet (send_signals knows).
        signal = bool(self.case.signals) and awaiting > len(self.signaled)
        return min(later, default=math.inf), tick, bool(waiting) or signal

    def settle(self, queues: list[str]) -> bool:
        """Start what can start now and report what ends now (what that releases is started by
        the next settle: :meth:`next_event` says whether there is any); whether anything
        moved."""
        self.beat()
        moved = self.send_signals() > 0
        for _ in range(MAX_STEPS):
            started = self.start_ready(queues)
            moved = moved or started > 0
            if not any(e.end <= self.clock.now for e in self.running):
                if started or not self.send_signals():
                    return moved
                continue
            self.finish_due()
            return True
        raise CaseError("the case did not settle (a loop that never ends?)")

    def stalled_at(self, moment: float) -> None:
        """Count the rounds in a row at which time cannot move on: a bug, not a long case."""
        self.still = self.still + 1 if moment <= self.clock.now else 0
        if self.still > STUCK_ROUNDS:
            raise CaseError(f"the case is stuck at {self.clock.now} (nothing moves the clock on)")

    def housekeep(self) -> None:
        maintain_queues(self.client, self.clock.now)

    # -- observing -----------------------------------------------------------------------------

    def observe(self, run_id: str) -> Observed:
        view = load_run(self.client, run_id)
        if view is None:
            raise CaseError(f"run {run_id} is gone")
        outputs: dict[str, Any] | None = None
        if self.case.expect.outputs is not None:  # read only when compared: two more calls
            try:
                outputs = run_outputs(self.client, run_id)
            except (UnresolvedReference, EngineError):
                outputs = None  # a step they read failed or never ran
        steps = _steps(view)
        if any("/" in label for label in self.case.expect.steps):
            steps |= self._child_steps(view, "", 1)
        return Observed(
            run_id,
            view.status,
            steps,
            list(self.order),
            outputs=outputs,
            failures=_failures(view),
        )

    def _child_steps(self, view: RunView, prefix: str, depth: int) -> dict[str, dict[str, Any]]:
        """The steps of the child runs ``view``'s sub-flow steps started, by their labels."""
        steps: dict[str, dict[str, Any]] = {}
        if depth > MAX_DEPTH:
            return steps
        for step in view.steps:
            child = load_run(self.client, step.child) if step.child else None
            if child is None:
                continue
            label = f"{prefix}{step.step}/"
            steps |= {f"{label}{name}": seen for name, seen in _steps(child).items()}
            steps |= self._child_steps(child, label, depth + 1)
        return steps


def _queue_names(reply: Any) -> list[str]:
    """The names in a ``queues`` reply (a refusal raised)."""
    if isinstance(reply, Exception):
        raise reply
    listed = json.loads(reply)
    return [str(q["name"]) for q in listed] if isinstance(listed, list) else []


def _first_member(reply: Any) -> str:
    """The member of a non-empty ``ZRANGE key 0 0 WITHSCORES`` reply (flat or in pairs)."""
    first = reply[0]
    member = first[0] if isinstance(first, list | tuple) else first
    return member.decode() if isinstance(member, bytes) else str(member)


def _first_score(reply: Any) -> float:
    """The score of a ``ZRANGE key 0 0 WITHSCORES`` reply, flat (RESP2) or in pairs (RESP3);
    inf when the set is empty."""
    if not reply:
        return math.inf
    first = reply[0]
    return float(first[1] if isinstance(first, list | tuple) else reply[1])


def _failures(view: RunView) -> list[str]:
    """``step load (r:load): timeout: the last line of its message``, for each failed job (the
    first line of a report the engine refused: it says what was refused and why)."""
    lines = []
    for step in view.steps:
        for job in step.jobs:
            if job.failure is None:
                continue
            message = str(job.failure.get("message", "")).strip().splitlines()
            group = str(job.failure.get("group", "?"))
            said = message[0 if group in REFUSED_GROUPS else -1] if message else ""
            last = said[:200]
            # A Python exception's last line names its class, which is its group too.
            said = last if last.startswith(f"{group}:") else f"{group}: {last}" if last else group
            lines.append(f"step {step.step} ({job.jid}): {said}")
    return lines


def _steps(view: RunView) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for step in view.steps:
        results = [job.outputs for job in step.jobs]
        # a step with no items (total 0) has the empty list as its outputs, as a fan-out does
        foreach = step.total != 1 or any(job.jid.endswith("]") for job in step.jobs)
        outputs: Any = results if foreach else (results[0] if results else None)
        out[step.step] = {
            "status": step.status,
            "attempts": step.attempts,
            "outputs": outputs if outputs is not None else {},
        }
    return out


@contextmanager
def namespace(server: redis.Redis, clock: Clock) -> Iterator[Client]:
    """A client on a fresh namespace at ``clock``'s time; its keys are removed afterwards."""
    prefix = f"flows-test-{uuid.uuid4().hex[:12]}:"
    client = Client.from_engine(ClockedEngine(server, prefix, clock), worker_name=WORKER)
    try:
        yield client
    finally:
        keys = list(server.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            server.unlink(*keys[start : start + 1000])
        client.engine.close()


def run_case(server: redis.Redis, test: TestFile, case: Case, *, foresee: bool = True) -> Observed:
    """Run ``case`` of ``test`` on ``server`` and say what happened. ``foresee``: a schedule
    case's ticks whose first job's outcome is known ahead are reported with their fire, in one
    round trip (the same calls in the same order either way)."""
    wall = time.monotonic()
    start = case.schedule.start if case.schedule is not None else case.at.timestamp()
    clock = Clock(start)
    with (
        namespace(server, clock) as client,
        tempfile.TemporaryDirectory(prefix="flows-test-") as sandbox,
    ):
        driver = _Driver(client, clock, test, case, Path(sandbox))
        driver.foreseeing = foresee
        if case.schedule is None:
            observed = _run_once(driver, test, case)
        else:
            observed = _run_schedule(driver, test, case)
        observed.output = driver.output()
        observed.seconds = time.monotonic() - wall
        observed.virtual_seconds = clock.now - start
        observed.round_trips = driver.engine.round_trips
        return observed


def _run_once(driver: _Driver, test: TestFile, case: Case) -> Observed:
    clock = driver.clock
    run_id = f"{test.flow.flow.name}@test-{uuid.uuid4().hex[:8]}"
    try:
        built = build_run(
            test.flow,
            run_id=run_id,
            logical_time=case.at,
            params=dict(case.params),
            trigger="manual",
        )
    except (ValueError, EngineError) as error:
        raise CaseError(f"the run cannot be built: {error}") from None
    submit(driver.client, built)
    for _ in range(MAX_STEPS):
        queues = driver.queues()
        moved = driver.settle(queues)
        driver.flush()
        view = load_run(driver.client, run_id)
        if view is None or (view.finished and not driver.running):
            break
        moment, _, pending = driver.next_event(queues, ticks=False)
        if pending and moved:
            continue  # jobs released at this moment: start them before time moves on
        if not math.isfinite(moment):
            break  # nothing more can happen: a wait without a timeout or a signal, say
        driver.stalled_at(moment)
        driver.beat_until(moment)
        clock.advance_to(moment)
        driver.housekeep()
    return driver.observe(run_id)


def _run_schedule(driver: _Driver, test: TestFile, case: Case) -> Observed:
    period = case.schedule
    assert period is not None
    clock, client = driver.clock, driver.client
    definition = definition_of(test.flow)
    # Registered just before the period starts, so a tick at its first instant is due.
    clock.now = period.start - 1
    Schedules(client).register(definition, clock.now)
    clock.now = period.start
    source = FlowsSource()
    if builds_alike_ahead(test.flow.flow):
        source = ahead = AheadSource(definition)

        def meanwhile() -> None:
            ahead.build_after(clock.now)
            driver.foresee(ahead.built)

        driver.engine.meanwhile = meanwhile
    service = SchedulerService(
        client,
        source,
        test.flow.flow_dir,
        service_id=WORKER,
        ping_interval=PING_INTERVAL,
        retention_interval=RETENTION_INTERVAL,
    )
    driver.due_limit = service.batch
    aging = Aging(client, period.start, service.retention_interval)
    outage = period.outage
    fired: list[float] = []
    queues: list[str] = []
    job_due = pending = False
    tick_at = period.start
    upcoming: float | None = None  # the next tick after the last fire, read with it
    for _ in range(MAX_STEPS):
        down = outage is not None and outage[0] <= clock.now < outage[1]
        upcoming = None
        known: _Next | None = None
        if not down and tick_at <= clock.now < period.end:
            quiet = not (driver.running or job_due or pending or driver.buffered)
            known, upcoming, queues = _tick(driver, service, aging, queues, fired, quiet=quiet)
        if known is not None:
            moved = True  # the foreseen job started and ended
            moment, tick, pending = known
        else:
            if job_due:
                driver.housekeep()
            moved = driver.settle(queues)
            due_at = upcoming if upcoming is not None and math.isfinite(upcoming) else None
            moment, tick, pending = driver.next_event(queues, ticks=True, due_at=due_at)
        if driver.buffered and moved:
            # A tick held back for a run that may just have ended: the service, which ticks
            # every second, fires it now rather than at the schedule's next fire time.
            tick = clock.now
        if outage is not None and outage[0] <= tick < outage[1]:
            tick = outage[1]  # the service is down: its next look is when it is back
        tick_at = tick
        if pending and moved:
            job_due = False
            continue  # jobs released at this moment: start them before time moves on
        job_due = moment <= tick
        moment = min(moment, tick)
        if not math.isfinite(moment) or moment >= period.end:
            break
        driver.stalled_at(moment)
        driver.beat_until(moment)
        clock.advance_to(moment)
    return Observed(runs=len(fired), order=list(driver.order), ticks=fired)


#: The next event as :meth:`_Driver.next_event` says it: (moment, tick, pending).
_Next = tuple[float, float, bool]


def _reads_queues(fires: int) -> bool:
    """Whether the run's queues are read again once ``fires`` ticks have fired."""
    return fires <= 2 or fires % 64 == 0


def _tick(
    driver: _Driver,
    service: SchedulerService,
    aging: Aging,
    queues: list[str],
    fired: list[float],
    *,
    quiet: bool,
) -> tuple[_Next | None, float | None, list[str]]:
    """The service's tick at the clock's time, the pops riding with its fire batch (``fired``
    takes its fired ticks). ``quiet``: nothing runs, waits in a queue or falls due with the
    tick, and no tick is held back (the service's tick then ends with its fire batch: no due
    read after it, which a report sent with the batch would come before). Returns the next
    event when the tick's first job was foreseen (reported in the same round trip:
    :meth:`_Driver.ride_ahead`), else the next tick read after the fire; and the run's
    queues."""
    # The run's queues are read again after the first fires and every 64th (sub-flows add
    # theirs), between the pops and the reports: with a report riding along, in its batch.
    driver.ride_pops(queues, ahead=quiet, again=_reads_queues(len(fired) + 1))
    report = service.tick(driver.clock.now)
    fired.extend(f.tick for f in report.fired)
    # Here, before the reads of what comes next are taken as read ahead (settle_ahead): a call
    # among them would have the service's next due read sent again.
    aging.at(driver.clock.now)
    known = driver.settle_ahead(queues)
    upcoming = driver.upcoming() if known is None else None
    driver.engine.rider = None  # not taken when nothing was fired
    if report.fired and _reads_queues(len(fired)):
        queues = driver.queues_read if driver.queues_read is not None else driver.queues()
    return known, upcoming, queues
