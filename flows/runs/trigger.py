"""A run of a registered flow, now: what ``flows schedule trigger`` and the REST API's
``POST /api/v1/runs`` do.

The flow is the version the scheduler service registered (its schedule's text), expanded as
every run is (:func:`flows.runs.build.build_run`, via
:class:`flows.runs.service_source.FlowsSource`): params given here are bound and checked
against the flow's declarations exactly as ``flows run -p`` values are (text converted to the
declared type, unknown names and wrong types refused), the schedule's params fill the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flows.expand.run_ids import manual_run_id
from flows.runs.service_source import FlowsSource
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules


class UnknownFlow(LookupError):
    """No flow of that name is registered (the scheduler service registers flows with a
    ``schedule:``)."""


@dataclass(frozen=True)
class Triggered:
    run_id: str
    jobs: int
    flow: str
    existed: bool  # the run id was taken already: nothing was submitted

    def as_json(self) -> dict[str, Any]:
        """The one JSON shape of a run started, however it was (the API's answer to every
        start, documented as ``flows.ui.shapes.RunStarted``; ``--json``)."""
        return {"id": self.run_id, "jobs": self.jobs, "flow": self.flow, "existed": self.existed}


def trigger_run(client: Client, name: str, params: Mapping[str, Any] | None = None) -> Triggered:
    """Submit a manual run of the registered flow ``name``.

    Raises :class:`UnknownFlow`, or ValueError (:class:`flows.flowfile.params.ParamError`,
    :class:`flows.expand.jobs.ExpansionError`) when the params do not fit the flow."""
    schedules = Schedules(client)
    registration = schedules.get(name, skips=0)
    if registration is None:
        raise UnknownFlow(f"no registered flow {name!r} (see `flows schedules`)")
    definition = registration.definition
    if params:
        definition = dataclasses.replace(definition, params={**definition.params, **params})
    now = client.engine.server_time()
    run_id = manual_run_id(definition.name, now)
    request = FlowsSource().build(definition, run_id, now, "manual", 0.0)
    outcome = schedules.trigger(name, request)
    return Triggered(run_id, request.job_count, definition.name, outcome == "exists")
