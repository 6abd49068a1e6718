"""Fixtures of the fault tier (helpers in ``fault_support``): servers started per test and
killed at its end, and one populated with jobs in every state and a submitted run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_support import FLOW, Valkey, invoke, populate


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Valkey]]:
    """Start servers with ``servers.append(Valkey(...))``; all are killed at the end."""
    started: list[Valkey] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture
def flow_file(tmp_path: Path) -> Path:
    path = tmp_path / "faulty.yaml"
    path.write_text(FLOW)
    return path


@pytest.fixture
def populated(servers: list[Valkey], tmp_path: Path, flow_file: Path) -> Valkey:
    """A server holding jobs in every state and a submitted run."""
    server = Valkey(tmp_path / "primary", tcp=True)
    servers.append(server)
    populate(server.url())
    code, output = invoke(["run", str(flow_file), "--detach", "--redis", server.url()])
    assert code == 0, output
    return server
