"""Step logs end to end: a real worker captures what jobs write, per attempt and per thread,
stores it in batches bounded per attempt, and the lines are stored before the job is reported."""

from __future__ import annotations

import json
import threading

import pytest
from test_worker import (  # noqa: F401
    NO_BACKOFF,
    SHELL,
    Processes,
    procs,
    put,
    run_burst,
    wait_state,
)

from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine


@pytest.fixture
def client(engine: Engine) -> Client:
    return Client.from_engine(engine, worker_name="test-client")


def texts(engine: Engine, jid: str, attempt: int | None = None) -> list[tuple[str, str, str]]:
    page = joblogs.read(engine, jid, attempt)
    return [(line.stream, line.level, line.text) for line in page.lines]


def test_jobs_side_by_side_in_threads_keep_their_own_lines(engine: Engine, client: Client) -> None:
    jids = [
        put(client, "q", "chatty", {"tag": tag, "lines": 200, "together": True}) for tag in "ab"
    ]
    assert run_burst(engine, ["q"], threads=2) == 0
    for jid, tag in zip(jids, "ab", strict=True):
        lines = texts(engine, jid)
        assert lines == [
            *[("stdout", "", f"{tag} {i}") for i in range(200)],
            ("stderr", "", f"{tag} warns"),
            ("log", "WARNING", f"tasks.chatty: {tag} logged"),
        ]


def test_each_attempt_has_its_own_log(engine: Engine, client: Client) -> None:
    jid = put(
        client,
        "q",
        "chatty",
        {"tag": "x", "lines": 1, "fail_first": True},
        retry=NO_BACKOFF,
        retries=2,
    )
    run_burst(engine, ["q"])
    assert client.jobs[jid].state == "complete"
    first = joblogs.read(engine, jid, 1)
    assert [line.text for line in first.lines][:1] == ["x 0"]
    latest = joblogs.read(engine, jid)
    assert (latest.attempt, latest.attempts) == (2, 2)
    assert latest.lines[0].text == "x 0"


def test_a_shell_steps_output_is_captured_in_the_order_it_was_written(
    engine: Engine, client: Client
) -> None:
    jid = put(client, "q", SHELL, {"command": "echo out; echo err >&2; printf 'no newline'"})
    run_burst(engine, ["q"])
    assert texts(engine, jid) == [
        ("stdout", "", "out"),
        ("stdout", "", "err"),
        ("stdout", "", "no newline"),
    ]


def test_a_flood_is_bounded_and_counted(engine: Engine, client: Client) -> None:
    client.config["log-lines"] = 1000
    flood = put(client, "q", "flood", {"lines": 100_000})
    quiet = [put(client, "q", "chatty", {"tag": str(i), "lines": 1}) for i in range(20)]
    assert run_burst(engine, ["q"], threads=2) == 0
    page = joblogs.read(engine, flood, count=5)
    assert [line.text for line in page.lines] == ["0", "1", "2", "3", "4"]
    assert page.total == 1001  # the budget and the marker
    assert page.dropped == 100_000 - 1000
    marker = joblogs.read(engine, flood, offset=1000).lines
    assert [line.stream for line in marker] == ["truncated"]
    for jid in quiet:
        assert client.jobs[jid].state == "complete" and len(texts(engine, jid)) == 3


def test_lines_are_stored_before_the_job_is_reported(engine: Engine, client: Client) -> None:
    # The moment the engine says a job completed, its lines are there.
    jids = [put(client, "q", "chatty", {"tag": str(i), "lines": 2}) for i in range(50)]
    pubsub = engine.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(engine.key_prefix + "log")
    seen: dict[str, int] = {}
    done = threading.Event()

    def watch() -> None:
        while len(seen) < len(jids) and not done.is_set():
            message = pubsub.get_message(timeout=0.1)
            if message is None:
                continue
            event = json.loads(message["data"])
            if event.get("event") == "completed":
                seen[event["jid"]] = len(texts(engine, event["jid"]))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert run_burst(engine, ["q"], threads=4) == 0
        watcher.join(10)
    finally:
        done.set()
        pubsub.close()
    assert seen == dict.fromkeys(jids, 4)


def test_no_capture_stores_nothing(engine: Engine, client: Client) -> None:
    jid = put(client, "q", "chatty", {"tag": "x"})
    assert run_burst(engine, ["q"], capture_logs=False) == 0
    assert joblogs.read(engine, jid).attempts == 0


ALTERNATE = 'i=0; while [ "$i" -lt 1000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i + 1)); done'


def test_a_shell_steps_two_streams_keep_their_order_over_1000_rounds(
    engine: Engine, client: Client
) -> None:
    jid = put(client, "q", SHELL, {"command": ALTERNATE})
    run_burst(engine, ["q"])
    expected = [text for i in range(1000) for text in (f"out {i}", f"err {i}")]
    assert [text for _, _, text in all_lines(engine, jid)] == expected


def test_a_python_steps_streams_and_records_keep_their_order(
    engine: Engine, client: Client
) -> None:
    jid = put(client, "q", "alternating", {"rounds": 1000})
    run_burst(engine, ["q"])
    expected: list[tuple[str, str, str]] = []
    for i in range(1000):
        expected += [("stdout", "", f"out {i}"), ("stderr", "", f"err {i}")]
        if i % 10 == 0:
            expected.append(("log", "WARNING", f"tasks.alternating: record {i}"))
    assert all_lines(engine, jid) == expected


def all_lines(engine: Engine, jid: str) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    offset = 0
    while True:
        page = joblogs.read(engine, jid, offset=offset)
        out += [(line.stream, line.level, line.text) for line in page.lines]
        if len(page.lines) < joblogs.PAGE:
            return out
        offset = page.next


@pytest.mark.parametrize("where", ["shell", "python"])
def test_a_line_longer_than_kept_is_cut_and_its_cut_counted(
    engine: Engine, client: Client, where: str
) -> None:
    size = 3 * 1024 * 1024
    if where == "shell":
        command = f"head -c {size} /dev/zero | tr '\\0' y; echo; echo after"
        jid = put(client, "q", SHELL, {"command": command})
    else:
        jid = put(client, "q", "long_line", {"size": size})
    run_burst(engine, ["q"])
    page = joblogs.read(engine, jid)
    assert [line.text for line in page.lines] == ["y" * 16384, "after"]
    assert [line.cut for line in page.lines] == [size - 16384, 0]
    assert (page.dropped, page.cut) == (1, 1)  # the cut line counts as dropped, and as cut


def test_a_chain_of_steps_stores_each_steps_lines_with_its_complete(
    engine: Engine, client: Client
) -> None:
    # Lines waiting go in the round trip of the complete that pops the next link (complete.pop).
    jids: list[str] = []
    for i in range(10):
        depends = jids[-1:] or None
        jids.append(put(client, "q", "chatty", {"tag": str(i), "lines": 2}, depends=depends))
    assert run_burst(engine, ["q"]) == 0
    for i, jid in enumerate(jids):
        job = client.jobs[jid]
        assert job.state == "complete"
        assert [entry["what"] for entry in job.history] == ["put", "popped", "done"]
        assert [line for _, _, line in texts(engine, jid)][:2] == [f"{i} 0", f"{i} 1"]


def test_bytes_written_to_the_streams_buffers_go_to_the_log_not_the_workers_output(
    engine: Engine,
    client: Client,
    procs: Processes,  # noqa: F811
) -> None:
    """``sys.stdout.buffer.write`` is a write to stdout: stored decoded (the replacement
    character for what is not UTF-8, a character cut over two writes whole), and never sent
    raw to the worker's own output, where a control sequence would reach the terminal."""
    jid = put(client, "bytes", "bytes_out")
    worker = procs.worker(["bytes"], name="bytes-worker")
    wait_state(client, jid, "complete")
    assert texts(engine, jid) == [
        ("stdout", "", "\x1b[2J clear \ufffd"),
        ("stdout", "", "caf\u00e9"),
        ("stderr", "", "err bytes"),
    ]
    output = procs.log(worker)
    assert "clear" not in output and "\x1b" not in output, output
