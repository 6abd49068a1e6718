"""Malformed calls of every command: the right error class, a message naming the command and the
argument, and not one byte changed in the namespace.

Each case runs against a namespace holding a job in every state (waiting, scheduled, depends,
running, failed, complete), a recurring job, tags, a tracked job, settings, a paused queue and a
flow run, so a command that wrote before checking would show up in the snapshot diff.

One test per command (and mode) runs all its cases in turn on the same namespace: each must
leave it unchanged, so the next starts from the same state (it is rebuilt after a failing case).
Every failing case is reported, by id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
from helpers import Snapshot, snapshot
from lua_support import T0, Lua, unchanged

from scheduler.engine.errors import (
    EngineError,
    HasDependents,
    InvalidArgument,
    JobNotFound,
    LockLost,
    TooLarge,
    UnknownCommand,
    WrongState,
)
from scheduler.engine.scripts import join_includes, lua_dir

LONG_ID = "j" * 257
BIG = '{"x": "' + "x" * (512 * 1024) + '"}'  # an object just over 512 KiB
BIG_TEXT = "m" * (512 * 1024 + 1)
# A run record carries the run's graph, so it may be as large as the run's jobs (64 MiB).
BIG_RUN = '{"x": "' + "x" * (64 * 1024 * 1024) + '"}'
DEEP_OBJECT = '{"a":' * 10000 + "1" + "}" * 10000
DEEP_ARRAY = "[" * 10000 + "]" * 10000
NESTED_101 = '{"a":' * 101 + "1" + "}" * 101  # decodes, but too deep to embed in a reply
TOO_MANY_TAGS = json.dumps([f"t{n}" for n in range(65)])

BAD_IDS = [
    ("", InvalidArgument),
    (LONG_ID, TooLarge),
    ("a b", InvalidArgument),
    ("a\tb", InvalidArgument),
    ("a\nb", InvalidArgument),
    ("nul\x00l", InvalidArgument),
    ("c1\u0085", InvalidArgument),
    ("csi\u009b2J", InvalidArgument),
    ("rlo\u202eid", InvalidArgument),  # bidirectional controls: an id displayed as another
    ("isolate\u2066x", InvalidArgument),
    ("mark\u200f", InvalidArgument),
]
# Names (jids, queues, run ids, schedule and flow names) are single URL and path segments.
BAD_NAMES = [
    *BAD_IDS,
    ("x/../y", InvalidArgument),
    ("a\\b", InvalidArgument),
    ("..", InvalidArgument),
    (".", InvalidArgument),
]
BAD_JIDS = [
    *BAD_NAMES,
    ("x-history", InvalidArgument),
    ("x-dependents", InvalidArgument),
    ("x-dependencies", InvalidArgument),
]
BAD_OBJECTS = [
    ("", InvalidArgument),
    ("not json", InvalidArgument),
    ("[1, 2]", InvalidArgument),
    ('"text"', InvalidArgument),
    ("12", InvalidArgument),
    ("null", InvalidArgument),
    ('{"a": 1', InvalidArgument),
    (DEEP_OBJECT, InvalidArgument),
    (DEEP_ARRAY, InvalidArgument),
    (BIG, TooLarge),
]
BAD_NUMBERS = ["abc", "nan", "NaN", "inf", "-inf", "Infinity", "1e999", "0x", "1,5", " "]
SOME_NUMBERS = ["abc", "nan", "inf", "-inf", "1e999"]
BAD_COUNTS = ["-1", "1.5", "abc", "nan", "inf", "100001", "1e300"]

CASES: list[Case] = []


class Case(NamedTuple):
    id: str
    command: str
    args: list[Any]
    error: type[EngineError]
    names: str  # what the message must name besides the command
    now: Any


def case(
    command: str, args: list[Any], error: type[EngineError], names: str, id: str = "", now: Any = T0
) -> None:
    """A call that must raise `error` with a message naming the command and `names`."""
    CASES.append(Case(f"{command}-{id or len(CASES)}", command, args, error, names, now))


def ids(
    command: str,
    prefix: list[Any],
    name: str,
    suffix: list[Any] | None = None,
    jid: bool = False,
    named: bool = False,
) -> None:
    """Each bad id (or jid, or name) in the place of argument `name`."""
    for value, error in BAD_JIDS if jid else BAD_NAMES if named else BAD_IDS:
        args = [*prefix, value, *(suffix or [])]
        case(command, args, error, name, id=f"{name}={value[:12]!r}")


def objects(
    command: str,
    prefix: list[Any],
    name: str,
    suffix: list[Any] | None = None,
    big: str = BIG,
) -> None:
    for value, error in BAD_OBJECTS:
        value = big if value is BIG else value
        case(command, [*prefix, value, *(suffix or [])], error, name, id=f"{name}={value[:12]!r}")


def numbers(
    command: str,
    prefix: list[Any],
    name: str,
    extra: tuple[str, ...] = (),
    suffix: list[Any] | None = None,
    values: list[str] = SOME_NUMBERS,
) -> None:
    for value in [*values, *extra]:
        case(
            command,
            [*prefix, value, *(suffix or [])],
            InvalidArgument,
            name,
            id=f"{name}={value!r}",
        )


# -- the cases, command by command -----------------------------------------------------------

PUT = ["client", "q", "new", "K", "{}", "0"]
for command in ("put", "requeue"):
    for missing in range(6):
        name = ["worker", "queue", "jid", "klass", "data", "delay"][missing]
        case(command, PUT[:missing], InvalidArgument, name, id=f"missing-{name}")
    ids(command, [], "worker", PUT[1:])
    ids(command, PUT[:1], "queue", PUT[2:], named=True)
    ids(command, PUT[:2], "jid", PUT[3:], jid=True)
    ids(command, PUT[:3], "klass", PUT[4:])
    objects(command, PUT[:4], "data", PUT[5:])
    numbers(command, PUT[:5], "delay", ("-1", "-0.5"), values=BAD_NUMBERS)
    case(command, [*PUT, "priority"], InvalidArgument, "priority", id="odd-options")
    case(command, [*PUT, "priority", "1", "tags"], InvalidArgument, "tags", id="odd-options-2")
    case(command, [*PUT, "bogus", "1"], InvalidArgument, "bogus", id="unknown-option")
    case(command, [*PUT, "delay", "1"], InvalidArgument, "delay", id="delay-as-option")
    for value in ["1.5", "x", "nan", "1000001", "-1000001", "inf"]:
        case(
            command, [*PUT, "priority", value], InvalidArgument, "priority", id=f"priority={value}"
        )
    for value in ["-1", "1.5", "x", "100001"]:
        case(command, [*PUT, "retries", value], InvalidArgument, "retries", id=f"retries={value}")
    for value in ["x", '{"a": 1}', "[1]", '["a b"]', '[""]', "[null]", '"t"', DEEP_ARRAY]:
        case(command, [*PUT, "tags", value], InvalidArgument, "tags", id=f"tags={value[:12]}")
    case(command, [*PUT, "tags", json.dumps([LONG_ID])], TooLarge, "tags", id="tags-long")
    case(command, [*PUT, "tags", TOO_MANY_TAGS], TooLarge, "tags", id="tags-65")
    for value in ["x", '["x-history"]', '["a b"]', "[1]", '{"a": "b"}', '["new"]']:
        case(
            command,
            [*PUT, "depends", value],
            InvalidArgument,
            "depends",
            id=f"depends={value[:12]}",
        )
case("requeue", ["client", "q", "nope", "K", "{}", "0"], JobNotFound, "nope", id="unknown-job")

# put.many: the call's arguments, its shared options, and each job's (named by its index).
MANY = ["client", "q", "", "new-1", "K", "{}", "0", "new-2", "K", "{}", "0"]
for missing, name in enumerate(["worker", "queue"]):
    case("put.many", MANY[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("put.many", [], "worker", MANY[1:])
ids("put.many", MANY[:1], "queue", MANY[2:], named=True)
case("put.many", MANY[:3], InvalidArgument, "jobs", id="no-jobs")
case("put.many", [*MANY, "new-3", "K"], InvalidArgument, "jobs", id="short-group")
for value, error in BAD_OBJECTS[1:]:  # '' means no options
    case("put.many", [*MANY[:2], value, *MANY[3:]], error, "options", id=f"options={value[:12]!r}")
for options, name in [
    ({"depends": ["waiting"]}, "depends"),
    ({"trigger": "all_done"}, "trigger"),
    ({"unique": 1}, "unique"),
    ({"bogus": 1}, "bogus"),
    ({"priority": 1.5}, "priority"),
    ({"priority": 1000001}, "priority"),
    ({"retries": -1}, "retries"),
    ({"retries": "x"}, "retries"),
    ({"tags": ["a b"]}, "tags"),
    ({"tags": "t"}, "tags"),
    ({"tags": {"a": "b"}}, "tags"),
    ({"tags": [1]}, "tags"),
    ({"ttl": 0}, "ttl"),
    ({"ttr": "x"}, "ttr"),
    ({"concurrency_limit": 2}, "concurrency_key"),
    ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit"),
    ({"concurrency_key": "a b"}, "concurrency_key"),
    ({"throttle": "a b"}, "throttle"),
]:
    case(
        "put.many",
        [*MANY[:2], json.dumps(options), *MANY[3:]],
        InvalidArgument,
        name,
        id=f"options-{name}={str(options)[:20]}",
    )
case(
    "put.many",
    [*MANY[:2], json.dumps({"tags": json.loads(TOO_MANY_TAGS)}), *MANY[3:]],
    TooLarge,
    "tags",
    id="options-tags-65",
)
for value, error in BAD_JIDS:  # in the second job: the message names it
    case(
        "put.many",
        [*MANY[:7], value, *MANY[8:]],
        error,
        'jobs[2](): Arg "jid"',
        id=f"jobs[2].jid={value[:12]!r}",
    )
for value, error in BAD_IDS:
    case(
        "put.many",
        [*MANY[:8], value, *MANY[9:]],
        error,
        'jobs[2](): Arg "klass"',
        id=f"jobs[2].klass={value[:12]!r}",
    )
for value, error in BAD_OBJECTS:
    case(
        "put.many",
        [*MANY[:9], value, *MANY[10:]],
        error,
        'jobs[2](): Arg "data"',
        id=f"jobs[2].data={value[:12]!r}",
    )
for value in [*BAD_NUMBERS, "-1", ""]:
    case(
        "put.many",
        [*MANY[:10], value],
        InvalidArgument,
        'jobs[2](): Arg "delay"',
        id=f"jobs[2].delay={value!r}",
    )
case("put.many", [*MANY[:7], "new-1", *MANY[8:]], InvalidArgument, "new-1", id="jid-twice")
case(
    "put.many", [*MANY[:3], *["new", "K", "{}", "0"] * 1001], TooLarge, "1001 jobs", id="1001-jobs"
)

for command in ("get",):
    case(command, [], InvalidArgument, "jid", id="missing")
    ids(command, [], "jid", jid=True)
ids("multiget", ["waiting"], "jid", jid=True)

case("config.get", [""], InvalidArgument, "option", id="empty")
ids("config.get", [], "option")
case("config.set", [], InvalidArgument, "option", id="missing")
case("config.set", ["heartbeat"], InvalidArgument, "value", id="missing-value")
ids("config.set", [], "option", ["1"])
numbers("config.set", ["heartbeat"], "value", ("-1",))
numbers("config.set", ["q-heartbeat"], "value", ("-1",))
for option in ("max-job-history", "jobs-history-count", "q-max-concurrency"):
    case("config.set", [option, "1.5"], InvalidArgument, "value", id=f"{option}-fraction")
case("config.set", ["application", BIG_TEXT], TooLarge, "value", id="big-value")
case("config.unset", [], InvalidArgument, "option", id="missing")
ids("config.unset", [], "option")

ids("queues", [], "queue")
for command in ("pause", "unpause", "queue.forget"):
    case(command, [], InvalidArgument, "queue", id="none")
    ids(command, ["q"], "queue")
case("length", [], InvalidArgument, "queue", id="missing")
ids("length", [], "queue")

case("jobs", [], InvalidArgument, "state", id="missing")
case("jobs", ["bogus", "q"], InvalidArgument, "state", id="unknown-state")
case("jobs", ["failed", "q"], InvalidArgument, "state", id="failed-state")
case("jobs", ["running"], InvalidArgument, "queue", id="missing-queue")
ids("jobs", ["waiting"], "queue")
for value in ["-1", "1.5", "x", "1e300", "nan"]:
    case("jobs", ["waiting", "q", value], InvalidArgument, "offset", id=f"offset={value}")
    case("jobs", ["complete", value], InvalidArgument, "offset", id=f"complete-offset={value}")
for value in BAD_COUNTS:
    case("jobs", ["waiting", "q", "0", value], InvalidArgument, "count", id=f"count={value}")
    case("jobs", ["complete", "0", value], InvalidArgument, "count", id=f"complete-count={value}")

for command in ("pop", "pop.lean"):
    case(command, [], InvalidArgument, "queue", id="missing")
    case(command, ["q"], InvalidArgument, "worker", id="missing-worker")
    case(command, ["q", "w1"], InvalidArgument, "count", id="missing-count")
    ids(command, [], "queue", ["w1", "1"])
    ids(command, ["q"], "worker", ["1"])
    for value in BAD_COUNTS:
        case(command, ["q", "w1", value], InvalidArgument, "count", id=f"count={value}")
case("peek", [], InvalidArgument, "queue", id="missing")
case("peek", ["q"], InvalidArgument, "count", id="missing-count")
for value in BAD_COUNTS:
    case("peek", ["q", value], InvalidArgument, "count", id=f"count={value}")

COMPLETE = ["running", "w1", "q", "{}"]
for missing, name in enumerate(["jid", "worker", "queue", "data"]):
    case("complete", COMPLETE[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("complete", [], "jid", COMPLETE[1:], jid=True)
ids("complete", COMPLETE[:1], "worker", COMPLETE[2:])
ids("complete", COMPLETE[:2], "queue", COMPLETE[3:])
for value, error in BAD_OBJECTS:
    if value != "":  # '' keeps the job's data (tests/lua/test_complete.py)
        case("complete", [*COMPLETE[:3], value], error, "data", id=f"data={value[:12]!r}")
case("complete", [*COMPLETE, "next"], InvalidArgument, "next", id="odd-options")
case("complete", [*COMPLETE, "bogus", "x"], InvalidArgument, "bogus", id="unknown-option")
for value, error in BAD_IDS:
    case("complete", [*COMPLETE, "next", value], error, "next", id=f"next={value[:12]!r}")
numbers("complete", [*COMPLETE, "next", "q2", "delay"], "delay", ("-1",))
for value in ["x", '["a b"]', '["x-history"]', '["running"]', '{"a": 1}']:
    case(
        "complete",
        [*COMPLETE, "next", "q2", "depends", value],
        InvalidArgument,
        "depends",
        id=f"depends={value[:12]}",
    )
for value, error in [
    ("not json", InvalidArgument),
    ("", InvalidArgument),
    (DEEP_ARRAY, InvalidArgument),
    (BIG, TooLarge),
]:
    case("complete", [*COMPLETE, "result", value], error, "result", id=f"result={value[:12]!r}")
case("complete", [*COMPLETE, "delay", "5"], InvalidArgument, "delay", id="delay-without-next")
case(
    "complete", [*COMPLETE, "depends", "[]"], InvalidArgument, "depends", id="depends-without-next"
)
case("complete", ["nope", "w1", "q", "{}"], JobNotFound, "nope", id="unknown-job")
case("complete", ["waiting", "w1", "q", "{}"], WrongState, "waiting", id="waiting")
case("complete", ["complete", "w1", "q", "{}"], WrongState, "complete", id="complete")
case("complete", ["running", "w2", "q", "{}"], LockLost, "running", id="other-worker")
case("complete", ["running", "w1", "q2", "{}"], WrongState, "running", id="other-queue")

FAIL = ["running", "w1", "boom", "message"]
for command in ("fail", "fail.held"):
    for missing, name in enumerate(["jid", "worker", "group", "message"]):
        case(command, FAIL[:missing], InvalidArgument, name, id=f"missing-{name}")
    ids(command, [], "jid", FAIL[1:], jid=True)
    ids(command, FAIL[:1], "worker", FAIL[2:])
    ids(command, FAIL[:2], "group", FAIL[3:])
    case(command, [*FAIL[:3], BIG_TEXT], TooLarge, "message", id="big-message")
    case(command, ["nope", "w1", "g", "m"], JobNotFound, "nope", id="unknown-job")
    case(command, ["running", "w2", "g", "m"], LockLost, "running", id="other-worker")
objects("fail", FAIL, "data")
case("fail.held", ["waiting", "w1", "g", "m"], WrongState, "waiting", id="waiting")

ids("failed", [], "group")
for value in ["-1", "1.5", "x", "1e300"]:
    case("failed", ["boom", value], InvalidArgument, "start", id=f"start={value}")
for value in BAD_COUNTS:
    case("failed", ["boom", "0", value], InvalidArgument, "limit", id=f"limit={value}")
case("unfail", [], InvalidArgument, "queue", id="missing")
case("unfail", ["q"], InvalidArgument, "group", id="missing-group")
ids("unfail", [], "queue", ["boom"])
ids("unfail", ["q"], "group")
for value in BAD_COUNTS:
    case("unfail", ["q", "boom", value], InvalidArgument, "count", id=f"count={value}")

RETRY = ["running", "q", "w1"]
for missing, name in enumerate(["jid", "queue", "worker"]):
    case("retry", RETRY[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("retry", [], "jid", RETRY[1:], jid=True)
ids("retry", RETRY[:1], "queue", RETRY[2:])
ids("retry", RETRY[:2], "worker")
numbers("retry", RETRY, "delay", ("-1",))
for value, error in BAD_IDS[1:]:
    case("retry", [*RETRY, "0", value], error, "group", id=f"group={value[:12]!r}")
case("retry", [*RETRY, "0", "g", BIG_TEXT], TooLarge, "message", id="big-message")
case("retry", ["nope", "q", "w1"], JobNotFound, "nope", id="unknown-job")
case("retry", ["waiting", "q", "w1"], WrongState, "waiting", id="waiting")
case("retry", ["running", "q", "w2"], LockLost, "running", id="other-worker")
case("retry", ["running", "q2", "w1"], WrongState, "running", id="other-queue")

case("heartbeat", [], InvalidArgument, "jid", id="missing")
case("heartbeat", ["running"], InvalidArgument, "worker", id="missing-worker")
ids("heartbeat", [], "jid", ["w1"], jid=True)
ids("heartbeat", ["running"], "worker")
for value, error in BAD_OBJECTS[1:]:  # '' means no data
    case("heartbeat", ["running", "w1", value], error, "data", id=f"data={value[:12]!r}")
case("heartbeat", ["nope", "w1"], JobNotFound, "nope", id="unknown-job")
case("heartbeat", ["waiting", "w1"], WrongState, "waiting", id="waiting")
case("heartbeat", ["running", "w2"], LockLost, "running", id="other-worker")

case("release", [], InvalidArgument, "jid", id="missing")
case("release", ["running"], InvalidArgument, "worker", id="missing-worker")
ids("release", [], "jid", ["w1"], jid=True)
ids("release", ["running"], "worker")
numbers("release", ["running", "w1"], "delay", ("-1",))
case("release", ["nope", "w1"], JobNotFound, "nope", id="unknown-job")
case("release", ["waiting", "w1"], WrongState, "waiting", id="waiting")
case("release", ["running", "w2"], LockLost, "running", id="other-worker")

case("depends", [], InvalidArgument, "jid", id="missing")
ids("depends", [], "jid", ["on", "waiting"], jid=True)
case("depends", ["depends"], InvalidArgument, "direction", id="missing-direction")
case("depends", ["depends", "sideways", "waiting"], InvalidArgument, "direction", id="direction")
case("depends", ["depends", "on"], InvalidArgument, "dependencies", id="none")
case("depends", ["depends", "off"], InvalidArgument, "dependencies", id="none-off")
ids("depends", ["depends", "on"], "jid", jid=True)
case("depends", ["depends", "on", "waiting", "a b"], InvalidArgument, "jid", id="second-bad")
case("depends", ["depends", "on", "depends"], InvalidArgument, "jid", id="itself")
case("depends", ["waiting", "on", "running"], WrongState, "waiting", id="not-depends")
case("depends", ["nope", "on", "running"], JobNotFound, "nope", id="unknown-job")

ids("cancel", [], "jid", jid=True)
ids("cancel", ["scheduled"], "jid", jid=True)
case("cancel", ["waiting"], HasDependents, "depends", id="has-dependents")
case("cancel", ["scheduled", "waiting", "running"], HasDependents, "waiting", id="has-dependents-2")

case("timeout", [], InvalidArgument, "jid", id="none")
ids("timeout", [], "jid", jid=True)
ids("timeout", ["running"], "jid", jid=True)
case("timeout", ["running", "nope"], JobNotFound, "nope", id="unknown-job-second")
case("timeout", ["running", "waiting"], WrongState, "waiting", id="waiting-second")

case("priority", [], InvalidArgument, "jid", id="missing")
case("priority", ["waiting"], InvalidArgument, "priority", id="missing-priority")
ids("priority", [], "jid", ["1"], jid=True)
numbers("priority", ["waiting"], "priority", ("1.5", "1000001", "-1000001"))
case("priority", ["nope", "1"], JobNotFound, "nope", id="unknown-job")

case("tag", [], InvalidArgument, "verb", id="missing")
case("tag", ["bogus", "waiting", "t"], InvalidArgument, "verb", id="unknown-verb")
for verb in ("add", "remove"):
    case("tag", [verb], InvalidArgument, "jid", id=f"{verb}-missing")
    ids("tag", [verb], "jid", ["t"], jid=True)
    ids("tag", [verb, "waiting"], "tag")
    case("tag", [verb, "waiting", "ok", "a b"], InvalidArgument, "tag", id=f"{verb}-second-bad")
    case("tag", [verb, "nope", "t"], JobNotFound, "nope", id=f"{verb}-unknown-job")
case("tag", ["add", "waiting", *json.loads(TOO_MANY_TAGS)], TooLarge, "tags", id="add-65")
case("tag", ["get"], InvalidArgument, "tag", id="get-missing")
ids("tag", ["get"], "tag")
for value in ["-1", "x", "1.5", "1e300"]:
    case("tag", ["get", "t", value], InvalidArgument, "offset", id=f"get-offset={value}")
    case("tag", ["top", value], InvalidArgument, "offset", id=f"top-offset={value}")
for value in BAD_COUNTS:
    case("tag", ["get", "t", "0", value], InvalidArgument, "count", id=f"get-count={value}")
    case("tag", ["top", "0", value], InvalidArgument, "count", id=f"top-count={value}")

for verb in ("track", "untrack"):
    case("track", [verb], InvalidArgument, "jid", id=f"{verb}-missing")
    ids("track", [verb], "jid", jid=True)
case("track", ["bogus", "waiting"], InvalidArgument, "verb", id="unknown-verb")
case("track", ["track", "nope"], JobNotFound, "nope", id="unknown-job")

case("log", [], InvalidArgument, "jid", id="missing")
case("log", ["waiting"], InvalidArgument, "message", id="missing-message")
ids("log", [], "jid", ["m"], jid=True)
case("log", ["waiting", "m" * 4097], TooLarge, "message", id="big-message")
objects("log", ["waiting", "m"], "data")
case("log", ["waiting", "m", NESTED_101], InvalidArgument, "data", id="data-101-deep")
case("log", ["nope", "m"], JobNotFound, "nope", id="unknown-job")

case("stats", [], InvalidArgument, "queue", id="missing")
case("stats", ["q"], InvalidArgument, "date", id="missing-date")
ids("stats", [], "queue", [str(T0)])
numbers("stats", ["q"], "date", ("-1",))

ids("workers", [], "worker")
case("worker.deregister", [], InvalidArgument, "worker", id="none")
ids("worker.deregister", ["w1"], "worker")
case("worker.forget", [], InvalidArgument, "worker", id="none")
case("worker.forget", ["w1", "w2"], InvalidArgument, "too many arguments", id="two")
ids("worker.forget", [], "worker")

case("await", [], InvalidArgument, "worker", id="missing")
case("await", ["w1"], InvalidArgument, "seconds", id="missing-seconds")
case("await", ["w1", "1"], InvalidArgument, "count", id="missing-count")
case("await", ["w1", "1", "1"], InvalidArgument, "queues", id="no-queues")
ids("await", [], "worker", ["1", "1", "q"])
ids("await", ["w1", "1", "1"], "queue")
ids("await", ["w1", "1", "1", "q"], "queue")
numbers("await", ["w1"], "seconds", ("0", "3601"), suffix=["1", "q"])
for value in ("0", "-1", "1.5", "x", "100001"):
    case("await", ["w1", "1", value, "q"], InvalidArgument, "count", id=f"count={value}")
case("complete.many", [], InvalidArgument, "worker", id="missing")
case("complete.many", ["w1"], InvalidArgument, "triples", id="no-jobs")
case("complete.many", ["w1", "running", "q"], InvalidArgument, "triples", id="not-triples")
ids("complete.many", [], "worker", ["running", "q", ""])
case("complete.many", ["w1", *(["running", "q", ""] * 1001)], TooLarge, "1000", id="too-many")
case("complete.pop", [], InvalidArgument, "worker", id="missing")
case("complete.pop", ["w1"], InvalidArgument, "queue", id="missing-queue")
case("complete.pop", ["w1", "q"], InvalidArgument, "count", id="missing-count")
case("complete.pop", ["w1", "q", "1"], InvalidArgument, "triples", id="no-jobs")
case("complete.pop", ["w1", "q", "1", "running", "q"], InvalidArgument, "triples", id="not-triples")
ids("complete.pop", [], "worker", ["q", "1", "running", "q", ""])
ids("complete.pop", ["w1"], "queue", ["1", "running", "q", ""])
for value in ("-1", "1.5", "x", "100001"):
    pop_args = ["w1", "q", value, "running", "q", ""]
    case("complete.pop", pop_args, InvalidArgument, "count", id=f"count={value}")
pop_args = ["w1", "q", "1", *(["running", "q", ""] * 1001)]
case("complete.pop", pop_args, TooLarge, "1000", id="too-many")
case("await.cancel", [], InvalidArgument, "worker", id="missing")
ids("await.cancel", [], "worker")
case("worker.register", [], InvalidArgument, "worker", id="missing")
ids("worker.register", [], "worker", ["{}"])
objects("worker.register", ["w9"], "info")
case("worker.register", ["w9", NESTED_101], InvalidArgument, "info", id="info-101-deep")
ids("worker.info", ["w1"], "worker")
case("worker.lease", [], InvalidArgument, "worker", id="missing")
ids("worker.lease", [], "worker", ["5"])
numbers("worker.lease", ["w1"], "seconds", ("0", "3601"))
case("worker.lease", ["w1", "5", "x"], InvalidArgument, "jids", id="jids-not-json")
case("worker.lease", ["w1", "5", '["a b"]'], InvalidArgument, "jids", id="jids-bad-id")
numbers("worker.lease", ["w1", "5", "[]"], "renewal", ("0", "1.5"), suffix=["0"])
case("worker.lease", ["w1", "5", "[]", "2"], InvalidArgument, "settled", id="no-settled")
for value in ("-1", "2", "3", "0.5", "x"):
    lease_args = ["w1", "5", "[]", "2", value]
    case("worker.lease", lease_args, InvalidArgument, "settled", id=f"settled={value}")
case("worker.lease", ["w1", "5", "", "2", "1"], InvalidArgument, "jids", id="numbers-no-jids")
case("worker.lease", ["w1", "5", "[]", "2", "1", "x"], InvalidArgument, "too many", id="extra")

RECUR = ["q", "new-rec", "K", "{}", "interval", "60", "0"]
for missing, name in enumerate(["queue", "jid", "klass", "data", "spec", "interval", "offset"]):
    case("recur", RECUR[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("recur", [], "queue", RECUR[1:])
ids("recur", RECUR[:1], "jid", RECUR[2:], jid=True)
case("recur", [RECUR[0], "r" * 246, *RECUR[2:]], TooLarge, "jid", id="jid-no-room")
ids("recur", RECUR[:2], "klass", RECUR[3:])
objects("recur", RECUR[:3], "data", RECUR[4:])
case("recur", [*RECUR[:4], "cron", *RECUR[5:]], InvalidArgument, "spec", id="spec-cron")
numbers("recur", RECUR[:5], "interval", ("0", "-60"), RECUR[6:])
numbers("recur", RECUR[:6], "offset", ("-1",))
case("recur", [*RECUR, "priority"], InvalidArgument, "priority", id="odd-options")
case("recur", [*RECUR, "bogus", "1"], InvalidArgument, "bogus", id="unknown-option")
for name, value in [
    ("priority", "1.5"),
    ("priority", "2000000"),
    ("retries", "-1"),
    ("backlog", "x"),
    ("tags", "x"),
    ("tags", '["a b"]'),
]:
    case("recur", [*RECUR, name, value], InvalidArgument, name, id=f"{name}={value}")
case("recur", [*RECUR, "tags", TOO_MANY_TAGS], TooLarge, "tags", id="tags-65")
for command in ("unrecur", "recur.get", "recur.update", "recur.tag", "recur.untag"):
    case(command, [], InvalidArgument, "jid", id="missing")
    ids(command, [], "jid", jid=True)
case("recur.update", ["rec", "priority"], InvalidArgument, "priority", id="odd-options")
case("recur.update", ["rec", "state", "x"], InvalidArgument, "state", id="unknown-option")
for name, value in [
    ("priority", "x"),
    ("priority", "1.5"),
    ("interval", "0"),
    ("interval", "-1"),
    ("interval", "nan"),
    ("retries", "-1"),
    ("backlog", "1.5"),
    ("data", "[]"),
    ("data", "x"),
    ("queue", "a b"),
    ("queue", LONG_ID),
    ("klass", ""),
]:
    error = TooLarge if value == LONG_ID else InvalidArgument
    case("recur.update", ["rec", name, value], error, name, id=f"{name}={value[:12]!r}")
case("recur.update", ["rec", "priority", "1", "data", BIG], TooLarge, "data", id="big-data")
case("recur.update", ["nope", "priority", "1"], JobNotFound, "nope", id="unknown")
for command in ("recur.tag", "recur.untag"):
    ids(command, ["rec"], "tag")
    case(command, ["nope", "t"], JobNotFound, "nope", id="unknown")
case("recur.tag", ["rec", *json.loads(TOO_MANY_TAGS)], TooLarge, "tags", id="65")

RUN = ["run-2", '{"flow": "f"}']
JOB = {"jid": "f-1", "queue": "q", "klass": "K", "data": "{}"}
case("flow.submit", [], InvalidArgument, "run_id", id="missing")
ids("flow.submit", [], "run_id", [RUN[1], json.dumps([JOB])], named=True)
objects("flow.submit", RUN[:1], "run", [json.dumps([JOB])], big=BIG_RUN)
case("flow.submit", ["run-2", "{}", json.dumps([JOB])], InvalidArgument, "flow", id="no-flow")
case(
    "flow.submit",
    ["run-2", '{"flow": 1}', json.dumps([JOB])],
    InvalidArgument,
    "flow",
    id="flow-number",
)
case(
    "flow.submit",
    ["run-2", '{"flow": "a b"}', json.dumps([JOB])],
    InvalidArgument,
    "flow",
    id="flow-space",
)
case("flow.submit", RUN, InvalidArgument, "jobs", id="missing-jobs")
for value in ["[]", "{}", '{"a": 1}', "x", DEEP_ARRAY, "[1]", '["x"]']:
    case("flow.submit", [*RUN, value], InvalidArgument, "job", id=f"jobs={value[:12]}")
for field, value in [
    ("jid", "a b"),
    ("jid", "x-history"),
    ("queue", ""),
    ("klass", None),
    ("data", "[1]"),
    ("data", 5),
    ("delay", -1),
    ("priority", 1.5),
    ("retries", -1),
    ("tags", ["a b"]),
    ("depends", ["unknown-job"]),
    ("depends", ["f-1"]),
]:
    spec = {**JOB, field: value}
    if value is None:
        del spec[field]
    case(
        "flow.submit",
        [*RUN, json.dumps([spec])],
        InvalidArgument,
        field,
        id=f"job-{field}={value!r}"[:40],
    )
case("flow.submit", [*RUN, json.dumps([JOB, JOB])], InvalidArgument, "f-1", id="twice")
# The fields the jobs share, sent once: refused as a job's own would be, naming where.
OWN = {"jid": "f-1", "data": "{}"}
for shared, names in [
    ({"queue": "a b"}, 'shared(): Arg "queue"'),
    ({"queue": "q", "klass": "K", "retries": -1}, 'shared(): Arg "retries"'),
    ({"queue": "q", "klass": "K", "trigger": "sometimes"}, 'shared(): Arg "trigger"'),
    ({"queue": "q", "klass": "K", "jid": "f-2"}, 'shared(): field "jid"'),
    ({"queue": "q", "klass": "K", "notify": "never"}, 'shared(): Arg "notify"'),
    ({"klass": "K"}, 'jobs[1](): Arg "queue" missing'),
    ([1], 'its "shared" is not a JSON object'),
]:
    case(
        "flow.submit",
        [*RUN, json.dumps({"shared": shared, "jobs": [OWN]})],
        InvalidArgument,
        names,
        id=f"shared={json.dumps(shared)[:24]}",
    )
for value, names in [
    ('{"jobs": {"a": 1}}', '"jobs" is not a JSON array'),
    ('{"jobs": [], "shared": {"queue": "q"}}', "at least one job"),
    ('{"job": []}', 'unknown field "job"'),
]:
    case("flow.submit", [*RUN, value], InvalidArgument, names, id=f"jobs={value[:16]}")
case(
    "flow.submit",
    [*RUN, json.dumps([{**JOB, "jid": "waiting"}])],
    InvalidArgument,
    "waiting",
    id="job-exists",
)
case("run.get", [], InvalidArgument, "run_id", id="missing")
ids("run.get", [], "run_id", named=True)
for value, error in BAD_IDS[1:]:  # '' means every flow
    case("runs", [value], error, "flow", id=f"flow={value[:12]!r}")
case(
    "flow.submit",
    ["x-jobs", *RUN[1:], json.dumps([JOB])],
    InvalidArgument,
    "run_id",
    id="run_id-reserved",
)
case("run.get", ["x-jobs"], InvalidArgument, "run_id", id="reserved")
for value in ["-1", "x", "1e300"]:
    case("run.get", ["r", value, "10"], InvalidArgument, "offset", id=f"offset={value}")
for value in [*BAD_COUNTS, "0", "1001"]:
    case("run.get", ["r", "0", value], InvalidArgument, "count", id=f"count={value}")
case("run.get", ["r", "0", "10", "x"], InvalidArgument, "too many", id="too-many")
for value in ["-1", "x", "1e300"]:
    case("runs", ["", value], InvalidArgument, "offset", id=f"offset={value}")
for value in BAD_COUNTS:
    case("runs", ["", "0", value], InvalidArgument, "count", id=f"count={value}")

for value, error in BAD_IDS[1:]:
    case("runs.statuses", [value], error, "flow", id=f"flow={value[:12]!r}")
case("runs.statuses", ["", "-1"], InvalidArgument, "offset", id="offset=-1")
case("runs.statuses", ["", "0", "1001"], InvalidArgument, "count", id="count=1001")
case("runs.statuses", ["", "0", "1", "x"], InvalidArgument, "too many", id="extra")

# step logs (the full set of log.append's cases is in test_logs.py)
case("log.append", [], InvalidArgument, "no jobs", id="missing")
ids("log.append", [], "jid", ["1", "0", "0"], jid=True)
case("log.append", ["waiting", "0", "0", "0"], InvalidArgument, "attempt", id="attempt=0")
case(
    "log.append",
    ["waiting", "1", "0", "1", T0, "stdin", "", "x"],
    InvalidArgument,
    "stream",
    id="stream",
)
case("log.get", [], InvalidArgument, "jid", id="missing")
ids("log.get", [], "jid", jid=True)
case("log.get", ["waiting", "-1"], InvalidArgument, "attempt", id="attempt=-1")
case("log.get", ["waiting", "", "0", "1001"], InvalidArgument, "count", id="count=1001")
# Offsets and counts reach Redis as integers, and the stored counters are read back by pattern.
case("log.get", ["running", "1", "1e308"], InvalidArgument, "offset", id="offset=1e308")
for value in ["1e15", "2147483648"]:
    log_args = ["running", "1", value, "1", T0, "stdout", "", "x"]
    case("log.append", log_args, InvalidArgument, "dropped", id=f"dropped={value}")

for command in ("run.retry", "run.cancel"):
    case(command, [], InvalidArgument, "run_id", id="missing")
    ids(command, [], "run_id")
    case(command, ["no-such-run"], JobNotFound, "no-such-run", id="unknown")
case("run.retry", ["r", "a b"], InvalidArgument, "target", id="target")
case("run.retry", ["r", "a", "b"], InvalidArgument, "too many", id="extra")
case("run.read", [], InvalidArgument, "run_id", id="missing")
ids("run.read", [], "run_id")
case("run.read", ["r", "x"], InvalidArgument, "limit", id="limit=x")
case("run.read", ["r", "1001"], InvalidArgument, "limit", id="limit=1001")
case("run.read", ["r", "1", "[1]"], InvalidArgument, "offsets", id="offsets-list")
case("run.read", ["r", "1", '{"a": -1}'], InvalidArgument, "offsets.a", id="offsets-negative")
case("run.read", ["r", "1", "{}", "x"], InvalidArgument, "too many", id="extra")
case("run.job", [], InvalidArgument, "run_id", id="missing")
ids("run.job", [], "run_id", ["r:a"])
case("run.job", ["r"], InvalidArgument, "jid", id="jid-missing")
ids("run.job", ["r"], "jid", jid=True)
case("run.job", ["r", "r:a", "x"], InvalidArgument, "too many", id="extra")
for _counts in ("run.counts", "run.recount"):
    case(_counts, [], InvalidArgument, "run_id", id="missing")
    ids(_counts, [], "run_id")
    case(_counts, ["r", "x"], InvalidArgument, "too many", id="extra")
case("run.rerun", [], InvalidArgument, "run_id", id="missing")
ids("run.rerun", [], "run_id", ["a"])
case("run.rerun", ["r"], InvalidArgument, "step", id="missing-step")
case("run.rerun", ["r", "a", "yes"], InvalidArgument, "downstream", id="downstream")
case("run.rerun", ["r", "a", "1", "x y"], InvalidArgument, "jid", id="item")
case("run.rerun", ["r", "a", "1", "x", "y"], InvalidArgument, "too many", id="extra")
case("run.rerun", ["no-such-run", "a"], JobNotFound, "no-such-run", id="unknown")
# sub-flow steps (their engine-level behaviour in test_subflow.py)
case("subflow.wait", [], InvalidArgument, "jid", id="missing")
case("subflow.wait", ["j", "w"], InvalidArgument, "queue", id="missing-queue")
case("subflow.wait", ["j", "w", "q"], InvalidArgument, "child_run_id", id="missing-child")
case("subflow.wait", ["j", "w", "q", "x-jobs"], InvalidArgument, "child_run_id", id="reserved")
case("subflow.wait", ["j", "w", "q", "c", "{}"], InvalidArgument, "run and jobs", id="half")
case("subflow.wait", ["no-such", "w", "q", "c"], JobNotFound, "no-such", id="unknown-job")
for command in ("put", "requeue"):
    case(command, [*PUT, "trigger", "sometimes"], InvalidArgument, "trigger", id="bad-trigger")
case(
    "flow.submit",
    [*RUN, json.dumps([{**JOB, "trigger": "never"}])],
    InvalidArgument,
    "trigger",
    id="bad-trigger",
)

# -- schedules, scheduler services, maintenance (ours) --------------------------------------

DEFINITION = {
    "flow": "f",
    "cron": ["* * * * *"],
    "timezone": "UTC",
    "overlap": "skip",
    "catchup": "none",
    "hash": "h1",
}
REGISTER = ["sched", json.dumps(DEFINITION), "flow: f", str(T0 + 60), "", ""]
TOO_MANY = "too many arguments"
for missing, name in enumerate(["name", "definition", "source"]):
    case("schedule.register", REGISTER[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("schedule.register", [], "name", REGISTER[1:])
objects("schedule.register", REGISTER[:1], "definition", REGISTER[2:])
for field, value in [
    ("flow", None),
    ("flow", "a b"),
    ("cron", []),
    ("cron", "* * * * *"),
    ("cron", [1]),
    ("cron", [""]),
    ("timezone", None),
    ("overlap", "never"),
    ("catchup", None),
    ("paused", "yes"),
    ("hash", None),
    ("hash", "a b"),
]:
    definition = {**DEFINITION, field: value}
    if value is None:
        del definition[field]
    case(
        "schedule.register",
        [REGISTER[0], json.dumps(definition), *REGISTER[2:]],
        InvalidArgument,
        field,
        id=f"definition-{field}={value!r}",
    )
case(
    "schedule.register",
    [*REGISTER[:2], "s" * (4 * 1024 * 1024 + 1), *REGISTER[3:]],
    TooLarge,
    "source",
    id="big-source",
)
for position, name in [(3, "next"), (5, "expected_next")]:
    for value in ["x", "nan", "-1", "inf"]:
        args = list(REGISTER)
        args[position] = value
        case("schedule.register", args, InvalidArgument, name, id=f"{name}={value}")
case(
    "schedule.register",
    [*REGISTER[:4], "a b", ""],
    InvalidArgument,
    "expected_hash",
    id="expected_hash",
)
case("schedule.register", [*REGISTER, "extra"], InvalidArgument, TOO_MANY, id="too-many")

for command in (
    "schedule.get",
    "schedule.pause",
    "schedule.unregister",
    "schedule.resume",
    "schedule.trigger",
):
    case(command, [], InvalidArgument, "name", id="missing")
    ids(command, [], "name")
for value in ["-1", "x", "101"]:
    case("schedule.get", ["sched", value], InvalidArgument, "skips", id=f"skips={value}")
for value in ["-1", "x", "1e300"]:
    case("schedule.list", [value], InvalidArgument, "offset", id=f"offset={value}")
    case("schedule.due", [value], InvalidArgument, "offset", id=f"offset={value}")
for value in ["-1", "x", "1001"]:
    case("schedule.list", ["0", value], InvalidArgument, "count", id=f"count={value}")
for value in ["0", "x", "10001"]:
    case("schedule.due", ["0", value], InvalidArgument, "limit", id=f"limit={value}")
case("schedule.pause", ["sched", "n" * 1025], TooLarge, "note", id="big-note")
case("schedule.pause", ["nope"], JobNotFound, "nope", id="unknown")
case("schedule.pause", ["sched", "note", "extra"], InvalidArgument, TOO_MANY, id="too-many")
RESUME = ["sched", str(T0 + 60), str(T0 + 120), "[]"]
case(
    "schedule.resume",
    ["sched", "x", *RESUME[2:]],
    InvalidArgument,
    "expected_next",
    id="expected_next",
)
case("schedule.resume", [*RESUME[:2], "x", "[]"], InvalidArgument, "next", id="next")
SKIP = {"first": T0, "last": T0 + 60, "count": 2, "reason": "paused"}
for name, skips, error in [
    ("skips", "", InvalidArgument),
    ("skips", "x", InvalidArgument),
    ("skips", '{"a": 1}', InvalidArgument),
    ("skips[1]", "[1]", InvalidArgument),
    ("first", json.dumps([{**SKIP, "first": "x"}]), InvalidArgument),
    ("first", json.dumps([{**SKIP, "first": -1}]), InvalidArgument),
    ("last", json.dumps([{**SKIP, "last": T0 - 1}]), InvalidArgument),
    ("count", json.dumps([{**SKIP, "count": 0}]), InvalidArgument),
    ("count", json.dumps([{**SKIP, "count": 1.5}]), InvalidArgument),
    ("reason", json.dumps([{**SKIP, "reason": None}]), InvalidArgument),
    ("reason", json.dumps([{**SKIP, "reason": "r" * 1025}]), TooLarge),
    ("skips", json.dumps([SKIP] * 1001), TooLarge),
]:
    case("schedule.resume", [*RESUME[:3], skips], error, name, id=f"skips-{name}-{skips[:20]}")
case("schedule.resume", ["nope", *RESUME[1:]], JobNotFound, "nope", id="unknown")
case("schedule.resume", [*RESUME, "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("schedule.unregister", ["sched", "a b"], InvalidArgument, "expected_hash", id="hash")
case("schedule.unregister", ["sched", "h1", "extra"], InvalidArgument, TOO_MANY, id="too-many")

FIRE = [
    "sched",
    "h1",
    str(T0 + 60),
    str(T0 + 120),
    "fire",
    str(T0 + 60),
    "[]",
    "sched-run-1",
    RUN[1],
    json.dumps([{**JOB, "jid": "s-1"}]),
]
for missing, name in enumerate(
    ["name", "hash", "expected", "next", "action", "tick", "skips", "run_id", "run", "jobs"]
):
    if name != "next":  # '' means no fire time left
        case("schedule.fire", FIRE[:missing], InvalidArgument, name, id=f"missing-{name}")
for position, name, values in [
    (1, "hash", ["a b"]),
    (2, "expected", ["x", "-1", "nan"]),
    (3, "next", ["x", "-1"]),
    (4, "action", ["run", "FIRE"]),
    (5, "tick", ["x", "-1"]),
    (6, "skips", ["x", "[1]"]),
    (7, "run_id", ["a b", "x-jobs"]),
    (8, "run", ["x", "{}"]),
    (9, "job", ["[]", "[1]"]),
    (10, "cancel_run_id", ["a b"]),
]:
    for value in values:
        args = [*FIRE, ""]
        args[position] = value
        case("schedule.fire", args, InvalidArgument, name, id=f"{name}={value}")
case(
    "schedule.fire",
    [*FIRE[:4], "buffered", *FIRE[5:]],
    InvalidArgument,
    "next",
    id="buffered-with-next",
)
case(
    "schedule.fire",
    [*FIRE[:4], "skip", FIRE[5], "[]", "run"],
    InvalidArgument,
    "skip",
    id="skip-with-run",
)
case("schedule.fire", [*FIRE, "", "extra"], InvalidArgument, TOO_MANY, id="too-many")
TRIGGER = ["sched", "manual-1", RUN[1], json.dumps([{**JOB, "jid": "m-1"}])]
case("schedule.trigger", TRIGGER[:1], InvalidArgument, "run_id", id="missing-run_id")
case("schedule.trigger", [*TRIGGER[:3], "[]"], InvalidArgument, "job", id="no-jobs")
case(
    "schedule.trigger",
    [*TRIGGER[:3], json.dumps([{**JOB, "jid": "waiting"}])],
    InvalidArgument,
    "waiting",
    id="job-exists",
)
case("schedule.trigger", ["nope", *TRIGGER[1:]], JobNotFound, "nope", id="unknown")
case("schedule.trigger", [*TRIGGER, "extra"], InvalidArgument, TOO_MANY, id="too-many")

case("scheduler.ping", [], InvalidArgument, "id", id="missing")
ids("scheduler.ping", [], "id", ["{}"])
objects("scheduler.ping", ["s1"], "info")
case("scheduler.ping", ["s1", NESTED_101], InvalidArgument, "info", id="info-101-deep")
case("scheduler.ping", ["s1", "{}", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("scheduler.forget", [], InvalidArgument, "id", id="missing")
ids("scheduler.forget", [], "id")
for value in ["0", "x", "1001", "1.5"]:
    case("schedulers", [value], InvalidArgument, "count", id=f"count={value}")

CATALOG = ["pipelines", "d1", "/srv/pipelines", '{"a.yaml": "version: 1"}']
case("catalog.sync", [], InvalidArgument, "source", id="missing")
ids("catalog.sync", [], "source", CATALOG[1:])
ids("catalog.sync", CATALOG[:1], "digest", CATALOG[2:])
case("catalog.sync", CATALOG[:3], InvalidArgument, "files", id="files-missing")
for value in ["{", "[]", '"text"', "1"]:
    case("catalog.sync", [*CATALOG[:3], value], InvalidArgument, "files", id=f"files={value}")
case("catalog.sync", [*CATALOG[:3], '{"a.yaml": 7}'], InvalidArgument, "a.yaml", id="not-text")
case("catalog.sync", [*CATALOG[:3], '{"": "x"}'], InvalidArgument, "path", id="empty-path")
case(
    "catalog.sync",
    [*CATALOG[:3], json.dumps({"big.yaml": "x" * 1_048_577})],
    TooLarge,
    "big.yaml",
    id="text-too-large",
)
case("catalog.sync", [*CATALOG, "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("catalog.list", ["extra"], InvalidArgument, TOO_MANY, id="too-many")
case("catalog.sources", ["extra"], InvalidArgument, TOO_MANY, id="too-many")
case("catalog.remove", [], InvalidArgument, "source", id="missing")
ids("catalog.remove", [], "source")
case("catalog.remove", ["nope"], JobNotFound, "nope", id="unknown")
case("catalog.remove", ["nope", "extra"], InvalidArgument, TOO_MANY, id="too-many")

case("maintain", [], InvalidArgument, "queue", id="missing")
ids("maintain", [], "queue")
for value in ["0", "x", "10001", "1.5"]:
    case("maintain", ["q", value], InvalidArgument, "limit", id=f"limit={value}")
    case("maintain.retention", [value], InvalidArgument, "limit", id=f"limit={value}")
case("maintain", ["q", "10", "extra"], InvalidArgument, TOO_MANY, id="too-many")
for value in ["-1", "x", "1e300"]:
    case("maintain.retention", ["10", value], InvalidArgument, "offset", id=f"offset={value}")
case("maintain.retention", ["10", "0", "extra"], InvalidArgument, TOO_MANY, id="too-many")

# waits (ours): a signal to a job that awaits none, and the sweep's bounds
case("wait.signal", [], InvalidArgument, "jid", id="missing")
ids("wait.signal", [], "jid", ["{}"], jid=True)
objects("wait.signal", ["waiting"], "data")
case("wait.signal", ["waiting", "{}", "x" * 300], TooLarge, "by", id="by-too-long")
case("wait.signal", ["waiting", "{}", "ada", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("wait.signal", ["waiting", "{}"], WrongState, "not a wait", id="not-a-wait")
case("wait.signal", ["depends", "{}"], WrongState, "not a wait", id="depends")
case("wait.signal", ["no-such-job", "{}"], JobNotFound, "no-such-job", id="no-job")
for value in ["0", "x", "10001", "1.5"]:
    case("wait.sweep", [value], InvalidArgument, "limit", id=f"limit={value}")
case("wait.sweep", ["10", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("wait.get", [], InvalidArgument, "jid", id="missing")
ids("wait.get", [], "jid", jid=True)
case("wait.get", ["waiting", "extra"], InvalidArgument, TOO_MANY, id="too-many")
for value in ["0", "x", "10001", "1.5"]:
    case("deadline.sweep", [value], InvalidArgument, "limit", id=f"limit={value}")
case("deadline.sweep", ["10", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("deadline.count", ["extra"], InvalidArgument, TOO_MANY, id="too-many")
case("job.explain", [], InvalidArgument, "jid", id="missing")
ids("job.explain", [], "jid", jid=True)
case("job.explain", ["waiting", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("cache.use", [], InvalidArgument, "jid", id="missing")
case("cache.use", ["waiting", "w", "q", "k", "x", "1"], InvalidArgument, "ttl", id="ttl")
case("cache.use", ["waiting", "w", "q", "k", "60", "0"], InvalidArgument, "attempt", id="attempt")
case("cache.use", ["waiting", "w", "q", "k", "60", "1", ""], InvalidArgument, "upstream", id="up")
case("cache.list", ["-1"], InvalidArgument, "offset", id="offset")
case("cache.list", ["0", "0"], InvalidArgument, "count", id="count")
case("cache.list", ["1e308"], InvalidArgument, "offset", id="offset=1e308")
# A ttl the entry's key cannot expire after (EXPIRE takes milliseconds in 64 bits).
for value in ["1e16", "1e308"]:
    cache_args = ["running", "w1", "q", "k", value, "1"]
    case("cache.use", cache_args, InvalidArgument, "ttl", id=f"ttl={value}")
case("cache.clear", [""], InvalidArgument, "key", id="empty-key")

# -- Tarantool-queue extensions and unique puts (ours) ----------------------------------------

for command in ("put", "requeue"):
    for name in ("ttl", "ttr"):
        for value in ["0", "-1", "x", "nan", "inf"]:
            case(command, [*PUT, name, value], InvalidArgument, name, id=f"{name}={value}")
    for value, error in BAD_IDS[1:]:  # '' means not given
        case(
            command,
            [*PUT, "concurrency_key", value],
            error,
            "concurrency_key",
            id=f"concurrency_key={value[:12]!r}",
        )
        case(command, [*PUT, "throttle", value], error, "throttle", id=f"throttle={value[:12]!r}")
    for value in ["0", "-1", "1.5", "x", "100001"]:
        case(
            command,
            [*PUT, "concurrency_key", "k", "concurrency_limit", value],
            InvalidArgument,
            "concurrency_limit",
            id=f"concurrency_limit={value}",
        )
    case(
        command,
        [*PUT, "concurrency_limit", "2"],
        InvalidArgument,
        "concurrency_key",
        id="limit-without-key",
    )
    for value in ["2", "yes", "true", "-1"]:
        case(command, [*PUT, "unique", value], InvalidArgument, "unique", id=f"unique={value}")
for field, value in [
    ("ttl", 0),
    ("ttr", "x"),
    ("concurrency_key", "a b"),
    ("concurrency_limit", 0),
    ("throttle", "a b"),
]:
    spec = {**JOB, field: value}
    if field == "concurrency_limit":
        spec["concurrency_key"] = "k"
    case(
        "flow.submit",
        [*RUN, json.dumps([spec])],
        InvalidArgument,
        field,
        id=f"job-{field}={value!r}",
    )

TOUCH = ["running", "w1", "10"]
for missing, name in enumerate(["jid", "worker", "increment"]):
    case("touch", TOUCH[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("touch", [], "jid", TOUCH[1:], jid=True)
ids("touch", TOUCH[:1], "worker", TOUCH[2:])
numbers("touch", TOUCH[:2], "increment", ("-1",))
case("touch", [*TOUCH, "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("touch", ["nope", "w1", "10"], JobNotFound, "nope", id="unknown-job")
case("touch", ["waiting", "w1", "10"], WrongState, "waiting", id="waiting")
case("touch", ["running", "w2", "10"], LockLost, "running", id="other-worker")

BURY = ["waiting", "w1", "why"]
for missing, name in enumerate(["jid", "worker"]):
    case("bury", BURY[:missing], InvalidArgument, name, id=f"missing-{name}")
ids("bury", [], "jid", BURY[1:], jid=True)
ids("bury", BURY[:1], "worker", BURY[2:])
case("bury", [*BURY[:2], BIG_TEXT], TooLarge, "message", id="big-message")
case("bury", [*BURY, "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("bury", ["nope", "w1"], JobNotFound, "nope", id="unknown-job")
for state in ("depends", "complete", "failed", "buried"):
    case("bury", [state, "w1"], WrongState, state, id=state)
case("bury", ["running", "w2"], LockLost, "running", id="other-worker")
case("kick", [], InvalidArgument, "queue", id="missing")
ids("kick", [], "queue", ["1"])
for value in BAD_COUNTS:
    case("kick", ["q", value], InvalidArgument, "count", id=f"count={value}")
case("kick", ["q", "1", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("kick.jobs", [], InvalidArgument, "jids", id="missing")
ids("kick.jobs", [], "jid", jid=True)
ids("kick.jobs", ["buried"], "jid", jid=True)  # a bad second jid: the first is not kicked
case("kick.jobs", ["nope"], JobNotFound, "nope", id="unknown-job")
case("kick.jobs", ["buried", "nope"], JobNotFound, "nope", id="unknown-second")
for state in ("waiting", "scheduled", "depends", "running", "failed", "complete"):
    case("kick.jobs", ["buried", state], WrongState, f"{state} is not buried: {state}", id=state)
case("run.kick", [], InvalidArgument, "run_id", id="missing")
ids("run.kick", [], "run_id", ["a"])
case("run.kick", ["r"], InvalidArgument, "step", id="missing-step")
ids("run.kick", ["r"], "step")
case("run.kick", ["r", "a", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("run.kick", ["no-such-run", "a"], JobNotFound, "no-such-run", id="unknown")

case("throttle.set", [], InvalidArgument, "name", id="missing")
case("throttle.set", ["th"], InvalidArgument, "limit", id="missing-limit")
ids("throttle.set", [], "name", ["1"])
for value in ["-1", "1.5", "x", "nan", "1e300"]:
    case("throttle.set", ["th", value], InvalidArgument, "limit", id=f"limit={value}")
case("throttle.set", ["th", "1", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("throttle.unset", [], InvalidArgument, "name", id="missing")
ids("throttle.unset", [], "name")
case("throttle.unset", ["th", "extra"], InvalidArgument, TOO_MANY, id="too-many")
ids("throttle.get", ["th"], "name")

case("delete", [], InvalidArgument, "jid", id="none")
ids("delete", [], "jid", jid=True)
ids("delete", ["scheduled"], "jid", jid=True)
case("delete", ["scheduled", "running"], WrongState, "running", id="running")
case("delete", ["waiting"], HasDependents, "depends", id="has-dependents")
case("queue.truncate", [], InvalidArgument, "queue", id="missing")
ids("queue.truncate", [], "queue")
for value in ["0", "x", "1.5", "100001"]:
    case("queue.truncate", ["q3", value], InvalidArgument, "limit", id=f"limit={value}")
case("queue.truncate", ["q3", "10", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("queue.truncate", ["q"], WrongState, "running", id="running")
case("queue.truncate", ["q4"], HasDependents, "q4", id="dependent-elsewhere")
case("queue.drop", [], InvalidArgument, "queue", id="missing")
ids("queue.drop", [], "queue")
case("queue.drop", ["q3", "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("queue.drop", ["nope"], JobNotFound, "nope", id="unknown")
case("queue.drop", ["q3"], WrongState, "buried", id="not-empty")
case("queue.drop", ["q"], WrongState, "running", id="running")
case("queue.stats", [], InvalidArgument, "queue", id="missing")
ids("queue.stats", [], "queue")
numbers("queue.stats", ["q"], "date", ("-1",))
case("queue.stats", ["q", str(T0), "extra"], InvalidArgument, TOO_MANY, id="too-many")
case("jobs", ["buried"], InvalidArgument, "queue", id="buried-missing-queue")

# -- queue counts, the worker registry, bounded failures, the consistency check ------

case("queue.counts", [], InvalidArgument, "queue", id="none")
ids("queue.counts", ["q"], "queue")
case("queue.counts", [f"q{n}" for n in range(101)], TooLarge, "queues", id="101")
for value, error in BAD_IDS[1:]:  # '' means every queue
    case("worker.list", [value], error, "queue", id=f"queue={value[:12]!r}")
case("worker.list", ["q", "extra"], InvalidArgument, TOO_MANY, id="too-many")
ids("failed.dropped", ["boom"], "group")
case("config.set", ["max-failed-per-group", "1.5"], InvalidArgument, "value", id="bound-fraction")
case("config.set", ["max-failed-per-group", "-1"], InvalidArgument, "value", id="bound-negative")

case("doctor.names", [], InvalidArgument, "what", id="missing")
case("doctor.names", ["jobs"], InvalidArgument, "what", id="unknown")
for value in ["-1", "x", "1e300"]:
    case("doctor.names", ["queues", value], InvalidArgument, "offset", id=f"offset={value}")
for value in ["0", "x", "1001", "1.5"]:
    case("doctor.names", ["queues", "0", value], InvalidArgument, "count", id=f"count={value}")
case("doctor.names", ["queues", "0", "10", "x"], InvalidArgument, TOO_MANY, id="too-many")
case("doctor.index", [], InvalidArgument, "index", id="missing")
case("doctor.index", ["tags", "q"], InvalidArgument, "index", id="unknown")
ids("doctor.index", ["work"], "name")
ids("doctor.index", ["failed"], "name")
case("doctor.index", ["completed", "x"], InvalidArgument, "name", id="completed-name")
for value in ["-1", "x"]:
    case("doctor.index", ["locks", "q", value], InvalidArgument, "offset", id=f"offset={value}")
for value in ["0", "1001"]:
    case("doctor.index", ["locks", "q", "0", value], InvalidArgument, "count", id=f"count={value}")
case("doctor.index", ["locks", "q", "0", "10", "x"], InvalidArgument, TOO_MANY, id="too-many")
case("doctor.jobs", [], InvalidArgument, "jid", id="none")
ids("doctor.jobs", ["waiting"], "jid", jid=True)
case("doctor.jobs", [f"j{n}" for n in range(1001)], TooLarge, "jids", id="1001")
REPAIR = ["orphan-lock", "locks", "q", "running"]
for missing, name in enumerate(["kind", "index", "name", "jid"]):
    case("doctor.repair", REPAIR[:missing], InvalidArgument, name, id=f"missing-{name}")
case("doctor.repair", ["fixed", *REPAIR[1:]], InvalidArgument, "kind", id="unknown-kind")
case(
    "doctor.repair",
    ["orphan-lock", "work", "q", "running"],
    InvalidArgument,
    "index",
    id="index-of-another-kind",
)
ids("doctor.repair", REPAIR[:2], "name", REPAIR[3:])
ids("doctor.repair", REPAIR[:3], "jid", jid=True)
case("doctor.repair", [*REPAIR, "wet"], InvalidArgument, "dry", id="dry")
case("doctor.repair", [*REPAIR, "dry", "x"], InvalidArgument, TOO_MANY, id="too-many")
case(
    "doctor.repair",
    ["unindexed", "job", "x", "waiting"],
    InvalidArgument,
    "name",
    id="job-with-name",
)
case(
    "doctor.repair", ["half-edge", "job", "a b", "waiting"], InvalidArgument, "name", id="edge-name"
)
case(
    "doctor.repair",
    ["failure-group", "failures", "g", "waiting"],
    InvalidArgument,
    "jid",
    id="group-with-jid",
)
case("doctor.repair", ["run-counts", "run", "r", "x"], InvalidArgument, "jid", id="run-with-jid")
case("doctor.repair", ["run-counts", "run", "a/b"], InvalidArgument, "name", id="run-name")
case("doctor.repair", ["run-counts", "job", "r", "x"], InvalidArgument, "index", id="run-index")
case(
    "doctor.repair",
    ["missing-job", "completed", "x", "waiting"],
    InvalidArgument,
    "name",
    id="completed-name",
)

# Backfills (commands/backfill.lua).
BF_RECORD = json.dumps({"flow": "f", "definition": {}, "hash": "h"})
BF = ["bf-1", BF_RECORD, "flow text", "[1]", '["f@1"]']
ids("backfill.create", [], "id", BF[1:])
case("backfill.create", ["bf-ticks", *BF[1:]], InvalidArgument, "reserved", id="id-suffix")
objects("backfill.create", BF[:1], "record", BF[2:])
for record, names in [
    ({"definition": {}, "hash": "h"}, "record.flow"),
    ({"flow": "a b", "definition": {}, "hash": "h"}, "record.flow"),
    ({"flow": "f", "hash": "h"}, "record.definition"),
    ({"flow": "f", "definition": {}}, "record.hash"),
    ({"flow": "f", "definition": {}, "hash": "h", "max_active": -1}, "max_active"),
    ({"flow": "f", "definition": {}, "hash": "h", "flow_max": 10001}, "flow_max"),
    ({"flow": "f", "definition": {}, "hash": "h", "file": 7}, "record.file"),
    ({"flow": "f", "definition": {}, "hash": "h", "params": []}, "record.params"),
    ({"flow": "f", "definition": {}, "hash": "h", "params": "x"}, "record.params"),
]:
    case("backfill.create", [BF[0], json.dumps(record), *BF[2:]], InvalidArgument, names)
case("backfill.create", [*BF[:2], "", *BF[3:]], InvalidArgument, "source", id="no-source")
for ticks, run_ids, error, names in [
    ("[]", "[]", InvalidArgument, "at least one tick"),
    ("{}", "[]", InvalidArgument, "tick"),
    ('["x"]', '["f@1"]', InvalidArgument, "ticks[1]"),
    ("[-1]", '["f@1"]', InvalidArgument, "ticks[1]"),
    ("[2, 1]", '["f@2", "f@1"]', InvalidArgument, "ascending"),
    (json.dumps(list(range(1, 10_002))), "[]", TooLarge, "ticks"),
    ("[1]", "[]", InvalidArgument, "run_ids"),
    ("[1]", "[1]", InvalidArgument, "run_ids[1]"),
    ("[1]", '["a b"]', InvalidArgument, "run_ids[1]"),
    ("[1]", '["x-jobs"]', InvalidArgument, "run_ids[1]"),
]:
    case("backfill.create", [*BF[:3], ticks, run_ids], error, names, id=f"ticks={ticks[:12]}")
for command in ("backfill.get", "backfill.cancel"):
    ids(command, [], "id")
case("backfill.cancel", ["no-such-backfill"], JobNotFound, "no-such-backfill", id="missing")
case("backfill.list", ["-1"], InvalidArgument, "offset", id="offset=-1")
case("backfill.list", ["0", "1001"], InvalidArgument, "count", id="count=1001")
numbers("backfill.due", [], "count", ("0", "1001", "1.5"))
for value, error in BAD_IDS[1:]:  # '' is every active backfill
    case("backfill.due", ["10", value], error, "id", id=f"id={value[:12]!r}")
BF_RUN = json.dumps({"flow": "f", "tick": 1})
BF_JOBS = json.dumps([{"jid": "f@1:a", "queue": "q", "klass": "K", "data": "{}"}])
ids("backfill.submit", ["bf-1", "0"], "run_id", [BF_RUN, BF_JOBS])
objects("backfill.submit", ["bf-1", "0", "f@1"], "run", [BF_JOBS], big=BIG_RUN)
ids("backfill.submit", [], "id", ["0", "f@1", BF_RUN, BF_JOBS])
numbers("backfill.submit", ["bf-1"], "index", ("-1", "0.5"), ["f@1", BF_RUN, BF_JOBS])
case("backfill.submit", ["nope", "0", "f@1", BF_RUN, BF_JOBS], JobNotFound, "nope", id="missing")
ids("backfill.resume", ["bf-1", "0"], "run_id")
case("backfill.resume", ["bf-1", "0", "x-jobs"], InvalidArgument, "-jobs", id="run_id-suffix")
ids("backfill.resume", [], "id", ["0", "f@1"])
numbers("backfill.resume", ["bf-1"], "index", ("-1", "0.5"), ["f@1"])
case("backfill.resume", ["bf-1", "0", "f@1", "x"], InvalidArgument, "too many", id="too-many")
case("backfill.resume", ["nope", "0", "f@1"], JobNotFound, "nope", id="missing")
ids("backfill.skip", [], "id", ["0", "why"])
numbers("backfill.skip", ["bf-1"], "index", ("-1",), ["why"])
case("backfill.skip", ["bf-1", "0", ""], InvalidArgument, "reason", id="no-reason")
case("backfill.skip", ["bf-1", "0", "r" * 1025], TooLarge, "reason", id="long-reason")
case("backfill.skip", ["nope", "0", "why"], JobNotFound, "nope", id="missing")
ids("backfill.runs", [], "run_id")
case("backfill.runs", ["r"] * 1001, InvalidArgument, "1000", id="too-many")

# A refused value is shown cut short (check: the message stays under 400 characters), a NUL in
# it escaped: a message names what is wrong, it does not echo a megabyte back.
LONG = "x" * 100_000
for command, args, name in [
    ("put", [*PUT[:5], LONG], "delay"),
    ("put", [*PUT, LONG, "1"], "unknown option"),
    ("put", [*PUT, LONG], "has no value"),
    ("put", [*PUT, "trigger", LONG], "trigger"),
    ("put", [*PUT, "unique", LONG], "unique"),
    ("put", [*PUT, "ttl", LONG], "ttl"),
    ("put.many", [*MANY[:2], json.dumps({LONG: 1}), *MANY[3:]], "unknown option"),
    ("pop", ["q", "w1", LONG], "count"),
    ("config.set", ["heartbeat", LONG], "value"),
    ("complete", [*COMPLETE, LONG, "x"], "unknown option"),
    ("recur", [*RECUR[:4], LONG, *RECUR[5:]], "spec"),
    ("recur.update", ["rec", LONG, "1"], "unknown option"),
    ("tag", [LONG, "waiting", "t"], "verb"),
    ("track", [LONG, "waiting"], "verb"),
    ("depends", ["depends", LONG, "waiting"], "direction"),
    ("jobs", [LONG, "q"], "state"),
    ("doctor.names", [LONG], "what"),
    ("doctor.index", [LONG, "q"], "index"),
    ("doctor.repair", [LONG, *REPAIR[1:]], "kind"),
    ("doctor.repair", [REPAIR[0], LONG, *REPAIR[2:]], "index"),
    ("doctor.repair", [*REPAIR, LONG], "dry"),
    ("schedule.fire", [*FIRE[:4], LONG, *FIRE[5:]], "action"),
    ("schedule.list", ["0", "10", LONG], "brief"),
    (
        "schedule.register",
        [REGISTER[0], json.dumps({**DEFINITION, "overlap": LONG}), *REGISTER[2:]],
        "overlap",
    ),
    ("run.rerun", ["r", "a", LONG], "downstream"),
    ("log.append", ["waiting", "1", "0", "1", LONG, "stdout", "", "x"], "time"),
    ("log.append", ["waiting", "1", "0", "1", T0, LONG, "", "x"], "stream"),
    ("cache.use", ["running", "w1", "q", "k", LONG, "1"], "ttl"),
    ("worker.lease", ["w1", LONG], "seconds"),
    ("backfill.create", [*BF[:3], json.dumps([LONG]), BF[4]], "ticks[1]"),
    ("run.read", ["r", "1", json.dumps({LONG: -1})], "offsets"),
]:
    case(command, args, InvalidArgument, name, id=f"long-{name}")
case("put", [*PUT[:5], "a\x00b"], InvalidArgument, "a\\x00b", id="delay-nul-shown")

# Any command: `now` must be a finite number of at least 0 (or '' for the server's clock).
for value in [*BAD_NUMBERS, "-1"]:
    for command, args in [("get", ["waiting"]), ("put", PUT), ("config.get", [])]:
        case(command, args, InvalidArgument, "now", id=f"now={value!r}", now=value)


def display(command: str) -> str:
    """The name a command's errors start with: 'config.get' -> 'ConfigGet'."""
    return "".join(part[:1].upper() + part[1:] for part in command.split("."))


# -- the populated namespace -----------------------------------------------------------------


POPULATED: dict[str, Snapshot] = {}


def populate(lua: Lua) -> None:
    """Fill the namespace (the first time for real, then restored from its DUMP: faster)."""
    cached = POPULATED.get(lua.prefix)
    if cached is None:
        fill(lua)
        POPULATED[lua.prefix] = snapshot(lua.r)
        return
    pipe = lua.r.pipeline(transaction=False)
    for key, (_, dump, expiry) in cached.items():
        assert expiry == -1
        pipe.restore(key, 0, dump)
    pipe.execute()


def fill(lua: Lua) -> None:
    lua.put("waiting", tags=["t", "u"])
    lua.put("scheduled", delay=100, tags=["t"])
    lua.put("depends", depends=["waiting"])
    lua.put("running")
    lua.put("failed")
    lua.put("complete")
    lua("fail", "failed", "w0", "boom", "it broke", now=T0)
    assert set(lua.pop_jids(worker="w1", count=3)) == {"waiting", "running", "complete"}
    lua.complete("complete", result='{"ok": true}')
    lua("retry", "waiting", "q", "w1", now=T0)
    lua("track", "track", "running", now=T0)
    lua("recur", "q", "rec", "K", "{}", "interval", 60, 1000, "tags", '["t"]', now=T0)
    lua.config("heartbeat", 120)
    lua.config("q2-max-concurrency", 3)
    lua("pause", "paused", now=T0)
    lua("worker.register", "w1", '{"host": "h"}', now=T0)
    lua("flow.submit", "run-1", '{"flow": "f"}', json.dumps([{**JOB, "jid": "f-0"}]), now=T0)
    assert lua("schedule.register", *REGISTER, now=T0) == "registered"
    lua("schedule.pause", "sched", "maintenance", now=T0)
    lua("scheduler.ping", "s1", '{"host": "h", "source": "pipelines"}', now=T0)
    lua("catalog.sync", "pipelines", "d1", "/srv/pipelines", '{"a.yaml": "x"}', now=T0)
    # Ours: a buried job, a parked job with its key's slot taken, a throttle, a ttl deadline, and
    # a dependent in another queue (q4 cannot be truncated without it).
    lua.put("buried", "q3", ttl=600)
    lua("bury", "buried", "w1", "kept aside", now=T0)
    lua.put("key-1", "q3", concurrency_key="k", ttr=30)
    lua.put("key-2", "q3", concurrency_key="k", throttle="th")
    lua("throttle.set", "th", 2, now=T0)
    assert [job["jid"] for job in lua.pop("q3", count=2)] == ["key-1"]
    lua.put("q4-job", "q4")
    lua.put("q5-job", "q5", depends=["q4-job"])


def check(lua: Lua, c: Case) -> None:
    with unchanged(lua.r), pytest.raises(EngineError) as raised:
        lua.raw(c.command, *c.args, now=c.now)
    assert type(raised.value) is c.error, f"{type(raised.value).__name__}: {raised.value}"
    message = str(raised.value)
    assert re.match(rf"{display(c.command)}\b", message), message
    assert c.names in message, message
    assert len(message) < 400, message  # a clear message, not a dump of the argument


@pytest.mark.parametrize("command", sorted({c.command for c in CASES}))
def test_bad_input_is_refused_and_changes_nothing(lua: Lua, command: str) -> None:
    populate(lua)
    failures: list[str] = []
    cases = [c for c in CASES if c.command == command]
    for c in cases:
        try:
            check(lua, c)
        except (AssertionError, pytest.fail.Exception) as failure:
            failures.append(f"{c.id}: {str(failure).splitlines()[0][:300]}")
            lua.r.flushall()
            populate(lua)
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures)


@pytest.mark.parametrize(
    "command", ["bogus", "", "PUT", "Get", "config", "config.", "__index", "put ", "recur.get.x"]
)
def test_unknown_command(lua: Lua, command: str) -> None:
    populate(lua)
    with unchanged(lua.r), pytest.raises(UnknownCommand, match="unknown command"):
        lua.raw(command, "waiting", now=T0)


def test_no_command_at_all(lua: Lua) -> None:
    """FCALL / EVALSHA with no arguments after the keys (below Engine.call, which needs one)."""
    populate(lua)
    lua.engine.load()
    with unchanged(lua.r), pytest.raises(redis.ResponseError, match=r"^UNKNOWNCOMMAND "):
        lua.engine._send_once("", [len(lua.engine._keys), *lua.engine._keys])


def commands_in_engine() -> set[str]:
    """Every command the bundled engine dispatches."""
    return set(re.findall(r"^api\['([^']+)'\]", join_includes(lua_dir()), re.MULTILINE))


def test_every_command_has_bad_input_cases() -> None:
    covered = {c.command for c in CASES}
    missing = commands_in_engine() - covered
    assert not missing, f"commands without bad-input cases in {Path(__file__).name}: {missing}"
