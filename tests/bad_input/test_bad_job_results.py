"""A job whose result the engine would refuse (a megabyte, NaN, 10,000 levels deep) fails at
once in group ``bad-result`` with a message naming the limit: it is not run again and again
until its lock and its retries run out."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.engine.client import Client
from scheduler.worker import Worker

TASKS = """
import math

def megabyte(job):
    return "x" * (1024 * 1024)

def not_a_number(job):
    return {"value": math.nan}

def deep(job):
    value = 1
    for _ in range(10_000):
        value = [value]
    return value

def one_too_deep(job):
    value = 1
    for _ in range(65):  # the limit of a result is 64 levels
        value = [value]
    return value

def fine(job):
    return {"ok": True}

RAN = []

async def coroutine(job):
    RAN.append(job.jid)

def generator(job):
    RAN.append(job.jid)
    yield 1

async def async_generator(job):
    RAN.append(job.jid)
    yield 1
"""


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("megabyte", "more than the limit of 524288"),
        ("not_a_number", "not valid JSON"),
        ("deep", "nests"),
        ("one_too_deep", 'Arg "result" nests more than 64 levels deep'),
    ],
)
def test_a_result_the_engine_would_refuse_fails_the_job_once(
    task: str, message: str, client: Client, tmp_path: Path
) -> None:
    (tmp_path / "result_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)]}}
    queue = client.queues["results"]
    bad = queue.put(f"result_tasks.{task}", data, retries=3)
    good = queue.put("result_tasks.fine", data)
    Worker(client, ["results"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    job = client.jobs[bad]
    assert job.state == "failed"
    assert job.failure is not None and job.failure["group"] == "bad-result"
    assert message in job.failure["message"]
    assert sum(1 for h in job.history if h.get("what") == "popped") == 1
    assert client.jobs[good].state == "complete"


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("coroutine", "the job function returned a coroutine (is it an async def?)"),
        ("generator", "the job function returned a generator"),
        ("async_generator", "the job function returned an async generator"),
    ],
)
def test_a_job_function_whose_body_never_ran_fails_not_completes(
    task: str, message: str, client: Client, tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    """An ``async def`` (or a generator function) returns without running its body: the job
    was completed with ``'<coroutine object ...>'`` as its result, having done nothing."""
    (tmp_path / "body_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)]}}
    jid = client.queues["bodies"].put(f"body_tasks.{task}", data, retries=3)
    Worker(client, ["bodies"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    job = client.jobs[jid]
    assert job.state == "failed", job.result
    assert job.failure is not None and job.failure["group"] == "bad-result"
    assert message in job.failure["message"]
    assert "asyncio.run" in job.failure["message"]
    assert sum(1 for h in job.history if h.get("what") == "popped") == 1
    assert not [w for w in recwarn if "never awaited" in str(w.message)]
