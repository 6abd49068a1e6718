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


def conforms(value: Any, schema: dict[str, Any], components: dict[str, Any]) -> bool:
    """Whether ``value`` has the shape ``schema`` gives (the subset of JSON Schema the document
    uses for its answers)."""
    if "$ref" in schema:
        return conforms(value, components[schema["$ref"].rsplit("/", 1)[1]], components)
    if "anyOf" in schema:
        return any(conforms(value, option, components) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return (
            isinstance(value, dict)
            and all(name in value for name in schema.get("required", ()))
            and (
                schema.get("additionalProperties", True) is not False
                or set(value) <= set(properties)
            )
            and all(conforms(value[k], s, components) for k, s in properties.items() if k in value)
        )
    if kind == "array":
        items = schema.get("items", {})
        return isinstance(value, list) and all(conforms(v, items, components) for v in value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    return kind is None  # {}: anything


def mismatch(reply: Reply, answers: dict[str, Any], components: dict[str, Any]) -> str | None:
    """What the document does not say of ``reply`` (None: it says all of it)."""
    documented = answers.get(str(reply.status))
    if documented is None:
        return f"answered {reply.status} {reply.body!r}, documented {sorted(answers)}"
    if reply.status == 401 and "www-authenticate" not in reply.headers:  # HTTP requires one
        return f"answered 401 {reply.body!r} without WWW-Authenticate"
    content = documented.get("content", {})
    kind = reply.headers.get("content-type", "").split(";")[0]
    if kind not in content:
        return f"answered {reply.status} as {kind}, documented as {sorted(content)}"
    schema = content[kind].get("schema", {})
    if (
        reply.body != ""
        and kind == "application/json"
        and not conforms(reply.body, schema, components)
    ):
        return f"answered {reply.status} {reply.body!r}, not the documented {schema}"
    return None


def off_document(api: Api, method: str, template: str, reply: Reply) -> str | None:
    """What the API's document does not say of ``reply`` to ``method`` ``template`` (a path
    under the API's prefix, as the document lists it): None when it gives the answer a named
    shape and the reply has it."""
    document = api.get("/api/v1/openapi.json").body
    answers = document["paths"]["/api/v1" + template][method]["responses"]
    documented = answers.get(str(reply.status), {}).get("content", {})
    schema = documented.get("application/json", {}).get("schema", {})
    if "$ref" not in schema:
        return f"{method.upper()} {template} {reply.status}: documented as {schema}, no shape"
    return mismatch(reply, answers, document["components"]["schemas"])
