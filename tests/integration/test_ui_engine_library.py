"""``flows ui`` over a Functions library that is not this release's engine, on a real server and
a real HTTP server: the library is looked at again on the way into each request that reads or
writes the engine (every few seconds; here at each one), and while it is foreign the API answers
503 with its error shape, pages the dashboard's error page and ``/metrics`` 503 (so a scrape
fails), nothing is run, and all is answered again once an operator loads the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from engine_library_support import PWNED, another_release, impostor
from helpers import assert_unchanged
from markupsafe import escape
from ui_support import TOKEN, Api, Reply, serve

from flows.ui import events
from flows.ui.auth import Auth
from scheduler.embedded import EmbeddedServer
from scheduler.engine import scripts
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine, library_name

READS = ("/api/v1/runs", "/api/v1/queues", "/api/v1/workers")


@pytest.fixture
def looks_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request's look reads the server's counts (not only every 5 s): a swap is seen by
    the next request, with no waiting."""
    monkeypatch.setattr(scripts, "LIBRARY_CHECK_EVERY", 0.0)


@pytest.fixture
def api(functions: redis.Redis, server: EmbeddedServer, looks_each_time: None) -> Iterator[Api]:
    with Client(server.url) as client:
        client.engine.load()  # as `flows ui` does before it serves
        client.queues["q"].put("K", {})  # the queue the writes pause
        with serve(client, Auth(TOKEN, reads_open=False)) as base:
            yield Api(base)


def assert_refused(api: Api) -> str:
    """Every kind of request refused with 503 and the refusal's words: its JSON body's detail."""
    replies: dict[str, Reply] = {path: api.get(path) for path in READS}
    replies["pause"] = api.post("/api/v1/queues/q/pause")
    details = set()
    for what, reply in replies.items():
        assert reply.status == 503, (what, reply.body)
        assert set(reply.body) == {"detail"}, (what, reply.body)
        details.add(reply.body["detail"])
    [detail] = details
    assert f"library {library_name()} there is not this release's engine" in detail
    assert f"FUNCTION DELETE {library_name()}) and runs `flows engine load`" in detail
    assert "answers 503" in detail and "needs no restart" in detail
    for path in ("/", "/runs", "/queues"):
        page = api.get(path)
        assert page.status == 503, (path, page.body)
        assert page.headers["content-type"].startswith("text/html"), page.headers
        assert "<h1>The engine cannot be used</h1>" in page.body
        assert str(escape(detail)) in page.body  # as text: its quotes escaped
        assert "Traceback" not in page.body and 'href="/runs"' in page.body  # the dashboard's
    scrape = api.get("/metrics")
    assert (scrape.status, scrape.body) == (503, {"detail": detail})
    return detail


def test_a_library_swapped_while_the_ui_runs_is_refused_until_the_engine_is_loaded(
    api: Api, functions: redis.Redis
) -> None:
    for path in (*READS, "/", "/metrics"):
        assert api.get(path).status == 200, path
    # Only the first call checked the library: the UI then ran whatever was loaded under the
    # engine's name, with its user's rights, for as long as it lived.
    functions.execute_command("FUNCTION", "LOAD", "REPLACE", impostor())
    with assert_unchanged(functions):
        assert_refused(api)
    assert functions.exists(PWNED) == 0
    # An operator mends it, and the UI answers again by itself.
    functions.function_delete(library_name())
    Engine(functions).load()
    for path in (*READS, "/", "/metrics"):
        assert api.get(path).status == 200, path
    assert api.post("/api/v1/queues/q/pause").status == 200


def test_a_ui_whose_first_call_finds_another_release_refuses_every_request(
    functions: redis.Redis, server: EmbeddedServer, looks_each_time: None
) -> None:
    functions.execute_command("FUNCTION", "LOAD", another_release())
    with (
        Client(server.url) as client,
        serve(client, Auth(TOKEN, reads_open=False)) as base,
        assert_unchanged(functions),
    ):
        api = Api(base)
        assert_refused(api)
        # Who may not read is told only that (the refusal names the server and its library).
        anonymous = api.get("/api/v1/runs", token=None)
        assert anonymous.status == 401 and "engine" not in anonymous.body["detail"]
        assert api.get("/", token=None).status == 401


def test_open_event_streams_end_once_the_library_is_swapped(
    api: Api, functions: redis.Redis, server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream passed the check once, when it opened: the engine's events and a job's log
    lines (read from the engine while the stream is open) end with the API's refusal."""
    monkeypatch.setattr(events, "KEEPALIVE", 0.05)
    with Client(server.url) as client:
        jid = client.queues["q"].put("K", {})  # not run: its log stream stays open
        client.engine.call("log.append", jid, 1, 0, 1, 1.0, "stdout", "", "a line")
    paths = {"events": "/api/v1/events", "logs": f"/api/v1/jobs/{jid}/logs/stream"}
    got: dict[str, list[tuple[str, Any]]] = {name: [] for name in paths}

    def follow(name: str) -> None:
        got[name].extend(api.events(paths[name]))

    threads = [threading.Thread(target=follow, args=(name,), daemon=True) for name in paths]
    for thread in threads:
        thread.start()
    for _ in range(200):  # open: the engine's events subscribed, the line read
        if functions.pubsub_numsub("ql:log")[0][1] and got["logs"]:
            break
        threading.Event().wait(0.05)
    assert got["logs"][0][0] == "line"
    functions.execute_command("FUNCTION", "LOAD", "REPLACE", another_release())
    for thread in threads:
        thread.join(15)
    assert not any(thread.is_alive() for thread in threads), "a stream goes on"
    detail = api.get("/api/v1/queues").body["detail"]
    assert got["events"] == [("refused", {"detail": detail})]
    assert got["logs"][-1] == ("refused", {"detail": detail})
