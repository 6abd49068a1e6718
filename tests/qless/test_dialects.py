"""One engine, two dialects: our own client keeps the native one through both of its paths, and
what would corrupt state is refused in both."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import redis
from helpers import assert_unchanged
from qless_support import Events, Qless, encode

from scheduler.engine.errors import InvalidArgument
from scheduler.engine.scripts import Engine, native_bundle, qless_bundle


def test_the_two_scripts_are_one_engine_with_two_entries() -> None:
    qless, native = qless_bundle(), native_bundle()
    assert qless.endswith("return Engine.dispatch(KEYS, ARGV)\n")
    assert native.endswith("return Engine.dispatch(KEYS, ARGV, true)\n")
    assert qless.rsplit("\n", 2)[0] == native.rsplit("\n", 2)[0]


def test_our_client_loads_the_native_script_for_evalsha(redis_client: redis.Redis) -> None:
    engine = Engine(redis_client, use_functions=False)
    engine.load()
    assert engine._sha == hashlib.sha1(native_bundle().encode()).hexdigest()


def test_the_native_dialect_is_unchanged(native: Engine, events: Events) -> None:
    native.call("put", "worker", "queue", "jid", "klass", "{}", 0, now=0)
    job = json.loads(native.call("get", "jid", now=0))
    assert (job["created"], job["updated"], job["result"]) == (0, 0, None)
    # A waiting job can be failed (qless refuses), and `failed` lists jobs, not jids.
    assert native.call("fail", "jid", "worker", "group", "message", now=1) == "jid"
    failed = json.loads(native.call("failed", "group", now=1))
    assert [job["jid"] for job in failed["jobs"]] == ["jid"]
    assert failed["dropped"] == 0
    assert "application" not in json.loads(native.call("config.get", now=1))
    native.call("put", "worker", "queue", "jid", "klass", "{}", 0, now=2)
    assert json.loads(native.call("get", "jid", now=2))["failure"] == {}
    assert ("ql:ready:queue", "queue") in events.collect()


def test_a_put_in_one_dialect_and_a_release_in_the_other(native: Engine, qless: Qless) -> None:
    """A dependent's delay follows the dialect of its put, whoever completes the dependency."""
    qless.running("a")
    qless("put", 0, "worker", "queue", "b", "klass", {}, 10, "depends", ["a"])
    native.call("put", "worker", "queue", "c", "klass", "{}", 10, "depends", '["a"]', now=0)
    native.call("complete", "a", "worker", "queue", "{}", now=30)
    assert native.call("jobs", "scheduled", "queue", now=30) == ["b", "c"]
    assert [job["jid"] for job in qless("pop", 30, "queue", "worker", 10)] == ["b"]


# What qless would take and store, leaving a job no call can make sense of again: refused in
# both dialects (the table in docs/pages/engine.md lists them).
UNSAFE: list[tuple[str, tuple[Any, ...], str]] = [
    ("put", ("w", "queue", "jid", "klass", {}, 0, "retries", -1), "retries"),
    ("put", ("w", "queue", "jid", "klass", {}, 0, "retries", "nan"), "retries"),
    ("put", ("w", "queue", "jid", "klass", {}, 0, "retries", 1.5), "retries"),
    ("put", ("w", "queue", "jid", "klass", {}, 0, "priority", "nan"), "priority"),
    ("put", ("w", "queue", "jid", "klass", {}, 0, "priority", 1.5), "priority"),
    ("put", ("w", "queue", "jid", "klass", {}, "nan"), "delay"),
    ("put", ("w", "queue", "jid", "klass", '{"a": NaN}', 0), "data"),
    ("put", ("w", "queue", "jid", "klass", {}, 0, "tags", [{"a": 1}]), "tags"),
    ("recur", ("queue", "r", "klass", {}, "interval", "nan", 0), "interval"),
    ("recur", ("queue", "r", "klass", {}, "interval", 60, 0, "retries", -1), "retries"),
    ("pop", ("queue", "worker", "nan"), "count"),
    ("config.set", ("heartbeat", "nan"), "value"),
    # settings of ours that count things: whole numbers of at least 0 (qless has none of them)
    ("config.set", ("log-lines", 1.5), "value"),
    ("config.set", ("log-bytes", 0.5), "value"),
    ("config.set", ("lost-worker-retries", 1.5), "value"),
    ("config.set", ("log-lines", -1), "value"),
]


@pytest.mark.parametrize(("command", "args", "named"), UNSAFE)
def test_what_would_corrupt_state_is_refused_in_both_dialects(
    qless: Qless,
    native: Engine,
    redis_client: redis.Redis,
    command: str,
    args: tuple[Any, ...],
    named: str,
) -> None:
    qless("put", 0, "w", "queue", "other", "klass", {}, 0)
    with assert_unchanged(redis_client):
        with pytest.raises(redis.ResponseError, match=f'Arg "{named}"'):
            qless(command, 1, *args)
        with pytest.raises(InvalidArgument, match=f'Arg "{named}"'):
            native.call(command, *(encode(a) for a in args), now=1)


PAST_A_DOUBLE = [
    ('{"a": 1e999}', "1e999"),
    ('{"s": "1e999 \\" 2", "n": [1, -2.5E+400]}', "-2.5E+400"),
    ('{"n": ' + "9" * 400 + "}", "999999999999... (400 characters)"),
]


@pytest.mark.parametrize(("text", "shown"), PAST_A_DOUBLE)
def test_a_number_past_a_double_is_named_as_such_in_both_dialects(
    qless: Qless, native: Engine, redis_client: redis.Redis, text: str, shown: str
) -> None:
    """cjson decodes a number past a double's range to an infinity: the engine's message says
    so, with the number as written, not "NaN and Infinity are not JSON numbers" (which the
    text never held); the same text in a string is no number."""
    words = (
        'Arg "data" holds a number past what JSON readers hold (a double: about 1.8e308 '
        f"either way; beyond, they read infinity): {shown}; give it as text"
    )
    with assert_unchanged(redis_client):
        with pytest.raises(redis.ResponseError) as qless_refused:
            qless.raw("put", 1, "w", "queue", "jid", "klass", text, 0)
        assert str(qless_refused.value).endswith(words)
        with pytest.raises(InvalidArgument) as refused:
            native.call("put", "w", "queue", "jid", "klass", text, 0, now=1)
        assert str(refused.value) == f"Put(): {words}"


def test_an_infinity_written_as_one_keeps_its_own_message(
    native: Engine, redis_client: redis.Redis
) -> None:
    text = '{"s": "1e999", "n": [-Infinity]}'
    with assert_unchanged(redis_client), pytest.raises(InvalidArgument) as refused:
        native.call("put", "w", "queue", "jid", "klass", text, 0, now=1)
    assert str(refused.value) == (
        'Put(): Arg "data" is not valid JSON: NaN and Infinity are not JSON numbers'
    )
    native.call("put", "w", "queue", "jid", "klass", "{}", 0, now=1)
    native.call("pop", "queue", "w", 1, now=2)
    with assert_unchanged(redis_client), pytest.raises(InvalidArgument) as refused:
        native.call("complete", "jid", "w", "queue", "", "result", "[1E309]", now=3)
    assert "past what JSON readers hold" in str(refused.value)
    assert str(refused.value).startswith('Complete(): Arg "result" holds a number')


def test_a_negative_delay_is_none_in_the_qless_dialect_only(
    qless: Qless, native: Engine, redis_client: redis.Redis
) -> None:
    qless("put", 0, "w", "queue", "jid", "klass", {}, -5)
    assert qless.job("jid")["state"] == "waiting"
    with assert_unchanged(redis_client), pytest.raises(InvalidArgument, match='"delay"'):
        native.call("put", "w", "queue", "jid", "klass", "{}", -5, now=0)


def test_tag_counts_stay_right_whichever_dialect_defines_or_drops_a_recurring_job(
    qless: Qless, native: Engine, redis_client: redis.Redis
) -> None:
    native.call("put", "w", "queue", "job", "klass", "{}", 0, "tags", '["foo"]', now=0)
    qless("recur", 0, "queue", "r", "klass", {}, "interval", 60, 0, "tags", ["foo"])
    native.call("unrecur", "r", now=0)  # never indexed: nothing to take out
    assert redis_client.zrange("ql:tags", 0, -1, withscores=True) == [("foo", 1.0)]
    assert redis_client.zrange("ql:t:foo", 0, -1) == ["job"]

    native.call("recur", "queue", "s", "klass", "{}", "interval", 60, 0, "tags", '["foo"]', now=0)
    assert redis_client.zrange("ql:t:foo", 0, -1) == ["job", "s"]
    qless("recur.tag", 0, "s", "bar")  # the qless dialect takes it out of the indexes
    assert redis_client.zrange("ql:t:foo", 0, -1) == ["job"]
    assert redis_client.zrange("ql:tags", 0, -1, withscores=True) == [("foo", 1.0)]
    native.call("recur.untag", "s", "bar", now=0)  # and the native one puts it back
    assert redis_client.zrange("ql:t:foo", 0, -1) == ["job", "s"]
