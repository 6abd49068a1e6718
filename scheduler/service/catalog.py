"""The flow files of a scheduler service's folder, scheduled or not, published in Redis
(``catalog.sync``) so that ``flows ui`` lists and starts any of them wherever it runs, and read
back (``catalog.list``).

A service publishes its whole folder (path within it → text) under its source name whenever a
scan finds the set of files or a text changed, in one engine call; the dashboard parses and
validates each text as it would a file of ``--flows-dir``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.engine.client import Client

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


def publish(client: Client, source: str, folder: str, files: Mapping[str, str]) -> str:
    """Replace what ``source`` published with ``files``: 'synced', or 'unchanged' when it had
    published this very content already."""
    return str(
        client.engine.call(
            "catalog.sync", source, digest(files), folder, json.dumps(dict(files), sort_keys=True)
        )
    )


def entries(client: Client) -> list[CatalogEntry]:
    """Every published flow file, by source and path."""
    raw = json.loads(client.engine.call("catalog.list"))
    return [
        CatalogEntry(str(e["source"]), str(e["folder"]), str(e["path"]), str(e["text"]))
        for e in raw
    ]


__all__ = ["MAX_TEXT", "CatalogEntry", "digest", "entries", "publish"]
