"""A fault says where to fix the Redis URL in the words of the surface the user started from:
``--redis or $FLOWS_REDIS_URL`` on the command line, ``the URL given to Client()`` in Python.
Before, a thread the library started (a worker's slot) had lost the command line's word, and a
pool child always said ``--redis``, whoever started the pool."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from pathlib import Path

import pytest
import redis

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.errors import URL_GIVEN_IN, Given, given_as
from scheduler.engine.faults import one_line
from scheduler.worker import Worker, WorkerPool

TASKS_DIR = str(Path(__file__).resolve().parent)
KLASS = "worker_tasks.fault_wording"
DATA = {"_flows": {"pythonpath": [TASKS_DIR]}}


def _surface(given: Given | None) -> given_as | nullcontext[None]:
    return given_as(given) if given is not None else nullcontext()


@pytest.mark.parametrize("given", ["flag", None])
def test_a_worker_thread_words_a_fault_for_the_surface_that_started_the_worker(
    client: Client, given: Given | None
) -> None:
    jid = client.queues["words"].put(KLASS, DATA)
    with _surface(given):
        worker = Worker(client, ["words"], burst=True, threads=2, poll_interval=0.05)
        assert worker.run() == 0
    assert client.jobs[jid].result.endswith(
        f"in {URL_GIVEN_IN[given or 'argument']}, and that"
        " the ACL user is enabled (a server restarted"
        " without its ACL file has lost its users)"
    )


@pytest.mark.parametrize("given", ["flag", None])
def test_a_pool_child_words_a_fault_for_the_surface_that_started_the_pool(
    client: Client, server: EmbeddedServer, given: Given | None
) -> None:
    jid = client.queues["words"].put(KLASS, DATA)
    with _surface(given):
        pool = WorkerPool(server.url, ["words"], burst=True, poll_interval=0.1)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(pool.run()), daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        for child in pool._children.values():
            child.process.kill()
        raise AssertionError("the pool did not finish its burst")
    assert codes == [0]
    result = client.jobs[jid].result
    assert f"in {URL_GIVEN_IN[given or 'argument']}," in result, result


def test_a_connection_error_of_the_python_api_names_the_url_given_to_client() -> None:
    """Was ``check --redis / $FLOWS_REDIS_URL`` on every surface."""
    text = one_line(redis.exceptions.ConnectionError("Connection refused"))
    assert text.endswith(f"check the host and port in {URL_GIVEN_IN['argument']}"), text
    with given_as("flag"):
        text = one_line(redis.exceptions.ConnectionError("Connection refused"))
    assert text.endswith(f"check the host and port in {URL_GIVEN_IN['flag']}"), text
