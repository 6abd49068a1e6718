"""Users of ``flows ui`` and their roles, kept in the namespace: a token per user, stored only as
its SHA-256 hash.

A role is what a user may do: ``viewer`` reads; ``operator`` also retries, reruns, cancels,
approves, signals and triggers; ``admin`` also manages schedules, queues, throttles and users.
Keys: ``P users`` (name → JSON ``{name, role, created, by}``) and ``P users:tokens`` (token
hash → name). Tokens are 256 random bits, so one hash is as good as a slow one and a lookup is
one HGET.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

from scheduler.engine.client import Client
from scheduler.engine.errors import FlowsError
from scheduler.terminal import visible

ROLES: Final = ("viewer", "operator", "admin")
NAME: Final = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
TOKEN_PREFIX: Final = "flows_"


class UserError(FlowsError, ValueError):
    """A user that cannot be added or revoked: the message says why; nothing was changed."""


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
        """A new user; returns its token (shown once: only its hash is kept)."""
        if not NAME.match(name):
            raise UserError(f"'{_shown(name)}' is not a user name (1 to 64 of A-Z a-z 0-9 _ . @ -)")
        if role not in ROLES:
            raise UserError(f"'{_shown(role)}' is not a role: viewer, operator or admin")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = json.dumps({"name": name, "role": role, "created": time.time(), "by": by})
        if not self.redis.hsetnx(self.key, name, record):
            raise UserError(f"user {name} exists: revoke it first to give it a new token")
        self.redis.hset(self.tokens_key, token_hash(token), name)
        return token

    def revoke(self, name: str) -> None:
        """Remove a user: its token stops working at once."""
        if not self.redis.hexists(self.key, name):
            raise UserError(f"no user {_shown(name)} (see `flows user list`)")
        stale = [h for h, owner in self.redis.hgetall(self.tokens_key).items() if owner == name]
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.key, name)
        if stale:
            pipe.hdel(self.tokens_key, *stale)
        pipe.execute()

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
