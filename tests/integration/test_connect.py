"""Which Redis a client uses (scheduler.connect), on the real embedded server: no URL means the
embedded server, and the engine layer learns of it only through the keeper registered here."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler import Client
from scheduler.connect import UNREACHABLE, connect
from scheduler.embedded import EmbeddedServer
from scheduler.engine import client as engine_client
from scheduler.engine.backoff import Backoff
from scheduler.engine.connections import keeper_of
from scheduler.engine.faults import ServerUnavailable


@pytest.fixture
def default_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedServer]:
    """The embedded server of a default data directory of this test's own (not started)."""
    monkeypatch.setenv("FLOWS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("FLOWS_REDIS_URL", raising=False)
    embedded = EmbeddedServer(appendfsync="no")
    yield embedded
    embedded.stop()


def test_no_url_means_the_embedded_server_with_a_keeper(default_server: EmbeddedServer) -> None:
    assert not default_server.is_running()
    with Client(worker_name="w") as client:
        assert default_server.is_running()  # started on demand
        keeper = keeper_of(client.redis)
        assert keeper is not None and keeper.unreachable == UNREACHABLE
        jid = client.queues["q"].put("k", {})
        assert client.jobs[jid].state == "waiting"


def test_an_unreachable_embedded_server_says_how_to_start_it_and_comes_back(
    default_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    with Client(worker_name="w") as client:
        jid = client.queues["q"].put("k", {})
        default_server.stop()
        with pytest.raises(ServerUnavailable) as raised:
            client.jobs.get(jid)
        assert str(raised.value).endswith(UNREACHABLE), raised.value
        # What a worker's or the service's backoff does: start the server again, via the keeper.
        backoff = Backoff(logging.getLogger("flows.test-connect"), "reading", client=client.redis)
        with caplog.at_level(logging.WARNING, "flows.test-connect"):
            backoff.failed(raised.value)
        assert default_server.is_running()
        assert "reading: started the embedded server again" in caplog.text
        job = client.jobs.get(jid)
        assert job is not None and job.state == "waiting"  # the append-only file kept it


def test_another_server_has_no_keeper(server: EmbeddedServer, tmp_path: Path) -> None:
    # ``server`` is not the default data directory's: nothing of this process may restart it.
    with Client(server.url, worker_name="w") as client:
        assert keeper_of(client.redis) is None
    other = connect(server.url)
    try:
        assert keeper_of(other) is None
    finally:
        other.close()


def test_an_unreachable_server_of_ones_own_keeps_the_plain_advice() -> None:
    with (
        Client("redis://127.0.0.1:1/0", worker_name="w") as client,
        pytest.raises(ServerUnavailable) as raised,
    ):
        client.jobs.get("nope")
    text = str(raised.value)
    assert "start the server, or check the host and port in the URL given to Client()" in text
    assert "flows server start" not in text


def test_the_engine_client_needs_a_url_or_a_redis_client(default_server: EmbeddedServer) -> None:
    with pytest.raises(ValueError, match="give a Redis URL or a redis client"):
        engine_client.Client()
    assert not default_server.is_running()  # the engine layer started nothing


def test_an_engine_client_over_a_given_redis_client_keeps_its_keeper(
    default_server: EmbeddedServer,
) -> None:
    raw = connect()  # the factory's redis client: the embedded server, kept
    try:
        assert keeper_of(raw) is not None
        client = Client(redis=raw, worker_name="w")
        assert client.redis is raw and keeper_of(client.redis) is not None
        assert isinstance(client, engine_client.Client)
    finally:
        raw.close()
    plain = redis.Redis(unix_socket_path=str(default_server.socket_path), decode_responses=True)
    try:
        assert keeper_of(plain) is None  # made without the factory: the engine knows nothing
    finally:
        plain.close()
