"""config.get / set / unset, stats and histograms, workers and worker.deregister."""

from __future__ import annotations

import json
import math

import pytest
from lua_support import DAY, T0, Lua, unchanged

from scheduler.engine.errors import InvalidArgument, JobNotFound, WrongState

DEFAULTS = {
    "heartbeat": 60,
    "grace-period": 10,
    "jobs-history": 604800,
    "jobs-history-count": 50000,
    "stats-history": 30,
    "histogram-history": 7,
    "max-worker-age": 86400,
    "max-job-history": 100,
    "max-failed-per-group": 0,
    "lost-worker-retries": 2,
    "worker-silent-after": 60,
    "log-lines": 10000,
    "log-bytes": 1048576,
}
HISTOGRAM_LENGTH = 60 + 59 + 23 + 6


# -- config ----------------------------------------------------------------------------------


def test_config_defaults(lua: Lua) -> None:
    assert json.loads(lua.raw("config.get", now=T0)) == DEFAULTS
    assert lua("config.get", "heartbeat", now=T0) == "60"
    assert lua("config.get", "unknown-option", now=T0) is None


def test_config_set_get_unset(lua: Lua) -> None:
    lua.config("heartbeat", 30)
    lua.config("q-heartbeat", 7.5)
    lua.config("application", "any text")
    assert lua("config.get", "heartbeat", now=T0) == "30"
    assert lua("config.get", "q-heartbeat", now=T0) == "7.5"
    merged = json.loads(lua.raw("config.get", now=T0))
    assert merged == {**DEFAULTS, "heartbeat": 30, "q-heartbeat": 7.5, "application": "any text"}
    assert lua("config.unset", "heartbeat", now=T0) is None
    assert lua("config.get", "heartbeat", now=T0) == "60"
    assert lua("config.unset", "never-set", now=T0) is None
    assert lua.r.hgetall(lua.key("config")) == {"q-heartbeat": "7.5", "application": "any text"}


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e400"])
def test_a_text_setting_that_reads_as_no_finite_number_stays_text(lua: Lua, value: str) -> None:
    lua.config("application", value)
    assert json.loads(lua.raw("config.get", now=T0))["application"] == value
    assert lua("config.get", "application", now=T0) == value


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("heartbeat", "soon"),
        ("heartbeat", "-1"),
        ("grace-period", "nan"),
        ("jobs-history", "inf"),
        ("q-heartbeat", "x"),
        ("q-max-concurrency", "-2"),
        # settings that count things must be whole numbers
        ("max-job-history", "2.5"),
        ("jobs-history-count", "0.5"),
        ("stats-history", "1.5"),
        ("histogram-history", "1.5"),
        ("q-max-concurrency", "1.5"),
        ("log-lines", "1.5"),
        ("log-bytes", "0.5"),
        ("lost-worker-retries", "1.5"),
        ("log-lines", "-1"),
        ("lost-worker-retries", "1e20"),
        # kept as given, so read back by every client: decimal notation only
        ("heartbeat", "0x10"),
        ("heartbeat", "0x1p4"),
        ("heartbeat", " 5"),
        ("heartbeat", "5 "),
        ("q-max-concurrency", "0x10"),
    ],
)
def test_config_set_refuses_bad_numbers(lua: Lua, option: str, value: str) -> None:
    with pytest.raises(InvalidArgument, match=r'ConfigSet\(\): Arg "value"'):
        lua("config.set", option, value, now=T0)
    assert lua.r.exists(lua.key("config")) == 0


# -- stats -----------------------------------------------------------------------------------


def bucket_index(seconds: float) -> int:
    if seconds < 60:
        return int(seconds)
    if seconds < 3600:
        return 60 + int(seconds // 60) - 1
    if seconds < DAY:
        return 119 + int(seconds // 3600) - 1
    return 142 + min(6, int(seconds // DAY)) - 1


def test_stats_histograms(lua: Lua) -> None:
    runs = [0, 0.5, 59.9, 60, 90, 3599, 3600, 7200, DAY - 1, DAY, 2 * DAY, 10 * DAY]
    for n, seconds in enumerate(runs):
        jid = f"j{n}"
        lua.put(jid, now=T0)
        lua.pop_jids(now=T0 + n)  # wait = n seconds
        lua("heartbeat", jid, "w1", now=T0 + n)  # keep the lock for the long runs:
        lua.config("heartbeat", 20 * DAY)
        lua("heartbeat", jid, "w1", now=T0 + n)
        lua.complete(jid, now=T0 + n + seconds)
    # runs are binned by completion day; all of them on T0's day except the long ones
    stats = lua("stats", "q", T0, now=T0)
    wait = stats["wait"]
    assert wait["count"] == len(runs)
    assert wait["mean"] == pytest.approx(sum(range(len(runs))) / len(runs))
    assert len(wait["histogram"]) == HISTOGRAM_LENGTH
    expected = [0] * HISTOGRAM_LENGTH
    for n in range(len(runs)):
        expected[bucket_index(n)] += 1
    assert wait["histogram"] == expected
    mean = sum(range(len(runs))) / len(runs)
    std = math.sqrt(sum((n - mean) ** 2 for n in range(len(runs))) / (len(runs) - 1))
    assert wait["std"] == pytest.approx(std)

    same_day = [s for n, s in enumerate(runs) if (T0 + n + s) // DAY == T0 // DAY]
    run = stats["run"]
    assert run["count"] == len(same_day)
    assert run["mean"] == pytest.approx(sum(same_day) / len(same_day))
    expected = [0] * HISTOGRAM_LENGTH
    for seconds in same_day:
        expected[bucket_index(seconds)] += 1
    assert run["histogram"] == expected

    later = lua("stats", "q", T0 + 10 * DAY + 20, now=T0)
    assert later["run"]["count"] == 1 and later["run"]["histogram"][-1] == 1
    assert later["wait"]["count"] == 0


def test_stats_of_an_unknown_queue(lua: Lua) -> None:
    stats = lua("stats", "nope", T0, now=T0)
    assert stats["retries"] == stats["failed"] == stats["failures"] == 0
    assert stats["wait"] == {"count": 0, "mean": 0, "std": 0, "histogram": [0] * HISTOGRAM_LENGTH}
    assert lua.namespace_keys() == set()


def test_stats_std_of_one_sample_is_zero(lua: Lua) -> None:
    lua.put("a")
    lua.pop_jids(now=T0 + 5)
    stats = lua("stats", "q", T0 + 1, now=T0)
    assert (stats["wait"]["count"], stats["wait"]["mean"], stats["wait"]["std"]) == (1, 5, 0)


# -- workers ---------------------------------------------------------------------------------


def test_workers_sorted_by_recent_activity(lua: Lua) -> None:
    for jid in "abc":
        lua.put(jid)
    lua.pop_jids(worker="old", now=T0)
    lua.pop_jids(worker="new", count=2, now=T0 + 10)
    lua("heartbeat", "b", "new", now=T0 + 50)
    assert lua("workers", now=T0 + 20) == [
        {"name": "new", "jobs": 2, "stalled": 0},
        {"name": "old", "jobs": 1, "stalled": 0},
    ]
    lua("heartbeat", "a", "old", now=T0 + 55)
    assert lua("workers", now=T0 + 80) == [
        {"name": "old", "jobs": 1, "stalled": 0},
        {"name": "new", "jobs": 1, "stalled": 1},
    ]
    assert lua("workers", "new", now=T0 + 80) == {"jobs": ["b"], "stalled": ["c"]}
    assert lua("workers", "nobody", now=T0) == {"jobs": [], "stalled": []}


def test_workers_are_pruned_by_max_worker_age(lua: Lua) -> None:
    lua.config("max-worker-age", 100)
    lua.pop_jids(worker="w-old", now=T0)
    lua.pop_jids(worker="w-new", now=T0 + 50)
    assert [w["name"] for w in lua("workers", now=T0 + 99)] == ["w-new", "w-old"]
    assert [w["name"] for w in lua("workers", now=T0 + 100)] == ["w-new"]
    assert lua.zset("workers") == ["w-new"]


def test_worker_deregister(lua: Lua) -> None:
    for worker in ("a", "b", "c"):
        lua.pop_jids(worker=worker)
    assert lua("worker.deregister", "a", "c", "unknown", now=T0) is None
    assert lua.zset("workers") == ["b"]


def test_worker_deregister_many(lua: Lua) -> None:
    workers = [f"w{n}" for n in range(10000)]
    lua.r.zadd(lua.key("workers"), dict.fromkeys(workers, T0))
    assert lua("worker.deregister", *workers, now=T0) is None
    assert lua.r.exists(lua.key("workers")) == 0


def test_worker_forget_takes_only_a_silent_worker_that_holds_nothing(lua: Lua) -> None:
    """A worker killed with kill -9 stayed listed, SILENT, for max-worker-age (a day): forget
    drops one not heard from for worker-silent-after and holding no job, as deregister does;
    a live one, one holding jobs or an unknown name is refused, changing nothing."""
    lua.put("a")
    lua.pop_jids(worker="busy", now=T0)
    lua("worker.register", "gone", '{"host": "h1", "pid": 1}', now=T0)
    lua("worker.lease", "gone", 5, now=T0)
    lua("worker.register", "live", '{"host": "h1", "pid": 2}', now=T0 + 100)
    silent = T0 + 61
    refusals = [
        ("live", WrongState, "seen 0s ago: it may be working"),
        ("busy", WrongState, "holds 1 job"),
        ("nobody", JobNotFound, "no worker nobody"),
    ]
    for worker, error, said in refusals:
        with unchanged(lua.r), pytest.raises(error, match=said):
            lua("worker.forget", worker, now=T0 + 100)
    with unchanged(lua.r), pytest.raises(WrongState, match="seen 10s ago"):
        lua("worker.forget", "gone", now=T0 + 10)
    assert lua("worker.forget", "gone", now=silent) is None
    assert [w["name"] for w in lua("workers", now=silent)] == ["live", "busy"]
    assert lua.r.zscore(lua.key("leases"), "gone") is None
    assert lua.r.exists(lua.key("w:gone:info")) == 0


def test_worker_register_and_info(lua: Lua) -> None:
    assert lua("worker.register", "w1", '{"host": "h1", "pid": 1}', now=T0) is None
    lua(
        "worker.register", "w2", '{"host": "h2", "nested": ' + "[" * 99 + "]" * 99 + "}", now=T0 + 1
    )
    info = json.loads(lua.raw("worker.info", now=T0))
    assert info["w1"] == {"host": "h1", "pid": 1} and info["w2"]["host"] == "h2"
    assert json.loads(lua.raw("worker.info", "w1", "nobody", now=T0)) == {
        "w1": {"host": "h1", "pid": 1}
    }
    assert [w["name"] for w in lua("workers", now=T0 + 1)] == ["w2", "w1"]
    lua("worker.deregister", "w1", now=T0)
    assert json.loads(lua.raw("worker.info", now=T0)).keys() == {"w2"}
    assert lua.r.exists(lua.key("w:w1:info")) == 0
    with pytest.raises(InvalidArgument, match="nests more than 100"):
        lua("worker.register", "w3", '{"a":' * 101 + "1" + "}" * 101, now=T0)
