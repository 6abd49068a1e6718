"""``flows doctor``: the consistency check (:mod:`scheduler.engine.doctor`) from the command
line."""

from __future__ import annotations

import click

from flows.cli import auditing
from flows.cli.common import console, open_client, print_json, table, user_errors
from flows.cli.options import as_json, connection
from scheduler.engine import doctor
from scheduler.engine.safety import replication_advice


def register(group: click.Group) -> None:
    group.add_command(doctor_command)


@click.command("doctor")
@click.option(
    "--deep",
    is_flag=True,
    help="Check every job of the namespace (SCAN), not only the running set. Slow on big ones.",
)
@click.option("--repair", is_flag=True, help="Repair what was found, and say what was done.")
@click.option(
    "--page",
    type=click.IntRange(1, 1000),
    default=doctor.PAGE,
    show_default=True,
    help="Entries or jobs per engine call.",
)
@as_json
@connection
def doctor_command(
    deep: bool,
    repair: bool,
    page: int,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Check that every job is in exactly the index its state names, and repair it.

    The light check (default) reads the running set: each queue's locks and each worker's
    jobs. --deep reads everything: every job's hash and dependency edges, every index entry.
    Exit status: 0 when nothing was found, 1 when problems were found (repaired or not).
    A master with replicas that takes writes without them (min-replicas-to-write 0) is
    reported too, with the settings that shrink what a partition can lose.
    """
    client = open_client(redis_url, namespace)
    with user_errors():
        report = doctor.check(client, deep=deep, repair=repair, page=page)
        # recorded when it repaired something, whatever it exits with (1: it found problems)
        auditing.changed(any(r.status == "repaired" for r in report.repairs))
        advice = replication_advice(client.redis)
    if as_json:
        print_json({**report.as_dict(), "server": advice})
    else:
        _print(report)
        for line in advice:
            console.print(f"\nserver: {line}", markup=False, highlight=False)
    if not report.clean:
        raise SystemExit(1)


def _print(report: doctor.Report) -> None:
    console.print(report.summary(), markup=False, highlight=False)
    if report.checked["skipped"]:
        console.print(
            f"{report.checked['skipped']} job(s) in a state the check does not know were left "
            "alone",
            markup=False,
        )
    if report.checked["unaddressable"]:
        console.print(
            f"{report.checked['unaddressable']} key(s) whose names are not valid ids were left "
            "alone",
            markup=False,
        )
    for kind, found in report.by_kind().items():
        console.print(f"\n{kind} ({len(found)}): {doctor.MEANINGS[kind]}", markup=False)
        if any(f.jid for f in found):
            table(None, ("jid", "where", "detail"), [[f.jid, f.where, f.detail] for f in found])
        else:  # about a run, a group or a worker: no job to name
            table(None, ("where", "detail"), [[f.where, f.detail] for f in found])
    if report.repair and report.repairs:
        rows = [
            [r.finding.kind, r.finding.jid or r.finding.name, r.status, r.action]
            for r in report.repairs
        ]
        table("Repairs", ("kind", "jid or name", "status", "what was done"), rows)
