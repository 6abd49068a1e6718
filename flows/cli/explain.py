"""``flows explain JID | RUN [STEP]``: why something is not running (or how it ended)."""

from __future__ import annotations

import click

from flows.cli.common import open_client, print_json, user_errors
from flows.cli.options import as_json, connection, id_argument
from flows.cli.terminal import visible
from flows.runs.explain import child_step, explain_run
from flows.runs.labels import UnknownStep
from flows.runs.logs import jid_meant
from flows.runs.read import load_run
from scheduler.engine.explain import explain as explain_job
from scheduler.engine.limits import id_fault


def register(group: click.Group) -> None:
    group.add_command(explain)


@click.command()
@id_argument("target", "job or run id", metavar="JID|RUN")
@click.argument("step", required=False)
@as_json
@connection
def explain(
    target: str, step: str | None, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Why a job, or each unfinished step of a run (or STEP of it), is where it is: waiting for
    which dependencies, scheduled until when, parked on which throttle or concurrency key, no
    live worker on its queue, awaiting a signal, upstream failed, ...

    A step of the child run a sub-flow step started is STEP/CHILD-STEP, as `flows status`
    labels it."""
    client = open_client(redis_url, namespace)
    with user_errors():
        view = load_run(client, target)
        if view is None:
            # No run; a name no job can have (a run's id may end in -history) is no job either.
            found = explain_job(client, target) if id_fault(target, "jid") is None else None
            if found is None:
                meant = jid_meant(client, target)
                see = f"did you mean {meant!r}?" if meant else "see `flows runs`"
                raise click.ClickException(visible(f"no job or run {target!r} ({see})"))
            if step is not None:  # not ignored: the reader asked about a step of a run
                raise click.UsageError(
                    f"{target!r} is a job, not a run: STEP goes with a run "
                    f"(flows explain {target}, or flows explain RUN {step})"
                )
            if as_json:
                print_json(found.as_json())
            else:
                # A sentence quotes a failure's or a bury's message, any text a job gave.
                click.echo(visible(f"{found.jid}: {found.sentence}"))
            return
        try:
            view, step = child_step(client, view, step)
            steps = explain_run(client, view, step)
        except UnknownStep as error:
            raise click.ClickException(str(error)) from None
    if as_json:
        print_json(
            {"run": view.run_id, "status": view.status, "steps": [s.as_json() for s in steps]}
        )
        return
    # "run r succeeded", not "is succeeded"; one still going "is running" (or "is waiting").
    click.echo(f"run {view.run_id} {'' if view.finished else 'is '}{view.status}")
    shown = [s for s in steps if s.jobs or step is not None]
    if not shown:
        click.echo("  every step has finished" if view.finished else "  nothing is held back")
    for reasons in shown:
        click.echo(visible(f"  {reasons.step} ({reasons.status})"))
        if reasons.no_items:
            click.echo(f"    {reasons.no_items}")
        many = len(reasons.jobs) > 1
        for job in reasons.jobs:
            click.echo(visible(f"    {job.jid + ': ' if many else ''}{job.sentence}"))
        if reasons.more:
            click.echo(f"    ... and {reasons.more} more jobs of this step")
