"""The documentation site builds in strict mode (a broken link, a missing page or a bad reference
fails), and its generated references cover every command and every field of a flow file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from flows.cli import main
from flows.flowfile.model import json_schema

REPO = Path(__file__).resolve().parents[2]
MKDOCS_BUILD = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", "docs/mkdocs.yml"]

pytestmark = pytest.mark.slow  # a whole site build: about ten seconds


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [*MKDOCS_BUILD, "-d", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_cli_reference_lists_every_command(site: Path) -> None:
    page = (site / "cli" / "index.html").read_text()
    names = main.list_commands(click.Context(main))  # every command, loaded or not
    assert names
    missing = [name for name in names if f"flows {name}" not in page]
    assert not missing


def test_the_flow_reference_lists_every_field(site: Path) -> None:
    page = (site / "flow-reference" / "index.html").read_text()
    schema = json_schema()
    fields = {
        (kind, field)
        for kind, definition in [("Flow", schema), *schema["$defs"].items()]
        for field in definition.get("properties", {})
    }
    assert len(fields) > 20
    missing = sorted(f"{kind}.{f}" for kind, f in fields if f"<code>{f}</code>" not in page)
    assert not missing


def test_the_python_api_page_documents_the_client(site: Path) -> None:
    page = (site / "python-api" / "index.html").read_text()
    anchors = [
        "scheduler.engine.client.Client",
        "scheduler.engine.queue.Queue.put",
        "scheduler.engine.job.Job.complete",
        "scheduler.worker.context.JobContext",
        "scheduler.engine.events.EventListener",
    ]
    missing = [anchor for anchor in anchors if f'id="{anchor}"' not in page]
    assert not missing
