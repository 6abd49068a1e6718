"""URL options of scheduler.engine.connections and how failover errors are classified (no
server)."""

from __future__ import annotations

import pytest
import redis

from scheduler.engine.client import Client
from scheduler.engine.connections import (
    Durability,
    as_cluster_error,
    connect,
    not_run,
    split_durability,
)
from scheduler.engine.errors import (
    ClusterDown,
    NotReplicated,
    OutcomeUnknown,
    ReadOnlyReplica,
    ServerError,
    SlotMoving,
    given_as,
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


@pytest.mark.parametrize(
    ("url", "says"),
    [
        # redis-py passes an unknown query option on to the connection, which refused it with
        # a TypeError at the first command (`unexpected error` on the command line).
        ("redis://:secret@127.0.0.1:1/0?foo=1", "'foo' is not an option of a redis://"),
        ("unix:///tmp/x.sock?ssl_cert_reqs=none", "'ssl_cert_reqs' is not an option of a unix://"),
        ("redis://127.0.0.1:1/0?socket_timeout=soon", "the value of 'socket_timeout'"),
        # A database that is not a number was silently database 0.
        ("redis://127.0.0.1:1/abc", "the path must be the database number"),
        ("redis://127.0.0.1:1/-1", "the path must be the database number"),
        # No socket path: reported as unreachable at localhost:6379.
        ("unix://", "a unix:// URL needs the socket's path"),
    ],
)
def test_a_url_redis_py_would_take_and_misuse_is_refused_at_once(url: str, says: str) -> None:
    with pytest.raises(ServerError) as refused:
        connect(url)
    assert says in str(refused.value)
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:1", "redis://127.0.0.1:1/", "rediss://127.0.0.1:1/15"]
)
def test_a_url_with_or_without_a_database_number_is_taken(url: str) -> None:
    connect(url).close()


def test_an_unreachable_cluster_is_a_cluster_error_naming_its_nodes() -> None:
    # Was redis-py's RedisClusterException, which is no RedisError: `unexpected error`.
    with pytest.raises(ClusterDown) as refused:
        connect("redis+cluster://127.0.0.1:1,127.0.0.1:2")
    assert str(refused.value).startswith(
        "cannot reach the Redis Cluster at 127.0.0.1:1, 127.0.0.1:2"
    )
    assert str(refused.value).endswith("check the hosts and ports in the URL given to Client()")
    with given_as("flag"), pytest.raises(ClusterDown, match=r"in --redis or \$FLOWS_REDIS_URL$"):
        connect("redis+cluster://127.0.0.1:1,127.0.0.1:2")


@pytest.mark.parametrize("option", ["url", "namespace", "worker_name"])
def test_the_client_says_which_argument_is_not_text(option: str) -> None:
    with pytest.raises(TypeError, match=rf"^Client\(\): {option} must be text, not int$"):
        Client(**{option: 1})  # type: ignore[arg-type]
