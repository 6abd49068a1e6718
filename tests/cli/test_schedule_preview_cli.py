"""`flows schedules --preview N --after-outage FROM/TO`: what the registered schedules will do."""

from __future__ import annotations

import shutil
from pathlib import Path

from cli_support import flows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_registered_schedules_preview(url: str, tmp_path: Path) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    shutil.copy(EXAMPLES / "nightly.yaml", folder)
    shutil.copy(EXAMPLES / "nightly.test.yaml", folder)  # a test file is not a flow
    scanned = flows("scheduler", "--flows-dir", str(folder), "--once", "--redis", url)
    assert scanned.exit_code == 0, scanned.output
    result = flows(
        "schedules",
        "--preview",
        "2",
        "--after-outage",
        "2026-03-02T12:00:00Z/2026-03-05T12:00:00Z",
        "--redis",
        url,
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "nightly-report: 15 3 * * * (Europe/Berlin): next 2 fire times" in out
    assert out.count(" 03:15:00 CE") >= 2
    assert (
        "down from 2026-03-02T12:00:00Z to 2026-03-05T12:00:00Z, 3 ticks missed "
        "(catch-up policy latest, window 12h)"
    ) in out
    assert "fires 2026-03-05 03:15:00 CET      2026-03-05 02:15:00 UTC  [catch-up]" in out
    assert (
        "skips 2026-03-03 03:15:00 CET .. 2026-03-04 03:15:00 CET  (2: outside catch-up window 12h)"
    ) in out
    assert "nightly.test" not in out
