"""A worker's memory does not follow the longest line a job writes: a shell step printing one
200 MB line leaves the worker's peak RSS within 64 MB of the worker idle (measured in /proc)."""

from __future__ import annotations

import time
from pathlib import Path

from test_worker import SHELL, Processes, procs, put, wait_for, wait_state  # noqa: F401

from scheduler.engine import joblogs
from scheduler.engine.client import Client
from scheduler.engine.scripts import Engine

MB = 1024 * 1024


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of the process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def test_one_200_mb_line_keeps_the_workers_peak_rss_within_64_mb_of_idle(
    engine: Engine,
    procs: Processes,  # noqa: F811
) -> None:
    client = Client.from_engine(engine, worker_name="test-client")
    warm = put(client, "big", SHELL, {"command": "echo warm"})
    worker = procs.worker(["big"], name="big-lines", log_level="WARNING")
    wait_state(client, warm, "complete")
    time.sleep(0.5)  # the worker idles: its threads started, its first job done
    idle = _status(worker.pid)["VmRSS"]
    # Reset the peak to what the process holds now (Linux: write 5 to clear_refs).
    Path(f"/proc/{worker.pid}/clear_refs").write_text("5")
    size = 200 * MB
    command = f"head -c {size} /dev/zero | tr '\\0' x; echo; echo done"
    jid = put(client, "big", SHELL, {"command": command})
    wait_state(client, jid, "complete", timeout=120)
    peak = _status(worker.pid)["VmHWM"]
    assert peak - idle < 64 * MB, f"idle {idle / MB:.0f} MB, peak {peak / MB:.0f} MB"
    page = joblogs.read(engine, jid)
    assert [line.text[:4] for line in page.lines] == ["xxxx", "done"]
    print(f"worker RSS idle {idle / MB:.1f} MB, peak {peak / MB:.1f} MB")
    assert page.lines[0].cut == size - 16384 and page.dropped == 1
