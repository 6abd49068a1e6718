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
:func:`presented_problem` is the one check, also used by ``flows worker --metrics-port``.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import HTTPException, Request

from flows.ui.guard import host_name
from scheduler.hosts import is_loopback
from scheduler.secrets import file_stamp

log = logging.getLogger("flows.ui")

ENV_TOKEN = "FLOWS_UI_TOKEN"
# A token shorter than this is refused at start: it could be guessed.
MIN_TOKEN_LENGTH = 16


class TokenError(ValueError):
    """The token file or variable cannot be used; the message says why."""


def load_token(token_file: Path | None) -> str | None:
    """The token from ``token_file`` (its first line), else ``$FLOWS_UI_TOKEN``, else None."""
    if token_file is not None:
        return read_token_file(token_file)
    token = os.environ.get(ENV_TOKEN, "").strip()
    return _long_enough(token, f"${ENV_TOKEN}") if token else None


def read_token_file(token_file: Path) -> str:
    """The token on the first line of ``token_file``."""
    try:
        text = token_file.read_text(encoding="utf-8")
    except OSError as error:
        raise TokenError(f"cannot read the token file {token_file}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise TokenError(
            f"the token file {token_file} is not UTF-8 text (byte {error.start})"
        ) from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    return _long_enough(token, f"the token file {token_file}")


def _long_enough(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(
            f"{where} holds a token of {len(token)} characters: use at least "
            f"{MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 32`)"
        )
    return token


LOOK_EVERY = 1.0
"""Seconds between two looks at whether the token file changed (a token that does not match
looks at once)."""


class TokenFile:
    """The token of a ``--token-file``, read again when the file changes (its modification time
    or size, as an env file is), so that a rotation takes effect without a restart and the old
    token stops working. The file is looked at, a stat, at most every :data:`LOOK_EVERY`, and
    at once when a presented token does not match (it may be the new one). A changed file that
    holds no usable token (half written, too short) keeps the token read last, with a
    warning."""

    def __init__(self, path: Path, token: str) -> None:
        self.path = path
        self._token = token
        self._stamp = file_stamp(path)
        self._looked = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path) -> TokenFile:
        """The token of ``path`` (a :class:`TokenError` when it holds none)."""
        return cls(path, read_token_file(path))

    def current(self) -> str:
        """The token, read again first if the last look is :data:`LOOK_EVERY` old."""
        if time.monotonic() - self._looked >= LOOK_EVERY:
            self.reread()
        return self._token

    def reread(self) -> bool:
        """Read the file again if it changed since it was read: whether the token did."""
        with self._lock:
            self._looked = time.monotonic()
            stamp = file_stamp(self.path)
            if stamp is None or stamp == self._stamp:
                return False  # unchanged, or gone for a moment (a rotation's rename)
            self._stamp = stamp
            try:
                token = read_token_file(self.path)
            except TokenError as error:
                log.warning("%s; the token read before is kept", error)
                return False
            changed = token != self._token
            if changed:
                self._token = token
                log.info("the token file %s changed: its new token is the server's", self.path)
            return changed


@dataclass(frozen=True)
class Auth:
    """The server's policy: its token (None: writes are disabled) and whether reads are open;
    ``token_file``: where the token is read again when it changes (None: it lasts)."""

    token: str | None
    reads_open: bool
    token_file: TokenFile | None = field(default=None, compare=False)

    def server_token(self) -> str | None:
        return self.token_file.current() if self.token_file is not None else self.token

    @classmethod
    def for_server(
        cls, token: str | None, host: str, read_only_open: bool, proxied: bool = False
    ) -> Auth:
        """The policy of a server listening on ``host``; ``proxied``: reached through a proxy
        (see :func:`reached_through`), so loopback is no longer this machine only."""
        return cls(token, read_only_open or (is_loopback(host) and not proxied))

    def _check(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        problem = presented_problem(header, self.token, self.token_file)
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


def server_token(token_file: Path | None) -> tuple[str | None, TokenFile | None]:
    """A server's token (``token_file``'s, else ``$FLOWS_UI_TOKEN``'s, else None) and, when it
    came from a file, that file, read again when it changes: a rotation needs no restart."""
    rotated = TokenFile.load(token_file) if token_file is not None else None
    return (rotated.current() if rotated is not None else load_token(None)), rotated


def presented_problem(
    header: str, token: str | None, rotated: TokenFile | None
) -> tuple[int, str] | None:
    """:func:`bearer_problem` for a server whose token is ``rotated``'s when it has a token
    file, else ``token``. A token that does not match may be the one the file was just rotated
    to: the file is looked at again at once."""
    problem = bearer_problem(header, rotated.current() if rotated is not None else token)
    if problem is not None and problem[0] == 403 and rotated is not None and rotated.reread():
        problem = bearer_problem(header, rotated.current())
    return problem


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
