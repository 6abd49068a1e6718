"""What the qless dialect publishes: qless's channels, payloads and order."""

from __future__ import annotations

from qless_support import Events, Qless


def lock_lost(jid: str, worker: str) -> list[tuple[str, object]]:
    message = {"jid": jid, "event": "lock_lost", "worker": worker}
    return [(f"ql:w:{worker}", message), ("ql:log", message)]


def test_put_publishes_only_the_log_event(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    assert events.collect() == [("ql:log", {"jid": "jid", "event": "put", "queue": "queue"})]


def test_a_tracked_put_logs_before_the_tracked_channel(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("track", 0, "track", "jid")
    events.collect()
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    assert events.collect() == [
        ("ql:log", {"jid": "jid", "event": "put", "queue": "queue"}),
        ("ql:put", "jid"),
    ]


def test_moving_a_running_job_logs_the_put_then_tells_the_worker(
    qless: Qless, events: Events
) -> None:
    qless.running("jid")
    events.collect()
    qless("put", 0, "other-worker", "another", "jid", "klass", {}, 10)
    assert events.collect() == [
        ("ql:log", {"jid": "jid", "event": "put", "queue": "another"}),
        *lock_lost("jid", "worker"),
    ]


def test_cancel_of_a_running_job_says_it_once_on_log_and_to_the_worker(
    qless: Qless, events: Events
) -> None:
    qless.running("jid", queue="q", worker="wrk")
    events.collect()
    assert qless("cancel", 0, "jid") == ["jid"]
    message = {"jid": "jid", "queue": "q", "event": "canceled", "worker": "wrk"}
    assert events.collect() == [("ql:log", message), ("ql:w:wrk", message)]


def test_cancel_of_a_tracked_waiting_job(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("track", 0, "track", "jid")
    events.collect()
    qless("cancel", 0, "jid")
    assert events.collect() == [
        ("ql:log", {"jid": "jid", "queue": "queue", "event": "canceled", "worker": ""}),
        ("ql:canceled", "jid"),
    ]


def test_fail_of_a_tracked_job_logs_first(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("track", 0, "track", "jid")
    qless("pop", 0, "queue", "worker", 10)
    events.collect()
    qless("fail", 0, "jid", "worker", "grp", "mess", {})
    assert events.collect() == [
        (
            "ql:log",
            {
                "message": "mess",
                "jid": "jid",
                "group": "grp",
                "event": "failed",
                "worker": "worker",
            },
        ),
        ("ql:failed", "jid"),
    ]


def test_complete_of_a_tracked_job(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("track", 0, "track", "jid")
    qless("pop", 0, "queue", "worker", 10)
    events.collect()
    qless("complete", 0, "jid", "worker", "queue", {})
    assert events.collect() == [
        ("ql:completed", "jid"),
        ("ql:log", {"jid": "jid", "event": "completed", "queue": "queue"}),
    ]


def test_advance(qless: Qless, events: Events) -> None:
    qless.running("jid")
    events.collect()
    qless("complete", 0, "jid", "worker", "queue", {}, "next", "queue")
    assert events.collect() == [
        ("ql:log", {"jid": "jid", "to": "queue", "event": "advanced", "queue": "queue"})
    ]


def test_a_tracked_job_that_stalls(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    qless("track", 0, "track", "jid")
    job = qless("pop", 0, "queue", "worker", 10)[0]
    events.collect()
    qless("pop", job["expires"] + 10, "queue", "worker", 10)
    assert events.collect() == [("ql:stalled", "jid"), *lock_lost("jid", "worker")]


def test_retries_run_out_by_lock_expiry(qless: Qless, events: Events) -> None:
    qless("config.set", 0, "grace-period", 0)
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    job = qless("pop", 0, "queue", "worker", 10)[0]
    events.collect()
    assert qless("pop", job["expires"] + 10, "queue", "worker", 10) == {}
    assert qless.job("jid")["state"] == "failed"
    assert events.collect() == [
        *lock_lost("jid", "worker"),
        (
            "ql:log",
            {
                "message": 'Job exhausted retries in queue "queue"',
                "jid": "jid",
                "group": "failed-retries-queue",
                "event": "failed",
                "worker": "worker",
            },
        ),
    ]


def test_retries_run_out_by_retry_logs_nothing(qless: Qless, events: Events) -> None:
    qless.running("jid")
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    qless("pop", 0, "queue", "worker", 10)
    events.collect()
    assert qless("retry", 1, "jid", "queue", "worker", 0) == -1
    assert qless.job("jid")["state"] == "failed"
    assert events.collect() == []


def test_retries_run_out_by_retry_of_a_tracked_job(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0, "retries", 0)
    qless("track", 0, "track", "jid")
    qless("pop", 0, "queue", "worker", 10)
    events.collect()
    assert qless("retry", 1, "jid", "queue", "worker", 0, "group", "message") == -1
    assert qless.job("jid")["state"] == "failed"
    # qless publishes the jid on `failed` and no `log` event.
    assert events.collect() == [("ql:failed", "jid")]


def test_timeout(qless: Qless, events: Events) -> None:
    qless.running("jid")
    events.collect()
    qless("timeout", 0, "jid")
    assert events.collect() == lock_lost("jid", "worker")


def test_config_events(qless: Qless, events: Events) -> None:
    qless("config.set", 0, "foo", "bar")
    qless("config.unset", 0, "foo")
    assert events.collect() == [
        ("ql:log", {"option": "foo", "event": "config_set", "value": "bar"}),
        ("ql:log", {"event": "config_unset", "option": "foo"}),
    ]


def test_track_and_untrack(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "jid", "klass", {}, 0)
    events.collect()
    qless("track", 0, "track", "jid")
    qless("track", 0, "untrack", "jid")
    assert events.collect() == [("ql:track", "jid"), ("ql:untrack", "jid")]


def test_no_ready_channel_in_the_qless_dialect(qless: Qless, events: Events) -> None:
    qless("put", 0, "worker", "queue", "a", "klass", {}, 0)
    qless("pause", 0, "queue")
    qless("unpause", 0, "queue")
    qless("put", 0, "worker", "queue", "b", "klass", {}, 5)
    qless("pop", 10, "queue", "worker", 1)
    channels = {channel for channel, _ in events.collect()}
    assert channels == {"ql:log"}
