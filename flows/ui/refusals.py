"""How the API refuses: one JSON shape, and the statuses its OpenAPI document gives each route.

Every refusal of ``flows ui``'s API (a credential, a bad value, a body too large, a host it does
not answer as, something not there, Redis away, a bug) answers :class:`Refusal`,
``{"detail": ...}``: the API's words, or for a flow file that does not validate, its findings.
:data:`EVERY_ROUTE` are the statuses any request can get whatever route it asks, as the app's
middleware and dependencies answer them; a route declares the others it answers with
:func:`refusals` (404 for what is not there, 409 for what its state does not allow now, 415
where it takes a body).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: The largest request body accepted, in bytes (a run's params included): 413 beyond.
MAX_BODY = 64 * 1024


class Finding(BaseModel):
    """One finding of ``flows validate`` (:class:`flows.flowfile.findings.Finding`)."""

    model_config = ConfigDict(extra="forbid")

    file: str
    line: int
    col: int
    severity: str
    code: str
    message: str
    hint: str


class Findings(BaseModel):
    """A flow file that does not validate: what was refused, and every error found in it."""

    model_config = ConfigDict(extra="forbid")

    message: str
    findings: list[Finding]


class Refusal(BaseModel):
    """Every refusal's body."""

    model_config = ConfigDict(extra="forbid")

    detail: str | Findings


def body(detail: str | dict[str, Any]) -> dict[str, Any]:
    """A refusal's JSON value (:class:`Refusal`)."""
    return {"detail": detail}


#: What each status means for the client, said once for every operation of the document.
MEANINGS = {
    400: "The request names a host this server does not answer as (`--allowed-host`), or "
    "the engine refuses a value; nothing changed.",
    401: "No credential, or one not of the form `Authorization: Bearer <token>` (answered "
    "with `WWW-Authenticate: Bearer`); a webhook: a missing, stale or wrong signature "
    "(with `WWW-Authenticate: Flows-Signature`).",
    403: "A token that is not this server's nor a user's, a user whose role may not do "
    "this, or a write sent from another origin; nothing changed.",
    404: "What the path names is not there: the detail names it (and the one likely "
    "meant); nothing changed.",
    409: "Not now: its state does not allow it, and the detail says what the state is; "
    "nothing changed.",
    413: f"The request body is over {MAX_BODY // 1024} KiB; nothing changed.",
    415: "The body is not sent as JSON (`Content-Type: application/json`); nothing changed.",
    422: "A query parameter, body field or param that cannot be used, named with where it "
    "is (`query.limit: ...`, `body.flow: ...`), or a body that is not JSON or not UTF-8 "
    "text, with where it stops being so; for a flow file that does not validate, its "
    "findings. Nothing changed.",
    503: "Redis cannot be used now (with `Retry-After`), the engine's library on it is not "
    "this release's, or too many event streams are open; nothing changed.",
}


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI answers of ``statuses``: each a :class:`Refusal`, with its meaning."""
    return {status: {"model": Refusal, "description": MEANINGS[status]} for status in statuses}


#: What any request can be answered, whatever route it asks (the app adds them to every one).
EVERY_ROUTE = refusals(400, 401, 403, 413, 422, 503)
