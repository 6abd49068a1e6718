"""Random sequences of put / pop / complete / fail / retry / heartbeat / cancel / timeout, with
time advanced explicitly, against a small Python model of the job state machine.

The model knows each job's state, which worker holds it and until when, whether its worker was
already warned (grace), the retries left, and the dependency edges. After every step the engine
must agree with it (every job's state, worker, retries, edges; every refusal's error class) and
each job must sit in exactly one index, the one its hash state names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import redis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from lua_support import MODES, T0, Lua, lua_in_mode, unchanged

from scheduler.engine import doctor
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, HasDependents, JobNotFound, LockLost, WrongState

JIDS = ["a", "b", "c", "d", "e"]
WORKERS = ["w1", "w2"]
GROUPS = ["g1", "g2", "failed-retries-q"]
HEARTBEAT = 10
GRACE = 4
SETTINGS = settings(
    max_examples=30,
    stateful_step_count=40,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Job:
    state: str  # waiting, scheduled, depends, running, failed, complete
    priority: int
    retries: int
    remaining: int
    order: int = 0  # waiting: position among equal priorities (equal: released together)
    due: float = 0.0  # scheduled: when it becomes waiting
    delay: float = 0.0  # depends: the delay to apply once released
    worker: str = ""
    expires: float = 0.0  # running: the hash's lock expiry
    lock: float = 0.0  # running: its score in the queue's locks
    grace: bool = False  # running: its worker was told lock_lost
    group: str = ""  # failed: its failure group
    dependencies: set[str] = field(default_factory=set)
    dependents: set[str] = field(default_factory=set)

    def valid_lock(self, now: float) -> bool:
        return not self.grace and self.expires > now


class Model:
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.now = T0
        self.counter = 0

    def next_order(self) -> int:
        self.counter += 1
        return self.counter

    def release(self, jid: str, delay: float, order: int | None = None) -> None:
        job = self.jobs[jid]
        job.worker, job.grace = "", False
        if delay > 0:
            job.state, job.due = "scheduled", self.now + delay
        else:
            job.state, job.order = "waiting", order or self.next_order()

    def drop_dependencies(self, jid: str) -> None:
        for dependency in self.jobs[jid].dependencies:
            if dependency in self.jobs:
                self.jobs[dependency].dependents.discard(jid)
        self.jobs[jid].dependencies = set()

    def owner_error(self, jid: str, worker: str) -> type[EngineError] | None:
        """What complete, retry and heartbeat answer a worker that may not hold the job."""
        job = self.jobs.get(jid)
        if job is None:
            return JobNotFound
        if job.state != "running":
            return WrongState
        if job.worker != worker or not job.valid_lock(self.now):
            return LockLost
        return None

    def fail(self, jid: str, group: str) -> None:
        job = self.jobs[jid]
        if job.state == "depends":
            self.drop_dependencies(jid)
        job.state, job.group, job.worker, job.grace = "failed", group, "", False


class JobMachine(RuleBasedStateMachine):
    lua: ClassVar[Lua]

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()

    @property
    def now(self) -> float:
        return self.model.now

    def call(self, command: str, *args: Any) -> Any:
        return self.lua(command, *args, now=self.now)

    def refused(self, error: type[EngineError], command: str, *args: Any) -> None:
        event(f"{command} refused: {error.__name__}")
        with unchanged(self.lua.r), pytest.raises(EngineError) as raised:
            self.call(command, *args)
        assert type(raised.value) is error, (command, args, raised.value)

    @initialize(
        jobs=st.lists(
            st.fixed_dictionaries(
                {
                    "priority": st.sampled_from([0, -1, 1]),
                    "retries": st.sampled_from([1, 0, 2]),
                }
            ),
            min_size=2,
            max_size=len(JIDS),
        )
    )
    def setup(self, jobs: list[dict[str, int]]) -> None:
        self.lua.r.flushall()
        self.lua.config("heartbeat", HEARTBEAT, now=T0)
        self.lua.config("grace-period", GRACE, now=T0)
        for jid, options in zip(JIDS, jobs, strict=False):
            self.do_put(jid, options["priority"], 0, options["retries"], set())

    # -- time --------------------------------------------------------------------------------

    STEPS = st.sampled_from([1, 0.5, 3, GRACE, HEARTBEAT - 1, HEARTBEAT, HEARTBEAT + 1])

    @rule(seconds=STEPS)
    def advance(self, seconds: float) -> None:
        self.model.now += seconds

    @rule(seconds=STEPS)
    def advance_more(self, seconds: float) -> None:
        self.model.now += seconds

    # -- commands, checked against the model -----------------------------------------------

    def do_put(
        self, jid: str, priority: int | None, delay: float, retries: int | None, depends: set[str]
    ) -> None:
        depends = depends - {jid}
        m = self.model
        old = m.jobs.get(jid)
        args: list[Any] = ["client", "q", jid, "K", "{}", delay]
        if priority is not None:
            args += ["priority", priority]
        if retries is not None:
            args += ["retries", retries]
        if depends:
            args += ["depends", '["' + '","'.join(sorted(depends)) + '"]']
        assert self.call("put", *args) == jid
        event("put: " + ("again" if old else "new") + (" with depends" if depends else ""))

        if old is not None:
            m.drop_dependencies(jid)
        dependents = old.dependents if old else set()
        priority = priority if priority is not None else (old.priority if old else 0)
        retries = retries if retries is not None else (old.retries if old else 5)
        job = Job("waiting", priority, retries, retries, delay=delay, dependents=dependents)
        m.jobs[jid] = job
        pending = {d for d in depends if d in m.jobs and m.jobs[d].state != "complete"}
        if pending:
            job.state, job.dependencies = "depends", pending
            for dependency in pending:
                m.jobs[dependency].dependents.add(jid)
        else:
            m.release(jid, delay)

    def do_pop(self, worker: str, count: int) -> None:
        m = self.model
        expected_reclaimed: list[str] = []
        expired = sorted(
            (j.lock, jid) for jid, j in m.jobs.items() if j.state == "running" and j.lock <= m.now
        )[:count]
        for _, jid in expired:
            job = m.jobs[jid]
            if not job.grace:
                event("pop: worker warned (grace period)")
                job.grace, job.lock = True, m.now + GRACE
                continue
            job.remaining -= 1
            if job.remaining < 0:
                event("pop: retries exhausted")
                m.fail(jid, "failed-retries-q")
            else:
                event("pop: expired job reclaimed")
                expected_reclaimed.append(jid)
        if len(expected_reclaimed) < count:
            due = sorted(
                (j.due, jid)
                for jid, j in m.jobs.items()
                if j.state == "scheduled" and j.due <= m.now
            )
            for _, jid in due:
                m.release(jid, 0)

        popped = [job["jid"] for job in self.call("pop", "q", worker, count)]
        event(f"pop: {len(popped)} of {count}")
        assert popped[: len(expected_reclaimed)] == expected_reclaimed, popped
        taken = popped[len(expected_reclaimed) :]
        waiting = sorted((j.priority, j.order) for j in m.jobs.values() if j.state == "waiting")
        wanted = count - len(expected_reclaimed)
        # The first `wanted` waiting jobs, in order (jobs released together tie: any order).
        assert len(set(taken)) == len(taken) == min(wanted, len(waiting)), (taken, waiting)
        assert all(m.jobs[jid].state == "waiting" for jid in taken), taken
        keys = [(m.jobs[jid].priority, m.jobs[jid].order) for jid in taken]
        assert keys == waiting[: len(taken)], (taken, keys, waiting)
        for jid in popped:
            job = m.jobs[jid]
            job.state, job.worker, job.grace = "running", worker, False
            job.expires = job.lock = m.now + HEARTBEAT

    def do_complete(self, jid: str, worker: str) -> None:
        m = self.model
        error = m.owner_error(jid, worker)
        if error:
            self.refused(error, "complete", jid, worker, "q", "{}")
            return
        assert self.call("complete", jid, worker, "q", "{}") == "complete"
        event(f"complete: {len(m.jobs[jid].dependents)} dependents")
        job = m.jobs[jid]
        job.state, job.worker, job.grace = "complete", "", False
        order = None
        for dependent in job.dependents:
            other = m.jobs[dependent]
            other.dependencies.discard(jid)
            if not other.dependencies and other.state == "depends":
                event("complete: dependent released")
                order = order or m.next_order()  # released together: any order among them
                m.release(dependent, other.delay, order)
        job.dependents = set()

    def do_fail(self, jid: str, worker: str, group: str) -> None:
        m = self.model
        job = m.jobs.get(jid)
        if job is None:
            self.refused(JobNotFound, "fail", jid, worker, group, "message")
            return
        if job.state == "running" and (job.worker != worker or not job.valid_lock(m.now)):
            self.refused(LockLost, "fail", jid, worker, group, "message")
            return
        assert self.call("fail", jid, worker, group, "message") == jid
        event(f"fail: {m.jobs[jid].state} job")
        m.fail(jid, group)

    def do_retry(self, jid: str, worker: str, delay: float) -> None:
        m = self.model
        error = m.owner_error(jid, worker)
        if error:
            self.refused(error, "retry", jid, "q", worker, delay)
            return
        job = m.jobs[jid]
        job.remaining -= 1
        assert self.call("retry", jid, "q", worker, delay) == job.remaining
        event("retry: exhausted" if job.remaining < 0 else "retry: put back")
        if job.remaining < 0:
            m.fail(jid, "failed-retries-q")
        else:
            m.release(jid, delay)

    def do_heartbeat(self, jid: str, worker: str) -> None:
        m = self.model
        error = m.owner_error(jid, worker)
        if error:
            self.refused(error, "heartbeat", jid, worker)
            return
        assert float(self.call("heartbeat", jid, worker)) == m.now + HEARTBEAT
        event("heartbeat")
        m.jobs[jid].expires = m.jobs[jid].lock = m.now + HEARTBEAT

    def do_cancel(self, jids: list[str]) -> None:
        m = self.model
        listed = set(jids)
        existing = [jid for jid in dict.fromkeys(jids) if jid in m.jobs]
        for jid in existing:  # checked in order: a completed job, then its dependents
            if m.jobs[jid].state == "complete":  # a cancel stops what has not ended
                self.refused(WrongState, "cancel", *jids)
                return
            if m.jobs[jid].dependents - listed:
                self.refused(HasDependents, "cancel", *jids)
                return
        assert self.call("cancel", *jids) == existing
        event(f"cancel: {len(existing)} jobs")
        for jid in existing:
            m.drop_dependencies(jid)
        for jid in existing:
            del m.jobs[jid]

    def do_timeout(self, jid: str) -> None:
        m = self.model
        job = m.jobs.get(jid)
        if job is None or job.state != "running":
            self.refused(JobNotFound if job is None else WrongState, "timeout", jid)
            return
        assert self.call("timeout", jid) is None
        event("timeout")
        job.expires = job.lock = m.now
        job.grace = True

    # -- rules: each aims at a relevant job most of the time, at any jid otherwise ----------

    def running(self) -> list[str]:
        return sorted(jid for jid, job in self.model.jobs.items() if job.state == "running")

    def target(self, data: st.DataObject) -> tuple[str, str]:
        """(jid, worker): mostly a running job and the worker holding it; else anything."""
        running = self.running()
        # Hypothesis favours 0 (and shrinks to it): make 0 the aimed choice.
        if running and data.draw(st.integers(0, 4), label="aim") < 4:
            jid = data.draw(st.sampled_from(running), label="jid")
            holder = self.model.jobs[jid].worker
            worker = data.draw(st.sampled_from([holder, holder, holder, *WORKERS]), label="worker")
            return jid, worker
        return (
            data.draw(st.sampled_from(JIDS), label="jid"),
            data.draw(st.sampled_from(WORKERS), label="worker"),
        )

    PUT = {
        "jid": st.sampled_from(JIDS),
        "priority": st.sampled_from([None, -1, 0, 0, 1]),
        "delay": st.sampled_from([0, 0, 0, 2, 12]),
        "retries": st.sampled_from([None, 0, 1, 2]),
        "depends": st.sets(st.sampled_from(JIDS), max_size=2),
    }

    @rule(**PUT)
    def put(
        self, jid: str, priority: int | None, delay: float, retries: int | None, depends: set[str]
    ) -> None:
        self.do_put(jid, priority, delay, retries, depends)

    @rule(**PUT)
    def put_another(
        self, jid: str, priority: int | None, delay: float, retries: int | None, depends: set[str]
    ) -> None:
        self.do_put(jid, priority, delay, retries, depends)

    @rule(worker=st.sampled_from(WORKERS), count=st.integers(1, 3))
    def pop(self, worker: str, count: int) -> None:
        self.do_pop(worker, count)

    @rule(worker=st.sampled_from(WORKERS), count=st.integers(1, 3))
    def pop_again(self, worker: str, count: int) -> None:
        self.do_pop(worker, count)

    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        self.do_complete(*self.target(data))

    @rule(data=st.data())
    def complete_another(self, data: st.DataObject) -> None:
        self.do_complete(*self.target(data))

    @rule(data=st.data(), group=st.sampled_from(GROUPS[:2]))
    def fail(self, data: st.DataObject, group: str) -> None:
        if data.draw(st.integers(0, 3), label="any state") == 3:
            jid = data.draw(st.sampled_from(JIDS), label="jid")
            self.do_fail(jid, "admin", group)
        else:
            self.do_fail(*self.target(data), group)

    @rule(data=st.data(), delay=st.sampled_from([0, 0, 2]))
    def retry(self, data: st.DataObject, delay: float) -> None:
        self.do_retry(*self.target(data), delay)

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        self.do_heartbeat(*self.target(data))

    @rule(data=st.data())
    def timeout(self, data: st.DataObject) -> None:
        self.do_timeout(self.target(data)[0])

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        pool = sorted(self.model.jobs) or JIDS
        if data.draw(st.integers(0, 3), label="any jid") == 3:
            pool = JIDS
        self.do_cancel(
            data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3), label="jids")
        )

    # -- agreement -----------------------------------------------------------------------

    @invariant()
    def engine_agrees_with_the_model(self) -> None:
        m = self.model
        described = {job["jid"]: job for job in self.call("multiget", *JIDS)}
        assert described.keys() == m.jobs.keys()
        for jid, job in m.jobs.items():
            got = described[jid]
            state = job.state
            if state == "running" and not job.valid_lock(m.now):
                state = "stalled"
            assert got["state"] == state, (jid, got["state"], job)
            assert got["worker"] == job.worker, (jid, got, job)
            assert (got["retries"], got["remaining"], got["priority"]) == (
                job.retries,
                job.remaining,
                job.priority,
            ), (jid, got, job)
            assert set(got["dependencies"]) == job.dependencies, (jid, got, job)
            assert set(got["dependents"]) == job.dependents, (jid, got, job)
            if job.state == "running":
                assert got["expires"] == job.expires
            if job.state == "failed":
                assert got["failure"]["group"] == job.group

    @invariant()
    def each_job_is_in_exactly_the_index_of_its_state(self) -> None:
        m, lua = self.model, self.lua
        indexes = read_indexes(lua)
        where: dict[str, list[str]] = {}
        for index, members in indexes.items():
            if index.startswith("w:") or index == "failures":
                continue
            for jid in members:
                where.setdefault(jid, []).append(index)
        for jid, job in m.jobs.items():
            expected = {
                "waiting": "work",
                "scheduled": "scheduled",
                "depends": "depends",
                "running": "locks",
                "complete": "completed",
                "failed": f"f:{job.group}",
            }[job.state]
            assert where.pop(jid, []) == [expected], (jid, job)
            if job.state == "scheduled":
                assert indexes["scheduled"][jid] == job.due
            if job.state == "running":
                assert indexes["locks"][jid] == job.lock
        assert not where, f"index entries without a job: {where}"
        for worker in WORKERS:
            held = {
                jid: j.expires
                for jid, j in m.jobs.items()
                if j.state == "running" and j.worker == worker and not j.grace
            }
            assert indexes[f"w:{worker}"] == held, worker
        assert indexes["failures"] == {j.group: 0 for j in m.jobs.values() if j.state == "failed"}
        # waiting jobs in priority order, ties (released together) in any order
        order = [(m.jobs[jid].priority, m.jobs[jid].order) for jid in indexes["work"]]
        assert order == sorted(order), (indexes["work"], order)

    def teardown(self) -> None:
        """After any sequence the consistency check (light and deep) finds nothing to repair."""
        client = Client.from_engine(self.lua.engine, worker_name="doctor")
        for deep in (False, True):
            report = doctor.check(client, deep=deep, now=self.now)
            assert report.clean, report.findings


def read_indexes(lua: Lua) -> dict[str, dict[str, float]]:
    """Every index of queue q, the failure groups and the workers' jobs, in one round trip."""
    names = ["work", "scheduled", "depends", "locks"]
    pipe = lua.r.pipeline(transaction=False)
    for name in names:
        pipe.zrange(lua.key(f"q:q-{name}"), 0, -1, withscores=True)
    pipe.zrange(lua.key("completed"), 0, -1, withscores=True)
    for group in GROUPS:
        pipe.lrange(lua.key(f"f:{group}"), 0, -1)
    for worker in WORKERS:
        pipe.zrange(lua.key(f"w:{worker}:jobs"), 0, -1, withscores=True)
    pipe.smembers(lua.key("failures"))
    pipe.lrange(lua.key("q:q-fifo"), 0, -1)  # the waiting jobs of priority 0: work too
    replies = iter(pipe.execute())
    out: dict[str, dict[str, float]] = {}
    for name in [*names, "completed"]:
        out[name] = dict(next(replies))
    for group in GROUPS:
        members = next(replies)
        assert len(members) == len(set(members)), f"duplicates in f:{group}: {members}"
        out[f"f:{group}"] = dict.fromkeys(members, 0.0)
    for worker in WORKERS:
        out[f"w:{worker}"] = dict(next(replies))
    out["failures"] = dict.fromkeys(next(replies), 0.0)
    listed = next(replies)
    scored = out["work"]
    assert len(listed) == len(set(listed)) and not set(listed) & set(scored), listed
    # In pop order (lua/include/work.lua): scores below 2^32, the list, the other scores.
    first = {jid: score for jid, score in scored.items() if score < 2**32}
    rest = {jid: score for jid, score in scored.items() if score >= 2**32}
    out["work"] = {**first, **dict.fromkeys(listed, 0.0), **rest}
    return out


# Two modes (FCALL with the qless layout, EVALSHA with the prefix) and more examples in each,
# rather than all four: the modes differ in dispatch only, which the rest of the tier covers.
@pytest.fixture(params=[MODES[0], MODES[3]])
def machine(
    request: pytest.FixtureRequest, redis_client: redis.Redis
) -> Iterator[type[JobMachine]]:
    for lua in lua_in_mode(request.param, redis_client):
        JobMachine.lua = lua
        yield JobMachine
        del JobMachine.lua


@pytest.mark.slow
@pytest.mark.timeout(900)  # passing takes seconds; shrinking a failure takes a minute or two
def test_engine_follows_the_job_state_machine(machine: type[JobMachine]) -> None:
    run_state_machine_as_test(machine, settings=SETTINGS)
