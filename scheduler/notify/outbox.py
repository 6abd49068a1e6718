"""Delivering the outbox: at least once, with retries and backoff, failures kept and shown.

The engine appends each event to ``P notify:outbox`` in the call that made it happen
(``lua/include/notify.lua``). Deliverers read it as consumer group ``deliver``: an entry is
acknowledged and deleted only once every rule it concerns has taken it, or its attempts ran
out, so an entry whose deliverer died (``kill -9`` mid-send) is still pending: read again by a
deliverer of the same name when it restarts, or claimed by another after :data:`CLAIM_AFTER`.
A re-sent event carries the same id (the stream entry's), so a receiver can drop duplicates.

Keys (``P`` the namespace's prefix): ``notify:tries`` (entry id → JSON ``{attempts, due, done,
errors}``), ``notify:failed`` (entry id → JSON of a delivery given up, until it is retried or
dropped) and ``notify:log`` (a capped stream of what was sent: one entry per send).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import redis

from scheduler.engine.client import Client
from scheduler.notify.channels import SENDERS, DeliveryError, channel_of, describe
from scheduler.notify.events import Context, Event, concerned
from scheduler.secrets import Secrets

log = logging.getLogger(__name__)

GROUP: Final = "deliver"
BATCH: Final = 100
CLAIM_AFTER: Final = 60.0
"""Seconds an entry taken by another deliverer may sit unacknowledged before this one takes it."""
MAX_ATTEMPTS: Final = 10
BACKOFF: Final = 5.0
MAX_BACKOFF: Final = 600.0
LOG_LENGTH: Final = 2000


def backoff(attempts: int, base: float = BACKOFF, cap: float = MAX_BACKOFF) -> float:
    """The wait after the ``attempts``-th failed attempt: doubling from ``base`` up to ``cap``."""
    return float(min(cap, base * 2 ** max(0, attempts - 1)))


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class Keys:
    prefix: str

    @property
    def outbox(self) -> str:
        return self.prefix + "notify:outbox"

    @property
    def tries(self) -> str:
        return self.prefix + "notify:tries"

    @property
    def failed(self) -> str:
        return self.prefix + "notify:failed"

    @property
    def log(self) -> str:
        return self.prefix + "notify:log"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def job(self, jid: str) -> str:
        return f"{self.prefix}j:{jid}"


class Deliverer:
    """Sends what the outbox holds. ``consumer``: a name stable across restarts of one process
    (the scheduler service's), so what it was sending when it died is sent first when it comes
    back; ``clock`` gives the time used for backoff (tests pass their own)."""

    def __init__(
        self,
        client: Client,
        *,
        secrets: Secrets | None = None,
        dashboard: str = "",
        consumer: str | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        base_backoff: float = BACKOFF,
        claim_after: float = CLAIM_AFTER,
        clock: Callable[[], float] = time.time,
        senders: Mapping[str, Any] | None = None,
    ) -> None:
        # Any: redis-py's reply types are unions this module reads as the server sends them.
        self.redis: Any = client.engine.redis
        self.keys = Keys(client.engine.key_prefix)
        self.secrets = secrets or Secrets()
        self.dashboard = dashboard
        self.consumer = consumer or default_consumer()
        self.max_attempts = max_attempts
        self.base_backoff = base_backoff
        self.claim_after = claim_after
        self.clock = clock
        self.senders = dict(senders or SENDERS)
        self._group_ready = False

    # -- reading ------------------------------------------------------------------------------

    def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self.redis.xgroup_create(self.keys.outbox, GROUP, id="0", mkstream=True)
        except redis.ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
        self._group_ready = True

    def _read(self, start: str) -> list[tuple[str, dict[str, str] | None]]:
        reply = self.redis.xreadgroup(GROUP, self.consumer, {self.keys.outbox: start}, count=BATCH)
        entries: list[tuple[str, dict[str, str] | None]] = []
        for _, items in reply or ():
            entries.extend((entry_id, fields or None) for entry_id, fields in items)
        return entries

    def _claim(self) -> None:
        """Take entries other deliverers left unacknowledged for longer than ``claim_after``."""
        self.redis.xautoclaim(
            self.keys.outbox,
            GROUP,
            self.consumer,
            int(self.claim_after * 1000),
            start_id="0-0",
            count=BATCH,
            justid=True,
        )

    def pending(self) -> Iterator[tuple[str, dict[str, str] | None]]:
        """This consumer's entries first (taken before and not yet done), then new ones."""
        self._ensure_group()
        self._claim()
        yield from self._read("0")
        yield from self._read(">")

    # -- delivering ---------------------------------------------------------------------------

    def tick(self) -> int:
        """One pass: every entry due now is tried. Returns how many sends succeeded."""
        sent = 0
        runs: dict[str, tuple[list[dict[str, Any]], str]] = {}
        seen: set[str] = set()
        for entry_id, fields in self.pending():
            if entry_id in seen:
                continue
            seen.add(entry_id)
            if fields is None:  # deleted while pending: nothing left to send
                self._finish(entry_id)
                continue
            sent += self._deliver(Event.from_entry(entry_id, fields), runs)
        return sent

    def _run(
        self, run_id: str, runs: dict[str, tuple[list[dict[str, Any]], str]]
    ) -> tuple[list[dict[str, Any]], str]:
        if run_id not in runs:
            raw, flow = self.redis.hmget(self.keys.run(run_id), "notify", "flow")
            try:
                rules = json.loads(raw) if raw else []
            except ValueError:
                rules = []
            runs[run_id] = (rules if isinstance(rules, list) else [], flow or "")
        return runs[run_id]

    def _context(self, event: Event, flow: str) -> Context:
        failure: dict[str, Any] = {}
        signal = ""
        if event.jid:
            raw_failure, raw_wait = self.redis.hmget(self.keys.job(event.jid), "failure", "wait")
            if raw_failure and event.kind in ("failure", "run_failure"):
                try:
                    decoded = json.loads(raw_failure)
                    failure = decoded if isinstance(decoded, dict) else {}
                except ValueError:
                    failure = {}
            if raw_wait:
                try:
                    signal = str(json.loads(raw_wait).get("signal", ""))
                except (ValueError, AttributeError):
                    signal = ""
        return Context(flow=flow, failure=failure, dashboard=self.dashboard, signal=signal)

    def _deliver(self, event: Event, runs: dict[str, tuple[list[dict[str, Any]], str]]) -> int:
        now = self.clock()
        state = self._state(event.id)
        if state.get("due", 0) > now:
            return 0
        rules, flow = self._run(event.run, runs)
        targets = concerned(event, rules)
        done: set[int] = set(state.get("done", ()))
        errors: dict[str, str] = {}
        context = self._context(event, flow)
        sent = 0
        attempt = int(state.get("attempts", 0)) + 1
        for index, name in targets:
            if index in done:
                continue
            rule = rules[index]
            found = channel_of(rule)
            try:
                if found is None:
                    raise DeliveryError("the rule names no channel")
                self.senders[found[0]](found[1], event, name, context, self.secrets)
            except DeliveryError as error:
                errors[str(index)] = str(error)
                self._log(event, name, rule, "retrying", attempt, str(error))
                continue
            except Exception as error:
                errors[str(index)] = f"{type(error).__name__}: {error}"
                self._log(event, name, rule, "retrying", attempt, errors[str(index)])
                continue
            done.add(index)
            sent += 1
            # Recorded at once: a crash after this send does not repeat it.
            self._save(event.id, {**state, "done": sorted(done)})
            self._log(event, name, rule, "delivered", attempt, "")
        if not errors:
            self._finish(event.id)
            return sent
        if attempt >= self.max_attempts:
            self._give_up(event, rules, targets, done, errors, attempt)
            return sent
        due = now + backoff(attempt, self.base_backoff)
        self._save(
            event.id, {"attempts": attempt, "due": due, "done": sorted(done), "errors": errors}
        )
        return sent

    def _state(self, entry_id: str) -> dict[str, Any]:
        raw = self.redis.hget(self.keys.tries, entry_id)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}
        return state if isinstance(state, dict) else {}

    def _save(self, entry_id: str, state: Mapping[str, Any]) -> None:
        self.redis.hset(self.keys.tries, entry_id, json.dumps(state))

    def _finish(self, entry_id: str) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.xack(self.keys.outbox, GROUP, entry_id)
        pipe.xdel(self.keys.outbox, entry_id)
        pipe.hdel(self.keys.tries, entry_id)
        pipe.execute()

    def _give_up(
        self,
        event: Event,
        rules: Sequence[Mapping[str, Any]],
        targets: Sequence[tuple[int, str]],
        done: set[int],
        errors: Mapping[str, str],
        attempts: int,
    ) -> None:
        record = {
            "id": event.id,
            "kind": event.kind,
            "run": event.run,
            "jid": event.jid,
            "at": event.at,
            "exhausted": event.exhausted,
            "attempts": attempts,
            "failed_at": self.clock(),
            "undelivered": [
                {
                    "rule": index,
                    "event": name,
                    "channel": describe(rules[index]),
                    "error": errors.get(str(index), ""),
                }
                for index, name in targets
                if index not in done
            ],
        }
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.keys.failed, event.id, json.dumps(record))
        pipe.xack(self.keys.outbox, GROUP, event.id)
        pipe.xdel(self.keys.outbox, event.id)
        pipe.hdel(self.keys.tries, event.id)
        pipe.execute()
        log.warning(
            "notification %s of run %s undelivered after %d attempts: %s",
            event.id,
            event.run,
            attempts,
            "; ".join(errors.values()),
        )

    def _log(
        self,
        event: Event,
        name: str,
        rule: Mapping[str, Any],
        status: str,
        attempt: int,
        error: str,
    ) -> None:
        self.redis.xadd(
            self.keys.log,
            {
                "id": event.id,
                "event": name,
                "run": event.run,
                "jid": event.jid,
                "channel": describe(rule),
                "status": status,
                "attempt": attempt,
                "error": error,
                "at": f"{self.clock():.3f}",
            },
            maxlen=LOG_LENGTH,
            approximate=True,
        )

    def drain(self, timeout: float, interval: float = 0.2) -> bool:
        """Deliver until nothing is due (backoffs aside) or ``timeout`` passed: whether the
        outbox's due entries were all sent."""
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            if not self.due() or time.monotonic() >= deadline:
                return not self.due()
            time.sleep(interval)

    def forget(self) -> None:
        """Leave the group when nothing is pending on this consumer (a short-lived sender, as
        `flows run`'s, would otherwise stay listed in the group forever)."""
        self._ensure_group()
        pending = self.redis.xpending_range(
            self.keys.outbox, GROUP, min="-", max="+", count=1, consumername=self.consumer
        )
        if not pending:
            self.redis.xgroup_delconsumer(self.keys.outbox, GROUP, self.consumer)

    def due(self) -> bool:
        """Whether an entry waits that this deliverer would try now: one no deliverer took yet,
        or one of its own whose next attempt is due."""
        self._ensure_group()
        group = next(
            (g for g in self.redis.xinfo_groups(self.keys.outbox) if g.get("name") == GROUP), None
        )
        last = str(group.get("last-delivered-id", "0-0")) if group else "0-0"
        if self.redis.xrange(self.keys.outbox, min="(" + last, count=1):
            return True
        now = self.clock()
        for _, raw in self.redis.hscan_iter(self.keys.tries):
            try:
                if float(json.loads(raw).get("due", 0)) <= now:
                    return True
            except (ValueError, AttributeError):
                continue
        return False


# -- reading what was sent, for `flows notifications` and the API -------------------------------


def recent(client: Client, count: int = 50) -> list[dict[str, Any]]:
    """The newest sends (delivered, or an attempt that failed), newest first."""
    keys = Keys(client.engine.key_prefix)
    out = []
    r: Any = client.engine.redis
    for entry_id, fields in r.xrevrange(keys.log, count=count):
        out.append({"log_id": entry_id, **fields})
    return out


def failed(client: Client) -> list[dict[str, Any]]:
    """Deliveries given up, oldest first."""
    keys = Keys(client.engine.key_prefix)
    records = []
    for raw in client.engine.redis.hvals(keys.failed):
        try:
            records.append(json.loads(raw))
        except ValueError:
            continue
    return sorted(records, key=lambda r: tuple(int(p) for p in str(r.get("id", "0-0")).split("-")))


def waiting(client: Client) -> list[dict[str, Any]]:
    """Events not delivered yet: in the outbox, with their attempts so far."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    out = []
    for entry_id, fields in r.xrange(keys.outbox, count=1000):
        raw = r.hget(keys.tries, entry_id)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}
        out.append(
            {
                "id": entry_id,
                **fields,
                "attempts": state.get("attempts", 0),
                "due": state.get("due"),
                "errors": state.get("errors", {}),
            }
        )
    return out


def retry_failed(client: Client, event_id: str) -> bool:
    """Put a given-up event back in the outbox (a new entry: a new id), for another round."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    raw = r.hget(keys.failed, event_id)
    if raw is None:
        return False
    record = json.loads(raw)
    fields = {k: str(record[k]) for k in ("kind", "run", "jid", "at") if record.get(k) is not None}
    if record.get("exhausted"):
        fields["exhausted"] = str(record["exhausted"])
    pipe = r.pipeline(transaction=True)
    pipe.xadd(keys.outbox, fields)
    pipe.hdel(keys.failed, event_id)
    pipe.execute()
    return True
