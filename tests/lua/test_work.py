"""A queue's waiting jobs in two keys (lua/include/work.lua): the jobs of priority 0 in a list,
the others in the sorted set; every reader sees them in one pop order."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Lua

from scheduler.engine import doctor
from scheduler.engine.client import Client

pytestmark = pytest.mark.system_server


def test_a_job_of_priority_0_costs_a_list_entry_and_no_sorted_set_entry(lua: Lua) -> None:
    for jid in ("a", "b"):
        lua.put(jid)
    lua.put("later", priority=1)
    assert lua.r.lrange(lua.key("q:q-fifo"), 0, -1) == ["a", "b"]
    assert lua.zset("q:q-work") == ["later"]
    assert not lua.r.exists(lua.key("seq")) or lua.r.get(lua.key("seq")) == "1"
    assert lua.pop_jids(count=3) == ["a", "b", "later"]
    assert not lua.r.exists(lua.key("q:q-fifo"), lua.key("q:q-work"))


def mixed_queue(lua: Lua) -> list[str]:
    """Waiting jobs in both keys, a job of priority 0 among them in the sorted set (back from a
    parked set): their pop order."""
    lua.put("k1", concurrency_key="k")
    lua.put("k2", concurrency_key="k")
    lua.put("a")
    lua.put("b")
    lua.put("n", priority=-1)
    lua.put("z", priority=1)
    assert lua.pop_jids(now=T0 + 1) == ["n"]
    assert lua.pop_jids(now=T0 + 1) == ["k1"]
    assert lua.pop_jids(now=T0 + 1) == ["a"]  # k2 parked on its way
    assert lua.zset("q:q-parked") == ["k2"]
    lua.complete("k1", now=T0 + 2)  # k2 back into the sorted set, with the score it parked with
    lua.put("c", now=T0 + 3)
    lua.put("m", priority=-1, now=T0 + 3)
    assert lua.r.lrange(lua.key("q:q-fifo"), 0, -1) == ["b", "c"]
    return ["m", "k2", "b", "c", "z"]


def test_every_reader_sees_one_pop_order(lua: Lua) -> None:
    order = mixed_queue(lua)
    lua("worker.register", "w1", json.dumps({"queues": ["q"]}), now=T0 + 3)
    for ahead, jid in enumerate(order):
        explained = json.loads(lua.raw("job.explain", jid, now=T0 + 3))
        assert explained["reason"] == "queued" and explained["ahead"] == ahead, jid
    for offset in range(len(order) + 1):
        for count in range(1, len(order) + 2):
            listed = lua("jobs", "waiting", "q", offset, count, now=T0 + 3)
            assert (listed or []) == order[offset : offset + count], (offset, count)
    counts = json.loads(lua.raw("queues", "q", now=T0 + 3))
    assert counts["waiting"] == len(order)
    assert lua("length", "q", now=T0 + 3) == len(order) + 2  # n and a run
    assert [job["jid"] for job in lua("peek", "q", 10, now=T0 + 3)] == order
    assert lua.pop_jids(count=10, now=T0 + 4) == order


def test_a_listed_job_whose_priority_changes_goes_behind_its_new_priority(lua: Lua) -> None:
    # The list keeps no sequence number: the job cannot take the place it was put in among the
    # jobs of its new priority.
    lua.put("a", priority=1)
    lua.put("b")
    lua.put("c", priority=1)
    lua("priority", "b", 1, now=T0)
    assert lua.pop_jids(count=3) == ["a", "c", "b"]


def test_a_job_changed_to_priority_0_waits_ahead_of_the_listed_ones(lua: Lua) -> None:
    lua.put("a")
    lua.put("b", priority=1)
    lua.put("c")
    lua("priority", "b", 0, now=T0)
    assert lua.zset("q:q-work") == ["b"]  # its sequence number kept, should it change again
    assert lua.waiting("q") == ["b", "a", "c"]
    assert lua.pop_jids(count=3) == ["b", "a", "c"]


def test_jobs_a_pop_did_not_look_at_keep_their_scores(lua: Lua) -> None:
    # As tests/lua/test_batched_writes.py's test for the list, with every job in the sorted set.
    for n in (1, 2, 3):
        lua.put(f"k{n}", concurrency_key="k", priority=1)
    for n in range(20):
        lua.put(f"p{n}", priority=1)
    scores = dict(lua.r.zrange(lua.key("q:q-work"), 0, -1, withscores=True))
    assert lua.pop_jids(count=2, now=T0 + 1) == ["k1", "p0"]
    after = lua.r.zrange(lua.key("q:q-work"), 0, -1, withscores=True)
    assert after == [(f"p{n}", scores[f"p{n}"]) for n in range(1, 20)]
    parked = dict(lua.r.zrange(lua.key("q:q-parked"), 0, -1, withscores=True))
    assert parked == {"k2": scores["k2"], "k3": scores["k3"]}


def test_cancel_and_truncate_take_jobs_out_of_both_keys(lua: Lua) -> None:
    for jid in ("a", "b", "c"):
        lua.put(jid)
    lua.put("z", priority=2)
    lua("cancel", "b", now=T0)
    assert lua.waiting("q") == ["a", "c", "z"]
    assert lua("queue.truncate", "q", now=T0) == 3
    assert not lua.r.exists(lua.key("q:q-fifo"), lua.key("q:q-work"))
    assert lua("queue.drop", "q", now=T0) == "dropped"


def test_a_queue_with_listed_jobs_is_not_dropped(lua: Lua) -> None:
    lua.put("a")
    with pytest.raises(Exception, match=r"1 waiting"):
        lua("queue.drop", "q", now=T0)


def test_the_doctor_checks_and_repairs_the_list(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    lua.r.rpush(lua.key("q:q-fifo"), "two words", "ghost")
    lua.r.hset(lua.key("j:b"), "state", "scheduled")
    client = Client.from_engine(lua.engine, worker_name="doctor-test")
    report = doctor.check(client, deep=True, repair=True, now=T0)
    assert {(f.kind, f.jid, f.index, f.name) for f in report.findings} == {
        ("bad-id", "two words", "fifo", "q"),
        ("missing-job", "ghost", "fifo", "q"),
        ("stray-entry", "b", "fifo", "q"),
        ("unindexed", "b", "job", ""),
    }
    assert all(r.status in ("repaired", "gone") for r in report.repairs), report.repairs
    assert lua.r.lrange(lua.key("q:q-fifo"), 0, -1) == ["a"]
    assert lua.zset("q:q-scheduled") == ["b"]
    assert doctor.check(client, deep=True, now=T0).clean
