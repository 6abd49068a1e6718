"""Replies of the qless dialect: what qless-core's own tests expect a qless client to read."""

from __future__ import annotations

import json

import redis
from qless_support import Qless


def waiting_job(jid: str = "jid", queue: str = "queue") -> dict[str, object]:
    return {
        "jid": jid,
        "klass": "klass",
        "state": "waiting",
        "queue": queue,
        "worker": "",
        "tracked": False,
        "priority": 0,
        "expires": 0,
        "retries": 5,
        "remaining": 5,
        "data": "{}",
        "tags": {},
        "history": [{"q": queue, "what": "put", "when": 0}],
        "failure": {},
        "spawned_from_jid": False,
        "dependents": {},
        "dependencies": {},
    }


def test_a_job_has_exactly_qless_fields_and_empty_lists_as_objects(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    assert qless("get", 0, "jid") == waiting_job()
    # The raw text: an empty list is `{}`, as cjson writes it in qless-core.
    raw = qless.raw("get", 0, "jid")
    assert '"tags":{}' in raw and '"dependents":{}' in raw and '"dependencies":{}' in raw


def test_a_popped_job(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    job = qless("pop", 1, "queue", "worker", 10)[0]
    assert job == {
        **waiting_job(),
        "state": "running",
        "worker": "worker",
        "expires": 61,
        "history": [
            {"q": "queue", "what": "put", "when": 0},
            {"what": "popped", "when": 1, "worker": "worker"},
        ],
    }


def test_a_completed_job_has_no_queue_and_done_names_no_worker(qless: Qless) -> None:
    qless.running("jid", now=1)
    assert qless("complete", 2, "jid", "worker", "queue", {}) == "complete"
    assert qless("get", 3, "jid") == {
        **waiting_job(),
        "state": "complete",
        "queue": "",
        "history": [
            {"q": "queue", "what": "put", "when": 1},
            {"what": "popped", "when": 1, "worker": "worker"},
            {"what": "done", "when": 2},
        ],
    }


def test_a_failed_job(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("pop", 1, "queue", "worker", 10)
    qless("fail", 2, "jid", "worker", "group", "message", {})
    assert qless("get", 3, "jid") == {
        **waiting_job(),
        "state": "failed",
        "failure": {"group": "group", "message": "message", "when": 2, "worker": "worker"},
        "history": [
            {"q": "queue", "what": "put", "when": 0},
            {"what": "popped", "when": 1, "worker": "worker"},
            {"group": "group", "what": "failed", "when": 2, "worker": "worker"},
        ],
    }


def test_failed_lists_jids_newest_first_a_page_at_a_time(qless: Qless) -> None:
    jids = [str(i) for i in range(30)]
    for i, jid in enumerate(jids):
        qless("put", i, "worker", "queue", jid, "klass", {}, 0)
        qless("pop", i, "queue", "worker", 10)
        qless("fail", i, jid, "worker", "group", "message")
    assert qless("failed", 30) == {"group": 30}
    newest = list(reversed(jids))
    assert qless("failed", 30, "group") == {"total": 30, "jobs": newest[:25]}
    assert qless("failed", 30, "group", 25, 25) == {"total": 30, "jobs": newest[25:]}
    assert qless("failed", 30, "nothing") == {"total": 0, "jobs": {}}


def test_workers(qless: Qless) -> None:
    qless.running("jid", now=0)
    assert qless("workers", 1) == [{"name": "worker", "jobs": 1, "stalled": 0}]
    assert qless("workers", 1, "worker") == {"jobs": ["jid"], "stalled": {}}
    assert qless("workers", 100, "worker") == {"jobs": {}, "stalled": ["jid"]}


def test_queues_count_due_scheduled_jobs_as_waiting(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "now", "klass", {}, 0)
    qless("put", 0, "worker", "queue", "later", "klass", {}, 10)
    counts = {
        "name": "queue",
        "waiting": 1,
        "running": 0,
        "stalled": 0,
        "scheduled": 1,
        "depends": 0,
        "recurring": 0,
        "paused": False,
    }
    assert qless("queues", 5) == [counts]
    assert qless("jobs", 5, "scheduled", "queue") == ["later"]
    assert qless("jobs", 20, "scheduled", "queue") == []  # a Redis array, as qless replies
    assert qless("queues", 20, "queue") == {**counts, "waiting": 2, "scheduled": 0}
    assert qless.job("later", 20)["state"] == "waiting"


def test_config_is_qless_own(qless: Qless) -> None:
    defaults = {
        "application": "qless",
        "grace-period": 10,
        "heartbeat": 60,
        "histogram-history": 7,
        "jobs-history": 604800,
        "jobs-history-count": 50000,
        "stats-history": 30,
    }
    assert qless("config.get", 0) == defaults
    for key, value in defaults.items():
        assert qless("config.get", 0, key) == value
    # A stored setting comes back as the text it was set to, as qless stores it.
    qless("config.set", 0, "max-job-history", 5)
    qless("config.set", 0, "heartbeat", 30)
    assert qless("config.get", 0) == {**defaults, "max-job-history": "5", "heartbeat": "30"}
    assert qless.raw("config.get", 0, "heartbeat") == "30"
    assert qless.raw("config.get", 0, "grace-period") == 10  # a default: an integer reply
    assert qless("config.get", 0, "foo") is None


def test_empty_replies_are_empty_objects(qless: Qless) -> None:
    assert qless.raw("workers", 0) == "{}"
    assert qless.raw("pop", 0, "queue", "worker", 10) == "{}"
    assert qless.raw("peek", 0, "queue", 10) == "{}"
    assert qless.raw("multiget", 0, "nothing") == "{}"
    assert qless.raw("queues", 0) == "{}"
    assert qless.raw("tag", 0, "top") == "{}"
    assert qless("tag", 0, "get", "foo") == {"total": 0, "jobs": {}}
    assert qless("track", 0) == {"jobs": {}, "expired": {}}


def test_tag_get_of_count_zero_reads_every_job_as_qless_does(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "a", "klass", {}, 0, "tags", ["abc"])
    qless("put", 0, "worker", "queue", "b", "klass", {}, 0, "tags", ["abc"])
    assert qless("tag", 1, "get", "abc", 0, 0) == {"total": 2, "jobs": ["a", "b"]}
    assert qless("tag", 1, "get", "abc", 1, 1) == {"total": 2, "jobs": ["b"]}


def test_recur_get(qless: Qless) -> None:
    qless("recur", 0, "queue", "jid", "klass", {}, "interval", 60, 0)
    assert qless("recur.get", 0, "jid") == {
        "backlog": 0,
        "count": 0,
        "data": "{}",
        "interval": 60,
        "jid": "jid",
        "klass": "klass",
        "priority": 0,
        "queue": "queue",
        "retries": 0,
        "state": "recur",
        "tags": {},
    }


def test_tracked_jobs(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    assert qless("track", 0, "track", "jid") == 1
    assert qless("track", 0) == {"jobs": [{**waiting_job(), "tracked": True}], "expired": {}}


def test_stats(qless: Qless) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("pop", 10, "queue", "worker", 10)
    qless("complete", 25, "jid", "worker", "queue", {})
    stats = qless("stats", 25, "queue", 0)
    assert sorted(stats) == ["failed", "failures", "retries", "run", "wait"]
    # 60 seconds, 59 minutes, 23 hours, 6 days; one sample of 10 s waiting, 15 s running.
    waited, ran = [0] * 148, [0] * 148
    waited[10], ran[15] = 1, 1
    assert stats["wait"] == {"count": 1, "mean": 10, "std": 0, "histogram": waited}
    assert stats["run"] == {"count": 1, "mean": 15, "std": 0, "histogram": ran}
    assert (stats["failed"], stats["failures"], stats["retries"]) == (0, 0, 0)


def test_the_qless_dialect_under_a_key_prefix(qless: Qless, redis_client: redis.Redis) -> None:
    def call(command: str, now: float, *args: object) -> object:
        return redis_client.evalsha(qless.sha, 1, "{app}:", command, now, *args)

    call("put", 0, "worker", "queue", "jid", "klass", "{}", 0)
    assert json.loads(str(call("get", 0, "jid"))) == waiting_job()
    assert call("pop", 0, "other", "worker", 1) == "{}"
    assert sorted(redis_client.keys("*")) == sorted(redis_client.keys("{app}:*"))
    assert redis_client.exists("{app}:j:jid") == 1
