"""Looking at and acting on jobs, queues and workers: ``flows queues``, ``workers``, ``jobs``,
``job``, ``failed``, ``unfail``, ``retry``, ``cancel``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.text import Text

from flows.cli import auditing
from flows.cli.common import (
    ago,
    console,
    known_queue,
    missing_run,
    note_new_queues,
    open_client,
    print_json,
    report,
    step_refusal,
    table,
    user_errors,
    when,
)
from flows.cli.options import as_json, connection, id_argument, id_option
from flows.cli.run import check_server, work_run
from flows.cli.terminal import visible
from flows.flowfile.findings import did_you_mean
from flows.runs import actions as run_actions
from flows.runs.labels import labelled_jid, labelled_step
from flows.runs.logs import jid_meant, no_step_of
from flows.runs.read import load_run
from scheduler.engine.client import Client
from scheduler.engine.errors import InvalidArgument, JobNotFound
from scheduler.engine.job import Job, RanBy
from scheduler.engine.limits import id_fault
from scheduler.secrets import shown_data
from scheduler.service.backfills import Backfills

QUEUE_STATES = (
    "waiting",
    "running",
    "stalled",
    "scheduled",
    "depends",
    "recurring",
    "parked",
    "buried",
)
LOAD_FIELDS = ("due", "backlog", "leased")
JOB_STATES = (*QUEUE_STATES, "complete", "failed")


def register(group: click.Group) -> None:
    for command in (queues, workers, jobs, job, failed, unfail, retry, rerun, cancel):
        group.add_command(command)


@click.command()
@as_json
@connection
def queues(as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """Queues with their job counts; backlog (waiting and due) and leased (running and stalled)
    are what an autoscaler reads."""
    client = open_client(redis_url, namespace)
    with user_errors():
        merged = client.queues.documents()
    if as_json:
        print_json(merged)
        return
    columns = ("queue", *QUEUE_STATES, *LOAD_FIELDS, "paused")
    rows = [
        [
            c["name"],
            *(c.get(s, 0) for s in (*QUEUE_STATES, *LOAD_FIELDS)),
            "yes" if c.get("paused") else "",
        ]
        for c in merged
    ]
    empty = (
        "no queues yet: a queue appears with the first job put into it or the first worker on it"
    )
    table("Queues", columns, rows, empty=empty)


@click.command()
@id_option(
    "--queue",
    "-q",
    what="queue name",
    kind="id",
    help="Only workers that registered this queue (its listeners).",
)
@id_option(
    "--forget",
    what="worker name",
    kind="id",
    metavar="NAME",
    help="Forget the silent worker NAME (killed, it never said it stopped) instead of listing: "
    "refused while it may be working or holds jobs.",
)
@as_json
@connection
def workers(
    queue: str | None,
    forget: str | None,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Workers by recent activity: host, pid, queues, the jobs they hold, when last seen.

    A worker not heard from for longer than the worker-silent-after setting (60 s) is marked
    silent: a live worker renews its registration well within that, so it most likely died.
    Workers silent for longer than the max-worker-age setting are left out (and forgotten).
    With --queue, a listing without a live worker says why on stderr: there is no such queue,
    or no live worker listens on it. --forget NAME forgets a silent worker at once (a worker
    killed with kill -9); one seen within worker-silent-after, or whose lease has not lapsed,
    or that holds jobs (they go back to a live worker first) is refused.
    """
    client = open_client(redis_url, namespace)
    if forget is not None:
        with user_errors():
            client.workers.forget(forget)
        click.echo(f"forgot worker {forget}")
        return
    with user_errors():
        merged = client.workers.documents(queue)
    if queue is not None and all(w.get("silent") for w in merged):
        _note_no_listener(client, queue, silent=len(merged))
    if as_json:
        print_json(merged)
        return
    rows = [
        [
            w["name"],
            w.get("host", ""),
            w.get("pid", ""),
            ",".join(str(q) for q in w.get("queues") or []),
            w.get("jobs", 0),
            w.get("stalled", 0),
            ago(w.get("started")),
            _last_seen(w),
        ]
        for w in merged
    ]
    if not rows and queue is not None:
        return  # the note on stderr said why
    title = "Workers" if queue is None else f"Workers listening on {queue}"
    columns = ("worker", "host", "pid", "queues", "jobs", "stalled", "started", "last seen")
    table(title, columns, rows, empty="no live workers: start one with `flows worker -q QUEUE`")


def _note_no_listener(client: Client, queue: str, silent: int) -> None:
    """Say on stderr why no live worker is listed as listening on ``queue`` (the listing still
    prints, as asked): there is no such queue (with the one likely meant), or no live worker
    listens on it (the ``silent`` ones listed most likely died)."""
    if not silent and not known_queue(client, queue, refuse=False):
        return
    dead = f" ({silent} silent worker{'s' if silent != 1 else ''}, most likely dead)"
    click.echo(
        f"note: no live worker listens on queue {visible(repr(queue))}{dead if silent else ''}",
        err=True,
    )


def _last_seen(worker: dict[str, Any]) -> str:
    """'3s ago', or 'SILENT 2m' for a worker not heard from for worker-silent-after."""
    seen = ago(worker.get("last_seen"))
    return f"SILENT {seen.removesuffix(' ago')}" if worker.get("silent") else seen


PAGE = 500
"""Jobs read per engine call while filtering the completed and failed jobs by queue."""


def _listed(client: Client, state: str, queue: str | None, limit: int) -> list[Job]:
    """Up to ``limit`` jobs in ``state``, of ``queue`` only when one is given.

    Waiting, running, ... are indexed per queue by the engine; completed and failed jobs are not
    (one set, and one list per failure group), so those are read page by page and kept when
    they are of the queue.
    """
    if state == "complete":
        return _filtered(lambda offset: _completed_page(client, offset), queue, limit)
    if state == "failed":
        found: list[Job] = []
        for group in sorted(client.failed()):
            found += _filtered(_failed_pages(client, group), queue, limit - len(found))
            if len(found) >= limit:
                break
        return found
    names = [queue] if queue else [c["name"] for c in client.queues.counts()]
    jids: list[str] = []
    for name in names:
        jids += [str(j) for j in client.engine.call("jobs", state, name, 0, limit)]
    return client.jobs.multiget(*jids[:limit]) if jids else []


Page = Callable[[int], tuple[int, list[Job]]]
"""Reads the page at an offset: how many entries it read, and the jobs among them."""


def _completed_page(client: Client, offset: int) -> tuple[int, list[Job]]:
    jids = client.jobs.complete(offset, PAGE)
    return len(jids), client.jobs.multiget(*jids)


def _failed_pages(client: Client, group: str) -> Page:
    def page(offset: int) -> tuple[int, list[Job]]:
        jobs = client.jobs.failed(group, offset, PAGE).jobs
        return len(jobs), jobs

    return page


def _filtered(page: Page, queue: str | None, limit: int) -> list[Job]:
    found: list[Job] = []
    offset = 0
    while len(found) < limit:
        read, jobs = page(offset)
        if not read:
            break
        offset += read
        found += [j for j in jobs if queue is None or j.queue == queue]
    return found[:limit]


@click.command()
@click.option(
    "--state",
    type=click.Choice(JOB_STATES),
    default="waiting",
    show_default=True,
    help="The jobs' state.",
)
@id_option(
    "--queue", "-q", what="queue name", kind="id", help="Only jobs of this queue (for every state)."
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10000),
    default=50,
    show_default=True,
    help="Show at most this many jobs.",
)
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
    if queue is not None:
        known_queue(client, queue, refuse=False)
    if state == "recurring":
        _recurring(client, queue, limit, as_json)
        return
    with user_errors():
        found = _listed(client, state, queue, limit + 1)  # one more: whether the list is cut
    more, found = len(found) > limit, found[:limit]
    if as_json:
        print_json([j.as_json() for j in found])
        return
    rows = [[j.jid, j.state, j.queue, j.klass, j.worker, j.priority, ago(j.updated)] for j in found]
    table(
        f"Jobs ({state})",
        ("jid", "state", "queue", "klass", "worker", "priority", "updated"),
        rows,
        empty=_no_jobs(state, queue),
    )
    if more:  # a cut list must not read as all there is (other queues' jobs may be left out)
        click.echo(
            f"note: the list stops at --limit {limit}; more jobs in state {state} exist "
            "(-q QUEUE lists one queue's)",
            err=True,
        )


def _no_jobs(state: str, queue: str | None) -> str:
    return f"no jobs in state {state}" + ("" if queue is None else f" in queue {visible(queue)}")


def _recurring(client: Client, queue: str | None, limit: int, as_json: bool) -> None:
    """Recurring jobs are definitions (``recur.get``), not job hashes."""
    names = [queue] if queue else [c["name"] for c in client.queues.counts()]
    with user_errors():
        jids = [str(j) for n in names for j in client.engine.call("jobs", "recurring", n, 0, limit)]
        found = [client.jobs.recurring(jid) for jid in jids[:limit]]
    if as_json:
        print_json(
            [
                {**{k: v for k, v in vars(r).items() if k != "client"}, "state": "recurring"}
                for r in found
            ]
        )
        return
    rows = [[r.jid, r.queue, r.klass, f"{r.interval:g}s", r.count, r.priority] for r in found]
    columns = ("jid", "queue", "klass", "every", "spawned", "priority")
    table("Jobs (recurring)", columns, rows, empty=_no_jobs("recurring", queue))


def _describe_ran_by(ran: RanBy | None) -> str:
    if ran is None:
        return ""
    where = ", ".join(
        part
        for part in (ran.host and f"host {ran.host}", ran.pid is not None and f"pid {ran.pid}")
        if part
    )
    return f"{ran.worker} ({where})" if where else ran.worker


@click.command()
@id_argument("jid", "job id", "jid", labels=True)
@as_json
@connection
def job(jid: str, as_json: bool, redis_url: str | None, namespace: str | None) -> None:
    """One job: state, data, result, failure and history.

    A job of the child run a sub-flow step started is RUN:STEP/CHILD-STEP too, as `flows
    status` labels its step."""
    client = open_client(redis_url, namespace)
    with user_errors():
        found = _job_or_refuse(client, labelled_jid(client, jid))
        if as_json:
            print_json(run_actions.job_document(client, found))
            return
        ran = run_actions.ran_by(client, found)
    rows: list[list[Any]] = [
        ["state", found.state],
        ["queue", found.queue],
        ["klass", found.klass],
        ["worker", found.worker],
        ["ran by", _describe_ran_by(ran)],
        ["priority", found.priority],
        ["retries left", f"{max(0, found.remaining)} of {found.retries}"],
        ["tags", ", ".join(found.tags)],
        ["created", when(found.created)],
        ["updated", when(found.updated)],
        ["data", json.dumps(shown_data(found.data))],
        ["result", "" if found.result is None else json.dumps(found.result)],
        ["depends on", ", ".join(found.dependencies)],
        ["dependents", ", ".join(found.dependents)],
    ]
    labels = {"ttl": "ttl (s)", "deadline": "expires unless started", "ttr": "ttr (s)"}
    for name, value in found.put_options().items():
        rows.append(
            [labels.get(name, name.replace("_", " ")), when(value) if name == "deadline" else value]
        )
    if found.failure:
        rows += [["failure", f"{found.failure.get('group')} at {when(found.failure.get('when'))}"]]
    table(f"Job {found.jid}", ("field", "value"), rows)
    if found.failure and found.failure.get("message"):
        console.print(Text(visible(str(found.failure.get("group"))), style="bold red"))
        console.print(visible(str(found.failure["message"])), markup=False, highlight=False)
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
@id_argument("group", "failure group", kind="id", required=False)
@click.option(
    "--limit",
    type=click.IntRange(1, 10000),
    default=25,
    show_default=True,
    help="Show at most this many failed jobs of GROUP.",
)
@as_json
@connection
def failed(
    group: str | None, limit: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Failure groups with counts, or the failed jobs of GROUP.

    A group keeps its latest failed jobs (the max-failed-per-group setting): the older ones
    it dropped are counted. With --json, the groups are a list of {group, total, dropped}
    (total: failed jobs kept), and GROUP's jobs an object of total, dropped and jobs.

    A GROUP without failed jobs is said on stderr, with the group likely meant: group names
    are case-sensitive, and an empty listing of a misspelt one reads as no failures."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if group is None:
            groups = client.jobs.failure_groups()
            if as_json:
                print_json(groups)
            else:
                rows = [[g["group"], g["total"], g["dropped"]] for g in groups]
                table("Failed", ("group", "jobs", "dropped"), rows, empty="no job has failed")
            return
        listing = client.failed(group, 0, limit)
        if not listing.total and not listing.dropped:
            _note_unknown_group(client, group)
    if as_json:
        print_json(
            {
                "total": listing.total,
                "dropped": listing.dropped,
                "jobs": [j.as_json() for j in listing.jobs],
            }
        )
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
    if not rows and not listing.dropped:
        return  # the note on stderr said so
    title = f"Failed: {group} ({listing.total}"
    title += f", {listing.dropped} older ones dropped)" if listing.dropped else ")"
    table(
        title,
        ("jid", "queue", "klass", "when", "last line"),
        rows,
        empty=f"no failed jobs kept in group {visible(repr(group))} "
        f"({listing.dropped} older ones dropped)",
    )


def _note_unknown_group(client: Client, group: str) -> None:
    """Say on stderr that ``group`` has no failed jobs, with the group likely meant (the
    listing still prints: empty, as asked)."""
    names = sorted(name for name, count in client.failed().items() if count)
    hint = did_you_mean(group, names) or (
        f"its groups: {', '.join(names[:10])}" if names else "no job has failed"
    )
    click.echo(f"note: no failed jobs in group {group!r} ({hint})", err=True)


@click.command()
@id_argument("group", "failure group", kind="id")
@id_option(
    "--queue",
    "-q",
    what="queue name",
    kind="id",
    required=True,
    help="Queue to put the jobs back into.",
)
@click.option(
    "--count",
    type=click.IntRange(1, 100000),
    default=25,
    show_default=True,
    help="How many failed jobs, the oldest first.",
)
@as_json
@connection
def unfail(
    group: str, queue: str, count: int, as_json: bool, redis_url: str | None, namespace: str | None
) -> None:
    """Put up to COUNT failed jobs of GROUP back into QUEUE (oldest first).

    Refused (exit 1, nothing changed) when GROUP has no failed jobs: `flows failed` lists the
    groups."""
    client = open_client(redis_url, namespace)
    with user_errors():
        refusal = run_actions.unfail_refusal(client, group, "`flows failed`")
    if refusal is not None:
        raise click.ClickException(refusal)
    note_new_queues(client, [queue])
    with user_errors():
        moved = client.unfail(queue, group, count)
    report(
        as_json,
        f"{moved} job(s) moved from {group} to {queue}",
        {"group": group, "queue": queue, "moved": moved},
    )


def _job_or_refuse(client: Client, jid: str) -> Job:
    """The job ``jid``; a jid that is none is refused naming the job of its run likely meant."""
    try:
        return client.jobs[jid]
    except JobNotFound as error:
        meant = jid_meant(client, jid)
        if meant is None:
            raise
        raise click.ClickException(visible(f"{error} (did you mean {meant!r}?)")) from None


def _is_run(client: Client, name: str) -> bool:
    return client.engine.call("run.get", name) is not None


def _may_be_job(name: str) -> bool:
    """Whether ``name``, no run, can be a jid: a run's id may end in ``-history``, a jid not."""
    return id_fault(name, "jid") is None


def _unknown(names: list[str]) -> click.ClickException:
    """The error for targets that are neither a run nor a job (as `flows explain` says it)."""
    listed = ", ".join(repr(name) for name in names)
    return click.ClickException(f"no job or run {listed} (see `flows runs`)")


@click.command()
@id_argument("target", "run or job id", labels=True)
@click.option(
    "--detach", is_flag=True, help="A run: only put its failed jobs back; workers run them."
)
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="A run: jobs at once in the local worker.",
)
@as_json
@connection
def retry(
    target: str,
    detach: bool,
    threads: int,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Resume run TARGET and work it here as `flows run` does (its failed steps run again,
    completed ones do not; exit code 0 when it succeeds), or put the failed jobs of TARGET
    back: a step of a run (RUN:STEP, a foreach step's items too) or a job.

    A run still running with nothing failed, expired or canceled (an interrupted `flows run`)
    is resumed as it is: nothing is put back, and what is left is worked here. Anything else
    with nothing failed, expired or canceled to put back (such a run with --detach, a run that
    is not running, a step, a job) is refused (exit code 1, nothing changed): re-run finished
    work with `flows rerun`.

    A step of the child run a sub-flow step started is RUN:STEP/CHILD-STEP, as `flows status`
    labels it: that job of the child run, retried as it would be named RUN.STEP:CHILD-STEP."""
    client = open_client(redis_url, namespace)
    with user_errors():
        target = labelled_jid(client, target)
        if _is_run(client, target):
            view = load_run(client, target, limit=0)
            assert view is not None
            if not detach:
                check_server(client, "flows retry")
            if not detach and view.status == "running" and "retry" not in view.actions:
                # an interrupted run: nothing to put back, its jobs wait to be worked here
                # (detached, nothing would be: the engine refuses it, as the API does)
                count = 0
                click.echo(f"run {target}: nothing failed; working what is left", err=True)
            else:
                count = run_actions.retry_run(client, target)
                click.echo(f"run {target}: {count} failed or canceled job(s) put back", err=True)
            auditing.now()  # before the work: a run that fails again was still retried
            if detach:
                if as_json:
                    print_json({"run": target, "retried": count})
                return
            sys.exit(work_run(client, target, view.queues, threads, as_json=as_json))
        if not _may_be_job(target):
            raise _unknown([target])
        try:
            done = run_actions.retry_job(client, target)
        except JobNotFound:
            raise _unknown([target]) from None
        except InvalidArgument:
            if (missing := no_step_of(client, target)) is not None:
                raise missing_run(missing) from None
            raise
    if "run" in done:
        text = f"run {done['run']}: {done['retried']} failed job(s) of {target} put back"
    else:
        text = f"{target} put back into {done['queue']}"
    report(as_json, text, done)


@click.command()
@id_argument("run_id", "run id", metavar="RUN")
@click.argument("step")
@click.option("--downstream", is_flag=True, help="Re-run every step that needs STEP too.")
@id_option(
    "--item", what="job id", metavar="JID", help="Only this job of the step (a foreach item)."
)
@click.option("--detach", is_flag=True, help="Only put the jobs back; workers run them.")
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Jobs at once in the local worker.",
)
@connection
def rerun(
    run_id: str,
    step: str,
    downstream: bool,
    item: str | None,
    detach: bool,
    threads: int,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Run STEP of the finished run RUN again (with --downstream, every step after it), and
    work it here as `flows run` does. Attempts count on; the earlier attempts' logs stay
    readable (`flows logs RUN STEP --attempt 1`). Refused while the run is running.

    A step of the child run a sub-flow step started is STEP/CHILD-STEP, as `flows status`
    labels it: re-run in the child run, as `flows rerun RUN.STEP CHILD-STEP` re-runs it."""
    client = open_client(redis_url, namespace)
    with user_errors():
        if not _is_run(client, run_id):
            raise click.ClickException(f"no run {run_id!r} (see `flows runs`)")
        run_id, step = labelled_step(client, run_id, step)
        if not detach:
            check_server(client, "flows rerun")
        with step_refusal(client, run_id, step):
            count = run_actions.rerun(client, run_id, step, downstream, item)
        what = f"{step} and the steps after it" if downstream else step
        click.echo(f"run {run_id}: {count} job(s) of {what} put back to run again", err=True)
        auditing.now()  # before the work: a run that fails again was still re-run
        if detach:
            return
        view = load_run(client, run_id, limit=0)
        sys.exit(work_run(client, run_id, view.queues if view else [], threads))


@click.command()
@id_argument("targets", "run or job id", labels=True, nargs=-1)
@id_option(
    "--backfill",
    "backfill_id",
    what="backfill id",
    kind="id",
    metavar="ID",
    default=None,
    help="Cancel a backfill: submit no more of its runs and cancel those still active.",
)
@as_json
@connection
def cancel(
    targets: tuple[str, ...],
    backfill_id: str | None,
    as_json: bool,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Cancel runs (every job not yet done) or jobs (refused while a job depends on one, and for
    a completed job or a run's failed or expired one: `flows delete` removes one), or a backfill
    (--backfill ID).

    A run's cancel cancels the child runs its sub-flow steps wait for too: a run's count
    includes their jobs (with --json, runs: {run: jobs}, jobs: the jobs canceled). A job of
    the child run a sub-flow step started is RUN:STEP/CHILD-STEP too, as `flows status` labels
    its step."""
    if not targets and backfill_id is None:
        raise click.UsageError("name a run or job to cancel, or --backfill ID")
    client = open_client(redis_url, namespace)
    with user_errors():
        targets = tuple(labelled_jid(client, t) for t in targets)
        runs = [t for t in targets if _is_run(client, t)]
        jids = [t for t in targets if t not in runs]
        # Every target checked before the first is canceled: a typo cancels nothing.
        asked = [jid for jid in jids if _may_be_job(jid)]
        found = {job.jid for job in client.jobs.multiget(*asked)} if asked else set()
        if missing := [jid for jid in jids if jid not in found]:
            raise _unknown(missing)
        if backfill_id is not None:
            _cancel_backfill(client, backfill_id)
        canceled_runs: dict[str, int] = {}
        canceled_jobs: list[str] = []
        for run_id in runs:
            # The engine's count: the run's jobs and those of the child runs canceled with it.
            canceled_runs[run_id] = count = int(client.engine.call("run.cancel", run_id))
            if not as_json:
                click.echo(f"run {visible(run_id)}: canceled {count} job(s)")
        if jids:
            canceled = canceled_jobs = list(client.jobs.cancel(*jids))
            if not as_json:
                click.echo(
                    f"canceled {len(canceled)} job(s)"
                    + (": " + ", ".join(canceled) if canceled else "")
                )
    if as_json:
        print_json({"runs": canceled_runs, "jobs": canceled_jobs})


def _cancel_backfill(client: Client, backfill_id: str) -> None:
    store = Backfills(client)
    if store.get(backfill_id) is None:
        raise click.ClickException(f"no backfill {backfill_id} (see `flows backfills`)")
    canceled = store.cancel(backfill_id)
    if not canceled.changed:
        click.echo(f"backfill {backfill_id} was {canceled.state} already: nothing to cancel")
        return
    click.echo(
        f"backfill {backfill_id}: canceled {canceled.runs} active run(s) ({canceled.jobs} job(s));"
        f" {canceled.pending} tick(s) will not be submitted"
    )
