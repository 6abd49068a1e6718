"""Users of ``flows ui`` and their roles, kept in the namespace: a token per user, stored only as
its SHA-256 hash.

A role is what a user may do: ``viewer`` reads; ``operator`` also retries, reruns, cancels,
approves, signals and triggers; ``admin`` also manages schedules, queues, throttles and users.
Keys: ``P users`` (name → JSON ``{name, role, created, by}``) and ``P users:tokens`` (token
hash → name). Tokens are 256 random bits, so one hash is as good as a slow one and a lookup is
one HGET. An add and a revoke each write both keys in one MULTI/EXEC, under a WATCH of both.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import redis

from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError
from scheduler.terminal import visible

ROLES: Final = ("viewer", "operator", "admin")
NAME: Final = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
"""What a user name is, whole (:func:`name_problem`)."""
TOKEN_PREFIX: Final = "flows_"


class UserError(FlowsError, ValueError):
    """A user that cannot be added or revoked: the message says why; nothing was changed."""


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a user name, or None when it is: the store's rule, which a command
    line checks as a usage error before it connects."""
    if NAME.fullmatch(name):
        return None
    return f"'{_shown(name)}' is not a user name (1 to 64 of A-Z a-z 0-9 _ . @ -)"


def rank(role: str) -> int:
    """How much a role may do (unknown roles: nothing)."""
    return ROLES.index(role) if role in ROLES else -1


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class User:
    name: str
    role: str
    created: float
    by: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "created": self.created, "by": self.by}


class Users:
    """The users of ``client``'s namespace."""

    def __init__(self, client: Client) -> None:
        self.redis: Any = client.engine.redis
        prefix = client.engine.key_prefix
        self.key = prefix + "users"
        self.tokens_key = prefix + "users:tokens"

    def add(self, name: str, role: str, by: str = "") -> str:
        """A new user; returns its token (shown once: only its hash is kept). The user and its
        token are written together or not at all."""
        problem = name_problem(name)
        if problem is not None:
            raise UserError(problem)
        if role not in ROLES:
            raise UserError(f"'{_shown(role)}' is not a role: viewer, operator or admin")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = json.dumps({"name": name, "role": role, "created": time.time(), "by": by})
        self._atomically(lambda pipe: self._adding(pipe, name, record, token_hash(token)))
        return token

    def revoke(self, name: str) -> None:
        """Remove a user: every token of it stops working at once."""
        self._atomically(lambda pipe: self._revoking(pipe, name))

    def _atomically(self, change: Callable[[Any], None]) -> None:
        """``change``'s reads under a WATCH of the users and their tokens, its writes queued in
        one MULTI/EXEC: a change of either between them (another add or revoke) makes EXEC write
        nothing, and ``change`` reads again. A process that dies before EXEC wrote nothing."""
        with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(self.key, self.tokens_key)
                    change(pipe)
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue

    def _adding(self, pipe: Any, name: str, record: str, hashed: str) -> None:
        """Add's reads (``pipe`` watching) and its writes, queued: the user, its token, and the
        removal of any token left naming it (a revoke's, by a version that wrote in steps)."""
        if pipe.hexists(self.key, name):
            raise UserError(f"user {name} exists: revoke it first to give it a new token")
        stray = self._tokens_of(pipe, name)
        pipe.multi()
        pipe.hset(self.key, name, record)
        if stray:
            pipe.hdel(self.tokens_key, *stray)
        pipe.hset(self.tokens_key, hashed, name)

    def _revoking(self, pipe: Any, name: str) -> None:
        """Revoke's reads (``pipe`` watching) and its writes, queued: the user and every token
        naming it."""
        if not pipe.hexists(self.key, name):
            raise UserError(f"no user {_shown(name)} (see `flows user list`)")
        tokens = self._tokens_of(pipe, name)
        pipe.multi()
        pipe.hdel(self.key, name)
        if tokens:
            pipe.hdel(self.tokens_key, *tokens)

    def _tokens_of(self, pipe: Any, name: str) -> list[str]:
        return [h for h, owner in pipe.hgetall(self.tokens_key).items() if owner == name]

    def list(self) -> list[User]:
        return sorted(
            (_user(raw) for raw in self.redis.hvals(self.key)), key=lambda user: user.name
        )

    def any(self) -> bool:
        return bool(self.redis.hlen(self.key))

    def find(self, token: str) -> User | None:
        """The user whose token this is, or None."""
        name = self.redis.hget(self.tokens_key, token_hash(token))
        if name is None:
            return None
        raw = self.redis.hget(self.key, name)
        return _user(raw) if raw is not None else None


def _shown(name: str) -> str:
    """A name as a message quotes it: a refused one may hold anything typed, escape sequences
    that would drive the terminal the message is printed on included."""
    return visible(name, newlines=False)


def _user(raw: str) -> User:
    data = json.loads(raw)
    return User(str(data["name"]), str(data["role"]), float(data["created"]), str(data["by"]))
