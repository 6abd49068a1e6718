"""A flow's ``outputs:`` for one run: what its run record keeps so they can be read once it has
ended (a parent's sub-flow step takes them as its outputs). Pure.

:func:`outputs_record` resolves params and run fields when the run is built; step references
stay as written, with the jids of each step they name (:class:`flows.flowfile.job_data.Upstream`),
and :func:`resolve_outputs` resolves them from those jobs' results as a worker resolves a job's
payload (:func:`flows.flowfile.job_data.resolve_payload`: the same values, the same errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from flows.expand.jobs import Expansion
from flows.flowfile.job_data import (
    META_KEY,
    FlowsMeta,
    Upstream,
    UpstreamJob,
    meta_json,
    resolve_payload,
)
from flows.flowfile.model import Flow
from flows.flowfile.templates import KEEP, PARAMS, RUN, STEPS, Reference, render, select

RECORD_FIELD: Final = "outputs"
"""The run record's field holding them (JSON: ``{"values": ..., "upstream": ...}``)."""


def outputs_record(flow: Flow, expansion: Expansion) -> dict[str, Any] | None:
    """The flow's outputs for the run ``expansion`` made (None when it declares none):
    ``values`` with params and run fields resolved, ``upstream`` the jobs of each step they
    read."""
    if flow.outputs is None:
        return None
    read: dict[str, None] = {}

    def lookup(reference: Reference) -> Any:
        root, rest = reference.root, reference.path[1:]
        if root == RUN:
            return select(expansion.run, rest, reference)
        if root == PARAMS:
            return select(expansion.params, rest, reference)
        if root == STEPS and rest:
            read.setdefault(rest[0], None)
        return KEEP

    values = render(dict(flow.outputs), lookup)
    jids: dict[str, list[str]] = {}
    empty: set[str] = set()
    for job in expansion.jobs:
        if job.step in read:
            jids.setdefault(job.step, []).append(job.jid)
            if job.empty:
                empty.add(job.step)
    upstream = {
        step: Upstream(
            tuple(jids.get(step, ())), flow.steps[step].fans_out, empty=step in empty
        ).to_json()
        for step in read
        if step in flow.steps
    }
    return {"values": values, "upstream": upstream}


def resolve_outputs(
    run_id: str, record: Mapping[str, Any], jobs: Mapping[str, UpstreamJob]
) -> dict[str, Any]:
    """The outputs of :func:`outputs_record` with their step references resolved from ``jobs``
    (jid → what was read of it); raises :class:`flows.flowfile.job_data.UnresolvedReference`."""
    upstream = {
        step: Upstream.from_json(entry) for step, entry in record.get("upstream", {}).items()
    }
    meta = meta_json(run_id, "", RECORD_FIELD, None, "python", upstream, None, None, {}, ".")
    # A step with no items (its one job completed with the empty list) has no jobs to read.
    parsed = FlowsMeta.from_data({META_KEY: meta})
    assert parsed is not None
    meta = parsed.expanded(jobs).to_json()
    return resolve_payload({**record.get("values", {}), META_KEY: meta}, jobs)


def upstream_jids(record: Mapping[str, Any]) -> list[str]:
    """Every jid :func:`resolve_outputs` needs read."""
    return [jid for entry in record.get("upstream", {}).values() for jid in entry["jids"]]


__all__ = ["RECORD_FIELD", "outputs_record", "resolve_outputs", "upstream_jids"]
