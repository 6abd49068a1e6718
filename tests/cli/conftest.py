"""Fixtures of the CLI tier: the session server's URL (on an empty database) and a client of it."""

from __future__ import annotations

import pytest
import redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client


@pytest.fixture
def url(server: EmbeddedServer, redis_client: redis.Redis) -> str:
    return server.url


@pytest.fixture
def client(url: str) -> Client:
    return Client(url, worker_name="cli-test")
