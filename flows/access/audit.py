"""The audit log: every change made through the REST API or the command line, who made it, on
what, when and from where, appended to a capped stream of the namespace (``P audit``).

Writers: the API's middleware (:mod:`flows.ui.audit_log`) after a write succeeded, and the
command line after a changing command succeeded (:func:`flows.cli.common.audited`). Readers:
``flows audit``, ``GET /api/v1/audit`` and the dashboard's Audit page, all through
:func:`recent`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # `flows validate` and other commands that change nothing import no redis
    from scheduler.engine.client import Client

MAX_ENTRIES: Final = 100_000
"""The stream keeps about this many entries (the oldest go first)."""
FIELDS: Final = ("at", "who", "role", "via", "action", "target", "address", "detail")
MAX_ID_PART: Final = 2**64 - 1
"""A stream id's two parts (milliseconds, sequence) are 64-bit: Redis refuses larger ones."""


def key(client: Client) -> str:
    return client.engine.key_prefix + "audit"


def record(
    client: Client,
    *,
    who: str,
    action: str,
    target: str = "",
    address: str = "",
    via: str = "api",
    role: str = "",
    detail: str = "",
) -> str:
    """Append one entry; returns its id."""
    entry = {
        "at": f"{time.time():.3f}",
        "who": who,
        "role": role,
        "via": via,
        "action": action,
        "target": target[:1000],
        "address": address,
        "detail": detail[:2000],
    }
    redis: Any = client.engine.redis
    return str(redis.xadd(key(client), entry, maxlen=MAX_ENTRIES, approximate=True))


def _id_part(text: str) -> bool:
    # ASCII digits only: a regex's \d and str.isdigit() take other scripts' digits too, which
    # Redis refuses
    return text.isascii() and text.isdigit() and int(text) <= MAX_ID_PART


def recent(
    client: Client, count: int = 100, before: str | None = None, who: str | None = None
) -> list[dict[str, Any]]:
    """The newest entries first (``before``: older than that id, ``MS-SEQ``; ``who``: that
    user's only). Raises ValueError for a ``before`` that is no stream id."""
    if before is not None:
        parts = before.split("-")
        if len(parts) != 2 or not all(_id_part(p) for p in parts):
            raise ValueError(f"{before!r} is no audit entry id (MS-SEQ, each at most 2**64-1)")
        if int(parts[0]) == int(parts[1]) == 0:
            return []  # nothing is older than the first id (Redis refuses "(0-0" as a bound)
    redis: Any = client.engine.redis
    out: list[dict[str, Any]] = []
    last = "+" if before is None else f"({before}"
    while len(out) < count:
        batch = redis.xrevrange(key(client), max=last, min="-", count=max(count, 100))
        if not batch:
            break
        for entry_id, fields in batch:
            if who is None or fields.get("who") == who:
                out.append({"id": entry_id, **{f: fields.get(f, "") for f in FIELDS}})
                if len(out) == count:
                    break
        last = f"({batch[-1][0]}"
    for entry in out:
        entry["at"] = float(entry["at"] or 0)
    return out
