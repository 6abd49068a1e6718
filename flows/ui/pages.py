"""The dashboard: server-rendered HTML pages of ``flows ui`` on the API's own read code.

Pages read what the API reads (the same functions, so one place answers each question) and
render it with Jinja2, every value escaped. Pages never write: their buttons call the API's
POST endpoints from the browser with the bearer token the user typed into the page (kept in the
tab's ``sessionStorage``, never in a cookie), so no request a browser makes on its own can
change anything. Live updates come from the API's event streams (``static/app.js``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, cast
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from flows.flowfile.durations import spelled
from flows.runs import history as run_history
from flows.runs import statuses
from flows.runs.explain import no_items
from flows.runs.labels import labelled_step
from flows.runs.read import RunView, StepView
from flows.ui import api, graph
from flows.ui.state import CheckedRoute, UiState, reader
from flows.validation.validate import validate_text
from scheduler.service.schedules import Schedules
from scheduler.terminal import CONTROL

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.autoescape = True
router = APIRouter(
    dependencies=[Depends(reader)], route_class=CheckedRoute, include_in_schema=False
)
Ui = api.Ui

# Items of a foreach step shown at once in its panel; the rest are a page away.
ITEMS_PAGE = 100
# Runs looked at for the overview's last 24 h, at most.
OVERVIEW_RUNS = 1000
# Rows of the other lists per page (a flow's row reads its recent runs: fewer of those), and
# of the overview's short lists, which end with a link to the whole list.
LIST_PAGE = 100
FLOWS_PAGE = 25
RUNS_PAGE = 50
OVERVIEW_LIST = 20

SYMBOLS = {**statuses.SYMBOLS, "paused": "‖", "stale": "○"}
# A missed deadline's mark: the clock of `expired` (on a graph node and in its badges).
DEADLINE_MARK = statuses.SYMBOLS["expired"]


def when(value: Any) -> str:
    """Epoch seconds as UTC time, '' for none."""
    if value in (None, "", 0):
        return ""
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(value: Any) -> str:
    if value is None or value == "":
        return ""
    seconds = float(value)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m" if hours else f"{minutes} m {seconds:02d} s"


def pretty(value: Any) -> str:
    """A JSON value indented for people, its unicode as text; the template escapes it."""
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def urlencode(value: Any) -> str:
    """A value as one URL part, every reserved character encoded ('/' too, unlike Jinja's own
    ``urlencode``): an id never becomes a path of its own."""
    return quote(str(value), safe="")


def shell(value: Any) -> str:
    """A value as one word of a command shown to be copied into a shell, as the command line
    prints it: a run id may hold ``$(...)``, ``;`` or a quote."""
    return shlex.quote(str(value))


templates.env.filters["urlencode"] = urlencode
templates.env.filters["shell"] = shell
templates.env.filters["when"] = when
templates.env.filters["pretty"] = pretty
templates.env.filters["duration"] = duration
templates.env.globals["symbols"] = SYMBOLS
templates.env.globals["deadline_mark"] = DEADLINE_MARK


# The characters a terminal would obey (scheduler.terminal's CONTROL: C0 but tab and newline,
# DEL, C1, the bidirectional controls). A run id, a job's data or a failure holding a
# right-to-left override would reorder the page's text after it (a run's heading, its badge,
# another job's id): each is shown as the log viewer shows it.
_HIDDEN = CONTROL
_NAMED = {0x1B: "\u241b", 0x7F: "\u2421", 0x0D: "\u240d"}


def _symbol(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _NAMED:
        return _NAMED[code]
    return chr(0x2400 + code) if code < 0x20 else f"<U+{code:04X}>"


class Exact(str):
    """A value the page holds as it is (the ``exact`` filter): an attribute a script reads to
    call the API with (a run id, a jid, a group) or a form field's value."""

    __slots__ = ()


def shown(value: Any) -> Any:
    """Every ``{{ value }}`` of a template (Jinja's ``finalize``): text with its control and
    bidirectional characters made visible; markup a macro made, and ``exact`` values, as they
    are."""
    if isinstance(value, str) and not isinstance(value, Exact | Markup):
        return _HIDDEN.sub(_symbol, value)
    return value


templates.env.finalize = shown
templates.env.filters["exact"] = Exact


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context)


def error_page(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    """The dashboard's page for a request it cannot answer: ``title`` and ``detail`` as text."""
    return templates.TemplateResponse(
        request, "error.html", {"title": title, "detail": detail}, status_code=status
    )


# -- overview, runs --------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, ui: Ui) -> HTMLResponse:
    now = api.engine_errors(ui.client.engine.server_time)  # services are alive by its clock
    since = now - 86400
    recent = api.list_runs(
        ui, offset=0, limit=100, flow=None, status=None, since=since, all_runs=True
    )
    runs = list(recent["items"])
    while recent["next"] is not None and len(runs) < OVERVIEW_RUNS:
        recent = api.list_runs(
            ui, offset=recent["next"], limit=100, flow=None, status=None, since=since, all_runs=True
        )
        runs.extend(recent["items"])
    queues = api.list_queues(ui, offset=0, limit=api.MAX_LIMIT)
    workers = api.list_workers(ui, offset=0, limit=api.MAX_LIMIT, queue=None)
    return render(
        request,
        "overview.html",
        by_status=Counter(str(r.get("status")) for r in runs),
        counted=len(runs),
        running=[r for r in runs if r.get("status") == "running"][:20],
        failures=[r for r in runs if r.get("status") == "failed"][:10],
        queues=[
            q for q in queues["items"] if int(q.get("backlog") or 0) or int(q.get("leased") or 0)
        ],
        queues_more=queues["next"] is not None,
        queues_looked=len(queues["items"]),
        schedules=api.list_schedules(ui, offset=0, limit=OVERVIEW_LIST),
        services=[(s, s.alive(now)) for s in api.engine_errors(Schedules(ui.client).services)],
        now=now,
        workers=workers["items"],
        workers_more=workers["next"] is not None,
    )


# The filter form sends an empty status for "any".
RunStatus = Annotated[str | None, Query(pattern=api.RUN_STATUSES.replace("^(", "^(|"))]


@router.get("/runs", response_class=HTMLResponse)
def runs(
    request: Request,
    ui: Ui,
    offset: api.Offset = 0,
    flow: Annotated[str | None, Query(max_length=256)] = None,
    status: RunStatus = None,
    all_runs: Annotated[bool, Query(alias="all")] = False,
) -> HTMLResponse:
    flow = flow or None
    # the pattern let only the words of flows.runs.statuses (or nothing) through
    chosen = cast("statuses.RunStatus | None", status or None)
    listed = api.list_runs(
        ui,
        offset=offset,
        limit=RUNS_PAGE,
        flow=flow,
        status=chosen,
        since=None,
        all_runs=all_runs,
    )
    found, after = listed["items"], listed["next"]
    # A filtered page looks at MAX_RUNS_SCANNED runs at most: a page short of matches with more
    # runs after it stopped there, and says so (the runs it did not look at may match).
    cut = _filtered(chosen, all_runs) and after is not None and len(found) < RUNS_PAGE
    newer = _newer(ui, flow, chosen, all_runs, offset)

    def link(at: int) -> str:
        return _runs_link(flow, chosen, all_runs, at)

    return render(
        request,
        "runs.html",
        runs=found,
        next=after,
        offset=offset,
        cut=cut,
        newer=None if newer is None else link(newer),
        older=None if after is None else link(after),
        flow=flow or "",
        status=status or "",
        all_runs=all_runs,
        statuses=list(statuses.RUN_STATUSES),
    )


def _filtered(status: str | None, all_runs: bool) -> bool:
    """Whether a run listing leaves runs out (by status, or child runs): its offsets are then
    positions in the engine's run index, not counts of the runs it shows."""
    return status is not None or not all_runs


def _runs_link(flow: str | None, status: str | None, all_runs: bool, offset: int) -> str:
    """The runs page at ``offset`` with the same filters, each value encoded whole."""
    query = {"flow": flow, "status": status, "all": "true" if all_runs else None}
    parts = [f"{key}={urlencode(value)}" for key, value in query.items() if value]
    return "/runs?" + "&".join([*parts, f"offset={offset}"])


def _newer(
    ui: UiState, flow: str | None, status: str | None, all_runs: bool, offset: int
) -> int | None:
    """Where the page before the one at ``offset`` starts (None: this is the first). Filtered,
    the run index is read backwards from ``offset`` in chunks of 100 until a page of matches
    is found, the index's start, or MAX_RUNS_SCANNED runs looked at: a page from there looks
    forward as far as one request does, so it reaches ``offset`` and says where it stopped."""
    if offset <= 0:
        return None
    if not _filtered(status, all_runs):
        return max(offset - RUNS_PAGE, 0)
    position, floor, matched = offset, max(offset - api.MAX_RUNS_SCANNED, 0), 0
    while position > floor:
        start = max(position - 100, floor)
        records = api._runs_page(ui.client, flow, start, position - start)
        for index in range(len(records) - 1, -1, -1):
            if api.listed(records[index], status, all_runs):
                matched += 1
                if matched == RUNS_PAGE:
                    return start + index
        position = start
    return position


# -- a run -----------------------------------------------------------------------------------------


def _counts(view: RunView) -> dict[str, dict[str, Any]]:
    """Each step as the run page draws its graph node, at load (run.html) and at each redraw
    (``/live``, static/app.js): the same values, its accessible name (``label``) included."""
    return {
        step.step: {
            "status": step.status,
            "items": step.total,
            "counts": dict(step.counts),
            "progress": step.progress,
            "duration": duration(step.duration),
            "actions": list(step.actions),
            "deadline_missed": step.deadline_missed,
            "label": _node_label(step),
        }
        for step in view.steps
    }


def _node_label(step: StepView) -> str:
    label = f"step {step.step}: {step.status}"
    return f"{label}, deadline missed" if step.deadline_missed is not None else label


def _run_deadline(view: RunView) -> dict[str, Any]:
    """The run's missed deadline as its page shows it (None: not missed) and its badge's title,
    at load and at each redraw."""
    missed = view.extra.get("deadline_missed")
    if missed is None:
        return {"deadline_missed": None, "deadline_title": None}
    deadline = spelled(view.extra.get("deadline"))  # as the file and the CLI spell it
    return {
        "deadline_missed": missed,
        "deadline_title": f"deadline {deadline} missed at {when(missed)} UTC",
    }


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, ui: Ui, run_id: str) -> HTMLResponse:
    # The steps' counts are the engine's; their jobs are a panel away (paged), so the page does
    # not grow with a run's size.
    view = api._load_run(ui.client, run_id, 0)
    needs = graph.run_needs(ui.client, view.record, view.graph)
    drawn = graph.layout([step.step for step in view.steps], needs)
    now = api.engine_errors(ui.client.engine.server_time)
    return render(
        request,
        "run.html",
        timeline=run_history.timeline(ui.client, view, needs, now),
        view=view,
        record=view.record,
        layout=drawn,
        steps=_counts(view),
        deadline=_run_deadline(view),
        graph=graph,
        children={step.step: step.child for step in view.steps if step.child},
    )


@router.get("/runs/{run_id}/live")
def run_live(ui: Ui, run_id: str) -> JSONResponse:
    """What the run page redraws: the run's status, actions and missed deadline, and each
    step's status, item counts and missed deadline, as the page drew them."""
    view = api._load_run(ui.client, run_id, 0)
    return JSONResponse(
        {
            "status": view.status,
            "actions": list(view.actions),
            **_run_deadline(view),
            "steps": _counts(view),
        }
    )


@router.get("/runs/{run_id}/steps/{step:path}", response_class=HTMLResponse)
def step_panel(
    request: Request, ui: Ui, run_id: str, step: str, offset: api.Offset = 0
) -> HTMLResponse:
    """The panel of one step (an HTML fragment): its jobs a page at a time; with one job (or
    ``jid``), that job's attempts, timings, outputs, data and failure, and the actions the
    engine allows now. A step of a child run is ``step/child-step``, as `flows status` labels it."""
    run_id, step = api.engine_errors(lambda: labelled_step(ui.client, run_id, step))
    view = api._load_run(ui.client, run_id, ITEMS_PAGE, {step: offset})
    found = view.step(step)
    if found is None:
        raise api.missing_step(view, step)
    single = found.jobs[0] if found.total == 1 and found.jobs else None
    job = None
    if single is not None and single.state is not None:
        existing = api.engine_errors(lambda: ui.client.jobs.get(single.jid))
        job = existing.as_json() if existing is not None else None
    return render(
        request,
        "step.html",
        run_id=run_id,
        run_actions=list(view.actions),
        step=found,
        items=found.jobs,
        offset=offset,
        page=ITEMS_PAGE,
        single=single,
        job=job,
        no_items=no_items(found.status) if found.total == 0 else None,
    )


# -- flows and schedules ---------------------------------------------------------------------------


def _params(source: str, file: str) -> list[dict[str, Any]]:
    """The flow's declared params as form fields: name, type, default, required."""
    result = validate_text(source, file=file, flow_dir=Path(file).parent)
    if result.flow is None:
        return []
    return [
        {
            "name": name,
            "type": param.type,
            "description": param.description or "",
            "default": param.default,
            "required": param.required,
        }
        for name, param in result.flow.params.items()
    ]


@router.get("/flows", response_class=HTMLResponse)
def flows(request: Request, ui: Ui, offset: api.Offset = 0) -> HTMLResponse:
    listed = api.list_schedules(ui, offset=offset, limit=FLOWS_PAGE)
    rows = []
    for schedule in listed["items"]:
        recent = api.list_runs(
            ui, offset=0, limit=20, flow=schedule["name"], status=None, since=None
        )["items"]
        registration = api._registration(ui.client, schedule["name"])
        definition = registration.definition
        rows.append(
            {
                **schedule,
                "recent": list(reversed(recent)),
                "params": _params(definition.source, definition.file),
            }
        )
    return render(request, "flows.html", schedules=rows, listed=listed)


# -- queues, workers, failures, a job --------------------------------------------------------------


@router.get("/queues", response_class=HTMLResponse)
def queues(request: Request, ui: Ui, offset: api.Offset = 0) -> HTMLResponse:
    listed = api.list_queues(ui, offset=offset, limit=LIST_PAGE)
    names = [str(q["name"]) for q in listed["items"]]
    stats = api.engine_errors(lambda: {name: ui.client.queues[name].stats() for name in names})
    return render(request, "queues.html", queues=listed["items"], stats=stats, listed=listed)


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request, ui: Ui, offset: api.Offset = 0) -> HTMLResponse:
    listed = api.list_workers(ui, offset=offset, limit=LIST_PAGE, queue=None)
    return render(request, "workers.html", workers=listed["items"], listed=listed)


@router.get("/failures", response_class=HTMLResponse)
def failures(
    request: Request,
    ui: Ui,
    group: Annotated[str | None, Query(max_length=256)] = None,
    offset: api.Offset = 0,
) -> HTMLResponse:
    """The failure groups; with ``group``, a page of that group's jobs (``offset``)."""
    groups = api.list_failure_groups(ui, offset=0, limit=api.MAX_LIMIT)
    jobs = api.list_failures(ui, group, offset=offset, limit=25) if group else None
    return render(
        request,
        "failures.html",
        groups=groups["items"],
        groups_more=groups["next"] is not None,
        group=group or "",
        jobs=jobs,
    )


@router.get("/jobs/{jid:path}", response_class=HTMLResponse)
def job(request: Request, ui: Ui, jid: str) -> HTMLResponse:
    return render(request, "job.html", job=api.get_job(ui, jid))
