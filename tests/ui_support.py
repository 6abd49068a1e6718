"""A real ``flows ui`` app served by uvicorn on a free loopback port, and a small HTTP client
(the standard library's: what the tests see is what any HTTP client sees)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from flows.runs.service_source import FlowsSource
from flows.ui.app import create_app
from flows.ui.auth import Auth
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules

TOKEN = "t0ken-for-the-tests-0123456789"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Api:
    base: str
    token: str | None = TOKEN

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "default",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        token = self.token if token == "default" else token
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return Reply(response.status, _decode(response.read()), dict(response.headers))
        except urllib.error.HTTPError as error:
            return Reply(error.code, _decode(error.read()), dict(error.headers))

    def get(self, path: str, **options: Any) -> Reply:
        return self.request("GET", path, **options)

    def post(self, path: str, body: Any = None, **options: Any) -> Reply:
        return self.request("POST", path, body, **options)

    def events(self, path: str, *, token: str | None = "default") -> Iterator[tuple[str, Any]]:
        """``(event, data)`` of a server-sent event stream, as they come."""
        request = urllib.request.Request(self.base + path)
        token = self.token if token == "default" else token
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            kind, data = "message", ""
            for raw in response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif line == "" and data:
                    yield kind, json.loads(data)
                    kind, data = "message", ""


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


@contextmanager
def serve(
    client: Client,
    auth: Auth,
    hosts: frozenset[str] | None = None,
    flows_dir: Path | None = None,
    also: Callable[[FastAPI], None] | None = None,
) -> Iterator[str]:
    """The app on a free loopback port, in a thread; yields its base URL. ``hosts``: the names
    it answers as (default: the loopback names); ``flows_dir``: the folder of flows it starts;
    ``also``: called with the app before it serves (a test's own route)."""
    app = (
        create_app(client, auth, flows_dir)
        if hosts is None
        else create_app(client, auth, flows_dir, hosts=hosts)
    )
    if also is not None:
        also(app)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="flows-ui-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("the ui server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def register_flow(
    client: Client, folder: Path, template: str, prefix: str, **fields: str
) -> dict[str, str]:
    """Register a flow as the scheduler service does: ``template`` formatted with a fresh
    ``name`` and ``queue`` (and ``fields``), written to ``folder``; returns the name and queue."""
    name, queue = f"{prefix}-{uuid.uuid4().hex[:6]}", f"q{uuid.uuid4().hex[:6]}"
    path = folder / f"{name}.yaml"
    text = template.format(name=name, queue=queue, **fields)
    path.write_text(text)
    now = time.time()
    definition = FlowsSource().load(path, text, now)
    assert definition is not None, text
    Schedules(client).register(definition, now)
    return {"name": name, "queue": queue}
