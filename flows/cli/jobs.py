"""Looking at and acting on jobs, queues and workers: ``flows queues``, ``workers``, ``jobs``,
``job``, ``failed``, ``unfail``, ``retry``, ``cancel``."""

from __future__ import annotations

import json
from typing import Any

import click

from flows.cli.common import ago, console, open_client, print_json, table, user_errors, when
from flows.cli.options import as_json, connection
from scheduler.client import Client
from scheduler.job import Job, as_dict

QUEUE_STATES = ("waiting", "running", "stalled", "scheduled", "depends", "recurring")
JOB_STATES = (*QUEUE_STATES, "complete", "failed")


def register(group: click.Group) -> None:
    for command in (queues, workers, jobs, job, failed, unfail, retry, cancel):
        group.add_command(command)


@click.command()
@as_json
@connection
def queues(as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Queues with their job counts."""
    client = open_client(redis_url, namespace)
    with user_errors():
        counts = client.queues.counts()
    if as_json:
        print_json(counts)
        return
    columns = ("queue", *QUEUE_STATES, "paused")
    rows = [
        [c["name"], *(c.get(s, 0) for s in QUEUE_STATES), "yes" if c.get("paused") else ""]
        for c in counts
    ]
    table("Queues", columns, rows)


@click.command()
@as_json
@connection
def workers(as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Workers by recent activity: host, pid, queues and the jobs they hold."""
    client = open_client(redis_url, namespace)
    with user_errors():
        counts = client.workers.counts()
        info = as_dict(client.engine.call("worker.info"))
    merged = [{**w, **info.get(w["name"], {})} for w in counts]
    if as_json:
        print_json(merged)
        return
    rows = [
        [
            w["name"],
            w.get("host", ""),
            w.get("pid", ""),
            ",".join(w.get("queues", [])),
            w.get("jobs", 0),
            w.get("stalled", 0),
            ago(w.get("started")),
        ]
        for w in merged
    ]
    table("Workers", ("worker", "host", "pid", "queues", "jobs", "stalled", "started"), rows)


def _jids(client: Client, state: str, queue: str | None, limit: int) -> list[str]:
    if state == "complete":
        return client.jobs.complete(0, limit)
    if state == "failed":
        jids: list[str] = []
        for group in client.failed():
            jids += [j.jid for j in client.failed(group, 0, limit).jobs]
        return jids[:limit]
    names = [queue] if queue else [c["name"] for c in client.queues.counts()]
    found: list[str] = []
    for name in names:
        found += [str(j) for j in client.engine.call("jobs", state, name, 0, limit)]
    return found[:limit]


@click.command()
@click.option("--state", type=click.Choice(JOB_STATES), default="waiting", show_default=True)
@click.option("--queue", "-q", help="Only this queue.")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
@as_json
@connection
def jobs(
    state: str,
    queue: str | None,
    limit: int,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Jobs in a state (waiting by default), newest activity last."""
    client = open_client(redis_url, namespace)
    with user_errors():
        found = client.jobs.multiget(*_jids(client, state, queue, limit)) if limit else []
    if as_json:
        print_json([_job_dict(j) for j in found])
        return
    rows = [[j.jid, j.state, j.queue, j.klass, j.worker, j.priority, ago(j.updated)] for j in found]
    table(
        f"Jobs ({state})", ("jid", "state", "queue", "klass", "worker", "priority", "updated"), rows
    )


def _job_dict(j: Job) -> dict[str, Any]:
    return {
        "jid": j.jid,
        "klass": j.klass,
        "state": j.state,
        "queue": j.queue,
        "worker": j.worker,
        "priority": j.priority,
        "retries": j.retries,
        "remaining": j.remaining,
        "data": j.data,
        "tags": j.tags,
        "result": j.result,
        "failure": j.failure,
        "history": j.history,
        "dependencies": j.dependencies,
        "dependents": j.dependents,
        "created": j.created,
        "updated": j.updated,
        "expires": j.expires,
        "tracked": j.tracked,
    }


def _ran_on(j: Job) -> str:
    """Who ran it last: the worker of the latest pop (host-pid by default)."""
    for entry in reversed(j.history):
        if entry.get("what") == "popped":
            return str(entry.get("worker", ""))
    return ""


@click.command()
@click.argument("jid")
@as_json
@connection
def job(jid: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """One job: state, data, result, failure and history."""
    client = open_client(redis_url, namespace)
    with user_errors():
        found = client.jobs[jid]
    if as_json:
        print_json(_job_dict(found))
        return
    rows: list[list[Any]] = [
        ["state", found.state],
        ["queue", found.queue],
        ["klass", found.klass],
        ["worker", found.worker or _ran_on(found)],
        ["priority", found.priority],
        ["retries left", f"{found.remaining} of {found.retries}"],
        ["tags", ", ".join(found.tags)],
        ["created", when(found.created)],
        ["updated", when(found.updated)],
        ["data", json.dumps(found.data)],
        ["result", "" if found.result is None else json.dumps(found.result)],
        ["depends on", ", ".join(found.dependencies)],
        ["dependents", ", ".join(found.dependents)],
    ]
    if found.failure:
        rows += [["failure", f"{found.failure.get('group')} at {when(found.failure.get('when'))}"]]
    table(f"Job {found.jid}", ("field", "value"), rows)
    if found.failure and found.failure.get("message"):
        console.print(f"[bold red]{found.failure.get('group')}[/]")
        console.print(str(found.failure["message"]), markup=False, highlight=False)
    history = [
        [
            when(e.get("when")),
            e.get("what", ""),
            ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("what", "when")),
        ]
        for e in found.history
    ]
    table("History", ("when", "what", "details"), history)


@click.command()
@click.argument("group", required=False)
@click.option("--limit", type=click.IntRange(1, 10000), default=25, show_default=True)
@as_json
@connection
def failed(
    group: str | None, limit: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Failure groups with counts, or the failed jobs of GROUP."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if group is None:
            counts = client.failed()
            if as_json:
                print_json(counts)
            else:
                table("Failed", ("group", "jobs"), sorted(counts.items()))
            return
        listing = client.failed(group, 0, limit)
    if as_json:
        print_json({"total": listing.total, "jobs": [_job_dict(j) for j in listing.jobs]})
        return
    rows = [
        [
            j.jid,
            j.queue,
            j.klass,
            when((j.failure or {}).get("when")),
            str((j.failure or {}).get("message", "")).strip().splitlines()[-1:][0]
            if (j.failure or {}).get("message")
            else "",
        ]
        for j in listing.jobs
    ]
    table(
        f"Failed: {group} ({listing.total})", ("jid", "queue", "klass", "when", "last line"), rows
    )


@click.command()
@click.argument("group")
@click.option("--queue", "-q", required=True, help="Queue to put the jobs back into.")
@click.option("--count", type=click.IntRange(1, 100000), default=25, show_default=True)
@connection
def unfail(
    group: str, queue: str, count: int, redis_url: str | None, namespace: str | None
) -> None:
    """Put up to COUNT failed jobs of GROUP back into QUEUE (oldest first)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        moved = client.unfail(queue, group, count)
    click.echo(f"{moved} job(s) moved from {group} to {queue}")


def _is_run(client: Client, name: str) -> bool:
    return client.engine.call("run.get", name) is not None


@click.command()
@click.argument("target")
@connection
def retry(target: str, redis_url: str | None, namespace: str | None) -> None:
    """Resume run TARGET (its failed steps run again, completed ones do not), or put failed job
    TARGET back into its queue with its retries restored."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if _is_run(client, target):
            count = int(client.engine.call("run.retry", target))
            click.echo(f"run {target}: {count} failed job(s) put back")
            return
        found = client.jobs[target]
        found.requeue(found.queue)
    click.echo(f"{target} put back into {found.queue}")


@click.command()
@click.argument("targets", nargs=-1, required=True)
@connection
def cancel(targets: tuple[str, ...], redis_url: str | None, namespace: str | None) -> None:
    """Cancel runs (every job not yet done) or jobs (refused while a job depends on one)."""
    client = open_client(redis_url, namespace)
    with user_errors():
        runs = [t for t in targets if _is_run(client, t)]
        jids = [t for t in targets if t not in runs]
        for run_id in runs:
            count = int(client.engine.call("run.cancel", run_id))
            click.echo(f"run {run_id}: canceled {count} job(s)")
        if jids:
            canceled = client.jobs.cancel(*jids)
            click.echo(
                f"canceled {len(canceled)} job(s)"
                + (": " + ", ".join(canceled) if canceled else "")
            )
