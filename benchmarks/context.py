"""The benchmark's environment: a private server, the clients on it, sizes and rounds."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.connections import connect

REPO_ROOT = Path(__file__).resolve().parent.parent
APPENDFSYNC = "everysec"


@dataclass(frozen=True)
class Sizes:
    """How much work each benchmark does (``--size NAME=N`` changes one)."""

    put: int = 20_000  # jobs put one call at a time
    bulk: int = 100_000  # jobs put through pipelines
    batch: int = 1_000  # calls per pipeline (and per baseline LPUSH pipeline)
    submit: int = 10_000  # independent steps in the submitted flow
    drain: int = 20_000  # no-op jobs drained by the workers
    latency: int = 2_000  # put-to-start samples (and as many PING samples)
    lifecycle: int = 10_000  # jobs put, popped and completed for the server time
    memory: int = 10_000  # jobs whose memory is measured
    flow: int = 10_000  # steps of the validate + expand + submit + run flow
    schedules: int = 10_000  # cron schedules due in the same minute
    fanout: int = 10_000  # items of a fan-out from one producer's output
    chain: int = 100  # steps of a chain, each depending on the one before
    cli: int = 5  # runs of each `flows` command per round (the figure: their median)
    writes: int = 2_000  # jobs, and steps of the flow, whose append-only file bytes are measured
    retention: int = 5_000  # completed jobs of a run that ages out while completes come

    def replace(self, **changes: int) -> Sizes:
        return dataclasses.replace(self, **changes)


SMOKE = Sizes(
    put=300,
    bulk=1_000,
    batch=100,
    submit=300,
    drain=300,
    latency=40,
    lifecycle=300,
    memory=300,
    flow=200,
    schedules=50,
    fanout=300,
    chain=20,
    cli=1,
    writes=100,
    retention=300,
)


@dataclass
class Bench:
    """What every benchmark gets: the server, a client on it, sizes, rounds and a work folder."""

    server: EmbeddedServer
    redis: Redis
    client: Client
    sizes: Sizes
    rounds: int
    workdir: Path
    worker_log_level: str = "INFO"
    latency_gap: float = 0.01

    @property
    def url(self) -> str:
        return self.server.url

    def connect(self) -> Redis:
        """Another connection, made exactly like the engine's (same library and options)."""
        return connect(self.url)

    def fresh(self) -> None:
        """An empty database (the engine's Functions library survives FLUSHALL).

        SYNC: with the server's default lazyfree-lazy-user-flush, memory would be freed in the
        background during the next measurement.
        """
        self.redis.execute_command("FLUSHALL", "SYNC")  # type: ignore[no-untyped-call]

    def child_env(self) -> dict[str, str]:
        """Environment of benchmark subprocesses: this repository importable, the server's URL."""
        paths = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), FLOWS_REDIS_URL=self.url)
        env.pop("FLOWS_NAMESPACE", None)
        return env

    def server_info(self, section: str) -> dict[str, Any]:
        info: dict[str, Any] = self.redis.info(section)
        return info


@contextlib.contextmanager
def private_server() -> Iterator[tuple[EmbeddedServer, Path]]:
    """A fresh embedded server (appendfsync everysec) in a temp dir, stopped and removed after."""
    workdir = Path(tempfile.mkdtemp(prefix="flows-bench-"))
    server = EmbeddedServer(workdir / "data", appendfsync=APPENDFSYNC)
    try:
        server.start()
        yield server, workdir
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def fresh_bench(
    sizes: Sizes, rounds: int, *, worker_log_level: str = "INFO", latency_gap: float = 0.01
) -> Iterator[Bench]:
    """A Bench on a fresh private server, the engine loaded, closed and removed after."""
    with private_server() as (server, workdir):
        redis = connect(server.url)
        try:
            client = Client(redis=redis)
            client.engine.load()
            # The connection that sent the library keeps a query buffer of its size (half a
            # megabyte), which the server frees or counts as a client's at moments of its own:
            # a memory figure measured across one of them was off by that much (even below 0).
            redis.connection_pool.disconnect()
            yield Bench(
                server, redis, client, sizes, max(1, rounds), workdir, worker_log_level, latency_gap
            )
        finally:
            redis.close()


def wait_until(done: Callable[[], bool], timeout: float, what: str, pause: float = 0.02) -> None:
    """Call ``done`` every ``pause`` seconds until it is true; TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(pause)
