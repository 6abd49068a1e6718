"""runs.statuses: a page of the newest runs with their statuses, in one call (the REST API's run
listing, the metrics' flows_runs)."""

from __future__ import annotations

import json

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import InvalidArgument


def submit(lua: Lua, run_id: str, flow: str, now: float) -> None:
    jobs = [{"jid": f"{run_id}:a", "queue": "q", "klass": "K", "data": "{}"}]
    lua.raw("flow.submit", run_id, json.dumps({"flow": flow}), json.dumps(jobs), now=now)


def test_newest_runs_first_with_their_status(lua: Lua) -> None:
    submit(lua, "r1", "f", T0)
    submit(lua, "r2", "g", T0 + 1)
    lua.pop(now=T0 + 2)
    lua.complete("r1:a", now=T0 + 3)
    reply = json.loads(lua.raw("runs.statuses", now=T0 + 4))
    assert [(r["id"], r["flow"], r["status"]) for r in reply] == [
        ("r2", "g", "running"),
        ("r1", "f", "succeeded"),
    ]
    # the records are those `runs` replies, with the status
    records = json.loads(lua.raw("runs", now=T0 + 4))
    assert [{k: v for k, v in r.items() if k != "status"} for r in reply] == records
    assert json.loads(lua.raw("runs.statuses", "", 1, 1, now=T0 + 4)) == reply[1:]
    assert json.loads(lua.raw("runs.statuses", "f", now=T0 + 4)) == reply[1:]
    assert lua.raw("runs.statuses", "", 0, 0, now=T0) == "[]"


@pytest.mark.parametrize(
    "args", [("", 0, 1001), ("", -1), ("", 0, "x"), ("bad flow!",), ("", 0, 1, 2)]
)
def test_bad_counts_are_refused(lua: Lua, args: tuple[object, ...]) -> None:
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="RunsStatuses"):
        lua.raw("runs.statuses", *args, now=T0)
