"""Flow YAML to engine put options: heartbeat -> ttr, foreach.max_parallel -> a concurrency key,
ttl and throttle (steps, hooks and defaults), as ``flow.submit`` job specs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePath
from textwrap import dedent

from flows_support import check, valid

from flows.expand.jobs import JobSpec, expand
from flows.expand.run_specs import compact_json
from flows.flowfile.model import json_schema

RUN = "etl-1"


def plan(text: str) -> dict[str, JobSpec]:
    flow = valid(text)
    puts = expand(
        flow,
        run_id=RUN,
        logical_time=datetime(2026, 1, 1, tzinfo=UTC),
        params={},
        flow_dir=PurePath("/srv"),
    )
    return {put.jid[len(RUN) + 1 :]: put for put in puts}


FLOW = dedent(
    """\
    version: 1
    name: etl
    defaults: {heartbeat: 30s, throttle: warehouse}
    steps:
      extract: {job: tasks.extract, ttl: 10m, heartbeat: 0}
      load:
        job: tasks.load
        needs: [extract]
        throttle: "api:v2"
        foreach: {items: [de, at, ch], max_parallel: 2}
    hooks:
      finally: {job: tasks.cleanup, ttl: 1h}
    """
)


def test_the_step_options_become_put_options() -> None:
    puts = plan(FLOW)
    extract = puts["extract"].to_engine(compact_json)
    assert extract["ttl"] == 600.0 and extract["throttle"] == "warehouse"
    assert "ttr" not in extract and "concurrency_key" not in extract  # heartbeat 0: the queue's
    for index in range(3):
        load = puts[f"load[{index}]"].to_engine(compact_json)
        assert (load["ttr"], load["throttle"]) == (30.0, "api:v2")
        assert (load["concurrency_key"], load["concurrency_limit"]) == (f"{RUN}:load", 2)
        assert "ttl" not in load
    hook = puts["finally"].to_engine(compact_json)
    assert (hook["ttl"], hook["ttr"], hook["throttle"]) == (3600.0, 30.0, "warehouse")


def test_a_plain_step_sends_none_of_them() -> None:
    job = plan("version: 1\nname: etl\nsteps:\n  a: {job: tasks.a}\n")["a"]
    spec = job.to_engine(compact_json)
    assert not {"ttl", "ttr", "concurrency_key", "concurrency_limit", "throttle"} & set(spec)


def test_the_schema_and_validation_know_them() -> None:
    step = json_schema()["$defs"]["Step"]["properties"]
    assert {"ttl", "throttle"} <= set(step)
    findings = check(
        "version: 1\nname: etl\nsteps:\n  a: {job: tasks.a, throttle: 'a b', ttl: soon}\n"
    )
    messages = " ".join(f.message for f in findings)
    assert len(findings) == 2 and "throttle" in messages and "ttl" in messages, messages
