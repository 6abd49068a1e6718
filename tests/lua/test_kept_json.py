"""JSON the engine decodes and keeps field by field (a run's object, a backfill's definition):
its numbers come back as they were given (cjson writes a number with 14 significant digits, so
a value it would write changed is kept as the text the caller sent), and a null field is not
kept (as a field left out)."""

from __future__ import annotations

import json

from lua_support import T0, Lua

# Past 14 significant digits: a 17-digit id and an epoch time in microseconds.
PARAMS = '{"id": 12345678901234567, "at": 1699923600.123456, "small": 0.1, "list": [1e-7, 3]}'
TICK = "1699923600.123456"


def test_a_run_record_keeps_its_numbers_exactly(lua: Lua) -> None:
    record = f'{{"flow": "f", "params": {PARAMS}, "tick": {TICK}, "outputs": {{"n": 2}}}}'
    jobs = json.dumps([{"jid": "r:a", "queue": "q", "klass": "K", "data": "{}"}])
    assert lua.raw("flow.submit", "r", record, jobs, now=T0) == "submitted"
    run = json.loads(lua.raw("run.get", "r", now=T0))
    assert run["params"] == PARAMS
    assert run["tick"] == TICK
    assert run["flow"] == "f"
    assert json.loads(run["outputs"]) == {"n": 2}


def test_a_backfill_keeps_its_definition_s_numbers_exactly(lua: Lua) -> None:
    definition = f'{{"flow": "f", "cron": ["0 * * * *"], "params": {PARAMS}}}'
    record = f'{{"flow": "f", "definition": {definition}, "hash": "h"}}'
    created = lua.raw("backfill.create", "b", record, "src", json.dumps([T0]), '["f@1"]', now=T0)
    assert created == "created"
    backfill = json.loads(lua.raw("backfill.get", "b", "1", now=T0))
    assert backfill["definition"] == definition


def test_a_null_field_of_a_run_object_is_not_kept(lua: Lua) -> None:
    record = '{"flow": "f", "schedule": null, "params": {"a": null}}'
    jobs = json.dumps([{"jid": "r:a", "queue": "q", "klass": "K", "data": "{}"}])
    assert lua.raw("flow.submit", "r", record, jobs, now=T0) == "submitted"
    run = json.loads(lua.raw("run.get", "r", now=T0))
    assert "schedule" not in run
    assert json.loads(run["params"]) == {"a": None}


def test_a_null_file_of_a_backfill_record_is_no_file(lua: Lua) -> None:
    record = '{"flow": "f", "definition": {}, "hash": "h", "file": null}'
    created = lua.raw("backfill.create", "b", record, "src", json.dumps([T0]), '["f@1"]', now=T0)
    assert created == "created"
    assert json.loads(lua.raw("backfill.get", "b", now=T0))["file"] == ""
