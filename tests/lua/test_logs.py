"""Step logs in the engine: log.append (bounded per attempt, batched over jobs) and log.get;
the logs go with the job (retention, cancel, a put over it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import assert_unchanged
from lua_support import T0, Lua

from scheduler.engine.errors import EngineError, InvalidArgument, JobNotFound

DAY = 86400


def line(text: str, stream: str = "stdout", level: str = "", at: float = T0) -> list[Any]:
    return [at, stream, level, text]


def append(lua: Lua, *jobs: tuple[str, int, list[list[Any]]], dropped: int = 0) -> list[str]:
    args: list[Any] = []
    for jid, attempt, lines in jobs:
        args += [jid, attempt, dropped, len(lines)]
        for entry in lines:
            args += entry
    replies: list[str] = json.loads(lua.raw("log.append", *args, now=T0))
    return replies


def get(lua: Lua, jid: str, *args: Any) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(lua.raw("log.get", jid, *args, now=T0))
    return reply


def test_lines_of_several_jobs_in_one_call_read_back_per_attempt(lua: Lua) -> None:
    lua.put("a")
    lua.put("b")
    replies = append(
        lua,
        ("a", 1, [line("one"), line("oops", "stderr"), line("note", "log", "INFO")]),
        ("b", 1, [line("b says")]),
        ("a", 2, [line("again")]),
    )
    assert replies == ["ok", "ok", "ok"]
    latest = get(lua, "a")
    assert (latest["attempt"], latest["attempts"], latest["total"]) == (2, 2, 1)
    assert [entry["m"] for entry in latest["lines"]] == ["again"]
    first = get(lua, "a", 1)
    assert first["lines"] == [
        {"t": T0, "s": "stdout", "m": "one"},
        {"t": T0, "s": "stderr", "m": "oops"},
        {"t": T0, "s": "log", "l": "INFO", "m": "note"},
    ]
    page = get(lua, "a", 1, 1, 1)
    assert ([e["m"] for e in page["lines"]], page["next"]) == (["oops"], 2)
    assert get(lua, "b")["lines"][0]["m"] == "b says"


def test_a_job_without_lines_has_an_empty_log(lua: Lua) -> None:
    lua.put("a")
    reply = get(lua, "a")
    assert (reply["attempt"], reply["attempts"], reply["lines"], reply["next"]) == (0, 0, [], 0)


def test_an_attempt_keeps_at_most_its_budget_and_says_it_was_truncated(lua: Lua) -> None:
    lua.put("a")
    lua.config("log-lines", 3)
    assert append(lua, ("a", 1, [line("l1"), line("l2")])) == ["ok"]
    assert append(lua, ("a", 1, [line("l3"), line("l4"), line("l5")])) == ["full"]
    assert append(lua, ("a", 1, [line("l6")]), dropped=10) == ["full"]
    reply = get(lua, "a")
    assert [e["m"] for e in reply["lines"][:3]] == ["l1", "l2", "l3"]
    assert reply["lines"][3]["s"] == "truncated"  # one marker, however many calls dropped lines
    assert (reply["total"], reply["dropped"]) == (4, 2 + 1 + 10)
    # another attempt has its own budget
    assert append(lua, ("a", 2, [line("fresh")])) == ["ok"]


def test_the_byte_budget_counts_text(lua: Lua) -> None:
    lua.put("a")
    lua.config("log-bytes", 10)
    assert append(lua, ("a", 1, [line("12345"), line("67890"), line("x")])) == ["full"]
    reply = get(lua, "a")
    assert [e["m"] for e in reply["lines"]][:2] == ["12345", "67890"]
    assert (reply["bytes"], reply["dropped"]) == (10, 1)


def test_lines_of_a_job_that_is_gone_are_not_kept(lua: Lua) -> None:
    with assert_unchanged(lua.r):
        assert append(lua, ("nope", 1, [line("x")])) == ["gone"]


def test_logs_go_with_the_job(lua: Lua) -> None:
    lua.config("jobs-history", DAY)
    lua.put("a")
    lua.put("b")
    append(lua, ("a", 1, [line("x")]), ("a", 2, [line("y")]), ("b", 1, [line("z")]))
    lua.pop(now=T0 + 1)
    lua.complete("a", now=T0 + 2)
    lua.raw("maintain.retention", 100, 0, now=T0 + DAY + 5)
    assert lua.job("a") is None
    lua("cancel", "b", now=T0 + 3)
    assert not [key for key in lua.namespace_keys() if "log:" in key]


def test_a_put_over_a_job_starts_its_logs_afresh(lua: Lua) -> None:
    lua.put("a")
    append(lua, ("a", 1, [line("old")]), ("a", 3, [line("older")]))
    lua.put("a", now=T0 + 1)
    assert get(lua, "a")["attempts"] == 0
    assert not [key for key in lua.namespace_keys() if "log:" in key]
    fields = lua.r.hkeys(lua.key("j:a"))
    assert not [f for f in fields if f.startswith("log")]


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("a",),
        ("a", 0, 0, 1, T0, "stdout", "", "x"),  # attempt 0
        ("a", 1, -1, 1, T0, "stdout", "", "x"),  # dropped < 0
        ("a", 1, 0, 2, T0, "stdout", "", "x"),  # announces more lines than follow
        ("a", 1, 0, 1, "soon", "stdout", "", "x"),
        ("a", 1, 0, 1, T0, "stdin", "", "x"),
        ("a", 1, 0, 1, T0, "log", "L" * 17, "x"),
        ("a", 1, 0, 1, T0, "stdout", "", "x" * 16385),
        ("a", 1, 0, 1, T0, "stdout", "", "ok", "b", "x", 0, 0),  # the second job is bad
    ],
)
def test_bad_appends_change_nothing(lua: Lua, args: tuple[Any, ...]) -> None:
    lua.put("a")
    lua.put("b")
    with assert_unchanged(lua.r), pytest.raises(EngineError, match="LogAppend"):
        lua.raw("log.append", *args, now=T0)


def test_log_get_refuses_what_it_cannot_answer(lua: Lua) -> None:
    with pytest.raises(JobNotFound, match="LogGet"):
        lua.raw("log.get", "nope", now=T0)
    lua.put("a")
    with pytest.raises(InvalidArgument, match="LogGet"):
        lua.raw("log.get", "a", 1, 0, 1001, now=T0)


def submit_run(lua: Lua, run_id: str, *steps: str) -> list[str]:
    jobs = [{"jid": f"{run_id}:{step}", "queue": "q", "klass": "K", "data": "{}"} for step in steps]
    lua.raw("flow.submit", run_id, json.dumps({"flow": "f"}), json.dumps(jobs), now=T0)
    return [job["jid"] for job in jobs]


def test_a_runs_cancel_keeps_what_its_jobs_wrote_until_the_run_goes(lua: Lua) -> None:
    [jid] = submit_run(lua, "r1", "a")
    [popped] = lua("pop.lean", "q", "w1", 1, now=T0)  # running when its run is canceled
    assert popped["runs"] == 1
    append(lua, (jid, 1, [line("tick 1"), line("tick 2")]))
    lua.raw("run.cancel", "r1", now=T0 + 1)
    assert lua("get", jid, now=T0 + 1) is None
    # the canceled running job's last lines still join its log
    assert append(lua, (jid, 1, [line("stopping")])) == ["ok"]
    page = get(lua, jid)
    assert [entry["m"] for entry in page["lines"]] == ["tick 1", "tick 2", "stopping"]
    assert (page["attempt"], page["attempts"], page["total"]) == (1, 1, 3)
    # a new job of the same jid logs afresh
    lua.put(jid)
    assert get(lua, jid)["attempts"] == 0
    lua("cancel", jid, now=T0 + 2)
    # the run's retention takes the kept logs with it
    lua.raw("maintain.retention", now=T0 + 400 * DAY)
    assert [k for k in lua.r.keys(lua.key("*")) if "log" in k] == []


def test_each_start_of_a_job_is_its_own_attempt_across_a_release_and_a_runs_retry(
    lua: Lua,
) -> None:
    [jid] = submit_run(lua, "r2", "a")
    starts = []
    for when in (1, 2):
        [job] = lua("pop.lean", "q", "w1", 1, now=T0 + when)
        starts.append(job["runs"])
        append(lua, (jid, job["runs"], [line(f"run {job['runs']}")]))
        if when == 1:  # handed back at shutdown: no retry used
            lua("release", jid, "w1", now=T0 + when)
    lua("fail", jid, "w1", "boom", "failed", "{}", now=T0 + 3)
    assert lua.raw("run.retry", "r2", now=T0 + 4) == 1  # the run resumed: logs kept
    [job] = lua("pop.lean", "q", "w1", 1, now=T0 + 5)
    starts.append(job["runs"])
    append(lua, (jid, job["runs"], [line(f"run {job['runs']}")]))
    assert starts == [1, 2, 3]
    assert [get(lua, jid, n)["lines"][0]["m"] for n in (1, 2, 3)] == ["run 1", "run 2", "run 3"]
    assert get(lua, jid)["attempts"] == 3


def test_a_cut_line_counts_as_dropped_and_as_cut(lua: Lua) -> None:
    lua.put("a")
    append(lua, ("a", 1, [line("x" * 10, level="/5000"), line("rec", "log", "INFO/7")]))
    page = get(lua, "a")
    assert [(e.get("c"), e.get("l")) for e in page["lines"]] == [(5000, None), (7, "INFO")]
    assert (page["dropped"], page["cut"], page["total"]) == (2, 2, 2)
    assert append(lua, ("a", 1, [line("more")])) == ["ok"]  # a cut line does not fill the log


def test_a_requeue_keeps_the_attempts_a_put_over_the_job_starts_afresh(lua: Lua) -> None:
    lua.put("a")
    [job] = lua("pop.lean", "q", "w1", 1, now=T0)
    append(lua, ("a", job["runs"], [line("first")]))
    lua("fail", "a", "w1", "boom", "failed", "{}", now=T0 + 1)
    lua("requeue", "w1", "q", "a", "K", "{}", 0, now=T0 + 2)
    [again] = lua("pop.lean", "q", "w1", 1, now=T0 + 3)
    assert again["runs"] == 2
    assert get(lua, "a", 1)["lines"][0]["m"] == "first"
    lua.put("a")
    assert get(lua, "a")["attempts"] == 0
    [fresh] = lua("pop.lean", "q", "w1", 1, now=T0 + 4)
    assert fresh["runs"] == 1


def test_a_canceled_runs_retry_keeps_the_attempts_before_it(lua: Lua) -> None:
    """Its step logs come back with the job, and its next start is numbered after them."""
    [jid] = submit_run(lua, "r3", "a")
    for attempt in (1, 2):
        [job] = lua("pop.lean", "q", "w1", 1, now=T0 + attempt)
        assert job["runs"] == attempt
        append(lua, (jid, attempt, [line(f"attempt {attempt}")]))
        if attempt == 1:
            lua.raw("fail", jid, "w1", "boom", "it broke", "{}", now=T0 + 1.5)
            lua.raw("run.retry", "r3", now=T0 + 1.6)
    lua.raw("run.cancel", "r3", now=T0 + 3)
    assert get(lua, jid)["attempts"] == 2
    lua.raw("run.retry", "r3", now=T0 + 4)
    assert get(lua, jid, 1)["lines"][0]["m"] == "attempt 1"
    assert get(lua, jid, 2)["lines"][0]["m"] == "attempt 2"
    [job] = lua("pop.lean", "q", "w1", 1, now=T0 + 5)
    assert job["runs"] == 3
    append(lua, (jid, 3, [line("attempt 3")]))
    page = get(lua, jid)
    assert (page["attempt"], page["attempts"]) == (3, 3)
    assert lua.r.exists(lua.key(f"log-kept-counts:{jid}")) == 0
    assert lua.r.smembers(lua.key("run:r3-kept-logs")) == set()
