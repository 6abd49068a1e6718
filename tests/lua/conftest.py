"""Fixtures of the script-level tier (its helpers are in ``lua_support``).

Every test that takes ``lua`` runs four times: through the Functions library (FCALL) and the
EVALSHA bundle, each with the qless layout (``ql:``) and with the ``{test}:`` prefix as KEYS[1].
After each test no key may exist outside the namespace under test. The shared ``engine`` and
``engine_ns`` fixtures are overridden here to run both ways too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from lua_support import MODES, NAMESPACE, Channels, Lua, lua_in_mode

from scheduler.engine.scripts import Engine


@pytest.fixture(params=MODES)
def lua(request: pytest.FixtureRequest, redis_client: redis.Redis) -> Iterator[Lua]:
    yield from lua_in_mode(request.param, redis_client)


@pytest.fixture(params=[True, False], ids=["fcall", "evalsha"])
def engine(request: pytest.FixtureRequest, redis_client: redis.Redis) -> Engine:
    """The engine with the qless layout, through Functions and through EVALSHA."""
    return Engine(redis_client, use_functions=request.param)


@pytest.fixture(params=[True, False], ids=["ns-fcall", "ns-evalsha"])
def engine_ns(request: pytest.FixtureRequest, redis_client: redis.Redis) -> Engine:
    """The engine in the ``{test}:`` namespace, through Functions and through EVALSHA."""
    return Engine(redis_client, prefix=NAMESPACE, use_functions=request.param)


@pytest.fixture
def channels(redis_client: redis.Redis) -> Iterator[Channels]:
    listener = Channels(redis_client)
    yield listener
    listener.close()
