"""How deeply the JSON the engine stores may nest: a job's data and a run's record at most
``Arg.MAX_NESTING`` (100) levels, a result (complete's, a wait's signal data) at most
``Arg.MAX_RESULT_NESTING`` (64); one level more is refused before anything is written, the job
left as it was (a running job stays running, its worker's to fail)."""

from __future__ import annotations

import json

import pytest
from lua_support import T0, Lua, unchanged

from scheduler.engine import limits
from scheduler.engine.errors import InvalidArgument

DATA = limits.MAX_JSON_DEPTH
RESULT = limits.MAX_RESULT_DEPTH


def nested(levels: int) -> str:
    """JSON text of an object nested ``levels`` levels deep (the outer object is level 1)."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


def running(lua: Lua, jid: str = "a") -> None:
    lua.put(jid)
    assert lua.pop_jids() == [jid]


def test_the_limits_are_the_clients() -> None:
    assert (DATA, RESULT) == (100, 64)
    assert json.loads(nested(3)) == {"a": {"a": {}}}
    assert limits.json_depth(json.loads(nested(RESULT))) == RESULT


def test_a_result_at_the_limit_completes_and_one_level_more_leaves_the_job_running(
    lua: Lua,
) -> None:
    running(lua, "at")
    assert lua.complete("at", result=nested(RESULT)) == "complete"
    job = lua.job("at")
    assert job is not None and job["result"] == nested(RESULT)
    running(lua, "past")
    with unchanged(lua.r), pytest.raises(InvalidArgument) as refused:
        lua.complete("past", result=nested(RESULT + 1))
    assert str(refused.value) == f'Complete(): Arg "result" nests more than {RESULT} levels deep'
    assert lua.state("past") == "running"


def test_complete_many_refuses_the_deep_result_alone(lua: Lua) -> None:
    running(lua, "at")
    running(lua, "past")
    reply = lua.raw(
        "complete.many", "w1", "at", "q", nested(RESULT), "past", "q", nested(RESULT + 1), now=T0
    )
    assert json.loads(reply) == [
        "complete",
        f'INVALID Complete(): Arg "result" nests more than {RESULT} levels deep',
    ]
    assert lua.state("at") == "complete"
    assert lua.state("past") == "running"


def test_job_data_at_the_limit_is_put_and_one_level_more_is_refused(lua: Lua) -> None:
    assert lua.put("at", data=nested(DATA)) == "at"
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f"nests more than {DATA} levels"):
        lua.put("past", data=nested(DATA + 1))
    assert lua.pop_jids() == ["at"]
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f'"data" nests more than {DATA}'):
        lua.complete("at", data=nested(DATA + 1))
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f'"data" nests more than {DATA}'):
        lua("heartbeat", "at", "w1", nested(DATA + 1), now=T0)
    assert lua.state("at") == "running"


def test_a_run_whose_record_or_job_data_nests_too_deeply_is_refused_whole(lua: Lua) -> None:
    def spec(data: str) -> str:
        return json.dumps([{"jid": "r:s", "queue": "q", "klass": "K", "data": data}])

    record = json.dumps({"flow": "f", "params": json.loads(nested(DATA - 1))})
    assert lua("flow.submit", "r", record, spec(nested(DATA)), now=T0) == "submitted"
    deep_record = json.dumps({"flow": "f", "params": json.loads(nested(DATA))})
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f'"run" nests more than {DATA}'):
        lua("flow.submit", "r2", deep_record, spec("{}"), now=T0)
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f'"data" nests more than {DATA}'):
        lua("flow.submit", "r2", json.dumps({"flow": "f"}), spec(nested(DATA + 1)), now=T0)


def test_signal_data_nest_as_a_result_may(lua: Lua) -> None:
    jobs = [
        {"jid": f"r:{name}", "queue": "q", "klass": "K", "data": "{}", "wait": {"signal": name}}
        for name in ("at", "past")
    ]
    lua("flow.submit", "r", json.dumps({"flow": "f"}), json.dumps(jobs), now=T0)
    with unchanged(lua.r), pytest.raises(InvalidArgument, match=f"nests more than {RESULT}"):
        lua("wait.signal", "r:past", nested(RESULT + 1), now=T0)
    assert lua.state("r:past") == "awaiting"
    assert lua("wait.signal", "r:at", nested(RESULT), now=T0) == "complete"


def test_a_schedule_definition_nested_too_deeply_is_refused(lua: Lua) -> None:
    """What the engine keeps for a reader nests at most as deep as job data, whoever sends it
    (the scheduler service checks a flow file's nesting; a direct call does not)."""
    definition = {
        "flow": "f",
        "hash": "h1",
        "file": "/f.yaml",
        "cron": ["* * * * *"],
        "timezone": "UTC",
        "overlap": "buffer_one",
        "catchup": "latest",
    }
    at = json.dumps({**definition, "params": json.loads(nested(DATA - 1))})
    past = json.dumps({**definition, "params": json.loads(nested(DATA))})
    with unchanged(lua.r), pytest.raises(InvalidArgument) as refused:
        lua.raw("schedule.register", "f", past, "src", "", "", "", now=T0)
    assert str(refused.value) == (
        f'ScheduleRegister(): Arg "definition" nests more than {DATA} levels deep'
    )
    assert lua.raw("schedule.register", "f", at, "src", "", "", "", now=T0) == "registered"


def test_reads_send_a_history_entry_nested_deeper_than_cjson_goes_as_it_is(lua: Lua) -> None:
    """An entry kept before the limits: each read of the job carries its text for the reader to
    cut (scheduler.engine.limits.read_json) instead of failing in the engine's decoder."""
    deep = "[" * 5_000 + "]" * 5_000
    entry = f'{{"what":"note","when":{T0},"detail":{deep}}}'
    running(lua, "old")
    lua.r.rpush(lua.key("j:old-history"), entry)
    assert entry in lua.raw("get", "old", now=T0)
    assert entry in lua.raw("multiget", "old", "gone", now=T0)
    lua.raw("track", "track", "old", now=T0)
    assert entry in lua.raw("track", now=T0)
    lua.raw("fail", "old", "w1", "group", "message", now=T0)
    reply = lua.raw("failed", "group", now=T0)
    assert entry in reply
    assert json.loads(reply.replace(deep, "[]"))["total"] == 1
