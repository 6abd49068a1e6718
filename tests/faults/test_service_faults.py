"""The scheduler service while its server is away: one warning when the connection is lost and
one line when it is back, for the whole process, not one per step (tick, scan, ...)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from fault_support import Valkey
from test_worker_faults import FLOWS, wait_until, worker_env

FLOW = """\
version: 1
name: nightly
queue: q
schedule: {cron: "0 3 * * *"}
steps:
  a: {run: "true"}
"""


def test_an_outage_is_one_warning_and_one_line_when_it_is_over(
    servers: list[Valkey], tmp_path: Path
) -> None:
    server = Valkey(tmp_path / "away")
    servers.append(server)
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(FLOW)
    log = tmp_path / "service.log"
    intervals = ["--tick-interval", "0.2", "--scan-interval", "0.2"]
    intervals += ["--housekeeping-interval", "0.2", "--retention-interval", "0.2"]
    with log.open("wb") as out:
        service = subprocess.Popen(
            [str(FLOWS), "scheduler", "--flows-dir", str(folder), *intervals],
            env=worker_env(server.url(), tmp_path / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "registered schedule nightly" in log.read_text(), 20, "the scan")
        server.stop()
        wait_until(lambda: "cannot reach Redis" in log.read_text(), 20, "the service to notice")
        time.sleep(3)  # every step fails many times meanwhile: real time, the service's clock
        servers.append(Valkey(tmp_path / "away"))
        wait_until(lambda: "is back after" in log.read_text(), 20, "the server back")
        service.send_signal(signal.SIGTERM)
        assert service.wait(30) == 0, log.read_text()
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
    text = log.read_text()
    lost = [line for line in text.splitlines() if "cannot reach Redis" in line]
    assert len(lost) == 1, text
    assert "WARNING" in lost[0] and f"lost the connection to Redis at {server.socket}" in lost[0]
    back = [line for line in text.splitlines() if "is back after" in line]
    assert len(back) == 1, text
    away = re.search(r"is back after (\d+(?:\.\d+)?) s", back[0])
    assert away is not None and 3 <= float(away.group(1)) < 60, back[0]
    assert "working again" not in text, text
    assert "Traceback" not in text, text
