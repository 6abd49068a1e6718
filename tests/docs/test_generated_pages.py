"""The generated reference pages are committed and read in the repository as on the site: this
fails when flow-reference.md or cli.md drifted from the schema or the command line (regenerate
them with `python docs/hooks/flow_reference.py`, see docs/pages/development.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "pages"


def test_the_committed_reference_pages_match_the_schema_and_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "docs/hooks/flow_reference.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reference_pages_hold_their_content_not_a_placeholder() -> None:
    reference = (PAGES / "flow-reference.md").read_text()
    assert "| `steps` (required) |" in reference
    cli = (PAGES / "cli.md").read_text()
    assert "### `flows run`" in cli and "`--log-level" in cli and "`--check-imports" in cli
    assert "::: mkdocs-click" not in cli
