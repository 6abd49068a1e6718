"""A job whose result the engine would refuse (a megabyte, NaN, 10,000 levels deep) fails at
once in group ``bad-result`` with a message naming the limit: it is not run again and again
until its lock and its retries run out."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from scheduler.engine.client import Client
from scheduler.secrets import remember
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

def as_text(job):
    import datetime, decimal, pathlib, uuid
    return {
        "at": datetime.datetime(2026, 3, 1, 12, 30, 5, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2026, 3, 1),
        "clock": datetime.time(7, 45),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "amount": decimal.Decimal("10.10"),
        "path": pathlib.Path("/data/out.csv"),
        "pair": (1, (2, datetime.date(2026, 1, 2))),
        "by_day": {1: datetime.date(2026, 1, 1), None: 0},  # keys as JSON writes them
    }

def plain_keys(job):
    return {"by_id": {1: "a", 2.5: "b", None: "d"}, "seen": {True: 1}, "pair": (1, 2)}

def a_set(job):
    return {"rows": [1, 2, {3, 4}]}

def equal_keys(job):
    return {"by": {1: "a", "1": "b"}}

def bytes_key(job):
    return {"by": {b"k": 1}}
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


def test_a_result_of_datetimes_uuids_decimals_and_paths_is_stored_as_their_text(
    client: Client, tmp_path: Path
) -> None:
    """Before, a result holding a ``datetime`` (or a ``Decimal``, a ``UUID``, a path) was stored
    as the whole result's ``repr()``: one text with no keys a dependent could read."""
    (tmp_path / "text_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)]}}
    jid = client.queues["texts"].put("text_tasks.as_text", data)
    Worker(client, ["texts"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    job = client.jobs[jid]
    assert job.state == "complete", job.failure
    assert job.result == {
        "at": "2026-03-01T12:30:05+00:00",
        "day": "2026-03-01",
        "clock": "07:45:00",
        "id": "12345678-1234-5678-1234-567812345678",
        "amount": "10.10",
        "path": "/data/out.csv",
        "pair": [1, [2, "2026-01-02"]],
        "by_day": {"1": "2026-01-01", "null": 0},
    }


def test_a_result_of_plain_values_has_its_keys_written_as_json_writes_them(
    client: Client, tmp_path: Path
) -> None:
    """As beside a datetime: before, the same keys were refused (``bad-result``) when nothing
    else in the result needed its text."""
    (tmp_path / "text_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)]}}
    jid = client.queues["texts"].put("text_tasks.plain_keys", data, retries=3)
    Worker(client, ["texts"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    job = client.jobs[jid]
    assert job.state == "complete", job.failure
    assert job.result == {
        "by_id": {"1": "a", "2.5": "b", "null": "d"},
        "seen": {"true": 1},
        "pair": [1, 2],
    }


@pytest.mark.parametrize(
    ("task", "envelope", "message"),
    [
        (
            "a_set",
            {"step": "load"},
            "the result of step 'load' cannot be stored: result.rows[2] is a set,"
            " which JSON cannot carry",
        ),
        (
            "equal_keys",
            {},
            "the result of text_tasks.equal_keys cannot be stored: result.by has two keys JSON"
            " writes alike, as \"1\": 1 (int) and '1' (str)",
        ),
        (
            "bytes_key",
            {},
            "the result of text_tasks.bytes_key cannot be stored: result.by has a key that is"
            " not text: b'k' (bytes)",
        ),
    ],
)
def test_a_result_json_cannot_carry_fails_naming_the_step_the_type_and_the_place(
    task: str, envelope: dict[str, str], message: str, client: Client, tmp_path: Path
) -> None:
    """Before, such a result was completed with its ``repr()`` text as the result."""
    (tmp_path / "text_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)], **envelope}}
    jid = client.queues["texts"].put(f"text_tasks.{task}", data, retries=3)
    Worker(client, ["texts"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    job = client.jobs[jid]
    assert job.state == "failed", job.result
    assert job.failure is not None and job.failure["group"] == "bad-result"
    assert job.failure["message"].startswith(message), job.failure["message"]
    assert sum(1 for h in job.history if h.get("what") == "popped") == 1


def test_a_result_is_stored_and_refused_alike_while_secrets_are_masked(
    client: Client, tmp_path: Path
) -> None:
    """Before, once the worker's process knew a secret (any job had read one), a result's
    ``None`` key was stored as ``"None"`` and a ``bytes`` key was stored as ``"b'k'"``."""
    remember(["Results-" + uuid.uuid4().hex])
    (tmp_path / "text_tasks.py").write_text(TASKS)
    data = {"_flows": {"pythonpath": [str(tmp_path)]}}
    stored = client.queues["texts"].put("text_tasks.as_text", data)
    refused = client.queues["texts"].put("text_tasks.bytes_key", data, retries=3)
    Worker(client, ["texts"], burst=True, sandbox_root=tmp_path / "sandbox").run()
    result = client.jobs[stored].result
    assert isinstance(result, dict) and result["by_day"] == {"1": "2026-01-01", "null": 0}
    failure = client.jobs[refused].failure
    assert failure is not None and failure["group"] == "bad-result", client.jobs[refused].result
    assert "result.by has a key that is not text: b'k' (bytes)" in failure["message"]
