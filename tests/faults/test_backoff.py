"""Waiting out faults (scheduler/engine/backoff.py) with the errors a real unreachable server and a
real
full server raise: pauses grow and are capped, and the log has one line per change of fault and
one when it is over, however many attempts fail."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fault_support import Valkey

from scheduler.engine.backoff import Backoff, Outage, transient
from scheduler.engine.client import Client
from scheduler.engine.faults import ServerOutOfMemory, ServerUnavailable


def raised(call: object) -> Exception:
    try:
        call()  # type: ignore[operator]
    except Exception as error:
        return error
    raise AssertionError("no error")


def test_one_line_per_fault_and_pauses_that_grow_to_the_cap(
    servers: list[Valkey], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = Valkey(tmp_path / "full")
    servers.append(server)
    full = Client(server.url())
    server.fill_memory()
    out_of_memory = raised(lambda: full.queues["q"].put("tasks.a", {}))
    unreachable = raised(lambda: Client("redis://127.0.0.1:1/0").queues["q"].length())
    assert isinstance(out_of_memory, ServerOutOfMemory)
    assert isinstance(unreachable, ServerUnavailable)
    assert transient(out_of_memory) and transient(unreachable)

    log = logging.getLogger("flows.test-backoff")
    backoff = Backoff(log, "fetching", first=0.1, cap=2.0)
    with caplog.at_level(logging.INFO, logger="flows.test-backoff"):
        pauses = [backoff.failed(unreachable) for _ in range(10)]
        pauses += [backoff.failed(out_of_memory) for _ in range(3)]
        backoff.succeeded()
        backoff.succeeded()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("fetching: cannot reach Redis at 127.0.0.1:1")
    assert lines[1].startswith("fetching: Redis at") and "is out of memory" in lines[1]
    assert lines[2] == "fetching: working again after 13 failures"
    assert 0.05 <= pauses[0] <= 0.1
    assert all(1.0 <= pause <= 2.0 for pause in pauses[6:])
    assert not backoff.failing


def test_the_default_cap_brings_a_process_back_within_two_seconds_of_its_server() -> None:
    backoff = Backoff(logging.getLogger("flows.test-backoff"), "fetching")
    unreachable = raised(lambda: Client("redis://127.0.0.1:1/0").queues["q"].length())
    pauses = [backoff.failed(unreachable) for _ in range(40)]
    assert max(pauses) <= 2.0
    assert all(1.0 <= pause <= 2.0 for pause in pauses[5:])


def test_one_failure_is_counted_in_the_singular(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff(logging.getLogger("flows.test-backoff"), "fetching")
    unreachable = raised(lambda: Client("redis://127.0.0.1:1/0").queues["q"].length())
    with caplog.at_level(logging.INFO, logger="flows.test-backoff"):
        backoff.failed(unreachable)
        backoff.succeeded()
    assert caplog.records[-1].getMessage() == "fetching: working again after 1 failure"


def test_a_connection_back_at_the_next_attempt_is_no_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A connection the server dropped (an ACL user changed, a client killed) that the next
    attempt opens again is said by no line: not lost, not back; nor is it any step's fault."""
    log = logging.getLogger("flows.test-backoff")
    outage = Outage(log, "scheduler s", "Redis at 127.0.0.1:1", "every step waits for it")
    steps = [Backoff(log, f"scheduler s: {name}", outage=outage) for name in ("tick", "scan")]
    unreachable = raised(lambda: Client("redis://127.0.0.1:1/0").queues["q"].length())
    with caplog.at_level(logging.INFO, logger="flows.test-backoff"):
        for step in steps:
            step.failed(unreachable)
        for step in steps:
            step.succeeded()
    assert caplog.records == []
    assert not any(step.failing for step in steps)


def test_a_sentinel_client_is_named_by_its_service_and_sentinels() -> None:
    """A client of a Sentinel-managed master has no host of its own in its settings: naming it
    by them said `localhost:6379`, a server it never used."""
    from redis.sentinel import Sentinel

    from scheduler.engine.faults import where

    client = Sentinel([("127.0.0.1", 26379), ("::1", 26380)]).master_for("mymaster")
    assert where(client) == (
        "Redis at the master of Sentinel service mymaster (sentinels 127.0.0.1:26379, [::1]:26380)"
    )
