"""The failover benchmark's accounting (``benchmarks/failover.py``) on a real server: a rerun is
a job whose function ran twice, not one popped again because a pop's reply was lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from benchmarks.failover import DRAIN, DRAIN_KLASS, FailoverResult, _account
from scheduler.engine.client import Client


@pytest.fixture
def client(redis_client: redis.Redis) -> Iterator[Client]:
    with Client(redis=redis_client) as client:
        yield client


def test_a_job_popped_again_is_a_rerun_only_when_its_function_ran_twice(
    client: Client, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.txt"
    jids = ["given-back", "ran-twice", "once"]
    queue = client.queues[DRAIN]
    for jid in jids:
        queue.put(DRAIN_KLASS, {"starts": str(starts)}, jid=jid)
    # Both popped, then given back: the first's pop reply never reached its worker (it did not
    # run); the second ran, and its completion was lost (it runs again).
    for job in queue.pop(2):
        job.release()
    for job in queue.pop(3):
        job.complete()
    starts.write_text("ran-twice\ngiven-back\nran-twice\nonce\n")  # what the task notes
    result = FailoverResult(mode="async", jobs=len(jids))
    _account(client, jids, starts, result, time.monotonic() + 30)
    assert (result.completed, result.missing, result.unfinished) == (3, 0, {})
    assert (result.reruns, result.pop_replies_lost) == (1, 1)
