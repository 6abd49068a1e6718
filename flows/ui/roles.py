"""Users and roles on top of the server's token (:mod:`flows.ui.auth`).

A request's bearer token is the server's own (``--token-file``: one person, every right) or a
user's (:mod:`flows.access.users`, used as soon as one exists). :data:`POLICY` says which role each
write needs, in one place: ``viewer`` reads, ``operator`` acts on runs, jobs and failures
(retry, rerun, cancel, kick, approve, signal, trigger), ``admin`` manages schedules, queues,
workers (forgets a gone one), throttles, users and the services' sources. Whoever passed is
kept on the request (:func:`who`) for the audit log and for approvals.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from fastapi import HTTPException, Request

from flows.access.users import User, Users, rank
from flows.ui.auth import Auth

# (method, path pattern, role needed), first match wins; a write no line names needs operator.
POLICY: Final = (
    ("POST", re.compile(r"^/api/v1/schedules/[^/]+/trigger$"), "operator"),
    (
        "POST",
        re.compile(r"^/api/v1/(schedules|queues|workers|throttles|users|sources)(/|$)"),
        "admin",
    ),
)
DEFAULT_WRITE_ROLE: Final = "operator"
SERVER_TOKEN: Final = "token"
"""The name the server's own token acts under."""


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    user: bool  # a user of the namespace, not the server's token


def needed_role(method: str, path: str) -> str:
    """The role a request needs."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return "viewer"
    for rule_method, pattern, role in POLICY:
        if method == rule_method and pattern.match(path):
            return role
    return DEFAULT_WRITE_ROLE


def who(request: Request) -> Identity | None:
    """Who made the request, once it passed (None: an open read)."""
    identity = getattr(request.state, "identity", None)
    return identity if isinstance(identity, Identity) else None


@dataclass(frozen=True)
class RoleAuth(Auth):
    """:class:`Auth` with the namespace's users: a user's token passes where the server's would,
    within what its role may do."""

    users: Users | None = field(default=None, compare=False)

    def _identify(self, request: Request) -> Identity:
        try:
            super()._check(request)
            return Identity(SERVER_TOKEN, "admin", user=False)
        except HTTPException as refused:
            if refused.status_code != 403 or self.users is None:
                raise
            token = _bearer(request)
            found: User | None = self.users.find(token)
            if found is None:
                raise HTTPException(403, "the token is not this server's nor a user's") from None
            return Identity(found.name, found.role, user=True)

    def _check(self, request: Request) -> None:
        # Auth.read and Auth.write decide when a credential is checked (open reads: only a
        # bearer token that is sent); this decides who it is and what its role may do.
        identity = self._identify(request)
        needed = needed_role(request.method, request.url.path)
        if rank(identity.role) < rank(needed):
            raise HTTPException(
                403,
                f"user {identity.name} is {_article(identity.role)} {identity.role}: "
                f"{request.method} "
                f"{request.url.path} needs {needed}",
            )
        request.state.identity = identity

    def still_allowed(self, request: Request) -> Callable[[], bool] | None:
        # A user's token is taken back by `flows user revoke`: an open stream is looked at
        # again while it lasts, so the revoke ends it too, not only the next request.
        identity = who(request)
        if identity is None or not identity.user or self.users is None:
            return None
        users, token = self.users, _bearer(request)
        return lambda: users.find(token) is not None


def _bearer(request: Request) -> str:
    return request.headers.get("authorization", "").partition(" ")[2].strip()


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
