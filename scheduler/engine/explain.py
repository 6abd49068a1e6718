"""Why a job is where it is: the engine's ``job.explain`` (one read-only call) and a sentence
for each of its reasons.

The engine decides the reason and gathers the facts (lua/commands/explain.lua); this module
only words them, so every surface (``flows explain``, the REST API, the dashboard) says the
same thing.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.engine.limits import read_json

if TYPE_CHECKING:
    from scheduler.engine.client import Client

Facts = Mapping[str, Any]


@dataclass(frozen=True)
class Explanation:
    jid: str
    reason: str
    sentence: str
    facts: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {"jid": self.jid, "reason": self.reason, "sentence": self.sentence, **self.facts}


def _when(value: Any, now: float) -> str:
    """``2026-11-01 03:00:05 UTC (1h 2m from now)`` / ``(5m ago)``: a moment at ``now`` is past,
    as the engine counts a deadline at ``now`` (``0s ago``)."""
    if value is None:
        return "an unknown time"
    moment = float(value)
    text = datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = moment - now
    return f"{text} ({_span(delta)} from now)" if delta > 0 else f"{text} ({_span(-delta)} ago)"


def _span(seconds: float) -> str:
    left = max(0, round(seconds))
    if left < 60:
        return f"{left}s"
    parts = [(left // 86400, "d"), (left % 86400 // 3600, "h"), (left % 3600 // 60, "m")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0m"


def _jobs(entries: Any) -> str:
    if not entries:
        return "none"
    if isinstance(entries[0], dict):
        return ", ".join(f"{e['jid']} ({e['state']})" for e in entries)
    return ", ".join(str(e) for e in entries)


def _deadline(facts: Facts, now: float) -> str:
    deadline = facts.get("deadline")
    if deadline is None or facts.get("reason") == "expiring":
        return ""  # past: the reason says so
    if facts.get("state") not in ("waiting", "scheduled", "depends", "buried"):
        return ""  # a wait's deadline is its timeout, said already; a started job has none
    return f" It must start by {_when(deadline, now)} or it expires."


def _timed_out(facts: Facts) -> str:
    """What becomes of a wait whose timeout passed (reason ``timed-out``): the one wording of it,
    in its sentence and in :func:`wait_line`."""
    on_timeout = facts.get("on_timeout")
    verb = "skips" if on_timeout == "skip" else "fails"
    return (
        f"the scheduler's next housekeeping {verb} it (on_timeout {on_timeout}); a signal "
        "before then still completes it"
    )


_SENTENCES: dict[str, Callable[[Facts, float], str]] = {
    "complete": lambda f, now: "It completed.",
    "cached": lambda f, now: (
        f"It completed from the step cache with the result of {f.get('from')} (its logs have "
        "the lines)."
    ),
    "skipped": lambda f, now: f"It was skipped ({f.get('why') or 'its trigger rule'}).",
    "failed": lambda f, now: (
        f"It failed in group {f.get('group') or '?'}: "
        f"{(str(f.get('message') or '').strip().splitlines() or [''])[-1]}"
    ),
    "expired": lambda f, now: "It expired: it did not start before its ttl deadline.",
    "expiring": lambda f, now: (
        f"It did not start before its ttl deadline, {_when(f.get('deadline'), now)}: the next "
        "pop or housekeeping expires it."
    ),
    "buried": lambda f, now: (
        f"It is buried ({f.get('message') or 'no reason given'}): it runs again only when it is "
        f"kicked (flows kick --job {shlex.quote(str(f.get('jid')))}, or its queue's "
        f"longest-buried jobs: flows kick {shlex.quote(str(f.get('queue')))})."
    ),
    "running": lambda f, now: (
        f"It is running on worker {f.get('worker')}, its lock valid until "
        f"{_when(f.get('expires'), now)}."
    ),
    "stalled": lambda f, now: (
        f"Its worker {f.get('worker')} stopped renewing its lock, which ran out at "
        f"{_when(f.get('expires'), now)}: the next pop or housekeeping gives it to another worker."
    ),
    "awaiting": lambda f, now: (
        f"It awaits the signal {f.get('signal')!r} since {_when(f.get('since'), now)}"
        + (
            f", until {_when(f.get('deadline'), now)}."
            if f.get("deadline") is not None
            else ", with no timeout."
        )
    ),
    "timed-out": lambda f, now: (
        f"Its wait for the signal {f.get('signal')!r} timed out at "
        f"{_when(f.get('deadline'), now)}: {_timed_out(f)}."
    ),
    "child-run": lambda f, now: f"It waits for its child run {f.get('child')} to end.",
    "upstream-failed": lambda f, now: (
        f"An upstream job will not complete by itself: {_jobs(f.get('failed'))}; under its "
        f"trigger rule {f.get('rule')} it does not run until that one is put back (flows retry, "
        "or flows kick for a buried one) and succeeds."
    ),
    "dependencies": lambda f, now: (
        f"It waits for its dependencies (trigger rule {f.get('rule')}): "
        f"{_jobs(f.get('waiting'))}" + (f" and {f['more']} more" if f.get("more") else "") + "."
    ),
    "retry-delay": lambda f, now: (
        f"Attempt {f.get('attempt')} waits for its retry delay after a failure "
        f"({f.get('group') or 'an error'}): due at {_when(f.get('until'), now)}."
    ),
    "scheduled": lambda f, now: f"It is scheduled: due at {_when(f.get('until'), now)}.",
    "queue-paused": lambda f, now: (
        f"Its queue {f.get('queue')} is paused (flows queue unpause {f.get('queue')})."
    ),
    "concurrency-key": lambda f, now: (
        f"It is parked: its concurrency key {f.get('key')!r} allows {f.get('limit')} at once, "
        f"held by {_jobs(f.get('holders'))}."
    ),
    "throttle": lambda f, now: (
        f"It is parked on the throttle {f.get('throttle')!r}: limit {f.get('limit')}, "
        f"{f.get('running')} running, held by {_jobs(f.get('holders'))}."
    ),
    "queue-full": lambda f, now: (
        f"Its queue {f.get('queue')} runs at its max-concurrency ({f.get('running')} of "
        f"{f.get('limit')})."
    ),
    "no-worker": lambda f, now: (
        f"No live worker listens on its queue {f.get('queue')}"
        + (
            f"; the last one, {f.get('last')}, was seen {_when(f.get('last_seen'), now)}."
            if f.get("last")
            else f"; none has ever registered for it (start one: flows worker -q {f.get('queue')})."
        )
    ),
    "queued": lambda f, now: (
        f"It is waiting its turn in queue {f.get('queue')}: {f.get('ahead')} job(s) ahead, "
        f"{f.get('workers')} live worker(s) listening."
    ),
}

REASONS = tuple(_SENTENCES)
"""Every reason the engine gives."""


def sentence(facts: Facts, now: float) -> str:
    """The sentence for one ``job.explain`` reply."""
    reason = str(facts.get("reason"))
    word = _SENTENCES.get(reason)
    text = word(facts, now) if word is not None else f"It is {facts.get('state')}."
    return text + _deadline(facts, now)


def wait_line(facts: Facts, now: float) -> str | None:
    """One line about a wait step awaiting its signal (``flows status``), from its
    ``job.explain`` reply: its signal and when it times out, or, once the engine says it timed
    out (reason ``timed-out``), how long ago and what happens next, in its sentence's words.
    None when the job is not awaiting a signal."""
    reason = facts.get("reason")
    if reason not in ("awaiting", "timed-out"):
        return None
    text = f"awaiting signal {facts.get('signal')!r}"
    deadline = facts.get("deadline")
    if deadline is None:
        return text  # no timeout (a timed-out wait has its deadline)
    if reason == "timed-out":
        return f"{text}, timed out {_span(now - float(deadline))} ago: {_timed_out(facts)}"
    return f"{text}, times out ({facts.get('on_timeout')}) in {_span(float(deadline) - now)}"


def explain(client: Client, jid: str, *, now: float | str = "") -> Explanation | None:
    """Why ``jid`` is where it is (None: no such job)."""
    raw = client.engine.call("job.explain", jid, now=now)
    if raw is None:
        return None
    facts = read_json(raw)
    moment = float(now) if now != "" else client.engine.server_time()
    return Explanation(jid, str(facts["reason"]), sentence(facts, moment), facts)
