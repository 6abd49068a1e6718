"""Who may do what through ``flows ui``.

* Every write (POST) needs ``Authorization: Bearer <token>``, the token given to the server
  (``--token-file`` or ``FLOWS_UI_TOKEN``); without a configured token writes are refused. No
  cookie ever carries authority, so no request a browser makes on its own can write.
* Reads need the token too, unless the server listens on loopback only and is not reached
  through a proxy (only this machine can reach it) or was started with ``--read-only-open``.
  A server told of a proxy (``--trusted-proxy``) or answering as a name other than the loopback
  ones (``--allowed-host``) is reached from elsewhere: its reads need the token. A token that
  is presented is checked even then: a wrong one is refused, so a bad credential is noticed the
  day it is set up.

Missing credentials answer 401 (with ``WWW-Authenticate: Bearer``), wrong ones 403.
:func:`bearer_problem` is the one check, also used by ``flows worker --metrics-port``.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request

from flows.ui.guard import host_name
from scheduler.hosts import is_loopback

ENV_TOKEN = "FLOWS_UI_TOKEN"
# A token shorter than this is refused at start: it could be guessed.
MIN_TOKEN_LENGTH = 16


class TokenError(ValueError):
    """The token file or variable cannot be used; the message says why."""


def load_token(token_file: Path | None) -> str | None:
    """The token from ``token_file`` (its first line), else ``$FLOWS_UI_TOKEN``, else None."""
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8")
        except OSError as error:
            raise TokenError(f"cannot read the token file {token_file}: {error.strerror}") from None
        except UnicodeDecodeError as error:
            raise TokenError(
                f"the token file {token_file} is not UTF-8 text (byte {error.start})"
            ) from None
        token = text.strip().splitlines()[0].strip() if text.strip() else ""
        where = f"the token file {token_file}"
    else:
        token = os.environ.get(ENV_TOKEN, "").strip()
        if not token:
            return None
        where = f"${ENV_TOKEN}"
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(
            f"{where} holds a token of {len(token)} characters: use at least "
            f"{MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 32`)"
        )
    return token


@dataclass(frozen=True)
class Auth:
    """The server's policy: its token (None: writes are disabled) and whether reads are open."""

    token: str | None
    reads_open: bool

    @classmethod
    def for_server(
        cls, token: str | None, host: str, read_only_open: bool, proxied: bool = False
    ) -> Auth:
        """The policy of a server listening on ``host``; ``proxied``: reached through a proxy
        (see :func:`reached_through`), so loopback is no longer this machine only."""
        return cls(token, read_only_open or (is_loopback(host) and not proxied))

    def _check(self, request: Request) -> None:
        problem = bearer_problem(request.headers.get("authorization", ""), self.token)
        if problem is not None:
            status, detail = problem
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            raise HTTPException(status, detail, headers=headers)

    def read(self, request: Request) -> None:
        """A dependency of every read endpoint. Open reads check a bearer token that is
        presented, and only that: another scheme (HTTP Basic) is a proxy's in front, which a
        browser sends with every request once its user logged in there."""
        presented = request.headers.get("authorization", "")
        if not self.reads_open or presented.partition(" ")[0].lower() == "bearer":
            self._check(request)

    def write(self, request: Request) -> None:
        """A dependency of every write endpoint."""
        self._check(request)

    def still_allowed(self, request: Request) -> Callable[[], bool] | None:
        """For a request that stays open (an event stream): what tells, while it is, that
        the credential it passed with still works (None: nothing can take it back; the
        server's token lasts as long as the server)."""
        return None


def reached_through(allowed_hosts: Iterable[str], trusted_proxies: Iterable[str]) -> str | None:
    """Why a server is reached from elsewhere than this machine whatever address it listens on,
    as the option that says so (None: nothing says it): a ``--trusted-proxy``, or an
    ``--allowed-host`` that is not a loopback name. A proxy on this machine forwards anyone's
    requests from a loopback address."""
    proxy = next(iter(trusted_proxies), None)
    if proxy is not None:
        return f"--trusted-proxy {proxy}"
    for name in allowed_hosts:
        bare = host_name(name).removeprefix("[").removesuffix("]")
        if bare and not is_loopback(bare):
            return f"--allowed-host {name.strip()}"
    return None


def bearer_problem(header: str, token: str | None) -> tuple[int, str] | None:
    """What is wrong with an ``Authorization`` header for a server whose token is ``token``
    (None: it has none), as an HTTP status and a message; None when it is the token."""
    scheme, _, given = header.partition(" ")
    if not header:
        return 401, "a bearer token is needed (Authorization: Bearer <token>)"
    if scheme.lower() != "bearer" or not given.strip():
        return 401, "the Authorization header must be 'Bearer <token>'"
    if token is None:
        return 403, (
            f"this server has no token and takes no writes: start it with --token-file or "
            f"${ENV_TOKEN}"
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return 403, "the token is not this server's"
    return None
