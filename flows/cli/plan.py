"""``flows plan FILE [-p name=value]...``: the jobs a run would put, without running anything."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from flows import gc_pause
from flows.cli.options import as_json, bad_params, flow_file, logical_time, param, run_id
from flows.cli.tables import fitted, show, table_console
from flows.cli.validate import load_or_exit
from flows.expand.jobs import ExpansionError, JobSpec, expand
from flows.expand.run_ids import run_id_for
from flows.flowfile.conditions import expression_of
from flows.flowfile.durations import format_duration
from flows.flowfile.job_data import CONDITION_KEY, META_KEY
from flows.flowfile.params import ParamError, parse_assignments

_SHOWN_DEPENDS = 4


def register(group: click.Group) -> None:
    group.add_command(plan)


@click.command()
@click.argument("file", type=flow_file)
@param
@logical_time
@run_id("<flow>@<logical time, UTC>, e.g. etl@20250131T020000Z")
@as_json
def plan(
    file: Path,
    params: tuple[str, ...],
    logical_time: datetime | None,
    run_id: str | None,
    as_json: bool,
) -> None:
    """Show the jobs one run of FILE would put: ids, queues, dependencies, delays."""
    gc_pause.enable()  # a short single-threaded command: see flows.gc_pause
    result = load_or_exit(file)
    assert result.flow is not None
    moment = logical_time or datetime.now(UTC).replace(microsecond=0)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    run = run_id or run_id_for(result.flow.name, moment.timestamp())
    try:
        given = parse_assignments(params)
        jobs = expand(
            result.flow, run_id=run, logical_time=moment, params=given, flow_dir=result.flow_dir
        )
    except ParamError as error:
        raise bad_params(error) from None
    except ExpansionError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps({"run_id": run, "jobs": [job.to_json() for job in jobs]}, indent=2))
    else:
        _print_table(run, jobs)


def _trigger(job: JobSpec) -> str:
    """The trigger rule, and the step's condition when it has one."""
    condition = job.data.get(META_KEY, {}).get(CONDITION_KEY)
    if condition is None:
        return job.trigger
    return f"{job.trigger}, if {expression_of(condition['expression'])}"


def _print_table(run_id: str, jobs: Sequence[JobSpec]) -> None:
    prefix = f"{run_id}:"
    rows = []
    for job in jobs:
        depends = [jid.removeprefix(prefix) for jid in job.depends]
        shown = ", ".join(depends[:_SHOWN_DEPENDS])
        if len(depends) > _SHOWN_DEPENDS:
            shown += f", … (+{len(depends) - _SHOWN_DEPENDS})"
        jid = job.jid.removeprefix(prefix)
        if job.fanout is not None:  # one job per item, made when the producer completes
            jid += f"[*] (items: {job.fanout[0].removeprefix(prefix)}.{job.fanout[1]})"
        rows.append(
            [
                jid,  # text, never markup: a matrix job's id is profile[region=eu,size=s]
                job.queue,
                job.klass,
                shown,
                format_duration(job.delay) if job.delay else "",
                _trigger(job),
            ]
        )
    console = table_console()
    show(
        console,
        fitted(
            f"{len(jobs)} jobs of run {run_id}",
            ("jid", "queue", "klass", "depends", "delay", "trigger"),
            rows,
            width=console.width,
            caption=f"each jid is '{prefix}' + the id shown",
        ),
    )
