"""Random sequences over jobs with concurrency keys, a throttle and ttls: put, pop, complete, fail,
retry, release, bury, kick, kick.jobs, touch, cancel, delete, timeout, maintain, priority,
throttle limits, with time advanced explicitly.

No model of who runs what: after every step the engine's own state must be consistent. Each key's
and the throttle's running count is exactly the running jobs holding it (for a key, also its jobs
waiting for the throttle on a reservation), never above the limit; a parked job is waiting, in
exactly one parked set and not in the work queue; and no parked job is forgotten: while a key (or
the throttle) has free slots and parked jobs, one of its jobs waits in the work queue, so the next
pop gets it. At the end the consistency check finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from lua_support import MODES, T0, Lua, lua_in_mode

from scheduler.engine import doctor
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError

JIDS = [f"j{n}" for n in range(6)]
WORKERS = ["w1", "w2"]
KEYS = {"k1": 1, "k2": 2}  # concurrency key -> its limit
THROTTLE = "t"
SETTINGS = settings(
    max_examples=25,
    stateful_step_count=50,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class SlotMachine(RuleBasedStateMachine):
    lua: ClassVar[Lua]

    def __init__(self) -> None:
        super().__init__()
        self.lua.r.flushall()
        self.clock = T0
        self.throttle_limit: int | None = None

    def call(self, command: str, *args: Any) -> Any:
        """The engine's reply, or None when it refuses (refusals are the other tier's concern)."""
        try:
            return self.lua.raw(command, *args, now=self.clock)
        except EngineError:
            return None

    @initialize(
        keys=st.lists(
            st.sampled_from([None, "k1", "k1", "k2"]), min_size=len(JIDS), max_size=len(JIDS)
        ),
        throttled=st.lists(st.booleans(), min_size=len(JIDS), max_size=len(JIDS)),
    )
    def setup(self, keys: list[str | None], throttled: list[bool]) -> None:
        self.lua.config("heartbeat", 10)
        self.lua.config("grace-period", 4)
        for jid, key, throttle in zip(JIDS, keys, throttled, strict=True):
            self.put_job(jid, key, throttle, None, 0)

    def put_job(
        self, jid: str, key: str | None, throttled: bool, ttl: int | None, delay: int
    ) -> None:
        options: list[Any] = []
        if key is not None:
            options += ["concurrency_key", key, "concurrency_limit", KEYS[key]]
        if throttled:
            options += ["throttle", THROTTLE]
        if ttl is not None:
            options += ["ttl", ttl]
        self.call("put", "client", "q", jid, "K", "{}", delay, "retries", 1, *options)

    @rule(seconds=st.sampled_from([0.5, 3, 11]))
    def advance(self, seconds: float) -> None:
        self.clock += seconds

    @rule(
        jid=st.sampled_from(JIDS),
        key=st.sampled_from([None, "k1", "k1", "k2"]),
        throttled=st.booleans(),
        ttl=st.sampled_from([None, None, 5, 30]),
        delay=st.sampled_from([0, 0, 2]),
    )
    def put(self, jid: str, key: str | None, throttled: bool, ttl: int | None, delay: int) -> None:
        self.put_job(jid, key, throttled, ttl, delay)

    @rule(
        jid=st.sampled_from(JIDS),
        key=st.sampled_from([None, "k1", "k1", "k2"]),
        throttled=st.booleans(),
    )
    def put_again(self, jid: str, key: str | None, throttled: bool) -> None:
        self.put_job(jid, key, throttled, None, 0)

    @rule(worker=st.sampled_from(WORKERS), count=st.integers(1, 4))
    def pop(self, worker: str, count: int) -> None:
        self.call("pop", "q", worker, count)

    @rule(worker=st.sampled_from(WORKERS), count=st.integers(1, 4))
    def pop_again(self, worker: str, count: int) -> None:
        self.call("pop", "q", worker, count)

    def holder(self, jid: str) -> str:
        return str(self.lua.r.hget(self.lua.key(f"j:{jid}"), "worker") or "w1")

    def pick(self, data: st.DataObject, *states: str) -> str:
        """A job in one of ``states`` most of the time (else, or when there is none, any jid)."""
        jobs = self.jobs()
        fitting = sorted(jid for jid, job in jobs.items() if job["state"] in states)
        if fitting and data.draw(st.integers(0, 4)) > 0:
            return data.draw(st.sampled_from(fitting))
        return data.draw(st.sampled_from(JIDS))

    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        jid = self.pick(data, "running")
        self.call("complete", jid, self.holder(jid), "q", "{}")

    @rule(data=st.data(), how=st.sampled_from(["fail", "fail.held", "retry", "release"]))
    def give_up(self, data: st.DataObject, how: str) -> None:
        jid = self.pick(data, "running", "waiting")
        worker = self.holder(jid)
        if how == "fail":
            self.call("fail", jid, worker, "g", "m")
        elif how == "fail.held":
            self.call("fail.held", jid, worker, "g", "m")
        elif how == "retry":
            self.call("retry", jid, "q", worker, 0)
        else:
            self.call("release", jid, worker, 2)

    @rule(data=st.data())
    def bury(self, data: st.DataObject) -> None:
        jid = self.pick(data, "running", "waiting", "scheduled")
        self.call("bury", jid, self.holder(jid), "aside")

    @rule(count=st.integers(1, 3))
    def kick(self, count: int) -> None:
        self.call("kick", "q", count)

    @rule(data=st.data())
    def kick_jobs(self, data: st.DataObject) -> None:
        self.call("kick.jobs", self.pick(data, "buried"), self.pick(data, "buried"))

    @rule(data=st.data())
    def touch(self, data: st.DataObject) -> None:
        jid = self.pick(data, "running")
        self.call("touch", jid, self.holder(jid), 5)

    @rule(data=st.data(), how=st.sampled_from(["cancel", "delete"]))
    def remove(self, data: st.DataObject, how: str) -> None:
        self.call(how, self.pick(data, "waiting", "scheduled", "buried"))

    @rule(data=st.data())
    def timeout(self, data: st.DataObject) -> None:
        self.call("timeout", self.pick(data, "running"))

    @rule()
    def maintain(self) -> None:
        self.call("maintain", "q")

    @rule(data=st.data(), priority=st.integers(-2, 2))
    def priority(self, data: st.DataObject, priority: int) -> None:
        self.call("priority", self.pick(data, "waiting"), priority)

    @rule(limit=st.sampled_from([None, 0, 1, 3]))
    def limit_throttle(self, limit: int | None) -> None:
        if limit is None:
            self.call("throttle.unset", THROTTLE)
        else:
            self.call("throttle.set", THROTTLE, limit)
        self.throttle_limit = limit

    # -- invariants ------------------------------------------------------------------------------

    def jobs(self) -> dict[str, dict[str, str]]:
        pipe = self.lua.r.pipeline(transaction=False)
        for jid in JIDS:
            pipe.hgetall(self.lua.key(f"j:{jid}"))
        # A job put waiting stores no state (lua/README.md, key layout).
        return {
            jid: {"state": "waiting", **job}
            for jid, job in zip(JIDS, pipe.execute(), strict=True)
            if job
        }

    @invariant()
    def slots_are_counted_exactly_and_never_over_the_limit(self) -> None:
        lua = self.lua
        jobs = self.jobs().values()
        running = [job for job in jobs if job["state"] == "running"]
        # a job waiting for the throttle holds its key's slot (reserved)
        reserved = [job for job in jobs if job["state"] == "waiting" and job.get("reserved")]
        counts = lua.r.hgetall(lua.key("q:q-ck"))
        for key, limit in KEYS.items():
            holding = sum(1 for job in [*running, *reserved] if job.get("ckey") == key)
            assert int(counts.get(key, 0)) == holding, (key, counts, running, reserved)
            assert holding <= limit, (key, running, reserved)
        throttled = sum(1 for job in running if job.get("throttle") == THROTTLE)
        assert int(lua.r.hget(lua.key("throttle-running"), THROTTLE) or 0) == throttled

    @invariant()
    def parked_jobs_wait_in_one_parked_set_and_none_is_forgotten(self) -> None:
        lua = self.lua
        jobs = self.jobs()
        work = set(lua.waiting("q"))
        parked = set(lua.zset("q:q-parked"))
        by_key = {key: set(lua.zset(f"ck:1:q:{key}")) for key in KEYS}
        by_throttle = set(lua.r.zrange(lua.key(f"tp:1:{THROTTLE}:q"), 0, -1))
        assert not work & parked
        assert set.union(*by_key.values(), by_throttle) == parked
        for jid in parked:
            job = jobs[jid]
            assert job["state"] == "waiting", (jid, job)
            gate = job.get("parked")
            assert jid in (by_key[job["ckey"]] if gate == "k" else by_throttle), (jid, job)
        counts = lua.r.hgetall(lua.key("q:q-ck"))
        for key, limit in KEYS.items():
            if by_key[key] and int(counts.get(key, 0)) < limit:
                assert any(jobs[jid].get("ckey") == key for jid in work), (key, by_key, work)
        running = int(lua.r.hget(lua.key("throttle-running"), THROTTLE) or 0)
        if by_throttle and (self.throttle_limit is None or running < self.throttle_limit):
            assert any(jobs[jid].get("throttle") == THROTTLE for jid in work), (by_throttle, work)

    def teardown(self) -> None:
        """After any sequence the consistency check (light and deep) finds nothing to repair."""
        client = Client.from_engine(self.lua.engine, worker_name="doctor")
        for deep in (False, True):
            report = doctor.check(client, deep=deep, now=self.clock)
            assert report.clean, report.findings


@pytest.fixture(params=[MODES[0], MODES[3]])
def machine(
    request: pytest.FixtureRequest, redis_client: redis.Redis
) -> Iterator[type[SlotMachine]]:
    for lua in lua_in_mode(request.param, redis_client):
        SlotMachine.lua = lua
        yield SlotMachine
        del SlotMachine.lua


@pytest.mark.slow
@pytest.mark.timeout(900)  # passing takes seconds; shrinking a failure takes a minute or two
def test_slots_stay_consistent_under_random_sequences(machine: type[SlotMachine]) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(machine, settings=SETTINGS)
