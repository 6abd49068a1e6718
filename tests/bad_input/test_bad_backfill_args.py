"""Bad ``flows backfill`` and ``flows cancel --backfill`` input: one clear error, exit 1 (2 for
a usage error), never a traceback, and not one key of the namespace changed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import assert_unchanged
from refusal_support import refused

from flows.cli import main
from flows.expand.run_ids import run_id_for
from scheduler.engine.client import Client

FILES = {
    "unscheduled.yaml": "version: 1\nname: plain\nqueue: q\nsteps:\n  a: {job: tasks.a}\n",
    "minutely.yaml": (
        'version: 1\nname: minutely\nqueue: q\nschedule: {cron: "* * * * *"}\n'
        "steps:\n  a: {job: tasks.a}\n"
    ),
    "nightly.yaml": (
        'version: 1\nname: nightly2\nqueue: q\nschedule: {cron: "0 2 * * *"}\n'
        "steps:\n  a: {job: tasks.a}\n"
    ),
    "broken.yaml": "version: 1\nname: broken\nsteps:\n  a: {needs: [nope], job: tasks.a}\n",
}

# (arguments, exit code, a piece of the error); {d} is the folder holding FILES.
CASES: list[tuple[list[str], int, str]] = [
    (["{d}/unscheduled.yaml", "--from", "2026-01-01", "--to", "2026-01-02"], 1, "no schedule:"),
    (["{d}/nightly.yaml", "--from", "2026-01-05", "--to", "2026-01-01"], 2, "is after --to"),
    (["{d}/minutely.yaml", "--from", "2026-01-01", "--to", "2026-02-01"], 1, "10,000 ticks"),
    (["{d}/nightly.yaml", "--from", "yesterday", "--to", "2026-01-02"], 2, "--from 'yesterday'"),
    (["{d}/nightly.yaml", "--from", "2026-01-01", "--to", "2026-13-01"], 2, "--to '2026-13-01'"),
    (["{d}/nightly.yaml", "--from", "2999-01-01", "--to", "2999-01-02"], 1, "in the future"),
    (["{d}/nightly.yaml", "--from", "2026-01-01T03:00", "--to", "2026-01-01T04:00"], 1, "no tick"),
    (
        ["{d}/nightly.yaml", "--from", "2026-01-01", "--to", "2026-01-02", "--max-active", "0"],
        2,
        "max-active",
    ),
    (["{d}/nightly.yaml", "--to", "2026-01-02"], 2, "--from"),
    (["{d}/nightly.yaml", "--from", "1969-12-25", "--to", "1970-01-03"], 2, "--from '1969-12-25'"),
    (["{d}/nightly.yaml", "--from", "0001-01-01", "--to", "0001-01-02"], 2, "--from '0001-01-01'"),
    (["{d}/broken.yaml", "--from", "2026-01-01", "--to", "2026-01-02"], 1, "'nope'"),
    (["{d}/missing.yaml", "--from", "2026-01-01", "--to", "2026-01-02"], 1, "no such file"),
    (["no-such-flow", "--from", "2026-01-01", "--to", "2026-01-02"], 1, "no registered flow"),
    (["{d}", "--from", "2026-01-01", "--to", "2026-01-02"], 1, "not a flow file"),
]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[0][:2])[-40:] for c in CASES])
def test_bad_backfills_are_refused_clearly_and_change_nothing(
    case: tuple[list[str], int, str], cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    args, code, expected = case
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    argv = ["backfill", *(a.replace("{d}", str(tmp_path)) for a in args)]
    output = refused(cli, populated.redis, argv, (code,))
    assert expected.lower() in output.lower(), output
    assert len(output.splitlines()) <= 12, output


def test_a_refused_range_is_shown_on_the_schedules_clock_with_the_utc(
    cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    """--from and --to without an offset are read on the schedule's clock: the refusal shows
    them so, the UTC in brackets. Before, `--from 2026-11-05` in Berlin came back as
    "--from 2026-11-04 23:00:00 UTC", a day the user never typed."""
    (tmp_path / "berlin.yaml").write_text(
        'version: 1\nname: berlin\nqueue: q\nschedule: {cron: "0 2 * * *", '
        "timezone: Europe/Berlin}\nsteps:\n  a: {job: tasks.a}\n"
    )
    flow = str(tmp_path / "berlin.yaml")
    cases = [
        (
            ["--from", "2026-11-05", "--to", "2026-11-04"],
            "--from 2026-11-05 00:00:00 CET (2026-11-04 23:00:00 UTC) is after --to 2026-11-04 "
            "23:59:59 CET (2026-11-04 22:59:59 UTC): nothing to backfill",
        ),
        (
            ["--from", "2026-07-01T03:00", "--to", "2026-07-01T04:00"],
            "the schedule of berlin has no tick from 2026-07-01 03:00:00 CEST (2026-07-01 "
            "01:00:00 UTC) to 2026-07-01 04:00:00 CEST (2026-07-01 02:00:00 UTC)",
        ),
        (
            ["--from", "2999-01-01", "--to", "2999-01-02"],
            "--from 2999-01-01 00:00:00 CET (2998-12-31 23:00:00 UTC) is in the future",
        ),
    ]
    for args, words in cases:
        output = refused(cli, populated.redis, ["backfill", flow, *args], (1, 2))
        assert words in " ".join(output.split()), output
    # A schedule in UTC: the UTC alone, once.
    (tmp_path / "nightly.yaml").write_text(FILES["nightly.yaml"])
    nightly = str(tmp_path / "nightly.yaml")
    argv = ["backfill", nightly, "--from", "2026-01-05", "--to", "2026-01-01"]
    output = refused(cli, populated.redis, argv, (2,))
    assert "--from 2026-01-05 00:00:00 UTC is after --to 2026-01-01 23:59:59 UTC" in output


NIGHTLY = [c for c in CASES if c[0][0] == "{d}/nightly.yaml"]


@pytest.mark.parametrize("case", NIGHTLY, ids=[" ".join(c[0][1:3]) for c in NIGHTLY])
def test_a_refused_backfill_resumes_no_canceled_run(
    case: tuple[list[str], int, str], cli: CliRunner, populated: Client, tmp_path: Path
) -> None:
    """A tick of the range whose run was canceled stays canceled when the backfill is refused."""
    tick = datetime(2026, 1, 1, 2, tzinfo=UTC).timestamp()
    run_id = run_id_for("nightly2", tick)
    job = {"jid": f"{run_id}:a", "queue": "q", "klass": "tasks.a", "data": "{}"}
    run = json.dumps({"flow": "nightly2", "tick": tick})
    populated.engine.call("flow.submit", run_id, run, json.dumps([job]))
    populated.engine.call("run.cancel", run_id)
    args, code, expected = case
    (tmp_path / "nightly.yaml").write_text(FILES["nightly.yaml"])
    argv = ["backfill", *(a.replace("{d}", str(tmp_path)) for a in args)]
    output = refused(cli, populated.redis, argv, (code,))
    assert expected.lower() in output.lower(), output
    assert json.loads(populated.engine.call("backfill.runs", run_id)) == ["canceled"]


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["cancel", "--backfill", "no-such-backfill"], 1, "no backfill no-such-backfill"),
        (["cancel", "--backfill", "a b"], 2, "white space"),  # a usage error, as any bad id
        (["cancel"], 2, "--backfill ID"),
        (["backfills", "no-such-backfill"], 1, "no backfill"),
    ],
)
def test_bad_backfill_ids_are_refused(
    argv: list[str], code: int, expected: str, cli: CliRunner, populated: Client
) -> None:
    with assert_unchanged(populated.redis):
        result = cli.invoke(main, argv)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert expected in result.output
