"""Tarantool-queue style operations: ``flows queue stats|pause|unpause|truncate|drop``,
``flows kick`` (a queue's oldest buried jobs, ``--job JID`` each, or ``--step RUN:STEP``),
``flows bury``, ``flows delete``, ``flows throttles`` and ``flows throttle set|unset``."""

from __future__ import annotations

from typing import Any

import click

from flows.cli.common import (
    error_text,
    known_queue,
    open_client,
    print_json,
    report,
    step_refusal,
    table,
    user_errors,
)
from flows.cli.options import as_json, connection, id_argument, id_option
from flows.runs.actions import kick_step
from flows.runs.labels import labelled_step
from scheduler.engine.errors import JobNotFound, WrongState

#: ``queue.stats`` fields in the order they are shown (Tarantool's statistics).
TASK_STATES = ("ready", "taken", "buried", "delayed", "depends", "done", "total")
CALLS = ("put", "take", "ack", "release", "bury", "kick", "delete", "touch", "expire")


def register(group: click.Group) -> None:
    for command in (queue, kick, bury, delete, throttles, throttle):
        group.add_command(command)


@click.group()
def queue() -> None:
    """One queue: statistics by state and by call, pause, unpause, truncate, drop."""


@queue.command("stats")
@id_argument("name", "queue name", kind="id")
@as_json
@connection
def queue_stats(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Jobs of queue NAME by state now, and today's calls by kind."""
    client = open_client(redis_url, namespace)
    known_queue(client, name)
    with user_errors():
        stats = client.queues[name].statistics()
    if as_json:
        print_json(stats)
        return
    tasks: dict[str, Any] = stats.get("tasks") or {}
    calls: dict[str, Any] = stats.get("calls") or {}
    rows = [["jobs", state, tasks.get(state, 0)] for state in TASK_STATES]
    rows += [["calls today", call, calls.get(call, 0)] for call in CALLS]
    table(f"Queue {name}", ("", "what", "count"), rows)


def _pause(
    name: str, paused: bool, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    client = open_client(redis_url, namespace)
    known_queue(client, name)
    with user_errors():
        handle = client.queues[name]
        handle.pause() if paused else handle.unpause()
    # The API's reply (POST /api/v1/queues/{queue}/pause|unpause), for --json.
    report(
        as_json,
        f"queue {name} {'paused' if paused else 'unpaused'}",
        {"queue": name, "paused": paused},
    )


@queue.command("pause")
@id_argument("name", "queue name", kind="id")
@as_json
@connection
def queue_pause(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Stop handing out the jobs of queue NAME (running ones go on; puts are still taken)."""
    _pause(name, True, as_json, redis_url, namespace)


@queue.command("unpause")
@id_argument("name", "queue name", kind="id")
@as_json
@connection
def queue_unpause(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Hand out the jobs of queue NAME again."""
    _pause(name, False, as_json, redis_url, namespace)


@queue.command("truncate")
@id_argument("name", "queue name", kind="id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@as_json
@connection
def queue_truncate(
    name: str, yes: bool, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Remove every job of queue NAME that is not running (waiting, parked, scheduled, depends,
    buried). Refused while a job of it runs."""
    if not yes:
        click.confirm(f"Remove every job of queue {name}?", abort=True)
    client = open_client(redis_url, namespace)
    known_queue(client, name)
    with user_errors():
        removed = client.queues[name].truncate()
    report(as_json, f"queue {name}: {removed} job(s) removed", {"queue": name, "removed": removed})


@queue.command("drop")
@id_argument("name", "queue name", kind="id")
@click.option("--truncate", "empty", is_flag=True, help="Remove its jobs first.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@as_json
@connection
def queue_drop(
    name: str, empty: bool, yes: bool, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Forget queue NAME (its place among the queues, pause and settings). Refused while it has
    jobs (use --truncate) or recurring jobs."""
    if not yes:
        what = "its jobs and the queue" if empty else "the queue"
        click.confirm(f"Remove {what} {name}?", abort=True)
    client = open_client(redis_url, namespace)
    known_queue(client, name)
    with user_errors():
        removed = client.queues[name].truncate() if empty else 0
        client.queues[name].drop()
    report(
        as_json,
        f"queue {name} dropped" + (f" ({removed} job(s) removed)" if empty else ""),
        {"queue": name, "dropped": True, "removed": removed},
    )


@click.command()
@id_argument("name", "queue name", kind="id", required=False)
@click.option(
    "--count",
    type=click.IntRange(1, 100000),
    default=None,
    help="How many buried jobs of queue NAME, the longest buried first. Default: 1.",
)
@id_option(
    "--job",
    "-j",
    "jobs",
    what="job id",
    multiple=True,
    metavar="JID",
    help="Kick this buried job instead of a queue's oldest (repeatable). Every JID is checked "
    "first: one that is missing or not buried kicks none.",
)
@id_option(
    "--step",
    "-s",
    "step",
    what="run's step",
    labels=True,
    metavar="RUN:STEP",
    help="Kick every buried job of STEP of run RUN (a foreach step's items too, a child run's "
    "step as STEP/CHILD-STEP), as the run page's Kick step button does; refused, kicking none, "
    "unless one of them is buried.",
)
@as_json
@connection
def kick(
    name: str | None,
    count: int | None,
    jobs: tuple[str, ...],
    step: str | None,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Make up to COUNT buried jobs of queue NAME waiting again (the longest buried first), or
    the buried jobs named with --job, whatever their queue, or those of a run's step (--step).

    Each job waits again at its priority; a job of a run makes its step waiting again."""
    if step is not None:
        if name is not None or count is not None or jobs:
            raise click.UsageError(
                "--step kicks a run's step: give no queue NAME, --count or --job"
            )
        _kick_step(step, as_json, redis_url, namespace)
        return
    if jobs:
        if name is not None:
            raise click.UsageError("give a queue NAME or --job JID, not both")
        if count is not None:
            raise click.UsageError("--count is for a queue's buried jobs, not with --job")
        _kick_jobs(jobs, as_json, redis_url, namespace)
        return
    if name is None:
        raise click.UsageError("name a queue to kick, or a buried job with --job JID")
    client = open_client(redis_url, namespace)
    known_queue(client, name)
    with user_errors():
        kicked = client.queues[name].kick(count or 1)
    report(as_json, f"queue {name}: {kicked} job(s) kicked", {"queue": name, "kicked": kicked})


def _kick_step(target: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """``flows kick --step RUN:STEP``: the engine kicks the step's buried jobs only when its
    decider allows the step ``kick``."""
    run_id, _, step = target.rpartition(":")
    if not run_id or not step:
        raise click.UsageError(f"--step {target!r}: name a run's step as RUN:STEP")
    client = open_client(redis_url, namespace)
    with user_errors():
        run_id, step = labelled_step(client, run_id, step)
        with step_refusal(client, run_id, step):
            kicked = kick_step(client, run_id, step)
    report(
        as_json,
        f"step {step} of run {run_id}: kicked {len(kicked)} job(s): {', '.join(kicked)}",
        {"run": run_id, "step": step, "kicked": len(kicked), "jobs": kicked},
    )


def _kick_jobs(
    jids: tuple[str, ...], as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """``flows kick --job JID...``: the engine checks every job before it kicks one."""
    client = open_client(redis_url, namespace)
    with user_errors():
        try:
            kicked = client.jobs.kick(*jids)
        except (JobNotFound, WrongState) as refused:
            if len(set(jids)) == 1:
                raise
            raise click.ClickException(f"{error_text(refused)}; nothing kicked") from None
    report(
        as_json,
        f"kicked {len(kicked)} job(s): {', '.join(kicked)}",
        {"kicked": len(kicked), "jobs": kicked},
    )


@click.command()
@id_argument("jid", "job id", "jid")
@click.option("--message", "-m", help="Why (kept in the job's history).")
@as_json
@connection
def bury(
    jid: str, message: str | None, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Take waiting or scheduled job JID out of circulation without failing it (see kick)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        found = client.jobs[jid]
        found.bury(message)
    report(as_json, f"{jid} buried in {found.queue}", {"jid": jid, "queue": found.queue})


@click.command()
@id_argument("jids", "job id", "jid", nargs=-1, required=True)
@as_json
@connection
def delete(
    jids: tuple[str, ...], as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Delete jobs for good (refused while one runs, or while a job not listed depends on one).

    Every JID is looked up first: one that names no job deletes nothing (exit 1)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        found = {job.jid for job in client.jobs.multiget(*jids)}
        if missing := [jid for jid in dict.fromkeys(jids) if jid not in found]:
            listed = ", ".join(repr(jid) for jid in missing)
            raise click.ClickException(f"no job {listed} (see `flows jobs`); nothing deleted")
        deleted = client.jobs.delete(*jids)
    text = f"deleted {len(deleted)} job(s)" + (": " + ", ".join(deleted) if deleted else "")
    report(as_json, text, {"deleted": list(deleted)})


@click.command()
@as_json
@connection
def throttles(as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Named throttles: limit, running and parked jobs."""
    client = open_client(redis_url, namespace)
    with user_errors():
        info = client.throttles.info()
    if as_json:
        print_json(info)
        return
    rows = [
        [
            name,
            "" if entry.get("limit") is None else entry["limit"],
            entry.get("running", 0),
            entry.get("parked", 0),
        ]
        for name, entry in sorted(info.items())
    ]
    table("Throttles", ("throttle", "limit", "running", "parked"), rows, empty="no throttles")


@click.group()
def throttle() -> None:
    """Set or lift a throttle's limit (jobs put with throttle=NAME, over all queues)."""


MAX_THROTTLE = 2147483647


class ThrottleLimit(click.IntRange):
    """A throttle's limit: a whole number of jobs from 0 to :data:`MAX_THROTTLE`; anything
    else (a negative number, text) is refused saying what is expected."""

    name = "limit"

    def __init__(self) -> None:
        super().__init__(0, MAX_THROTTLE)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(
                f"{value!r}: expected how many of its jobs may run at once, a whole number from "
                f"0 to {MAX_THROTTLE} (to lift the limit: flows throttle unset NAME)",
                param,
                ctx,
            )


# "-1" is a (refused) limit, not an option: click passes what is no option of the command on.
@throttle.command("set", context_settings={"ignore_unknown_options": True})
@id_argument("name", "throttle name", kind="id")
@click.argument("limit", type=ThrottleLimit())
@as_json
@connection
def throttle_set(
    name: str, limit: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """At most LIMIT jobs of throttle NAME run at once."""
    client = open_client(redis_url, namespace)
    with user_errors():
        client.throttles[name] = limit
    report(as_json, f"throttle {name}: at most {limit} running", {"throttle": name, "limit": limit})


@throttle.command("unset")
@id_argument("name", "throttle name", kind="id")
@as_json
@connection
def throttle_unset(name: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Lift throttle NAME's limit: its jobs run freely."""
    client = open_client(redis_url, namespace)
    with user_errors():
        had = name in client.throttles
        if had:
            del client.throttles[name]
    report(
        as_json,
        f"throttle {name}: " + ("limit lifted" if had else "had no limit"),
        {"throttle": name, "lifted": had},
    )
