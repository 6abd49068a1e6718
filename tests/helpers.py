"""Helpers shared by the test tiers (import as ``from helpers import ...``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

# key -> (type, DUMP bytes, expiry)
Snapshot = dict[str, tuple[str, bytes, int]]

_BATCH = 500


def snapshot(r: redis.Redis, pattern: str = "*") -> Snapshot:
    """Every key matching ``pattern``: its type, its DUMP bytes and its expiry.

    Found with SCAN (never KEYS, which blocks the server). The expiry is the absolute
    PEXPIRETIME in ms (-1: none), which unlike PTTL does not tick down between two snapshots;
    servers older than Redis 7 have no PEXPIRETIME and get PTTL instead.
    """
    keys = sorted(set(r.scan_iter(match=pattern, count=_BATCH)))
    out: Snapshot = {}
    for start in range(0, len(keys), _BATCH):
        batch = keys[start : start + _BATCH]
        out.update(zip(batch, _describe(r, batch), strict=True))
    # A key that expired between SCAN and DUMP has no value: it is simply not there.
    return {key: value for key, value in out.items() if value[0] != "none"}


def _describe(r: redis.Redis, keys: list[str]) -> list[tuple[str, bytes, int]]:
    absolute = _has_pexpiretime(r)
    pipe = r.pipeline(transaction=False)  # DUMP's raw bytes are not decoded outside MULTI
    for key in keys:
        pipe.type(key)
        pipe.dump(key)
        if absolute:
            pipe.pexpiretime(key)
        else:
            pipe.pttl(key)
    replies = pipe.execute()
    return [
        (str(replies[i]), bytes(replies[i + 1] or b""), int(replies[i + 2]))
        for i in range(0, len(replies), 3)
    ]


def _has_pexpiretime(r: redis.Redis) -> bool:
    try:
        r.pexpiretime("flows:test:probe")
    except redis.ResponseError:
        return False
    return True


def diff(before: Snapshot, after: Snapshot) -> list[str]:
    """Human-readable differences between two snapshots (empty if identical)."""
    lines = [f"added {key!r} ({after[key][0]})" for key in sorted(after.keys() - before.keys())]
    lines += [f"removed {key!r}" for key in sorted(before.keys() - after.keys())]
    for key in sorted(before.keys() & after.keys()):
        (type1, dump1, exp1), (type2, dump2, exp2) = before[key], after[key]
        if type1 != type2:
            lines.append(f"changed {key!r}: type {type1} -> {type2}")
        elif dump1 != dump2:
            lines.append(f"changed {key!r}: value ({type1})")
        elif exp1 != exp2:
            lines.append(f"changed {key!r}: expiry {exp1} -> {exp2}")
    return lines


@contextmanager
def assert_unchanged(r: redis.Redis, pattern: str = "*") -> Iterator[Snapshot]:
    """Fail if the block changed any key matching ``pattern``, byte for byte.

    Checked when the block ends normally, so put ``pytest.raises`` inside it::

        with assert_unchanged(redis_client), pytest.raises(InvalidArgument):
            engine.call("put", ...)
    """
    before = snapshot(r, pattern)
    yield before
    changes = diff(before, snapshot(r, pattern))
    if changes:
        raise AssertionError("Redis changed:\n  " + "\n  ".join(changes))
