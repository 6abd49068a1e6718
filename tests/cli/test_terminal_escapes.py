"""No job, name, datum or log drives the reader's terminal: every command shows control
characters as ``\\xNN`` (``flows.cli.terminal.visible``); ``flows logs --color`` passes colour
sequences on and nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import flows

from flows.cli.terminal import visible
from scheduler.engine.client import Client

# Set the title, clear the screen and the scrollback, home the cursor; a C1 CSI; a bell; a
# right-to-left override (U+202E, in UTF-8).
HOSTILE = "\\033]0;TITLE\\033\\\\\\033[2J\\033[3J\\033[H\\302\\2332J\\007 \\342\\200\\256gnp.exe"
FLOW = f"""\
version: 1
name: hostile
queue: hostile
steps:
  noisy:
    retry: {{attempts: 1}}
    run: |
      printf '\\033[31mred\\033[0m {HOSTILE}\\n'
      printf '{HOSTILE}\\n' >&2
      exit 3
"""
# Control characters, and the bidirectional controls that reorder how a line displays.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The console script, in processes of its own: logging is set up by the command, as for a user.
FLOWS = str(Path(sys.executable).parent / "flows")


def _clean(text: str) -> None:
    found = RAW.search(text)
    assert found is None, f"raw control character {found.group()!r} in:\n{text}"


@pytest.fixture
def failed_run(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("FLOWS_REDIS_URL", url)
    path = tmp_path / "hostile.yaml"
    path.write_text(FLOW)
    result = flows("run", str(path))
    assert result.exit_code == 1
    _clean(result.stdout + result.stderr)
    assert "\\x1b]0;TITLE" in result.stderr  # shown, not obeyed
    run_id = next(
        line.split()[2] for line in result.stderr.splitlines() if line.startswith("submitted")
    )
    return run_id, f"{run_id}:noisy"


def test_flows_job_failed_and_status_show_escapes_as_text(
    failed_run: tuple[str, str], client: Client
) -> None:
    run_id, jid = failed_run
    for args in (
        ["job", jid],
        ["failed"],
        ["status", run_id],
        ["jobs", "--state", "failed"],
        ["explain", jid],
        ["explain", run_id, "noisy"],
    ):
        result = flows(*args)
        _clean(result.stdout + result.stderr)
    assert "\\x1b]0;TITLE" in flows("explain", jid).stdout  # the failure, shown not obeyed
    group = client.jobs[jid].failure["group"]  # type: ignore[index]
    result = flows("failed", group)
    _clean(result.stdout + result.stderr)
    assert "\\x1b" in flows("job", jid).stdout


def test_flows_logs_passes_colour_only_when_asked(failed_run: tuple[str, str]) -> None:
    run_id, _ = failed_run
    plain = flows("logs", run_id)  # not a terminal: colour shown as text too
    _clean(plain.stdout)
    assert "\\x1b[31mred" in plain.stdout and "\\x1b]0;TITLE" in plain.stdout
    never = flows("logs", run_id, "--color", "never")
    assert never.stdout == plain.stdout
    coloured = flows("logs", run_id, "--color", "always").stdout
    assert "\x1b[31mred\x1b[0m" in coloured
    rest = re.sub("\x1b\\[[0-9;]*m", "", coloured)
    _clean(rest)  # no other sequence got through
    assert "\\x1b]0;TITLE" in rest and "\\x9b2J" in rest
    assert "\\u202egnp.exe" in plain.stdout and "\\u202egnp.exe" in rest


def test_visible_escapes_c0_c1_and_del_and_keeps_tab_and_newline() -> None:
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("\x1b]0;T\x07\r\x7f\x9b") == "\\x1b]0;T\\x07\\x0d\\x7f\\x9b"
    assert visible("a\nb", newlines=False) == "a\\x0ab"
    assert visible("\x1b[1;31mx\x1b[0m\x1b[2J", sgr="keep") == "\x1b[1;31mx\x1b[0m\\x1b[2J"


def test_visible_shows_bidirectional_controls_and_keeps_other_text() -> None:
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    shown = "".join(f"\\u{ord(c):04x}" for c in bidi)
    assert visible(bidi) == shown
    assert visible(f"x{bidi}", sgr="keep") == f"x{shown}"
    assert visible("café 日本語 🎉 \u200d") == "café 日本語 🎉 \u200d"  # a joiner is no control


# A step id, a `needs` entry and a param's `choices` as a pull request could write them, and a
# bidirectional override.
HOSTILE_FLOW = """\
version: 1
name: hostile
queue: q
schedule: {cron: "*/5 * * * *"}
params:
  env: {type: string, choices: ["prod\\e[2J", dev], default: test}
steps:
  "a\\e[2Jb": {run: echo a}
  c:
    needs: ["a\\e[2Jc", "b\\e]0;TITLE\\a"]
    run: echo c
  "e\\u202egnp.exe": {run: echo e}
"""


def test_flows_validate_and_run_show_a_flow_file_s_escapes_as_text(tmp_path: Path) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE_FLOW)
    result = flows("validate", str(path))
    assert result.exit_code == 1
    _clean(result.stdout + result.stderr)
    assert "needs 'a\\x1b[2Jc', which is not a step" in result.stdout
    assert "did you mean 'a\\x1b[2Jb'?" in result.stdout  # a hint quotes the file too
    assert "(prod\\x1b[2J, dev)" in result.stdout
    assert "e\\u202egnp.exe" in result.stdout
    ran = flows("run", str(path))
    assert ran.exit_code == 1
    _clean(ran.stdout + ran.stderr)
    assert "needs 'a\\x1b[2Jc', which is not a step" in ran.stderr


def test_flows_scheduler_once_shows_a_flow_file_s_escapes_as_text(url: str, tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "hostile.yaml").write_text(HOSTILE_FLOW)
    # A process of its own: the log lines come from the handler the command installs.
    done = subprocess.run(
        [FLOWS, "scheduler", "--redis", url, "--flows-dir", str(folder), "--once"],
        env=dict(os.environ, FLOWS_REDIS_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    _clean(done.stdout + done.stderr)
    assert "error: step 'c' needs 'a\\x1b[2Jc', which is not a step" in done.stderr
    assert "e\\u202egnp.exe" in done.stderr


def test_the_scheduler_service_logs_a_flow_file_s_escapes_as_text(url: str, tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "hostile.yaml").write_text(HOSTILE_FLOW)
    service = subprocess.Popen(
        [FLOWS, "scheduler", "--redis", url, "--flows-dir", str(folder)],
        env=dict(os.environ, FLOWS_REDIS_URL=url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert service.stderr is not None
        lines: list[str] = []
        for line in service.stderr:  # the scan's record, written at once: to its last line
            lines.append(line)
            if ":12:3: error:" in line:  # the last finding; its hint is the record's last line
                lines.append(service.stderr.readline())
                break
    finally:
        service.terminate()
        service.communicate(timeout=60)
    logged = "".join(lines)
    _clean(logged)
    assert "does not validate" in logged
    assert "needs 'a\\x1b[2Jc', which is not a step" in logged
    assert "e\\u202egnp.exe" in logged


# A job's own log record and its bury message carry the data as they are; the fail group is
# the engine's id (control characters made `_`), which a bidirectional override survives.
JOB_MODULE = """\
import logging

from scheduler.worker.outcomes import BuryJob, FailJob


def noisy(job):
    logging.getLogger(__name__).warning("record: %s", job.data["x"])
    logging.getLogger(__name__).warning("two lines\\nFORGED INFO flows.worker: all jobs done")
    raise BuryJob("bury: " + job.data["x"])


def spoof(job):
    raise FailJob("evil\\u202etxt.exe", "spoofed")
"""


@pytest.mark.parametrize("processes", ["1", "0"])
def test_flows_worker_logs_what_a_job_wrote_as_text(
    url: str, client: Client, tmp_path: Path, processes: str
) -> None:
    (tmp_path / "hostilejobs.py").write_text(JOB_MODULE)
    data = "\x1b]0;TITLE\x07\x1b[2J café 日本 \u202eevil"
    noisy = client.queues["q"].put("hostilejobs.noisy", {"x": data})
    spoof = client.queues["q"].put("hostilejobs.spoof", {})
    done = subprocess.run(
        [FLOWS, "worker", "-q", "q", "--burst", "--processes", processes],
        cwd=tmp_path,
        env=dict(os.environ, FLOWS_REDIS_URL=url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert client.jobs[noisy].state == "buried" and client.jobs[spoof].state == "failed"
    _clean(done.stderr)
    shown = "\\x1b]0;TITLE\\x07\\x1b[2J café 日本 \\u202eevil"  # other text as it is
    assert f"record: {shown}" in done.stderr
    assert f"bury: {shown}" in done.stderr
    # A record's later lines are indented: none starts like a record of its own.
    assert "\n  FORGED INFO" in done.stderr and "\nFORGED" not in done.stderr
    # A failure group is an id, which holds no bidirectional control: made '_' (limits.id_from).
    assert "(evil_txt.exe)" in done.stderr
    assert client.jobs[spoof].failure["group"] == "evil_txt.exe"


@pytest.mark.parametrize(
    "command",
    [
        ("schedule", "show"),  # the engine's refusal quotes the name it was given
        ("schedule", "pause"),
        ("backfills",),
        ("jobs",),  # click's own usage error quotes the extra argument
        ("user", "revoke"),
        ("cancel",),
    ],
)
def test_an_error_quoting_what_was_typed_shows_its_escapes_as_text(
    url: str, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    """Whichever command refuses it and however it words the refusal, a typed name's control
    characters reach the terminal as text."""
    monkeypatch.setenv("FLOWS_REDIS_URL", url)
    result = flows(*command, "ab\x1b]0;TITLE\x07cd")
    assert result.exit_code in (1, 2), result.output
    _clean(result.stdout + result.stderr)
    assert "ab\\x1b]0;TITLE\\x07cd" in result.stderr
