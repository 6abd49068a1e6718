"""An outbox entry, what it means, which rules of its run it concerns, and what each channel
is sent for it. Pure."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

_FOREACH_SUFFIX: Final = re.compile(r"\[[^\]]*\]$")

# What each entry kind is called in a rule's `on`, for a rule of the flow and of a step.
_FLOW_ON: Final = {
    "run_failure": "failure",
    "run_success": "success",
    "awaiting": "awaiting",
    "deadline": "deadline",
}
_STEP_ON: Final = {
    "failure": "failure",
    "success": "success",
    "awaiting": "awaiting",
    "deadline": "deadline",
}


@dataclass(frozen=True)
class Event:
    """One outbox entry: ``id`` (the stream entry's, stable across deliveries), ``kind`` (the
    engine's: ``failure``, ``success``, ``awaiting``, ``run_failure``, ``run_success``,
    ``deadline``; shown and sent as :attr:`name` and :attr:`scope`), its run and job (a run's
    own event names the job that ended it; a run deadline none). ``rules``: the only rules
    (indexes in the run's list) it is for, when it is a given-up event sent again (its other
    channels had it already); None: every rule it concerns. ``retry_of``: the given-up event
    it sends again."""

    id: str
    kind: str
    run: str
    jid: str
    at: float
    exhausted: str = ""
    rules: tuple[int, ...] | None = None
    retry_of: str = ""

    @classmethod
    def from_entry(cls, entry_id: str, fields: Mapping[str, str]) -> Event:
        return cls(
            id=entry_id,
            kind=fields.get("kind", ""),
            run=fields.get("run", ""),
            jid=fields.get("jid", ""),
            at=float(fields.get("at") or 0),
            exhausted=fields.get("exhausted", ""),
            rules=_indexes(fields["rules"]) if "rules" in fields else None,
            retry_of=fields.get("retry_of", ""),
        )

    @property
    def name(self) -> str:
        """What the event is called wherever it is shown or sent (a rule's ``on``, a webhook's
        ``event``): ``failure``, ``success``, ``awaiting`` or ``deadline``, of the run or of a
        step as :attr:`scope` says (the engine's ``run_failure`` is a ``failure`` of a run)."""
        return self.kind.removeprefix("run_")

    @property
    def scope(self) -> str:
        """``run`` for the run's own event, ``step`` for a step's (a webhook's ``scope``)."""
        return "step" if self.step is not None else "run"

    @property
    def step(self) -> str | None:
        """The step the job belongs to (``load`` for ``<run>:load[3]``); None for a run's event."""
        if self.kind.startswith("run_") or not self.jid.startswith(self.run + ":"):
            return None
        return _FOREACH_SUFFIX.sub("", self.jid[len(self.run) + 1 :])

    @property
    def job_step(self) -> str:
        """The job's part of its jid (``load[3]``)."""
        return self.jid[len(self.run) + 1 :] if self.jid.startswith(self.run + ":") else self.jid

    def matches(self, rule: Mapping[str, Any]) -> str | None:
        """The name in ``rule['on']`` this event answers to (None: the rule is not concerned)."""
        on = set(rule.get("on") or ())
        step = rule.get("step")
        if step is None:
            if self.kind == "failure" and self.exhausted and "retries_exhausted" in on:
                return "retries_exhausted"
            name = _FLOW_ON.get(self.kind)
            if self.kind == "deadline" and self.step is not None:
                return None  # a step's deadline is told to the step's rules
            return name if name in on else None
        if self.step != step:
            return None
        if self.kind == "failure":
            if "failure" in on:
                return "failure"
            return "retries_exhausted" if self.exhausted and "retries_exhausted" in on else None
        name = _STEP_ON.get(self.kind)
        return name if name in on else None


def _indexes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split() if part.isdigit())


@dataclass(frozen=True)
class Context:
    """What a message says beyond the entry: the flow, the job's failure, the dashboard."""

    flow: str = ""
    failure: Mapping[str, Any] = field(default_factory=dict)
    dashboard: str = ""
    signal: str = ""


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def payload(event: Event, name: str, context: Context) -> dict[str, Any]:
    """The JSON body a webhook gets: one shape for every event."""
    body: dict[str, Any] = {
        "id": event.id,
        "event": name,
        "scope": event.scope,
        "flow": context.flow,
        "run": event.run,
        "step": event.job_step if event.step is not None else None,
        "jid": event.jid or None,
        "at": when(event.at),
        "summary": summary(event, name, context),
    }
    if context.failure:
        body["failure"] = {
            "group": context.failure.get("group", ""),
            "message": context.failure.get("message", ""),
        }
    if event.exhausted:
        body["retries_exhausted"] = True
    if context.dashboard:
        body["url"] = run_url(event, context)
    if name == "awaiting":
        body["approve"] = approval(event, context)
    return body


def run_url(event: Event, context: Context) -> str:
    base = context.dashboard.rstrip("/")
    url = f"{base}/runs/{quote(event.run, safe='@')}"
    if event.step is not None:
        url += f"/steps/{quote(event.job_step, safe='[]=,')}"
    return url


def approval(event: Event, context: Context) -> dict[str, str]:
    """How to approve an awaiting step: the command (its words quoted for a shell: a run id
    may hold quotes, ``$(...)`` or ``;``, and a reader pastes the line) and, with a dashboard,
    its page."""
    run, step = shlex.quote(event.run), shlex.quote(event.job_step)
    out = {"command": f"flows approve {run} {step}"}
    if context.signal and context.signal != "approve":
        out["command"] = f"flows signal {run} {step} --data '{{}}'"
    if context.dashboard:
        out["url"] = run_url(event, context)
    return out


_TITLES: Final = {
    "failure": "failed",
    "success": "succeeded",
    "retries_exhausted": "failed: its retries are exhausted",
    "awaiting": "is waiting for approval",
    "deadline": "missed its deadline",
}


def summary(event: Event, name: str, context: Context) -> str:
    """One line: ``Run nightly@... failed`` / ``Step load of run ... failed: <message>``."""
    what = f"Run {event.run}"
    if event.step is not None:
        what = f"Step {event.job_step} of run {event.run}"
    if context.flow:
        what = f"[{context.flow}] {what}"
    line = f"{what} {_TITLES.get(name, name)}"
    message = context.failure.get("message") if context.failure else None
    if message and name in ("failure", "retries_exhausted"):
        line += f": {str(message).splitlines()[0][:300]}"
    return line


def text(event: Event, name: str, context: Context) -> str:
    """The plain text of a mail or a Slack message: the summary, then where to look and act."""
    lines = [summary(event, name, context), "", f"When: {when(event.at)}", f"Event id: {event.id}"]
    if context.failure and context.failure.get("message"):
        lines += ["", "Error:", str(context.failure["message"])[:4000]]
    if name == "awaiting":
        approve = approval(event, context)
        lines += ["", f"Approve: {approve['command']}"]
        if "url" in approve:
            lines.append(f"Or on the dashboard: {approve['url']}")
    elif context.dashboard:
        lines += ["", f"Dashboard: {run_url(event, context)}"]
    return "\n".join(lines)


def concerned(event: Event, rules: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    """The indexes of the rules this event concerns, with the name each knows it by (of an
    event sent again, only the rules it is sent again to)."""
    out = []
    for index, rule in enumerate(rules):
        if event.rules is not None and index not in event.rules:
            continue
        name = event.matches(rule)
        if name is not None:
            out.append((index, name))
    return out
