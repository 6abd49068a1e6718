"""Fixtures of the CLI tier: the session server's URL (on an empty database) and a client of it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp folder with a short path, for a command's $TMPDIR: the socket of the private server
    it starts there (``flows-UID/<hash>.sock``) must fit the 107 bytes of a unix socket's path,
    which under xdist's longer ``tmp_path`` (``.../popen-gw0/<test>0/``) it did not."""
    folder = Path(tempfile.mkdtemp(prefix="ft-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
