"""Behaviour of the qless dialect where our native dialect differs on purpose."""

from __future__ import annotations

import pytest
import redis
from helpers import assert_unchanged
from qless_support import Qless


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ("waiting", "waiting"),
        ("scheduled", "scheduled"),
        ("depends", "depends"),
        ("complete", "complete"),
        ("missing", "does not exist"),
        ("other-worker", "another worker"),
    ],
)
def test_only_a_running_job_can_be_failed_by_its_worker(
    qless: Qless, r: redis.Redis, setup: str, words: str
) -> None:
    if setup == "waiting":
        qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    elif setup == "scheduled":
        qless("put", 0, "worker", "queue", "jid", "klass", {}, 10)
    elif setup == "depends":
        qless("put", 0, "worker", "queue", "a", "klass", {}, 0)
        qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "depends", ["a"])
    elif setup == "complete":
        qless.running("jid")
        qless("complete", 0, "jid", "worker", "queue", {})
    elif setup == "other-worker":
        qless.running("jid", worker="another-worker")
    with assert_unchanged(r), pytest.raises(redis.ResponseError, match=words):
        qless("fail", 1, "jid", "worker", "group", "message", {})


@pytest.fixture
def r(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


def test_the_worker_keeps_its_job_after_its_lock_expired_until_another_takes_it(
    qless: Qless,
) -> None:
    qless.running("jid")  # expires at 60; grace period 10
    assert qless("pop", 65, "queue", "another", 10) == {}  # lock_lost told, not reclaimed
    assert qless("heartbeat", 66, "jid", "worker", {}) == 126
    qless.running("other")
    assert qless("fail", 67, "other", "worker", "group", "message", {}) == "other"
    # Given to another worker at last: the first one's calls are refused.
    qless("put", 0, "w", "queue", "late", "klass", {}, 0)
    qless("pop", 0, "queue", "worker", 10)
    qless("pop", 61, "queue", "another", 10)
    assert [job["jid"] for job in qless("pop", 72, "queue", "another", 10)] == ["late"]
    with pytest.raises(redis.ResponseError, match="given out to another worker"):
        qless("heartbeat", 73, "late", "worker", {})
    with pytest.raises(redis.ResponseError, match="another worker"):
        qless("complete", 73, "late", "worker", "queue", {})


def test_a_put_without_depends_keeps_the_dependencies(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "a", "klass", {}, 0)
    qless("put", 0, "worker", "queue", "b", "klass", {}, 0)
    qless("put", 0, "worker", "queue", "c", "klass", {}, 0, "depends", ["a", "b"])
    qless("put", 1, "worker", "queue", "c", "klass", {}, 0)
    job = qless.job("c")
    assert (job["state"], sorted(job["dependencies"])) == ("depends", ["a", "b"])
    # Naming dependencies replaces them.
    qless("put", 2, "worker", "queue", "c", "klass", {}, 0, "depends", ["b"])
    assert qless.job("c")["dependencies"] == ["b"]
    assert qless.job("a")["dependents"] == {}


def test_a_delay_after_dependencies_runs_from_the_put(qless: Qless) -> None:
    qless.running("a")
    qless("put", 0, "worker", "queue", "b", "klass", {}, 10, "depends", ["a"])
    assert qless.job("b")["state"] == "depends"
    qless("complete", 20, "a", "worker", "queue", {})
    # Due at 10 already: the next pop takes it.
    assert [job["jid"] for job in qless("pop", 20, "queue", "worker", 10)] == ["b"]

    qless.running("c", queue="other", now=100)
    qless("put", 100, "worker", "other", "d", "klass", {}, 10, "depends", ["c"])
    qless("complete", 105, "c", "worker", "other", {})
    assert qless.job("d")["state"] == "scheduled"
    assert qless("pop", 109, "other", "worker", 10) == {}
    assert [job["jid"] for job in qless("pop", 110, "other", "worker", 10)] == ["d"]


def test_a_failure_stays_until_the_job_completes(qless: Qless) -> None:
    qless.running("jid", now=1)
    qless("fail", 2, "jid", "worker", "group", "message", {})
    failure = {"group": "group", "message": "message", "when": 2, "worker": "worker"}
    qless("put", 3, "worker", "queue", "jid", "klass", {}, 0)
    qless("pop", 4, "queue", "worker", 10)
    assert qless.job("jid")["failure"] == failure
    qless("complete", 6, "jid", "worker", "queue", {})
    assert qless.job("jid")["failure"] == {}


def test_negative_settings_are_taken(qless: Qless) -> None:
    qless("config.set", 0, "jobs-history", -1)
    for jid in map(str, range(3)):
        qless("put", 0, "worker", "queue", jid, "klass", {}, 0)
    qless("pop", 1, "queue", "worker", 10)
    for jid in map(str, range(3)):
        qless("complete", 2, jid, "worker", "queue", {})
    assert [qless("get", 3, jid) for jid in map(str, range(3))] == [None, None, None]

    qless("config.set", 0, "heartbeat", -10)
    qless("config.set", 0, "grace-period", 0)
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    assert qless("pop", 1, "queue", "worker", 10)[0]["expires"] == -9
    assert qless("pop", 2, "queue", "worker", 10) == {}
    assert qless.job("jid")["state"] == "failed"


def test_a_setting_that_is_no_number_is_refused(qless: Qless, r: redis.Redis) -> None:
    for value in ("nan", "inf", "soon"):
        with assert_unchanged(r), pytest.raises(redis.ResponseError, match="finite number"):
            qless("config.set", 0, "heartbeat", value)


def test_array_data_is_kept(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", [], 0)
    qless("pop", 1, "queue", "worker", 10)
    qless("complete", 2, "jid", "worker", "queue", [], "next", "foo")
    assert qless("pop", 3, "foo", "worker", 10)[0]["data"] == "[]"
    qless("recur", 0, "queue", "r", "klass", [1, 2], "interval", 60, 0)
    assert qless("recur.get", 0, "r")["data"] == "[1, 2]"


def test_numbers_among_tags_are_taken_as_their_text(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "tags", [1, "x"])
    assert qless.job("jid")["tags"] == ["1", "x"]
    assert qless("tag", 0, "get", "1") == {"total": 1, "jobs": ["jid"]}


def test_history_keeps_the_first_and_the_newest_entries(qless: Qless) -> None:
    qless("config.set", 0, "max-job-history", 5)
    for now in range(100):
        qless("put", now, "worker", "queue", "jid", "klass", {}, 0)
    assert [entry["when"] for entry in qless.job("jid")["history"]] == [0, 96, 97, 98, 99]


def test_a_log_entry_keeps_its_fields(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("log", 0, "jid", "foo", {"foo": "bar"})
    assert qless.job("jid")["history"] == [
        {"q": "queue", "what": "put", "when": 0},
        {"foo": "bar", "what": "foo", "when": 0},
    ]


def test_retry_with_a_group_and_message(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    qless("pop", 0, "queue", "worker", 10)
    qless("retry", 0, "jid", "queue", "worker", 0, "group", "message")
    job = qless.job("jid")
    assert job["failure"] == {"group": "group", "message": "message", "when": 0, "worker": "worker"}
    assert job["history"][-1] == {"group": "group", "what": "failed", "when": 0}
    assert (job["state"], job["remaining"]) == ("failed", -1)


def test_retries_run_out_by_retry(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    qless("pop", 0, "queue", "worker", 10)
    qless("retry", 0, "jid", "queue", "worker", 0)
    job = qless.job("jid")
    assert job["failure"] == {
        "group": "failed-retries-queue",
        "message": 'Job exhausted retries in queue "queue"',
        "when": 0,
        "worker": "",
    }
    assert job["history"] == [
        {"q": "queue", "what": "put", "when": 0},
        {"what": "popped", "when": 0, "worker": "worker"},
        {"group": "failed-retries-queue", "what": "failed", "when": 0},
    ]


def test_a_retry_leaves_no_history_entry(qless: Qless) -> None:
    qless.running("jid")
    assert qless("retry", 1, "jid", "queue", "worker", 0) == 4
    assert [entry["what"] for entry in qless.job("jid")["history"]] == ["put", "popped"]


def test_a_lost_lock_is_recorded_whatever_the_grace_period(qless: Qless) -> None:
    qless("config.set", 0, "grace-period", 0)
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("pop", 1, "queue", "worker", 10)
    job = qless("pop", 71, "queue", "another", 10)[0]
    assert job["history"] == [
        {"q": "queue", "what": "put", "when": 0},
        {"what": "popped", "when": 1, "worker": "worker"},
        {"what": "timed-out", "when": 71},
        {"what": "popped", "when": 71, "worker": "another"},
    ]
    assert (job["remaining"], job["expires"]) == (4, 131)


def test_retries_run_out_by_lock_expiry(qless: Qless) -> None:
    qless("config.set", 0, "grace-period", 0)
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    qless("pop", 0, "queue", "worker", 10)
    qless("pop", 70, "queue", "worker", 10)
    job = qless.job("jid")
    assert job["failure"] == {
        "group": "failed-retries-queue",
        "message": 'Job exhausted retries in queue "queue"',
        "when": 70,
        "worker": "",
    }
    assert job["history"][-1] == {"group": "failed-retries-queue", "what": "failed", "when": 70}
    assert qless("failed", 70, "failed-retries-queue") == {"total": 1, "jobs": ["jid"]}


class TestRecurring:
    def test_backlog_spawns_as_qless_does(self, qless: Qless) -> None:
        qless("recur", 0, "queue", "jid", "klass", {}, "interval", 60, 0, "backlog", 1)
        assert [job["jid"] for job in qless("pop", 600, "queue", "worker", 10)] == [
            "jid-1",
            "jid-2",
        ]

    def test_a_new_interval_moves_the_next_spawn(self, qless: Qless) -> None:
        qless("recur", 0, "queue", "jid", "klass", {}, "interval", 60, 0)
        assert len(qless("pop", 0, "queue", "worker", 10)) == 1
        qless("recur.update", 0, "jid", "interval", 10)
        assert len(qless("pop", 60, "queue", "worker", 10)) == 6

    def test_children_are_put_when_they_were_due(self, qless: Qless) -> None:
        qless("recur", 0, "queue", "jid", "klass", {}, "interval", 60, 0)
        jobs = qless("pop", 599, "queue", "worker", 100)
        assert [job["history"][0]["when"] for job in jobs] == list(range(0, 600, 60))

    def test_the_template_is_not_found_by_its_tags(self, qless: Qless, r: redis.Redis) -> None:
        qless("recur", 0, "queue", "jid", "klass", {}, "interval", 60, 0, "tags", ["foo"])
        qless("recur.tag", 0, "jid", "bar")
        assert qless("tag", 0, "get", "foo") == {"total": 0, "jobs": {}}
        assert r.zrange("ql:tags", 0, -1) == []
        assert qless("pop", 0, "queue", "worker", 10)[0]["tags"] == ["foo", "bar"]
        assert qless("tag", 0, "get", "bar") == {"total": 1, "jobs": ["jid-1"]}
        qless("recur.untag", 0, "jid", "foo")
        qless("unrecur", 0, "jid")
        # The child's tags are counted still (the template never was).
        assert r.zrange("ql:tags", 0, -1, withscores=True) == [("bar", 1.0), ("foo", 1.0)]


def test_advancing_with_dependencies_and_a_delay_counts_it_from_the_complete(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "a", "klass", {}, 0)
    qless("put", 1, "worker", "queue", "b", "klass", {}, 0)
    qless("pop", 2, "queue", "worker", 1)
    qless("complete", 3, "a", "worker", "queue", {}, "next", "foo", "depends", ["b"], "delay", 10)
    assert qless.job("a", 4)["state"] == "depends"
    qless("pop", 5, "queue", "worker", 1)
    qless("complete", 6, "b", "worker", "queue", {})
    assert qless.job("a", 7)["state"] == "scheduled"
    assert [job["jid"] for job in qless("peek", 13, "foo", 10)] == ["a"]
    assert qless.job("a", 14)["state"] == "waiting"


@pytest.mark.parametrize(
    ("command", "args", "words"),
    [
        ("cancel", ("a", "b"), "b is a dependency of c"),
        ("depends", ("missing", "on", "a"), "in the depends state"),
        ("depends", ("a", "on", "x"), "in the depends state"),
        ("heartbeat", ("b", "worker", {}), "not currently running: depends"),
        ("complete", ("missing", "worker", "queue", {}), "does not exist"),
        ("retry", ("a", "queue", "worker", 0), "not currently running: waiting"),
        ("requeue", ("worker", "queue", "missing", "klass", {}, 0), "does not exist"),
        ("log", ("missing", "foo"), "does not exist"),
    ],
)
def test_errors_carry_the_words_qless_clients_look_for(
    qless: Qless, r: redis.Redis, command: str, args: tuple[object, ...], words: str
) -> None:
    qless("put", 0, "worker", "queue", "a", "klass", {}, 0)
    qless("put", 1, "worker", "queue", "b", "klass", {}, 0, "depends", ["a"])
    qless("put", 2, "worker", "queue", "c", "klass", {}, 0, "depends", ["b"])
    with assert_unchanged(r), pytest.raises(redis.ResponseError, match=words):
        qless(command, 3, *args)


def test_a_running_job_reads_running_until_timed_out(qless: Qless) -> None:
    qless.running("jid")  # its lock expires at 60
    assert qless.job("jid", 100)["state"] == "running"
    qless("timeout", 100, "jid")
    job = qless.job("jid", 100)
    assert (job["state"], job["expires"]) == ("stalled", 0)
    assert job["history"][-1] == {"what": "timed-out", "when": 100}
    assert [job["jid"] for job in qless("pop", 101, "queue", "another", 10)] == ["jid"]
