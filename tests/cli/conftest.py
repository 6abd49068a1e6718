"""Fixtures of the CLI tier: the session server's URL (on an empty database) and a client of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


@pytest.fixture
def client(url: str) -> Iterator[Client]:
    with Client(url, worker_name="cli-test") as client:
        yield client
