"""backfill.*: a backfill's ticks offered as its limits allow, each handled exactly once by a
compare-and-set, runs submitted as flow.submit does, canceling, and bad input refused with
nothing changed. Time is always passed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import InvalidArgument, JobNotFound, TooLarge

H = 3600.0
TICKS = [T0 + i * H for i in range(5)]


def record(flow: str = "f", **fields: Any) -> str:
    return json.dumps(
        {"flow": flow, "definition": {"flow": flow, "cron": ["0 * * * *"]}, "hash": "h1", **fields}
    )


def run_id(tick: float, flow: str = "f") -> str:
    return f"{flow}@{int(tick)}"


def create(lua: Lua, bid: str = "b1", ticks: list[float] = TICKS, **fields: Any) -> Any:
    runs = json.dumps([run_id(t, fields.get("flow", "f")) for t in ticks])
    return lua.raw(
        "backfill.create", bid, record(**fields), "flow text", json.dumps(ticks), runs, now=T0
    )


def submit(lua: Lua, bid: str, index: int, tick: float, *, now: float, flow: str = "f") -> Any:
    rid = run_id(tick, flow)
    jobs = [{"jid": f"{rid}:a", "queue": "q", "klass": "K", "data": "{}"}]
    run = {"flow": flow, "tick": tick, "trigger": "backfill"}
    return lua.raw("backfill.submit", bid, index, rid, json.dumps(run), json.dumps(jobs), now=now)


def due(lua: Lua, now: float, bid: str = "") -> list[dict[str, Any]]:
    reply = json.loads(lua.raw("backfill.due", 100, bid, now=now))
    return [] if reply == {} else list(reply)


def get(lua: Lua, bid: str = "b1") -> dict[str, Any]:
    reply = json.loads(lua.raw("backfill.get", bid, now=T0))
    reply["active"] = [] if reply["active"] == {} else reply["active"]
    return dict(reply)


def finish(lua: Lua, tick: float, now: float) -> None:
    """Work the tick's one job to completion."""
    jid = f"{run_id(tick)}:a"
    assert lua.pop_jids(now=now) == [jid]
    lua.complete(jid, now=now)


def test_create_get_and_list(lua: Lua) -> None:
    assert create(lua, max_active=2, flow_max=3, **{"from": T0 - 10, "to": T0 + 5 * H}) == "created"
    assert create(lua) == "exists"
    b = get(lua)
    assert (b["flow"], b["state"], b["total"], b["next"], b["pending"], b["active"]) == (
        "f",
        "active",
        5,
        0,
        5,
        [],
    )
    assert (b["max_active"], b["flow_max"], b["first"], b["last"], b["from"]) == (
        2,
        3,
        TICKS[0],
        TICKS[-1],
        T0 - 10,
    )
    assert "source" not in b and "definition" not in b
    assert b["params"] == "{}"  # none given
    assert json.loads(lua.raw("backfill.get", "b1", "1", now=T0))["source"] == "flow text"
    assert lua.raw("backfill.get", "nope", now=T0) is None
    create(lua, "b2")
    assert [b["id"] for b in json.loads(lua.raw("backfill.list", now=T0 + 1))] == ["b2", "b1"]
    assert lua.raw("backfill.list", 5, 10, now=T0) == "[]"


def test_the_params_given_are_kept_as_written(lua: Lua) -> None:
    """`flows backfill -p`: listed with the backfill, a number past what a double holds exactly
    unchanged."""
    create(lua, params={"region": "us", "n": 12345678901234567890})
    assert get(lua)["params"] == '{"region": "us", "n": 12345678901234567890}'


def test_due_offers_as_many_ticks_as_max_active_leaves_room_for(lua: Lua) -> None:
    create(lua, max_active=2)
    [offer] = due(lua, T0 + 1)
    assert (offer["id"], offer["next"], offer["hash"], offer["source"]) == (
        "b1",
        0,
        "h1",
        "flow text",
    )
    assert [float(t) for t in offer["ticks"]] == TICKS[:2]
    assert json.loads(offer["definition"])["cron"] == ["0 * * * *"]
    assert submit(lua, "b1", 0, TICKS[0], now=T0 + 1) == "submitted"
    assert submit(lua, "b1", 1, TICKS[1], now=T0 + 1) == "submitted"
    assert due(lua, T0 + 2) == []  # two active: no room
    finish(lua, TICKS[0], T0 + 3)
    [offer] = due(lua, T0 + 4)  # the finished run is forgotten, one slot frees
    assert (offer["next"], [float(t) for t in offer["ticks"]]) == (2, TICKS[2:3])
    assert get(lua)["active"] == [run_id(TICKS[1])]
    assert lua.r.hget(lua.key(f"run:{run_id(TICKS[0])}"), "trigger") == "backfill"


def test_get_and_list_count_only_the_runs_still_active(lua: Lua) -> None:
    """A run that ended is no longer active, whether or not a service has looked since."""
    create(lua, max_active=2)
    submit(lua, "b1", 0, TICKS[0], now=T0 + 1)
    submit(lua, "b1", 1, TICKS[1], now=T0 + 1)
    finish(lua, TICKS[0], T0 + 2)
    with assert_unchanged(lua.r):
        assert get(lua)["active"] == [run_id(TICKS[1])]
        [listed] = json.loads(lua.raw("backfill.list", now=T0 + 3))
    assert listed["active"] == [run_id(TICKS[1])]


def test_submit_is_a_compare_and_set_on_the_next_tick(lua: Lua) -> None:
    create(lua)
    assert submit(lua, "b1", 1, TICKS[1], now=T0) == "conflict"
    assert lua.raw("backfill.skip", "b1", 1, "why", now=T0) == "conflict"
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match="run_id"):
        submit(lua, "b1", 0, TICKS[1], now=T0)  # the run of another tick
    rid = run_id(TICKS[0])
    jobs = json.dumps([{"jid": f"{rid}:a", "queue": "q", "klass": "K", "data": "{}"}])
    wrong = json.dumps({"flow": "f", "tick": TICKS[1]})
    with assert_unchanged(lua.r), pytest.raises(InvalidArgument, match=r"run\.tick"):
        lua.raw("backfill.submit", "b1", 0, rid, wrong, jobs, now=T0)
    assert submit(lua, "b1", 0, TICKS[0], now=T0) == "submitted"
    assert submit(lua, "b1", 0, TICKS[0], now=T0) == "conflict"  # handled once
    assert get(lua)["next"] == 1


def ran(lua: Lua, tick: float, now: float = T0) -> str:
    """Submit the tick's run as the schedule would (its job in queue `other`)."""
    rid = run_id(tick)
    jobs = json.dumps([{"jid": f"{rid}:a", "queue": "other", "klass": "K", "data": "{}"}])
    lua.raw("flow.submit", rid, json.dumps({"flow": "f"}), jobs, now=now)
    return rid


def test_a_tick_whose_run_exists_is_not_run_again(lua: Lua) -> None:
    create(lua, max_active=1)
    rid = ran(lua, TICKS[0], T0 + 1)  # the schedule fired it meanwhile
    with assert_unchanged(lua.r, lua.prefix + "run*"):
        assert submit(lua, "b1", 0, TICKS[0], now=T0 + 1) == "exists"
    b = get(lua)
    assert (b["next"], b["existed"], b["submitted"], b["active"]) == (1, 1, 0, [])
    assert lua.r.lrange(lua.key(f"run:{rid}-jobs"), 0, -1) == [f"{rid}:a"]


def test_due_moves_past_ticks_whose_run_exists_without_using_a_slot(lua: Lua) -> None:
    for tick in (TICKS[0], TICKS[1], TICKS[3]):
        ran(lua, tick)
    create(lua, max_active=1)
    [offer] = due(lua, T0 + 1)
    assert (offer["next"], offer["runs"]) == (2, [run_id(TICKS[2])])
    assert get(lua)["existed"] == 2
    assert submit(lua, "b1", 2, TICKS[2], now=T0 + 1) == "submitted"
    finish(lua, TICKS[2], T0 + 2)
    [offer] = due(lua, T0 + 3)
    assert (offer["next"], offer["runs"]) == (4, [run_id(TICKS[4])])
    b = get(lua)
    assert (b["existed"], b["submitted"]) == (3, 1)


def test_skip_records_why_and_a_finished_backfill_is_done(lua: Lua) -> None:
    create(lua, ticks=TICKS[:2])
    assert lua.raw("backfill.skip", "b1", 0, "cannot build", now=T0) == "skipped"
    assert submit(lua, "b1", 1, TICKS[1], now=T0) == "submitted"
    assert submit(lua, "b1", 2, TICKS[1], now=T0) == "done"
    assert due(lua, T0 + 1) == []
    assert get(lua)["state"] == "active"  # its last run still runs
    finish(lua, TICKS[1], T0 + 2)
    assert due(lua, T0 + 3) == []
    b = get(lua)
    assert (b["state"], b["failed"], b["last_error"], b["submitted"]) == (
        "done",
        1,
        "cannot build",
        1,
    )
    assert lua.zset("backfills-active") == []
    assert lua.zset("backfills") == ["b1"]


def test_the_flows_max_active_runs_counts_its_other_active_runs(lua: Lua) -> None:
    other = "f@manual"
    jobs = json.dumps([{"jid": "manual:a", "queue": "other", "klass": "K", "data": "{}"}])
    lua.raw("flow.submit", other, json.dumps({"flow": "f"}), jobs, now=T0)
    create(lua, max_active=5, flow_max=2)
    [offer] = due(lua, T0 + 1)
    assert len(offer["ticks"]) == 1  # the manual run takes one of the flow's two
    assert submit(lua, "b1", 0, TICKS[0], now=T0 + 1) == "submitted"
    assert due(lua, T0 + 2) == []
    lua.raw("run.cancel", other, now=T0 + 3)
    [offer] = due(lua, T0 + 4)
    assert len(offer["ticks"]) == 1
    # another flow's runs do not count
    create(lua, "g1", flow="g", flow_max=2)
    assert [len(o["ticks"]) for o in due(lua, T0 + 5, "g1")] == [2]


def test_without_limits_a_call_offers_a_bounded_number_of_ticks(lua: Lua) -> None:
    ticks = [T0 + i * 60 for i in range(250)]
    create(lua, ticks=ticks)
    [offer] = due(lua, T0 + 1)
    assert len(offer["ticks"]) == 100


def test_cancel_cancels_active_runs_and_stops_submitting(lua: Lua) -> None:
    create(lua, max_active=2)
    submit(lua, "b1", 0, TICKS[0], now=T0)
    submit(lua, "b1", 1, TICKS[1], now=T0)
    finish(lua, TICKS[0], T0 + 1)
    reply = json.loads(lua.raw("backfill.cancel", "b1", now=T0 + 2))
    assert reply == {"state": "canceled", "changed": True, "runs": 1, "jobs": 1, "pending": 3}
    assert lua.state(f"{run_id(TICKS[1])}:a") is None  # canceled jobs are deleted
    assert lua.state(f"{run_id(TICKS[0])}:a") == "complete"
    status = json.loads(lua.raw("backfill.runs", run_id(TICKS[0]), run_id(TICKS[1]), "x", now=T0))
    assert status == ["succeeded", "canceled", "missing"]
    assert due(lua, T0 + 3) == []
    assert submit(lua, "b1", 2, TICKS[2], now=T0 + 3) == "canceled"
    b = get(lua)
    assert (b["state"], b["canceled"], b["active"]) == ("canceled", T0 + 2, [])
    again = json.loads(lua.raw("backfill.cancel", "b1", now=T0 + 4))
    assert again == {"state": "canceled", "changed": False, "runs": 0, "jobs": 0, "pending": 0}
    with assert_unchanged(lua.r), pytest.raises(JobNotFound):
        lua.raw("backfill.cancel", "nope", now=T0)


def resume(lua: Lua, bid: str, index: int, tick: float, *, now: float) -> Any:
    return lua.raw("backfill.resume", bid, index, run_id(tick), now=now)


def statuses(lua: Lua, *ticks: float) -> list[str]:
    return list(json.loads(lua.raw("backfill.runs", *(run_id(t) for t in ticks), now=T0)))


def canceled_by_a_backfill(lua: Lua) -> None:
    """Backfill b0 ran tick 0, then was canceled with ticks 1 and 2 running: their runs are
    canceled, ticks 3 and 4 never submitted."""
    create(lua, "b0", max_active=3)
    for index in range(3):
        assert submit(lua, "b0", index, TICKS[index], now=T0) == "submitted"
    finish(lua, TICKS[0], T0 + 1)
    assert json.loads(lua.raw("backfill.cancel", "b0", now=T0 + 2))["runs"] == 2
    assert statuses(lua, *TICKS) == ["succeeded", "canceled", "canceled", "missing", "missing"]


def test_a_tick_whose_run_was_canceled_is_offered_and_resumed(lua: Lua) -> None:
    canceled_by_a_backfill(lua)
    create(lua, max_active=1)
    [offer] = due(lua, T0 + 3)
    # tick 0 ran: passed over without a slot; tick 1's canceled run takes the one slot
    assert (offer["next"], offer["runs"], offer["statuses"]) == (
        1,
        [run_id(TICKS[1])],
        ["canceled"],
    )
    assert get(lua)["existed"] == 1
    assert resume(lua, "b1", 1, TICKS[1], now=T0 + 4) == "resumed"
    # resumed as `flows retry RUN` resumes it: its canceled job back as it was first put
    rid = run_id(TICKS[1])
    assert lua.state(f"{rid}:a") == "waiting"
    assert statuses(lua, TICKS[1]) == ["running"]
    assert lua.r.exists(lua.key(f"run-canceled:{rid}")) == 0
    assert lua.r.hget(lua.key(f"run:{rid}"), "canceled") is None
    assert lua.r.lrange(lua.key(f"run:{rid}-jobs"), 0, -1) == [f"{rid}:a"]
    b = get(lua)
    assert (b["next"], b["resumed"], b["submitted"], b["existed"], b["active"]) == (
        2,
        1,
        0,
        1,
        [rid],
    )
    assert due(lua, T0 + 5) == []  # the resumed run holds the one slot
    finish(lua, TICKS[1], T0 + 6)
    [offer] = due(lua, T0 + 7)
    assert (offer["next"], offer["statuses"]) == (2, ["canceled"])
    assert resume(lua, "b1", 2, TICKS[2], now=T0 + 8) == "resumed"
    finish(lua, TICKS[2], T0 + 9)
    [offer] = due(lua, T0 + 10)
    assert (offer["next"], offer["statuses"]) == (3, ["missing"])
    assert submit(lua, "b1", 3, TICKS[3], now=T0 + 11) == "submitted"
    finish(lua, TICKS[3], T0 + 12)
    assert submit(lua, "b1", 4, TICKS[4], now=T0 + 13) == "submitted"
    finish(lua, TICKS[4], T0 + 14)
    assert due(lua, T0 + 15) == []
    b = get(lua)
    assert (b["state"], b["submitted"], b["resumed"], b["existed"], b["failed"]) == (
        "done",
        2,
        2,
        1,
        0,
    )
    assert statuses(lua, *TICKS) == ["succeeded"] * 5


def test_a_resumed_run_is_what_run_retry_makes_of_it(lua: Lua) -> None:
    """Two runs canceled while running: one resumed by a backfill, the other by run.retry (as
    `flows retry RUN`), at the same time, end up the same, attempts and history included."""
    create(lua, "b0", max_active=2)
    for index in (0, 1):
        submit(lua, "b0", index, TICKS[index], now=T0)
    assert len(lua.pop_jids(count=2, now=T0 + 1)) == 2
    lua.raw("backfill.cancel", "b0", now=T0 + 2)
    create(lua, ticks=TICKS[:1])
    assert resume(lua, "b1", 0, TICKS[0], now=T0 + 3) == "resumed"
    assert lua.raw("run.retry", run_id(TICKS[1]), now=T0 + 3) == 1

    def seen(tick: float) -> str:
        rid = run_id(tick)
        job = lua.job(f"{rid}:a", now=T0 + 4)
        read = json.loads(lua.raw("run.read", rid, now=T0 + 4))
        return json.dumps([job, read["status"], read["actions"]]).replace(rid, "R")

    assert seen(TICKS[0]) == seen(TICKS[1])
    assert lua.history(f"{run_id(TICKS[0])}:a", now=T0 + 4)[-1] == "put"
    assert lua.job(f"{run_id(TICKS[0])}:a")["state"] == "waiting"  # type: ignore[index]


def test_offers_are_oldest_first_with_each_runs_status(lua: Lua) -> None:
    canceled_by_a_backfill(lua)
    ran(lua, TICKS[3], T0 + 3)
    lua.raw("run.cancel", run_id(TICKS[3]), now=T0 + 3)  # canceled by hand: resumed too
    create(lua, max_active=10)
    [offer] = due(lua, T0 + 4)
    assert offer["next"] == 1
    assert offer["runs"] == [run_id(t) for t in TICKS[1:]]
    assert offer["statuses"] == ["canceled", "canceled", "canceled", "missing"]
    for index in (1, 2, 3):
        assert resume(lua, "b1", index, TICKS[index], now=T0 + 5) == "resumed"
    assert submit(lua, "b1", 4, TICKS[4], now=T0 + 5) == "submitted"
    b = get(lua)
    assert (b["resumed"], b["submitted"], len(b["active"])) == (3, 1, 4)
    assert lua.state(f"{run_id(TICKS[3])}:a") == "waiting"  # its own queue, as it was put


def test_the_flows_max_active_runs_holds_for_resumed_runs(lua: Lua) -> None:
    canceled_by_a_backfill(lua)
    other = "f@manual"
    jobs = json.dumps([{"jid": "manual:a", "queue": "other", "klass": "K", "data": "{}"}])
    lua.raw("flow.submit", other, json.dumps({"flow": "f"}), jobs, now=T0 + 3)
    create(lua, max_active=5, flow_max=2)
    [offer] = due(lua, T0 + 4)
    assert offer["statuses"] == ["canceled"]  # the manual run takes one of the flow's two
    assert resume(lua, "b1", 1, TICKS[1], now=T0 + 4) == "resumed"
    assert due(lua, T0 + 5) == []  # the resumed run takes the other
    assert statuses(lua, TICKS[2]) == ["canceled"]


def test_submit_of_a_tick_whose_run_was_canceled_resumes_it(lua: Lua) -> None:
    canceled_by_a_backfill(lua)
    create(lua, max_active=5)
    assert submit(lua, "b1", 0, TICKS[0], now=T0 + 3) == "exists"  # succeeded: it ran
    rid = run_id(TICKS[1])
    assert submit(lua, "b1", 1, TICKS[1], now=T0 + 3) == "resumed"  # not built again
    assert lua.r.lrange(lua.key(f"run:{rid}-jobs"), 0, -1) == [f"{rid}:a"]
    assert lua.r.hget(lua.key(f"run:{rid}"), "trigger") == "backfill"
    b = get(lua)
    assert (b["next"], b["existed"], b["resumed"], b["submitted"], b["active"]) == (
        2,
        1,
        1,
        0,
        [rid],
    )


def test_a_run_that_ended_otherwise_is_not_resumed(lua: Lua) -> None:
    rid = ran(lua, TICKS[0], T0)
    assert lua.pop_jids("other", now=T0 + 1) == [f"{rid}:a"]
    lua.raw("fail", f"{rid}:a", "w1", "boom", "it broke", now=T0 + 1)
    assert statuses(lua, TICKS[0]) == ["failed"]
    create(lua, max_active=1)
    with assert_unchanged(lua.r, lua.prefix + "run*"):
        [offer] = due(lua, T0 + 2)  # passed over: it ran
        assert (offer["next"], offer["statuses"]) == (1, ["missing"])
    assert lua.state(f"{rid}:a") == "failed"
    assert get(lua)["existed"] == 1
    # and resume, told of a tick whose run ended otherwise, counts it as having run
    create(lua, "b2")
    with assert_unchanged(lua.r, lua.prefix + "run*"):
        assert resume(lua, "b2", 0, TICKS[0], now=T0 + 3) == "exists"
    assert (get(lua, "b2")["next"], get(lua, "b2")["existed"]) == (1, 1)


def test_resume_is_a_compare_and_set_and_writes_nothing_otherwise(lua: Lua) -> None:
    canceled_by_a_backfill(lua)
    create(lua)
    with assert_unchanged(lua.r):
        assert resume(lua, "b1", 1, TICKS[1], now=T0 + 3) == "conflict"  # tick 0 is next
        with pytest.raises(InvalidArgument, match="run_id"):
            lua.raw("backfill.resume", "b1", 0, run_id(TICKS[1]), now=T0 + 3)
    assert resume(lua, "b1", 0, TICKS[0], now=T0 + 3) == "exists"
    assert resume(lua, "b1", 1, TICKS[1], now=T0 + 3) == "resumed"
    assert resume(lua, "b1", 1, TICKS[1], now=T0 + 3) == "conflict"  # handled once
    assert resume(lua, "b1", 2, TICKS[2], now=T0 + 3) == "resumed"
    with assert_unchanged(lua.r):  # tick 3 has no run (dropped meanwhile): it is to be submitted
        assert resume(lua, "b1", 3, TICKS[3], now=T0 + 4) == "missing"
    assert submit(lua, "b1", 3, TICKS[3], now=T0 + 4) == "submitted"
    lua.raw("backfill.cancel", "b1", now=T0 + 5)
    with assert_unchanged(lua.r):
        assert resume(lua, "b1", 4, TICKS[4], now=T0 + 6) == "canceled"
        with pytest.raises(JobNotFound):
            lua.raw("backfill.resume", "nope", 0, run_id(TICKS[0]), now=T0)
    b = get(lua)
    assert (b["resumed"], b["existed"], b["submitted"], b["next"]) == (2, 1, 1, 4)


def test_a_canceled_run_that_keeps_nothing_to_put_back_is_handed_over_as_failed(
    lua: Lua,
) -> None:
    canceled_by_a_backfill(lua)
    rid = run_id(TICKS[1])
    lua.r.delete(lua.key(f"run-canceled:{rid}"))  # its kept jobs gone by hand
    assert statuses(lua, TICKS[1]) == ["canceled"]
    create(lua)
    assert resume(lua, "b1", 0, TICKS[0], now=T0 + 3) == "exists"
    with assert_unchanged(lua.r, lua.prefix + "run*"):
        assert resume(lua, "b1", 1, TICKS[1], now=T0 + 3) == "skipped"
    b = get(lua)
    assert (b["next"], b["failed"], b["resumed"], b["active"]) == (2, 1, 0, [])
    assert b["last_error"] == f"run {rid} is canceled and keeps no job to put back"


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (["a b", record(), "s", "[1]", '["r"]'], InvalidArgument, "white space"),
        (["b-ticks", record(), "s", "[1]", '["r"]'], InvalidArgument, "reserved"),
        (["b-runs", record(), "s", "[1]", '["r"]'], InvalidArgument, "reserved"),
        (["b", "{}", "s", "[1]", '["r"]'], InvalidArgument, "record.flow"),
        (["b", record(max_active=-1), "s", "[1]", '["r"]'], InvalidArgument, "max_active"),
        (["b", record(flow_max=1.5), "s", "[1]", '["r"]'], InvalidArgument, "flow_max"),
        (["b", record(), "", "[1]", '["r"]'], InvalidArgument, "source"),
        (["b", record(), "s", "[]", "[]"], InvalidArgument, "at least one tick"),
        (["b", record(), "s", "[2, 1]", '["r", "s"]'], InvalidArgument, "ascending"),
        (["b", record(), "s", '["x"]', '["r"]'], InvalidArgument, "not a time"),
        (["b", record(), "s", "[1]", "[]"], InvalidArgument, "one run per tick"),
        (["b", record(), "s", "[1]", '["r-jobs"]'], InvalidArgument, "-jobs"),
        (["b", record(), "s", "[1]", "[1]"], InvalidArgument, "must be a string"),
        (["b", record(), "s", json.dumps(list(range(1, 10_002))), "[]"], TooLarge, "10000"),
    ],
)
def test_bad_creates_change_nothing(
    lua: Lua, args: list[str], error: type[Exception], match: str
) -> None:
    with assert_unchanged(lua.r), pytest.raises(error, match=match):
        lua.raw("backfill.create", *args, now=T0)


def test_bad_submits_change_nothing(lua: Lua) -> None:
    create(lua)
    with assert_unchanged(lua.r):
        with pytest.raises(JobNotFound):
            lua.raw("backfill.skip", "nope", 0, "why", now=T0)
        with pytest.raises(InvalidArgument, match="index"):
            lua.raw("backfill.skip", "b1", -1, "why", now=T0)
        with pytest.raises(InvalidArgument, match="reason"):
            lua.raw("backfill.skip", "b1", 0, "", now=T0)
        with pytest.raises(InvalidArgument, match="run"):
            lua.raw("backfill.submit", "b1", 0, "r", "[]", "[]", now=T0)
        with pytest.raises(InvalidArgument, match="count"):
            lua.raw("backfill.due", 0, now=T0)


def test_cancel_counts_the_jobs_of_the_child_runs_it_cancels(lua: Lua) -> None:
    """A tick's run whose sub-flow step waits for its child run of three jobs: the cancel's
    `jobs` counts the step and the child's three, as run.cancel's reply does."""
    create(lua, max_active=1)
    assert submit(lua, "b1", 0, TICKS[0], now=T0) == "submitted"
    step = f"{run_id(TICKS[0])}:a"
    assert lua.pop_jids(now=T0 + 1) == [step]
    child = f"{run_id(TICKS[0])}.a"
    jobs = [{"jid": f"{child}:{name}", "queue": "c", "klass": "K", "data": "{}"} for name in "xyz"]
    record = json.dumps({"flow": "c", "parent_run": run_id(TICKS[0]), "parent_step": "a"})
    waiting = lua.raw("subflow.wait", step, "w1", "q", child, record, json.dumps(jobs), now=T0 + 1)
    assert waiting == "waiting"
    reply = json.loads(lua.raw("backfill.cancel", "b1", now=T0 + 2))
    assert reply == {"state": "canceled", "changed": True, "runs": 1, "jobs": 4, "pending": 4}
    assert lua.state(f"{child}:x") is None
