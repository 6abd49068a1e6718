"""The scheduler service while its server is away: one warning when the connection is lost and
one line when it is back, for the whole process, not one per step (tick, scan, ...)."""

from __future__ import annotations

import re
from pathlib import Path

from fault_support import Valkey, outage_log

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
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "nightly.yaml").write_text(FLOW)
    intervals = ["--tick-interval", "0.2", "--scan-interval", "0.2"]
    intervals += ["--housekeeping-interval", "0.2", "--retention-interval", "0.2"]
    server, text = outage_log(
        ["scheduler", "--flows-dir", str(folder), *intervals],
        servers,
        tmp_path,
        started="registered schedule nightly",
        noticed="cannot reach Redis",
    )
    lost = [line for line in text.splitlines() if "cannot reach Redis" in line]
    assert len(lost) == 1, text
    assert "WARNING" in lost[0] and f"lost the connection to Redis at {server.socket}" in lost[0]
    back = [line for line in text.splitlines() if "is back after" in line]
    assert len(back) == 1, text
    away = re.search(r"is back after (\d+(?:\.\d+)?) s", back[0])
    assert away is not None and 3 <= float(away.group(1)) < 60, back[0]
    assert "working again" not in text, text
    assert "Traceback" not in text, text
