"""Who may do what through ``flows ui``.

* Every write (POST) needs ``Authorization: Bearer <token>``, the token given to the server
  (``--token-file`` or ``FLOWS_UI_TOKEN``); without a configured token writes are refused. No
  cookie ever carries authority, so no request a browser makes on its own can write.
* Reads need the token too, unless the server listens on loopback only (only this machine can
  reach it) or was started with ``--read-only-open``.

Missing credentials answer 401 (with ``WWW-Authenticate: Bearer``), wrong ones 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request

ENV_TOKEN = "FLOWS_UI_TOKEN"
# A token shorter than this is refused at start: it could be guessed.
MIN_TOKEN_LENGTH = 16


class TokenError(ValueError):
    """The token file or variable cannot be used; the message says why."""


def load_token(token_file: Path | None) -> str | None:
    """The token from ``token_file`` (its first line), else ``$FLOWS_UI_TOKEN``, else None."""
    if token_file is not None:
        try:
            text = token_file.read_text()
        except OSError as error:
            raise TokenError(f"cannot read the token file {token_file}: {error.strerror}") from None
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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) can only be reached from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Auth:
    """The server's policy: its token (None: writes are disabled) and whether reads are open."""

    token: str | None
    reads_open: bool

    @classmethod
    def for_server(cls, token: str | None, host: str, read_only_open: bool) -> Auth:
        return cls(token, read_only_open or is_loopback(host))

    def _check(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if not header:
            raise HTTPException(
                401,
                "a bearer token is needed (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if scheme.lower() != "bearer" or not given.strip():
            raise HTTPException(
                401,
                "the Authorization header must be 'Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if self.token is None:
            raise HTTPException(
                403,
                f"this server takes no writes: start flows ui with --token-file or ${ENV_TOKEN}",
            )
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HTTPException(403, "the token is not this server's")

    def read(self, request: Request) -> None:
        """A dependency of every read endpoint."""
        if not self.reads_open:
            self._check(request)

    def write(self, request: Request) -> None:
        """A dependency of every write endpoint."""
        self._check(request)
