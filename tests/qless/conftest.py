"""Fixtures of the qless-dialect tier: the bundle as qless clients call it (``qless``), what it
publishes (``events``), and our own client's engine through both paths (``native``), which must
keep the native dialect."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from qless_support import Events, Qless

from scheduler.engine.scripts import Engine


@pytest.fixture
def qless(redis_client: redis.Redis) -> Qless:
    return Qless(redis_client)


@pytest.fixture
def events(redis_client: redis.Redis) -> Iterator[Events]:
    recorder = Events(redis_client)
    yield recorder
    recorder.close()


@pytest.fixture(params=[True, False], ids=["fcall", "evalsha"])
def native(request: pytest.FixtureRequest, redis_client: redis.Redis) -> Engine:
    """Our client's engine: the Functions library, or its own EVALSHA script."""
    return Engine(redis_client, use_functions=request.param)
