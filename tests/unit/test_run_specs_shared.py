"""The jobs text a run sends (flows/expand/run_specs.py): what every job has alike, once."""

from __future__ import annotations

import json
from dataclasses import replace

from flows.expand.jobs import JobSpec
from flows.expand.run_specs import check_limits, compact_json, job_objects

JOB = JobSpec(
    jid="r:a",
    queue="q",
    klass="K",
    data={"n": 1},
    priority=0,
    tags=(),
    retries=0,
    depends=(),
    delay=0.0,
    trigger="all_success",
    step="a",
    index=None,
)


def test_fields_every_job_has_alike_are_sent_once() -> None:
    jobs = [
        JOB,
        replace(JOB, jid="r:b", data={"n": 2}, depends=("r:a",), concurrency_key="k"),
        replace(JOB, jid="r:c", data={}, queue="other", concurrency_key="k"),
    ]
    text = check_limits("r", jobs)
    sent = json.loads(text)
    assert sent["shared"] == {"klass": "K", "retries": 0, "trigger": "all_success"}
    assert sent["jobs"][0] == {"jid": "r:a", "queue": "q", "data": '{"n":1}'}
    # each job as the engine reads it: its own fields over the shared ones
    assert job_objects(text) == [job.to_engine(compact_json) for job in jobs]


def test_a_lone_job_shares_everything_but_its_own() -> None:
    sent = json.loads(check_limits("r", [replace(JOB, concurrency_key="k", concurrency_limit=2)]))
    assert sent["jobs"] == [{"jid": "r:a", "data": '{"n":1}'}]
    assert (sent["shared"]["concurrency_key"], sent["shared"]["concurrency_limit"]) == ("k", 2)


def test_an_array_of_jobs_reads_as_it_is() -> None:
    assert job_objects('[{"jid": "r:a"}]') == [{"jid": "r:a"}]
