"""Fixtures of the integration tier: the ``flows`` command line and a client, both on the
session's server (its database emptied first by ``redis_client``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from click.testing import CliRunner

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client


@pytest.fixture
def cli(
    server: EmbeddedServer, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    """A runner of ``flows`` on the session's server, acting as user ``ada`` (the audit log's
    name for whoever runs a command)."""
    monkeypatch.setenv("FLOWS_REDIS_URL", server.url)
    monkeypatch.setenv("FLOWS_USER", "ada")
    return CliRunner()


@pytest.fixture
def client(server: EmbeddedServer, redis_client: redis.Redis) -> Iterator[Client]:
    with Client(server.url) as client:
        yield client
