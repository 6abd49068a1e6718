"""The flow files of a scheduler service's folder, scheduled or not, published in Redis
(``catalog.sync``) so that ``flows ui`` lists and starts any of them wherever it runs, and read
back (``catalog.list``).

A service publishes its whole folder (path within it → text) under its source name whenever a
scan finds the set of files or a text changed, in one engine call; the dashboard parses and
validates each text as it would a file of ``--flows-dir``.

A source is *live* while one of its services is: a service whose ping names the source ticked
within :data:`~scheduler.service.records.LIVE_TICK_AGE` seconds (what ``flows scheduler
--health`` asks, :meth:`ServiceHealth.alive`). A service retired, moved to another folder or
given another source name leaves its folder published under its old name: :func:`sources` says
which sources are stale and when each was last seen, :func:`remove` forgets one
(``flows sources remove``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.engine.client import Client
from scheduler.engine.errors import JobNotFound
from scheduler.engine.limits import read_json
from scheduler.service.records import LIVE_TICK_AGE, ServiceHealth, _list
from scheduler.service.schedules import Schedules

MAX_TEXT = 1_048_576
"""Bytes of one file's text the catalogue keeps (as ``catalog.sync`` allows); a larger file is
left out of it (and still scheduled, when it has a schedule)."""


@dataclass(frozen=True)
class CatalogEntry:
    """One flow file a service published: its source, where its folder is on the service's
    machine, its path within that folder, its text."""

    source: str
    folder: str
    path: str
    text: str


def digest(files: Mapping[str, str]) -> str:
    """What names a folder's content: its paths and their texts."""
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(path.encode() + b"\0" + hashlib.sha256(files[path].encode()).digest())
    return hashed.hexdigest()[:32]


def publish(
    client: Client,
    source: str,
    folder: str,
    files: Mapping[str, str],
    *,
    now: float | str = "",
) -> str:
    """Replace what ``source`` published with ``files`` at ``now`` (default: the server's
    clock): 'synced', or 'unchanged' when it had published this very content already."""
    text = json.dumps(dict(files), sort_keys=True)
    return str(client.engine.call("catalog.sync", source, digest(files), folder, text, now=now))


def entries(client: Client) -> list[CatalogEntry]:
    """Every published flow file, by source and path."""
    raw = json.loads(client.engine.call("catalog.list"))
    return [
        CatalogEntry(str(e["source"]), str(e["folder"]), str(e["path"]), str(e["text"]))
        for e in raw
    ]


@dataclass(frozen=True)
class Source:
    """What one source published, and whether a service of it is alive."""

    name: str
    folder: str  # where the folder is on its service's machine
    files: int
    published: float  # when its content was last published
    services: tuple[ServiceHealth, ...]  # its services still in the health list, newest first
    live: bool
    last_seen: float
    """The latest of: a service's last tick, a service leaving the health list (stopped, or
    dropped after ``max-worker-age`` of silence), its last publication."""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "folder": self.folder,
            "files": self.files,
            "published": self.published,
            "live": self.live,
            "last_seen": self.last_seen,
            "services": [
                {"id": s.id, "last_tick": s.last_tick, "host": s.info.get("host")}
                for s in self.services
            ],
        }


def sources(client: Client, now: float) -> list[Source]:
    """Every source that published files, by name, live or stale at ``now`` (the server's
    clock)."""
    raw = _list(read_json(client.engine.call("catalog.sources")))
    health = Schedules(client).services()
    out = []
    for record in raw:
        name = str(record["source"])
        own = tuple(s for s in health if s.source == name)
        seen = [float(record["synced"]), *(s.last_tick for s in own)]
        if record.get("seen") is not None:
            seen.append(float(record["seen"]))
        out.append(
            Source(
                name=name,
                folder=str(record["folder"]),
                files=int(record["files"]),
                published=float(record["synced"]),
                services=own,
                live=any(s.alive(now) for s in own),
                last_seen=max(seen),
            )
        )
    return out


class SourceRefused(Exception):
    """A source's folder was not removed (nothing changed)."""


class UnknownSource(SourceRefused, LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listed = f" (sources: {', '.join(known)})" if known else " (none has)"
        super().__init__(f"no source {name!r} has published flow files{hint}{listed}")


class LiveSource(SourceRefused):
    def __init__(self, source: Source, now: float) -> None:
        self.source = source
        newest = source.services[0]
        where = f" on {newest.info['host']}" if newest.info.get("host") else ""
        super().__init__(
            f"source {source.name!r} is live: its service {newest.id}{where} ticked "
            f"{max(now - newest.last_tick, 0.0):.0f} s ago. Removed, its folder would be "
            "published again only when the service restarts or a file of it changes: stop the "
            "service first (it is stale once no service of it has ticked for "
            f"{LIVE_TICK_AGE:.0f} s)"
        )


def remove(client: Client, name: str, now: float, *, force: bool = False) -> Source:
    """Forget what source ``name`` published, and return its record as it was. Refused,
    changing nothing: :class:`UnknownSource` when it published nothing, :class:`LiveSource`
    when a service of it is alive at ``now`` (the server's clock) unless ``force``. A live
    service publishes its folder again when it restarts or its files change."""
    listed = sources(client, now)
    found = next((s for s in listed if s.name == name), None)
    if found is None:
        raise UnknownSource(name, [s.name for s in listed])
    if found.live and not force:
        raise LiveSource(found, now)
    try:
        client.engine.call("catalog.remove", name)
    except JobNotFound:  # removed meanwhile
        raise UnknownSource(name, [s.name for s in listed if s.name != name]) from None
    return found


__all__ = [
    "MAX_TEXT",
    "CatalogEntry",
    "LiveSource",
    "Source",
    "SourceRefused",
    "UnknownSource",
    "digest",
    "entries",
    "publish",
    "remove",
    "sources",
]
