"""Fixtures shared by every test tier.

* ``server`` (session): one real embedded server per test process (so one per xdist worker);
  the tests of a module marked ``system_server`` run on it and again on the system's
  ``redis-server`` (Debian 12: Redis 7.0) when one is installed (:func:`pytest_generate_tests`);
* ``redis_client``: a ``redis.Redis`` on it (``decode_responses=True``), emptied before the test
  with FLUSHALL (the loaded engine library survives: FLUSHALL does not remove Functions);
* ``engine`` / ``engine_ns``: the Lua engine with the qless layout (``ql:``) / prefix ``{test}:``;
* ``functions``: ``redis_client`` on a server without any Functions library (the engine's own
  loaded again after the test); ``engine_library_support`` has libraries that are not it.
* ``reap``: ``reap(Popen(...))`` hands a process to the test's end (:func:`helpers.reaped`).

The files holding a test marked ``slow`` are collected first (the long tests then start early and
``--dist worksteal`` spreads the short ones after them).

``from helpers import snapshot, assert_unchanged`` for "bad input changes nothing" checks.

For the whole session ``$FLOWS_DATA_DIR`` points into the session's temp dir and
``$FLOWS_REDIS_URL`` / ``$FLOWS_NAMESPACE`` are unset, so no test can touch the user's own data
directory or flush a server named in their shell.

Property tests (hypothesis) explore new examples on a developer's machine; under ``$CI`` they
run a fixed set (derandomized), so a CI run is red only for what every run of that commit finds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from helpers import Reap, reaped, system_redis_server
from hypothesis import settings

from scheduler.embedded import EmbeddedServer
from scheduler.engine.connections import connect
from scheduler.engine.scripts import Engine

NAMESPACE = "{test}:"

# Compiled modules kept even where the environment turns bytecode off: every `flows` process a
# test starts imports the project again, and each pytest process rewrites the test files anew.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# A shell starts a background job (`.ci/run &`, a CI step in the background) with Ctrl-C
# ignored, and every process inherits that: `flows run` would then rightly ignore the SIGINT a
# test sends it. A Python handler here is reset to the default in each process a test starts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No deadline: hypothesis's per-example time limit is a stopwatch, which a loaded machine trips
# (this suite bounds nothing by wall time; the benchmarks measure speed).
settings.register_profile("local", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "local")


@pytest.fixture(scope="session", autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's ``$FLOWS_DATA_DIR``; a server started there on demand is stopped at the end."""
    data_dir = tmp_path_factory.mktemp("flows-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLOWS_DATA_DIR", str(data_dir))
        patch.delenv("FLOWS_REDIS_URL", raising=False)
        patch.delenv("FLOWS_NAMESPACE", raising=False)
        # xdist's workers get COLUMNS=80 from the controller's terminal: tables and help text
        # must be laid out alike in a worker, a plain run and a pipe.
        patch.delenv("COLUMNS", raising=False)
        patch.delenv("LINES", raising=False)
        yield data_dir
        EmbeddedServer(data_dir).stop()


@pytest.fixture(scope="session")
def server(
    request: pytest.FixtureRequest,
    isolated_environment: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[EmbeddedServer]:
    """A real server for this test process, in its own temp dir, stopped at the end; its binary
    is the suite's own unless a test is parametrized with another (``system_server``)."""
    binary = getattr(request, "param", None)
    # everysec: tests do not exercise power loss, and always costs ~4x per write here.
    embedded = EmbeddedServer(
        tmp_path_factory.mktemp("server"), binary=binary, appendfsync="everysec"
    )
    embedded.start()
    yield embedded
    embedded.stop()


@pytest.fixture
def redis_client(server: EmbeddedServer) -> Iterator[redis.Redis]:
    """A client of the session's server, on an empty database."""
    client = connect(server.url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def functions(redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """The admin's client on a server without any Functions library; the engine's own is loaded
    again at the end (FLUSHALL keeps libraries: the session's other tests share them)."""
    redis_client.function_flush()
    yield redis_client
    redis_client.function_flush()
    Engine(redis_client).load()


@pytest.fixture
def engine(redis_client: redis.Redis) -> Engine:
    """The engine with the qless key layout (``ql:``)."""
    return Engine(redis_client)


@pytest.fixture
def engine_ns(redis_client: redis.Redis) -> Engine:
    """The engine in the ``{test}:`` namespace."""
    return Engine(redis_client, prefix=NAMESPACE)


@pytest.fixture
def reap() -> Iterator[Reap]:
    """``reap(process)``: ``process``, killed if it still runs, waited for and its pipes closed
    when the test ends, passed or failed."""
    with contextlib.ExitStack() as stack:
        yield lambda process: stack.enter_context(reaped(process))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``system_server`` that uses the server runs on the suite's server and on the
    system's ``redis-server``, in this session, so xdist shares them out like any other test; a
    test of such a module marked ``system_server(False)`` runs on the suite's server only.
    The suite's server is parameter ``None``, the same as a test without the mark, so a worker
    keeps one server across both kinds of test (pytest runs each server's tests together)."""
    mark = metafunc.definition.get_closest_marker("system_server")
    if mark is None or mark.args[:1] == (False,):
        return
    system = system_redis_server()
    if system is None or "server" not in metafunc.fixturenames:
        return
    servers = [pytest.param(None, id="suite-server"), pytest.param(system, id="system-redis")]
    metafunc.parametrize("server", servers, indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files holding a test marked ``slow`` run first, each whole and in its order (a
    module's fixture is built once): under ``-n 2`` a test of a minute that started last would
    leave one worker finishing it alone while the other has nothing left."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--screenshots",
        metavar="DIR",
        default=None,
        help="Save a screenshot of each dashboard page the browser tests open into DIR.",
    )
