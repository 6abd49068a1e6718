"""The proof helpers of every tier (``helpers.snapshot`` / ``assert_unchanged``) and the session's
isolation: a helper that saw no change where there was one would make every "bad input changes
nothing" test pass whatever the code did, so each is shown to catch a change."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from helpers import assert_unchanged, diff, snapshot

from scheduler.embedded import default_data_dir


def test_the_session_never_uses_the_real_data_dir(isolated_environment: Path) -> None:
    assert default_data_dir() == isolated_environment
    assert "FLOWS_REDIS_URL" not in os.environ


def test_snapshot_describes_every_key(redis_client: redis.Redis) -> None:
    redis_client.set("s", "v")
    redis_client.hset("h", mapping={"a": "1"})
    redis_client.zadd("z", {"m": 1.5})
    redis_client.set("ttl", "v", px=60_000)
    redis_client.set("{test}:only", "v")
    shot = snapshot(redis_client)
    assert {key: kind for key, (kind, _, _) in shot.items()} == {
        "s": "string",
        "h": "hash",
        "z": "zset",
        "ttl": "string",
        "{test}:only": "string",
    }
    assert shot["s"][2] == -1 and shot["ttl"][2] > 0
    assert set(snapshot(redis_client, "{test}:*")) == {"{test}:only"}  # braces are literal
    # A TTL ticking down is not a change: the expiry is absolute.
    assert diff(shot, snapshot(redis_client)) == []


def test_snapshot_pages_through_many_keys(redis_client: redis.Redis) -> None:
    with redis_client.pipeline(transaction=False) as pipe:
        for i in range(1_234):
            pipe.set(f"k{i}", i)
        pipe.execute()
    assert len(snapshot(redis_client)) == 1_234


def test_assert_unchanged(redis_client: redis.Redis) -> None:
    redis_client.hset("h", mapping={"a": "1", "b": "2"})
    with assert_unchanged(redis_client):
        redis_client.hget("h", "a")
        redis_client.hset("h", "a", "1")  # rewriting the same value is no change
    changes: dict[str, Callable[[], object]] = {
        "value": lambda: redis_client.hset("h", "c", "3"),
        "added": lambda: redis_client.set("new", "x"),
        "removed": lambda: redis_client.delete("h"),
        "expiry": lambda: redis_client.pexpire("h", 100_000),
    }
    for word, change in changes.items():
        with pytest.raises(AssertionError, match=word), assert_unchanged(redis_client):
            change()
        redis_client.flushall()
        redis_client.hset("h", mapping={"a": "1", "b": "2"})


def test_assert_unchanged_only_watches_its_pattern(redis_client: redis.Redis) -> None:
    with assert_unchanged(redis_client, "{test}:*"):
        redis_client.set("ql:other-namespace", "x")
