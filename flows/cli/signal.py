"""``flows signal`` and ``flows approve``: complete a run's ``wait:`` step
(:mod:`flows.runs.signals`)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Collection

import click

from flows.cli.auditing import who
from flows.cli.common import open_client, print_json, user_errors
from flows.cli.options import as_json, connection, id_argument
from flows.flowfile.subflow_job import MAX_DEPTH
from flows.runs.read import RunView, load_run
from flows.runs.signals import Signaled, SignalRefused, approval, parse_data, signal_step
from scheduler.engine.client import Client
from scheduler.engine.explain import explain, wait_line
from scheduler.engine.limits import json_fault


def register(group: click.Group) -> None:
    for command in (signal, approve):
        group.add_command(command)


def print_awaiting(
    client: Client,
    view: RunView,
    now: float | None = None,
    *,
    told: Collection[str] = (),
    err: bool = False,
    within: str = "",
) -> list[str]:
    """Below a run's table (``flows status``; on stderr, ``err``, while `flows run` works it):
    each step awaiting a signal (but those in ``told``), when it times out (or that it timed
    out: the engine's ``job.explain`` decides, at ``now``, the server's clock by default, as
    ``flows explain`` does), and how to give it; then those of the child runs its sub-flow
    steps wait for, labelled ``step/child-step`` (``within``: the labels' start, for a child
    run's). Returns the labels of the steps it told of."""
    waits = [
        s
        for s in view.steps
        if s.status == "awaiting" and len(s.jids) == 1 and within + s.step not in told
    ]
    children = [s for s in view.steps if s.child and s.status == "running"]
    if not waits and not children:
        return []
    moment = client.engine.server_time() if now is None else now
    shown = []
    for step in waits:
        found = explain(client, step.jids[0], now=moment)
        line = wait_line(found.facts, moment) if found is not None else None
        if line is None:
            continue
        run, name = shlex.quote(view.run_id), shlex.quote(step.step)
        signal_hint = f"flows signal {run} {name} --data JSON"
        if "approve" in step.actions:  # the engine's word: its wait takes an approval's data
            hint = f"flows approve {run} {name} --note TEXT   (or: {signal_hint})"
        else:
            hint = f"{signal_hint}   (the data naming each output the step declares)"
        # sys.stderr as it is now: under `flows run`'s live view, its proxy prints above it.
        click.echo(f"{within}{step.step}: {line}\n  {hint}", file=sys.stderr if err else None)
        shown.append(within + step.step)
    if within.count("/") >= MAX_DEPTH:
        return shown
    for step in children:  # an approval in a child run holds the parent's step: say so here
        child = load_run(client, str(step.child), limit=1)
        if child is not None:
            label = f"{within}{step.step}/"
            shown += print_awaiting(client, child, moment, told=told, err=err, within=label)
    return shown


def child_waits(view: RunView) -> bool:
    """Whether a step of ``view`` waits for a child run (which may have waits of its own)."""
    return any(s.child and s.status == "running" for s in view.steps)


def _report(done: Signaled, as_json_output: bool) -> None:
    if as_json_output:
        print_json({"run": done.run_id, "step": done.step, "jid": done.jid, "data": done.data})
    else:
        click.echo(f"run {done.run_id}: step {done.step} signaled; its dependents may run")


@click.command()
@id_argument("run_id", "run id", metavar="RUN")
@click.argument("step")
@click.option(
    "--data",
    default="{}",
    show_default=True,
    metavar="JSON",
    help="The signal's data, a JSON object: the step's outputs (steps.STEP.outputs.KEY).",
)
@as_json
@connection
def signal(
    run_id: str,
    step: str,
    data: str,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Complete STEP of RUN, a `wait:` step awaiting its signal, with --data as its outputs.

    Refused (exit 1, nothing changed) when the step is not awaiting a signal: its needs are not
    done yet, it is done already, or it is not a wait step; --data that is not a JSON object is
    a usage error (exit 2).

    A wait of the child run a sub-flow step started is STEP/CHILD-STEP, as `flows status`
    labels it."""
    try:
        values = parse_data(data)
    except SignalRefused as error:  # a usage error: said before connecting, nothing changed
        raise click.BadParameter(
            str(error).removeprefix("--data").lstrip(": "), param_hint="'--data'"
        ) from None
    user = who()
    client = open_client(redis_url, namespace)
    with user_errors():
        done = signal_step(client, run_id, step, values, by=user)
    _report(done, as_json)


@click.command()
@id_argument("run_id", "run id", metavar="RUN")
@click.argument("step")
@click.option("--note", default=None, metavar="TEXT", help="A note, the step's outputs.note.")
@as_json
@connection
def approve(
    run_id: str,
    step: str,
    note: str | None,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Approve STEP of RUN: `flows signal` with the data {"note": TEXT, "approved_by": USER}
    (USER: $FLOWS_USER, else the login name).

    A wait of the child run a sub-flow step started is STEP/CHILD-STEP, as `flows status`
    labels it."""
    fault = None if note is None else json_fault(note)
    if fault is not None:  # bytes that are no UTF-8 text, as the shell gave them
        raise click.BadParameter(fault[1], param_hint="'--note'")
    user = who()
    client = open_client(redis_url, namespace)
    with user_errors():
        done = signal_step(client, run_id, step, approval(note, user), by=user)
    _report(done, as_json)
