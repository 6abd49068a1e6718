"""URL options of scheduler.engine.connections and how failover errors are classified (no
server)."""

from __future__ import annotations

import pytest
import redis

from scheduler.engine.connections import Durability, as_cluster_error, not_run, split_durability
from scheduler.engine.errors import (
    ClusterDown,
    NotReplicated,
    OutcomeUnknown,
    ReadOnlyReplica,
    SlotMoving,
)


def test_the_wait_options_leave_the_url_and_become_a_durability() -> None:
    url, durability = split_durability("redis://h:1/0?wait=2&wait_timeout=0.5&ssl_cert_reqs=none")
    assert url == "redis://h:1/0?ssl_cert_reqs=none"
    assert durability == Durability(2, 0.5)
    assert split_durability("redis://h:1/0") == ("redis://h:1/0", None)
    assert split_durability("redis://h:1/0?wait=0") == ("redis://h:1/0", None)
    assert split_durability("unix:///tmp/s.sock?wait=1&db=2") == (
        "unix:///tmp/s.sock?db=2",
        Durability(1, 1.0),
    )


def test_fewer_acknowledgements_than_asked_raise_not_replicated() -> None:
    Durability(1, 1.0).check(1, "put")
    with pytest.raises(NotReplicated, match=r"'complete' ran on the master but 0 of 2"):
        Durability(2, 1.0).check(0, "complete")


def test_an_error_in_place_of_wait_reply_counts_as_no_acknowledgement() -> None:
    # The server became a replica under the call (fenced): WAIT was unblocked, or refused.
    unblocked = redis.ResponseError("UNBLOCKED force unblock from blocking operation")
    with pytest.raises(NotReplicated, match=r"'put' ran on the master but 0 of 1"):
        Durability(1, 1.0).check(unblocked, "put")


@pytest.mark.parametrize(
    ("error", "ran"),
    [
        (redis.exceptions.MovedError("3999 127.0.0.1:7001"), False),
        (redis.exceptions.AskError("3999 127.0.0.1:7001"), False),
        (redis.exceptions.TryAgainError(), False),
        (redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"), False),
        (redis.exceptions.ReadOnlyError("READONLY You can't write against a replica"), False),
        (redis.ConnectionError("Error 111 connecting to 127.0.0.1:7000. Refused."), False),
        (redis.ConnectionError("The previous master is now a slave"), False),
        (redis.ConnectionError("Connection closed by server."), None),
        (redis.TimeoutError("Timeout reading from socket"), None),
    ],
)
def test_only_replies_that_prove_the_call_did_not_run_count_as_not_run(
    error: Exception, ran: bool | None
) -> None:
    assert not_run(error) is (ran is False)


def test_each_failover_error_gets_its_class() -> None:
    assert isinstance(as_cluster_error(redis.exceptions.TryAgainError(), "put"), SlotMoving)
    assert isinstance(
        as_cluster_error(redis.exceptions.ReadOnlyError("READONLY"), "put"), ReadOnlyReplica
    )
    assert isinstance(
        as_cluster_error(redis.exceptions.ClusterDownError("CLUSTERDOWN"), "put"), ClusterDown
    )
    lost = as_cluster_error(redis.ConnectionError("Connection closed by server."), "pop")
    assert isinstance(lost, OutcomeUnknown)
    assert "'pop'" in str(lost) and "may or may not have run" in str(lost)
