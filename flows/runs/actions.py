"""The actions on runs, steps and jobs, each one engine call that checks what the engine's
decider allows (lua/include/run_state.lua) before it writes: a refusal names the state and the
allowed actions and changes nothing (:class:`scheduler.engine.errors.WrongState`)."""

from __future__ import annotations

from typing import Any, Final

from flows.flowfile.findings import did_you_mean
from flows.flowfile.job_data import FlowsMeta
from flows.runs.read import StepView, step_document
from scheduler.engine.client import Client
from scheduler.engine.errors import WrongState
from scheduler.engine.job import Job, RanBy
from scheduler.engine.replies import as_dict, as_list

RETRYABLE: Final = frozenset({"failed", "expired"})
"""States a plain job (of no run) is put back from by a retry."""


def is_run(client: Client, name: str) -> bool:
    return client.engine.call("run.get", name) is not None


def unknown_queue(client: Client, name: str) -> str | None:
    """Why ``name`` is no queue the namespace has seen, with the one likely meant (an answer of
    nothing for a misspelt queue would look like an empty queue, a pause of one would pause
    nothing for good); None when it is one."""
    names = [str(entry.get("name")) for entry in client.queues.counts()]
    if name in names:
        return None
    hint = did_you_mean(name, names) or (
        f"its queues: {', '.join(sorted(names)[:10])}" if names else "it has no queues yet"
    )
    return f"no queue {name!r} ({hint})"


def unfail_refusal(client: Client, group: str, listing: str) -> str | None:
    """Why nothing of ``group`` can be put back: it has no failed jobs (the group likely meant,
    and ``listing``, what lists the groups, say where to look); None when it has some."""
    groups = client.failed()
    if groups.get(group):
        return None
    hint = did_you_mean(group, [g for g, n in groups.items() if n])
    return (
        f"no failed jobs in group {group!r} ({hint + '; ' if hint else ''}{listing} lists the "
        "groups); nothing moved"
    )


def run_of_job(client: Client, jid: str) -> str | None:
    """The run a job belongs to (from its flow meta, else its ``<run>:<step>`` id), or None."""
    found = _run_target(client, jid)
    return None if found is None else found[0]


def _run_target(client: Client, name: str) -> tuple[str, str] | None:
    """The run ``name`` is of, and the target that names it to the engine's ``run.retry``:
    a job of a run (by its flow meta, else its ``<run>:<step>`` id) by its jid, and a
    ``<run>:<step>`` that is no job by the step (a foreach step's jobs are
    ``<run>:<step>[i]``: the engine targets them all by the step's name); None when neither.
    A run id may hold ``[`` itself (``--run-id 'nightly[eu]'``): the whole name is tried too."""
    job = client.jobs.get(name)
    meta = FlowsMeta.from_data(job.data) if job is not None else None
    if meta is not None:
        return meta.run, name
    for head in dict.fromkeys((name.split("[", 1)[0], name)):
        if ":" in head:
            run_id = head.rsplit(":", 1)[0]
            if is_run(client, run_id):
                return run_id, name if job is not None else name[len(run_id) + 1 :]
    return None


def retry_run(client: Client, run_id: str, target: str | None = None) -> int:
    """Put the run's failed and expired jobs back (only ``target``'s: a step or a jid)."""
    args = [run_id] if target is None else [run_id, target]
    return int(client.engine.call("run.retry", *args))


def retry_job(client: Client, jid: str) -> dict[str, str | int]:
    """Retry one job, or a step of a run (``<run>:<step>``, a foreach step's too): a job of a
    run through its run (the engine's rules), a plain one only when it failed or expired.
    Returns ``{run, retried}`` or ``{queue, retried}``; raises
    :class:`~scheduler.engine.errors.JobNotFound` or :class:`WrongState`."""
    of_run = _run_target(client, jid)
    if of_run is not None:
        run_id, target = of_run
        return {"run": run_id, "retried": retry_run(client, run_id, target)}
    found = client.jobs[jid]
    if found.state not in RETRYABLE:
        raise WrongState(
            f"Retry(): job {jid} is {found.state}: retry is not allowed "
            "(only a failed or expired job is put back)"
        )
    found.requeue(found.queue)
    return {"queue": found.queue, "retried": 1}


def actions_and_step(
    client: Client, jid: str, state: str | None, run_id: str | None
) -> tuple[list[str], dict[str, Any] | None]:
    """What may be done to job ``jid`` (in ``state``) now, and its step. For a job of run
    ``run_id`` (:func:`run_of_job`), one ``run.job`` call: what the engine's decider allows (the
    words of :mod:`flows.runs.statuses`), and the job's step as the run's JSON gives it
    (:func:`flows.runs.read.step_document`, without its page of jobs; None when the run has no
    such step). For a plain job (None), ``retry`` when it failed or expired, ``cancel`` until it
    completes and ``kick`` while it is buried, and no step."""
    if run_id is not None:
        reply = as_dict(client.engine.call("run.job", run_id, jid))
        allowed = reply.get("actions")
        raw = reply.get("step")
        step = step_document(StepView.parse(raw)) if isinstance(raw, dict) and raw else None
        return (list(allowed) if isinstance(allowed, list) else []), step  # [] comes as {}
    plain = []
    if state in RETRYABLE:
        plain.append("retry")
    if state is not None and state != "complete":
        plain.append("cancel")
    if state == "buried":
        plain.append("kick")
    return plain, None


def ran_by(client: Client, job: Job) -> RanBy | None:
    """Who ran ``job`` last, with host and pid; from the worker's registration when the
    history has none (the worker registered after it popped the job)."""
    ran = job.ran_by
    if ran is None or (ran.host and ran.pid is not None):
        return ran
    info = as_dict(as_dict(client.engine.call("worker.info", ran.worker)).get(ran.worker))
    pid = info.get("pid")
    return RanBy(
        ran.worker,
        ran.host or (str(info["host"]) if info.get("host") else None),
        ran.pid if ran.pid is not None else (int(pid) if isinstance(pid, int) else None),
    )


def job_document(client: Client, job: Job) -> dict[str, Any]:
    """One job as every surface gives it (`flows job --json`, ``GET /api/v1/jobs/{jid}``): its
    fields, the run it belongs to (``run``, or None), its step as that run's JSON gives it
    (``step``, or None) and the actions allowed on it now (both :func:`actions_and_step`), and
    who ran it last (``ran_by``: worker, host, pid; or None)."""
    doc = job.as_json()
    doc["run"] = run_id = run_of_job(client, job.jid)
    actions, doc["step"] = actions_and_step(client, job.jid, doc.get("state"), run_id)
    doc["actions"] = actions
    ran = ran_by(client, job)
    doc["ran_by"] = None if ran is None else ran._asdict()
    return doc


def rerun(
    client: Client, run_id: str, step: str, downstream: bool = False, item: str | None = None
) -> int:
    """Run a finished run's step again (with ``downstream``, every job needing it)."""
    return int(client.engine.call("run.rerun", run_id, step, 1 if downstream else 0, item or ""))


def kick_step(client: Client, run_id: str, step: str) -> list[str]:
    """Put every buried job of a run's step back into its queue (a foreach step's items
    too), in one engine call refused unless the decider allows the step ``kick``; returns the
    jids kicked."""
    return [str(jid) for jid in as_list(client.engine.call("run.kick", run_id, step))]


__all__ = [
    "RETRYABLE",
    "actions_and_step",
    "is_run",
    "job_document",
    "kick_step",
    "ran_by",
    "rerun",
    "retry_job",
    "retry_run",
    "run_of_job",
]
