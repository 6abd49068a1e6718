"""Malformed calls of the schedule and scheduler-health commands: the right error class, a
message naming the command, and not one byte changed.

Each command's cases run against a namespace holding a fired schedule with a running run and
skip records, a paused one, one with a buffered tick, an ended one and a service's health entry.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import EngineError, InvalidArgument, JobNotFound, TooLarge, WrongState

TICK = T0 + 60
LONG = "n" * 257
BIG_SOURCE = "s" * (4 * 1024 * 1024 + 1)


def definition(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "flow": name,
        "hash": "h1",
        "file": "/f.yaml",
        "cron": ["* * * * *"],
        "timezone": "UTC",
        "overlap": "buffer_one",
        "catchup": "latest",
        **changes,
    }


def d(**changes: Any) -> str:
    return json.dumps(definition("f", **changes))


def run(run_id: str = "f@2", flow: str = "f") -> list[str]:
    jobs = [{"jid": f"{run_id}:a", "queue": "q", "klass": "K", "data": "{}"}]
    return [run_id, json.dumps({"flow": flow}), json.dumps(jobs)]


def populate(lua: Lua) -> None:
    for name, nxt in (("f", TICK), ("p", TICK), ("e", "")):
        lua.raw("schedule.register", name, json.dumps(definition(name)), "src", nxt, "", "", now=T0)
    lua.raw(
        "schedule.fire",
        "f",
        "h1",
        TICK,
        TICK + 60,
        "fire",
        TICK,
        json.dumps([{"first": T0, "last": T0, "count": 1, "reason": "catch-up policy none"}]),
        *run("f@1"),
        now=TICK,
    )
    lua.raw(
        "schedule.fire", "f", "h1", TICK + 60, TICK + 120, "buffer", TICK + 60, "[]", now=TICK + 60
    )
    lua.raw("schedule.pause", "p", "note", now=T0)
    lua.raw("scheduler.ping", "svc", json.dumps({"pid": 1}), now=T0)


def skips(*records: Any) -> str:
    return json.dumps(list(records))


GOOD_SKIP = {"first": TICK, "last": TICK, "count": 1, "reason": "r"}
BAD_SKIPS = [
    ("", InvalidArgument),
    ("x", InvalidArgument),
    ('{"a": 1}', InvalidArgument),
    (skips(1), InvalidArgument),
    (skips({**GOOD_SKIP, "first": "x"}), InvalidArgument),
    (skips({**GOOD_SKIP, "first": -1}), InvalidArgument),
    (skips({k: v for k, v in GOOD_SKIP.items() if k != "last"}), InvalidArgument),
    (skips({**GOOD_SKIP, "last": TICK - 1}), InvalidArgument),
    (skips({**GOOD_SKIP, "count": 0}), InvalidArgument),
    (skips({**GOOD_SKIP, "count": 1.5}), InvalidArgument),
    (skips({**GOOD_SKIP, "reason": 5}), InvalidArgument),
    (skips({k: v for k, v in GOOD_SKIP.items() if k != "reason"}), InvalidArgument),
    (skips({**GOOD_SKIP, "reason": ""}), InvalidArgument),
    (skips({**GOOD_SKIP, "reason": "r" * 1025}), TooLarge),
    (skips(*[GOOD_SKIP] * 1001), TooLarge),
]


def fire_args(action: str = "fire", **over: Any) -> list[Any]:
    base: dict[str, Any] = {
        "name": "f",
        "hash": "h1",
        "expected": TICK + 120,
        "next": TICK + 180,
        "action": action,
        "tick": TICK + 120,
        "skips": "[]",
    }
    base.update(over)
    args = [base[k] for k in ("name", "hash", "expected", "next", "action", "tick", "skips")]
    if action in ("fire", "buffered"):
        args += over.get("run", run())
    return args


CASES: dict[str, list[tuple[list[Any], type[EngineError]]]] = {
    "schedule.register": [
        ([name, d(flow=name or "x"), "src", TICK, "", ""], error)
        for name, error in (("", InvalidArgument), ("a b", InvalidArgument), (LONG, TooLarge))
    ]
    + [
        (["n", definition_text, "src", TICK, "", ""], error)
        for definition_text, error in (
            ("", InvalidArgument),
            ("nope", InvalidArgument),
            ("[]", InvalidArgument),
            (d(flow=1), InvalidArgument),
            (d(flow="a b"), InvalidArgument),
            (d(cron=[]), InvalidArgument),
            (d(cron="* * * * *"), InvalidArgument),
            (d(cron=[1]), InvalidArgument),
            (d(cron=[""]), InvalidArgument),
            (d(cron=["* * * * *"] * 65), InvalidArgument),
            (d(timezone=""), InvalidArgument),
            (d(timezone=None), InvalidArgument),
            (d(overlap="never"), InvalidArgument),
            (d(catchup="some"), InvalidArgument),
            (d(paused="yes"), InvalidArgument),
            (d(hash=None), InvalidArgument),
            (d(hash="a b"), InvalidArgument),
            (d(blob="x" * 524288), TooLarge),
        )
    ]
    + [
        (["n", d(), "", TICK, "", ""], InvalidArgument),
        (["n", d(), BIG_SOURCE, TICK, "", ""], TooLarge),
        (["n", d(), "src", "abc", "", ""], InvalidArgument),
        (["n", d(), "src", "-1", "", ""], InvalidArgument),
        (["n", d(), "src", "nan", "", ""], InvalidArgument),
        (["n", d(), "src", TICK, "a b", ""], InvalidArgument),
        (["n", d(), "src", TICK, "", "x"], InvalidArgument),
        (["n", d(), "src", TICK, "", "", "extra"], InvalidArgument),
    ],
    "schedule.get": [
        ([""], InvalidArgument),
        ([LONG], TooLarge),
        (["f", "-1"], InvalidArgument),
        (["f", "101"], InvalidArgument),
        (["f", "x"], InvalidArgument),
    ],
    "schedule.list": [
        (["-1"], InvalidArgument),
        (["0", "1001"], InvalidArgument),
        (["x"], InvalidArgument),
        (["0", "1.5"], InvalidArgument),
        (["0", "5", "x"], InvalidArgument),
        (["0", "5", "1", "extra"], InvalidArgument),
    ],
    "schedule.pause": [
        ([""], InvalidArgument),
        (["a\tb"], InvalidArgument),
        (["nope"], JobNotFound),
        (["f", "n" * 1025], TooLarge),
        (["f", "note", "extra"], InvalidArgument),
    ],
    "schedule.resume": [
        (["nope", TICK, TICK, "[]"], JobNotFound),
        ([""], InvalidArgument),
        (["p", "x", TICK, "[]"], InvalidArgument),
        (["p", TICK, "x", "[]"], InvalidArgument),
        (["p", TICK, TICK, "[]", "extra"], InvalidArgument),
    ]
    + [(["p", TICK, TICK + 60, bad], error) for bad, error in BAD_SKIPS],
    "schedule.unregister": [
        ([""], InvalidArgument),
        ([LONG], TooLarge),
        (["f", "a b"], InvalidArgument),
        (["f", "h1", "extra"], InvalidArgument),
    ],
    "schedule.due": [
        (["-1"], InvalidArgument),
        (["0", "0"], InvalidArgument),
        (["0", "10001"], InvalidArgument),
        (["x", "5"], InvalidArgument),
        (["0", "5", "a b"], InvalidArgument),
        (["0", "5", LONG], TooLarge),
        (["0", "5", "f", "extra"], InvalidArgument),
    ],
    "schedule.fire": [
        (fire_args(name=""), InvalidArgument),
        (fire_args(name=LONG), TooLarge),
        (fire_args(hash=""), InvalidArgument),
        (fire_args(expected=""), InvalidArgument),
        (fire_args(expected="x"), InvalidArgument),
        (fire_args(expected=-1), InvalidArgument),
        (fire_args(next="x"), InvalidArgument),
        (fire_args(next="inf"), InvalidArgument),
        (fire_args("nope"), InvalidArgument),
        (fire_args(""), InvalidArgument),
        (fire_args(tick=""), InvalidArgument),
        (fire_args(tick="x"), InvalidArgument),
        (fire_args("skip", tick="x"), InvalidArgument),
        (fire_args(run=[]), InvalidArgument),
        (fire_args(run=["a b", *run()[1:]]), InvalidArgument),
        (fire_args(run=["r-jobs", *run()[1:]]), InvalidArgument),
        (fire_args(run=[run()[0], "{}", run()[2]]), InvalidArgument),
        (fire_args(run=[*run()[:2], "[]"]), InvalidArgument),
        (fire_args(run=[*run()[:2], "nope"]), InvalidArgument),
        (fire_args(run=["f@9", *run("f@1")[1:]]), InvalidArgument),  # its job f@1:a exists
        (fire_args(run=[*run(), "a b"]), InvalidArgument),
        (fire_args(run=[*run(), "f@1", "extra"]), InvalidArgument),
        ([*fire_args("skip"), *run()], InvalidArgument),
        (fire_args("buffered", next=TICK), InvalidArgument),
    ]
    + [(fire_args("skip", skips=bad), error) for bad, error in BAD_SKIPS],
    "schedule.trigger": [
        (["", *run()], InvalidArgument),
        (["nope", *run()], JobNotFound),
        (["f", "a b", *run()[1:]], InvalidArgument),
        (["f", *run()[:2], "[]"], InvalidArgument),
        (
            [
                "f",
                *run("f@1:a")[:2],
                json.dumps([{"jid": "f@1:a", "queue": "q", "klass": "K", "data": "{}"}]),
            ],
            InvalidArgument,
        ),
        (["f", *run(), "extra"], InvalidArgument),
    ],
    "scheduler.ping": [
        (["", "{}"], InvalidArgument),
        ([LONG, "{}"], TooLarge),
        (["s", ""], InvalidArgument),
        (["s", "[1]"], InvalidArgument),
        (["s", "x"], InvalidArgument),
        (["s", json.dumps({"x": "x" * 65536})], TooLarge),
        (["s", "{}", "extra"], InvalidArgument),
    ],
    "scheduler.forget": [([""], InvalidArgument), (["a b"], InvalidArgument)],
    "schedulers": [(["0"], InvalidArgument), (["1001"], InvalidArgument), (["x"], InvalidArgument)],
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_bad_input_changes_nothing(lua: Lua, command: str) -> None:
    populate(lua)
    failures = []
    for i, (args, error) in enumerate(CASES[command]):
        try:
            with assert_unchanged(lua.r), pytest.raises(error) as raised:
                lua.raw(command, *args, now=TICK + 120)
            display = "".join(part.capitalize() for part in command.split("."))
            assert raised.value.message.startswith(display + "():"), raised.value.message
        except (AssertionError, pytest.fail.Exception) as failure:
            failures.append(f"case {i} {str(args)[:120]}: {failure}")
            lua.r.flushall()
            populate(lua)
    assert not failures, "\n".join(failures)


def test_stale_calls_are_conflicts_that_change_nothing(lua: Lua) -> None:
    populate(lua)
    with assert_unchanged(lua.r):
        assert lua.raw("schedule.fire", *fire_args(name="nope"), now=TICK) == "conflict"
        assert lua.raw("schedule.fire", *fire_args(hash="h2"), now=TICK) == "conflict"
        assert lua.raw("schedule.fire", *fire_args(expected=TICK), now=TICK) == "conflict"
        assert lua.raw("schedule.fire", *fire_args(run=[*run(), "f@0"]), now=TICK) == "conflict"
        assert lua.raw("schedule.register", "f", d(hash="h2"), "s", TICK, "", "", now=T0) == (
            "conflict"
        )
        assert lua.raw("schedule.unregister", "f", "h2", now=T0) == "conflict"


def test_resume_of_a_schedule_paused_in_its_file_changes_nothing(lua: Lua) -> None:
    lua.raw(
        "schedule.register",
        "x",
        json.dumps(definition("x", paused=True)),
        "s",
        TICK,
        "",
        "",
        now=T0,
    )
    lua.raw("schedule.pause", "x", now=T0)
    with assert_unchanged(lua.r), pytest.raises(WrongState):
        lua.raw("schedule.resume", "x", TICK, TICK, "[]", now=T0)
