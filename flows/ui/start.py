"""Starting any flow from ``flows ui``: every flow file of ``--flows-dir`` (scheduled or not;
without it, of the scheduler services' folders, from the catalogue they publish),
``POST /api/v1/flows/{flow}/runs`` with params checked as ``flows validate`` and ``flows run -p``
check them, the dashboard's "Run" page, and signed webhook triggers
(``POST /api/v1/hooks/{flow}``, for a flow that declares ``on: webhook``).

A flow defined in the catalogue by one live source (:mod:`scheduler.service.catalog`: a
service of it ticks) and by stale ones (a service retired, moved or renamed) is started from the
live source's file; several files are a conflict (409) only when two live sources define the
flow, or only stale ones do, and the answer names each source, live or stale, and how to
remove a stale one.

A webhook request is its own credential: ``X-Flows-Signature: sha256=<hex>``, HMAC-SHA256 with
the flow's secret of ``<X-Flows-Timestamp>.<body>`` (:func:`scheduler.notify.channels.sign`, the
same scheme notifications are signed with). A timestamp more than :data:`WINDOW` seconds away
from the server's clock is refused, and so is a signature seen before (a replay): nothing is
started for either.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from flows.expand.jobs import ExpansionError
from flows.expand.run_ids import manual_run_id
from flows.flowfile.notify_rules import WebhookTrigger
from flows.flowfile.params import ParamError
from flows.runs.build import FlowFile, build_run, parse_flow_text, read_flow_file
from flows.runs.submit import submit
from flows.runs.trigger import Triggered
from flows.ui import api
from flows.ui.pages import render
from flows.ui.refusals import refusals
from flows.ui.roles import Identity
from flows.ui.shapes import Listing, RunStarted, answer
from flows.ui.state import TOO_DEEP, CheckedRoute, UiState, engine_library, not_utf8, reader, writer
from flows.validation.validate import InvalidFlow
from scheduler import secrets
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError, ForeignEngine
from scheduler.notify.channels import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from scheduler.secrets import MissingSecret
from scheduler.service import catalog
from scheduler.service.records import LIVE_TICK_AGE
from scheduler.service.scanning import flow_files

log = logging.getLogger("flows.ui")

WINDOW: Final = 300.0
"""Seconds a webhook's timestamp may be away from the server's clock."""

#: The challenge of a webhook's 401 (HTTP requires one): the headers that sign a request.
CHALLENGE: Final = f'Flows-Signature headers="{TIMESTAMP_HEADER} {SIGNATURE_HEADER}"'

router = APIRouter(route_class=CheckedRoute)


def unsigned(detail: str) -> HTTPException:
    """A webhook's 401: not signed, or not as the flow's secret signs (see the module)."""
    return HTTPException(401, detail, headers={"WWW-Authenticate": CHALLENGE})


class RunParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    params: dict[str, Any] = Field(default_factory=dict)
    """Values of the flow's params; text is converted to the declared type as `-p` does."""


@dataclass(frozen=True)
class Listed:
    file: str  # the path within its folder
    source: FlowFile | None
    errors: list[dict[str, Any]]
    origin: str | None = None  # the scheduler service's source it came from (None: --flows-dir)
    published: catalog.Source | None = None  # the origin's record (None: removed meanwhile)

    @property
    def live(self) -> bool | None:
        """Whether a service of its source is alive (None: a file of ``--flows-dir``)."""
        if self.origin is None:
            return None
        return self.published is not None and self.published.live

    @property
    def name(self) -> str | None:
        """The flow it defines (None: a file that does not validate)."""
        if self.source is not None:
            return self.source.flow.name
        return None


@dataclass(frozen=True)
class Shelf:
    """Where the flows to list and start come from: the folder of ``--flows-dir``, else the
    catalogue the scheduler services publish of their folders (every flow file, scheduled or
    not: :mod:`scheduler.service.catalog`), so a dashboard anywhere can start them."""

    folder: Path | None
    client: Client

    def listed(self) -> Iterator[Listed]:
        if self.folder is not None:
            for path in flow_files(self.folder):
                file = str(path.relative_to(self.folder))
                yield _judged(file, None, partial(read_flow_file, path))
            return
        now = self.client.engine.server_time()
        published = {s.name: s for s in catalog.sources(self.client, now)}
        for entry in catalog.entries(self.client):
            where = str(PurePosixPath(entry.folder) / entry.path)
            load = partial(parse_flow_text, entry.text, where)
            yield _judged(entry.path, entry.source, load, published.get(entry.source))


def _judged(
    file: str,
    origin: str | None,
    load: Callable[[], FlowFile],
    published: catalog.Source | None = None,
) -> Listed:
    try:
        return Listed(file, load(), [], origin, published)
    except InvalidFlow as invalid:
        errors = [f.to_dict() for f in invalid.findings if f.severity == "error"]
        return Listed(file, None, errors, origin, published)
    except (OSError, ValueError) as error:
        return Listed(file, None, [{"message": str(error)}], origin, published)


def shelf(request: Request, ui: api.Ui) -> Shelf:
    folder = getattr(request.app.state, "flows_dir", None)
    return Shelf(None if folder is None else Path(folder), ui.client)


Flows = Annotated[Shelf, Depends(shelf)]


def _describe(listed: Listed, shadowed: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": listed.file,
        "source": listed.origin,
        "live": listed.live,
        "last_seen": listed.published.last_seen if listed.published else None,
        "shadowed": shadowed,
        "errors": listed.errors,
    }
    flow = listed.source.flow if listed.source is not None else None
    if flow is None:
        return {**out, "name": None, "valid": False}
    return {
        **out,
        "name": flow.name,
        "valid": True,
        "description": flow.description or "",
        "scheduled": flow.schedule is not None,
        "webhook": flow.on is not None and flow.on.webhook is not None,
        "params": [
            {
                "name": name,
                "type": param.type,
                "description": param.description or "",
                "default": param.default,
                "required": param.is_required,
                "choices": param.choices,
            }
            for name, param in flow.params.items()
        ],
    }


def _where(listed: Listed) -> str:
    if listed.origin is None:
        return listed.file
    if listed.live:
        return f"{listed.origin}:{listed.file} (source {listed.origin}, live)"
    when = f", last seen {_utc(listed.published.last_seen)}" if listed.published else ""
    return f"{listed.origin}:{listed.file} (source {listed.origin}, stale{when})"


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _defines(listed: Listed, name: str) -> bool:
    if listed.name is not None:
        return listed.name == name
    return PurePosixPath(listed.file).stem == name


def _shadowed(listed: Listed, live_names: set[str]) -> bool:
    """A stale source's copy of a flow a live source defines too: starting it starts that."""
    return listed.live is False and listed.name in live_names


def _pick(name: str, matches: list[Listed]) -> Listed:
    """The file to start of those defining ``name``: the only one, else the only one of a live
    source (or of ``--flows-dir``); 409 naming each, live or stale, when that is not one."""
    if len(matches) == 1:
        return matches[0]
    live = [m for m in matches if m.live is not False]
    if len(live) == 1:
        return live[0]
    message = f"several files define flow {name!r}: " + "; ".join(_where(m) for m in matches)
    if len({m.origin for m in live if m.origin is not None}) > 1:
        message += (
            ". Two live sources define it: rename the flow in one of their folders, or stop "
            "the service of one"
        )
    stale = sorted({m.origin for m in matches if m.origin is not None and not m.live})
    if stale:
        commands = ", ".join(f"`flows sources remove {shlex.quote(s)}`" for s in stale)
        message += (
            f". A stale source (no service of it has ticked for {LIVE_TICK_AGE:.0f} s: retired, "
            f"moved or renamed) keeps its files here until removed: {commands} "
            f"(or POST {api.PREFIX}/sources/<source>/remove)"
        )
    raise HTTPException(409, message)


def _find(flows: Shelf, name: str) -> FlowFile:
    """The flow file of ``name``: 404 when none is, 409 when several are and no one of them is
    its live source's (:func:`_pick`), 422 (with every finding) when it is invalid."""
    matches = [listed for listed in flows.listed() if _defines(listed, name)]
    if not matches:
        where = "under the flows folder" if flows.folder is not None else "in the services' folders"
        raise HTTPException(404, f"no flow named {name!r} {where}")
    found = _pick(name, matches)
    if found.source is None:
        raise HTTPException(422, {"message": f"flow {name!r} does not validate",
                                  "findings": found.errors})  # fmt: skip
    return found.source


def _start(ui: UiState, source: FlowFile, params: dict[str, Any], trigger: str) -> dict[str, Any]:
    now = ui.client.engine.server_time()
    run_id = manual_run_id(source.flow.name, now)
    try:
        built = build_run(
            source,
            run_id=run_id,
            logical_time=datetime.fromtimestamp(now, UTC),
            params=params,
            trigger=trigger,
        )
    except (ParamError, ExpansionError) as error:
        raise HTTPException(422, str(error)) from None
    except EngineError as error:
        raise HTTPException(422, str(error)) from None
    submission = api.engine_errors(lambda: submit(ui.client, built))
    return Triggered(
        submission.run_id, submission.jobs, source.flow.name, not submission.created
    ).as_json()


@router.get(
    f"{api.PREFIX}/flows",
    dependencies=[Depends(reader)],
    tags=["flows"],
    response_model=None,
    responses=answer(Listing),
)
def list_flows(flows: Flows) -> dict[str, Any]:
    """Every flow file of the flows folder (``--flows-dir``; else of the scheduler services'
    folders), scheduled or not: its name, params (to start it with), whether it has a schedule
    or a webhook trigger, its source (a service's, or null) and whether a service of that
    source is alive (``live``; ``shadowed``: a stale source's copy of a flow a live source
    defines too, which starting the flow does not start), and its errors when invalid."""
    listed = list(flows.listed())
    live_names = {f.name for f in listed if f.live is not False and f.name is not None}
    return {"items": [_describe(f, _shadowed(f, live_names)) for f in listed]}


@router.post(
    f"{api.PREFIX}/flows/{{flow}}/runs",
    dependencies=[Depends(writer)],
    tags=["flows"],
    status_code=201,
    response_model=None,
    responses={**answer(RunStarted, 201), **refusals(404, 409, 415)},
)
def start_flow(
    ui: api.Ui, flows: Flows, flow: str, body: RunParams | None = None
) -> dict[str, Any]:
    """Start a run of the flow file named ``flow`` with ``params``: 422 with what is wrong (the
    findings of `flows validate`, an unknown or mistyped param) and nothing started."""
    return _start(ui, _find(flows, flow), dict((body or RunParams()).params), "manual")


@router.post(
    f"{api.PREFIX}/hooks/{{flow}}",
    tags=["flows"],
    status_code=201,
    response_model=None,
    responses={**answer(RunStarted, 201), **refusals(404, 409)},
)
async def webhook(request: Request, ui: api.Ui, flows: Flows, flow: str) -> dict[str, Any]:
    """Start a run of a flow declaring `on: webhook`, with the JSON body as its param, when the
    request is signed with the flow's secret (no bearer token: the signature is the credential).
    401 for a missing, stale, replayed or wrong signature; nothing is started then."""
    body = await request.body()
    source, hook = _hooked(flows, flow)
    signature = request.headers.get(SIGNATURE_HEADER, "")
    stamp = request.headers.get(TIMESTAMP_HEADER, "")
    if not signature or not stamp:
        raise unsigned(f"{SIGNATURE_HEADER} and {TIMESTAMP_HEADER} are required")
    try:
        key = secrets.resolve([hook.secret])[hook.secret]
    except MissingSecret as error:
        log.warning("webhook of flow %r: %s", flow, error)  # where it was looked for: the log's
        raise HTTPException(
            503, "the webhook's secret is not set on this server (its log says where it looked)"
        ) from None
    if not verify(key, stamp, body, signature):
        raise unsigned("the signature does not match the body and timestamp")
    engine_library(request)  # signed: the sender may read why nothing can be started
    _check_time(stamp, ui.client.engine.server_time())
    payload = _payload(body)
    # A signature is good once: remembered past the window, so a replay is refused.
    seen = (
        f"{ui.client.engine.key_prefix}hook-seen:{hashlib.sha256(signature.encode()).hexdigest()}"
    )
    redis: Any = ui.client.engine.redis
    if not redis.set(seen, flow, nx=True, ex=int(WINDOW * 2) + 1):
        raise HTTPException(409, "this signed request was received before (a replay): refused")
    request.state.identity = Identity(f"webhook:{flow}", "", user=False)
    try:
        return _start(ui, source, {hook.param: payload}, "webhook")
    except (HTTPException, ForeignEngine):
        redis.delete(seen)  # nothing started: the sender may fix its body (or wait) and resend
        raise


def _payload(body: bytes) -> dict[str, Any]:
    """A webhook's JSON object (none sent: empty), read as every JSON body is: UTF-8 only."""
    try:
        payload = json.loads(body.decode("utf-8") if body else "{}")
    except UnicodeDecodeError as error:
        raise HTTPException(422, not_utf8(error)) from None
    except RecursionError:
        raise HTTPException(422, TOO_DEEP) from None
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise HTTPException(422, "the body must be a JSON object")
    return payload


def _hooked(flows: Shelf, flow: str) -> tuple[FlowFile, WebhookTrigger]:
    """The flow file of ``flow`` and its webhook trigger. Nobody is known yet: a refusal tells
    no more than that the flow cannot be started so, never a file's findings, paths or sources
    (reads behind the token tell those)."""
    try:
        source = _find(flows, flow)
    except HTTPException as refused:
        if refused.status_code == 409:
            raise HTTPException(
                409, f"several files define flow {flow!r}: GET {api.PREFIX}/flows lists them"
            ) from None
        source = None
    hook = source.flow.on.webhook if source is not None and source.flow.on is not None else None
    if source is None or hook is None:
        raise HTTPException(
            404,
            f"flow {flow!r} has no webhook trigger here: no such flow, no `on: webhook`, or "
            "its file does not validate",
        )
    return source, hook


def _check_time(stamp: str, now: float) -> None:
    """401 unless ``stamp`` is epoch seconds within :data:`WINDOW` of ``now``."""
    try:
        sent = float(stamp)
    except ValueError:
        sent = math.nan
    if not math.isfinite(sent):  # "nan" and "inf" are floats, and no time: never stale
        raise unsigned(f"{TIMESTAMP_HEADER} must be epoch seconds")
    skew = abs(now - sent)
    if skew > WINDOW:
        raise unsigned(f"the timestamp is {skew:.0f}s away from now (at most {WINDOW:.0f})")


@router.get("/start", response_class=HTMLResponse, include_in_schema=False,
            dependencies=[Depends(reader)])  # fmt: skip
def start_page(request: Request, flows: Flows) -> HTMLResponse:
    items = list_flows(flows)["items"]
    return render(request, "start.html", flows=items, folder=flows.folder, live_age=LIVE_TICK_AGE)
