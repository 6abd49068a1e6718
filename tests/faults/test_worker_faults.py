"""Workers under faults, as real processes: a full server at start is waited out (no restart
loop, one log line), and an embedded server killed under a worker is started again by it; in
both cases every job is done once the fault is gone, with a log line per change of state, not
one per attempt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from fault_support import FLOWS, Valkey, outage_log, wait_until, worker_env

from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client


def put_jobs(client: Client, count: int, first: int = 0) -> list[str]:
    return [
        client.queues["q"].put("fault_tasks.noop", {"n": n}, jid=f"job-{n}")
        for n in range(first, first + count)
    ]


def all_complete(client: Client, jids: list[str]) -> bool:
    return all(job.state == "complete" for job in client.jobs.multiget(*jids))


def test_a_worker_pool_waits_out_a_full_server_without_a_restart_loop(
    servers: list[Valkey], tmp_path: Path
) -> None:
    server = Valkey(tmp_path / "full")
    servers.append(server)
    client = Client(server.url())
    jids = put_jobs(client, 20)
    server.fill_memory()
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        pool = subprocess.Popen(
            [str(FLOWS), "worker", "-q", "q", "--burst", "--processes", "1"],
            env=worker_env(server.url(), tmp_path / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "out of memory" in log.read_text(), 20, "the worker to say so")
        time.sleep(1.5)  # several attempts, all refused
        assert pool.poll() is None, log.read_text()
        assert not any(job.state == "complete" for job in client.jobs.multiget(*jids))
        server.free_memory()
        assert pool.wait(30) == 0, log.read_text()
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.wait()
    text = log.read_text()
    assert all_complete(client, jids)
    assert "Traceback" not in text
    assert text.count("out of memory") == 1, text
    assert "restarting" not in text, text
    assert "working again" in text, text
    client.close()


def test_a_worker_starts_its_embedded_server_again_when_it_died(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    embedded = EmbeddedServer(data_dir, appendfsync="everysec")
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(FLOWS), "worker", "-q", "q", "--processes", "0"],
            env=worker_env(None, data_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "started on q" in log.read_text(), 20, "the worker to start")
        client = Client(embedded.url)
        first = put_jobs(client, 5)
        wait_until(lambda: all_complete(client, first), 20, "the first jobs")
        client.close()
        pid = int(embedded.pid_path.read_text())
        os.kill(pid, signal.SIGKILL)
        # Started again within a second or so: too short an outage to say (see below).
        noticed = "started the embedded server again"
        wait_until(lambda: noticed in log.read_text(), 20, "the worker to notice")
        # Nobody else starts it: is_running only probes.
        wait_until(embedded.is_running, 20, "the worker to start the server again")
        assert int(embedded.pid_path.read_text()) != pid
        client = Client(embedded.url)
        second = put_jobs(client, 5, first=5)
        wait_until(lambda: all_complete(client, second), 20, "the jobs put after the restart")
        client.close()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        embedded.stop()
    text = log.read_text()
    assert "started the embedded server again" in text, text
    assert "Traceback" not in text, text
    # one line for the whole worker if the restart took over a second, not one per activity
    assert text.count("cannot reach Redis") <= 1, text


def test_a_worker_says_once_that_its_connection_is_lost_and_once_that_it_is_back(
    servers: list[Valkey], tmp_path: Path
) -> None:
    """A server away for seconds: fetching, heartbeats, lease renewals (tried every second),
    registration and the lock-lost listener all fail meanwhile; the worker says it once when
    the connection is lost, naming the server, and once when it is back, not once per
    activity."""
    server, text = outage_log(
        ["worker", "-q", "q", "--processes", "0"],
        servers,
        tmp_path,
        started="started on q",
        noticed="lost the connection",
        settle=1,  # every activity meets the server again
    )
    lines = text.splitlines()
    lost = [x for x in lines if "cannot reach Redis" in x]
    assert len(lost) == 1, text
    assert "WARNING" in lost[0] and f"lost the connection to Redis at {server.socket}" in lost[0]
    assert lost[0].endswith("none is fetched until it is back, retrying at most every 2s)")
    back = [x for x in lines if "is back after" in x]
    assert len(back) == 1, text
    assert "working again" not in text, text
    assert "Traceback" not in text, text
    # it held no job: no warning that its jobs were taken
    assert next(x for x in lines if "lapsed" in x).endswith("its lease lapsed; it held no jobs")


def test_what_an_outage_keeps_from_the_engine_is_said_in_two_lines_not_one_a_job(
    servers: list[Valkey], tmp_path: Path
) -> None:
    """Jobs that end while the server is away cannot report their outcomes (nor store their
    lines): a warning each buried the outage's own two lines under one a job. Now the first is
    said with what follows from it, and the rest in one line once a send succeeds or the
    worker stops."""
    server = Valkey(tmp_path / "away")
    servers.append(server)
    client = Client(server.url())
    gate = tmp_path / "gate"
    jids = [
        client.queues["q"].put("fault_tasks.gated", {"gate": str(gate)}, jid=f"job-{n}")
        for n in range(8)
    ]
    log = tmp_path / "worker.log"
    args = ["worker", "-q", "q", "--threads", "8", "--processes", "0", "--log-level", "debug"]
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(FLOWS), *args],
            env=worker_env(server.url(), tmp_path / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        running = lambda: all(job.state == "running" for job in client.jobs.multiget(*jids))  # noqa: E731
        wait_until(running, 20, "every job running")
        server.stop()
        gate.touch()  # every job ends now, while the server is away
        # Two at least (each job's first try is a line, at DEBUG after the first): something
        # for the summary to count, however the jobs' ends fall into batches.
        unsent = lambda: log.read_text().count(": outcome complete not sent (")  # noqa: E731
        wait_until(lambda: unsent() >= 2, 20, "two completes tried")
        wait_until(lambda: "lost the connection" in log.read_text(), 20, "the outage said")
        servers.append(Valkey(tmp_path / "away"))
        wait_until(lambda: "is back after" in log.read_text(), 20, "the server back")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    lines = log.read_text().splitlines()
    assert not [x for x in lines if "WARNING" in x and "could not report" in x]
    warned = [x for x in lines if "WARNING" in x and "outcome complete not sent" in x]
    assert len(warned) == 1, "\n".join(lines)
    assert warned[0].endswith(
        "its job is held and the outcome sent again until the engine has it. Until a send"
        " succeeds, the others are counted"
    )
    tried = {
        x.split("job ", 1)[1].split(":", 1)[0] for x in lines if "outcome complete not sent (" in x
    }
    assert len(tried) >= 2 and tried <= set(jids), tried
    [summary] = [x for x in lines if "the outcome of" in x]
    more = len(tried) - 1
    said = f"the outcome of {more} more {'job' if more == 1 else 'jobs'} not sent while the server"
    assert f"{said} was away (for each, " in summary, "\n".join(lines)
    named = summary.rpartition("): ")[2].split(" and ")[0].split(", ")
    assert len(named) == min(more, 5) and set(named) <= tried, summary
    assert len([x for x in lines if "WARNING" in x and "step log lines not sent" in x]) <= 1
    assert "Traceback" not in "\n".join(lines)
