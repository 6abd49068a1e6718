"""Delivering the outbox: at least once, with retries and backoff, failures kept and shown.

The engine appends each event to ``P notify:outbox`` in the call that made it happen
(``lua/include/notify.lua``). Every sender of the namespace (each scheduler service, a ``flows
run``) reads it as one consumer group, ``deliver``, so each entry is held by one deliverer at a
time: two never send it at once. An entry is acknowledged and deleted only once every channel
it concerns has taken it or was given up, so an entry whose deliverer died (``kill -9``
mid-send) is still pending: read again by a deliverer of the same name when it restarts, or
claimed by another after :data:`CLAIM_AFTER` (a live deliverer renews its claim of the entry it
is sending, so only an entry whose deliverer is gone is claimed). A re-sent event carries the
same id (the stream entry's), so a receiver can drop duplicates.

Senders need not be alike: each resolves secrets from its own env file, environment and
folders, and may lack a channel. A deliverer that cannot send some channel of an entry it holds
(a secret it cannot resolve) sends the channels it can, notes who could not and why, and
releases the entry: hands it to the group's :data:`PARKED` consumer, idle, where any deliverer
that did not find it could not send it claims it, by a compare-and-set on the entry's idle time
(``XCLAIM`` with a minimum idle time), so one takes it. A deliverer looks again at an entry it
could not send after :data:`RECHECK_AFTER`; a channel no deliverer that took it could send for
:data:`GIVE_UP_AFTER` is given up with their reasons. Times are the Redis server's clock.

Keys (``P`` the namespace's prefix): ``notify:tries`` (entry id → JSON of its channels:
:mod:`scheduler.notify.tries`), ``notify:failed`` (entry id → JSON of a delivery given up, with
each channel's status, until it is retried or dropped) and ``notify:log`` (a capped stream of
what was sent: one entry per send, and one per channel given up).

What the listings show of them: :mod:`scheduler.notify.documents`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import redis

from scheduler.engine.client import Client
from scheduler.engine.connections import redact_url
from scheduler.engine.errors import carrying_given, counted
from scheduler.notify.channels import (
    SENDERS,
    DeliveryError,
    channel_of,
    describe,
    secret_names,
    url_problem,
)
from scheduler.notify.documents import (
    EventDocument,
    SendDocument,
    channel_document,
    event_document,
    given_up_document,
    send_document,
)
from scheduler.notify.events import Context, Event, concerned
from scheduler.notify.tries import DELIVERED, FAILED, LEFT, RETRYING, Channel, Tries
from scheduler.secrets import MissingSecret, Secrets, masked

log = logging.getLogger(__name__)

GROUP: Final = "deliver"
PARKED: Final = "~released"
"""The consumer that holds the entries a deliverer released (never reads: others claim them)."""
BATCH: Final = 100
CLAIM_PAGES: Final = 50
"""Pages of :data:`BATCH` idle entries one claim pass looks through at most."""
CLAIM_AFTER: Final = 60.0
"""Seconds an entry taken by another deliverer may sit unacknowledged before this one takes it."""
RENEW_SHARE: Final = 0.25
"""A deliverer sending an entry takes it again every this share of ``claim_after`` (15 s)."""
RENEW_WAIT: Final = 1.0
"""Seconds a deliverer whose send ended waits at most for a renewal of its claim on its way
(one stuck until its connection times out is left behind)."""
RECHECK_AFTER: Final = 60.0
"""Seconds before a deliverer takes again an entry it could not send (its secrets may be there
now, and it may have to give it up)."""
GIVE_UP_AFTER: Final = 1800.0
"""Seconds a channel may wait for a deliverer that can send it before it is given up (about
as long as the attempts at a receiver that keeps refusing take)."""
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


class Failing:
    """The channels whose last attempt here failed, and how many attempts failed since: a
    receiver that keeps refusing is said once when it starts (with why) and once when it takes
    a notification again, not once per attempt, and not only when an event is given up half an
    hour later. A channel is named as the listings name it (``webhook URL``, ``slack (secret
    NAME)``), any password in the URL masked."""

    def __init__(self) -> None:
        self._failures: dict[str, int] = {}
        self._left: dict[str, str] = {}  # channel -> why this sender left it, as said

    def left(self, rule: Mapping[str, Any], sender: str, reason: str, give_up_after: float) -> None:
        """This sender cannot send by ``rule``'s channel: said once per reason, at the first
        event it leaves (another sender may hold what it lacks)."""
        channel = self._name(rule)
        if self._left.get(channel) == reason:
            return
        self._left[channel] = reason
        log.warning(
            "notification channel %s cannot be sent by %s: %s; left to another sender (given"
            " up in %g min if none can; `flows notifications` lists it)",
            channel,
            sender,
            masked(" ".join(reason.split())),
            give_up_after / 60,
        )

    def failed(self, rule: Mapping[str, Any], error: str) -> None:
        channel = self._name(rule)
        if channel not in self._failures:
            log.warning(
                "notification channel %s fails: %s (`flows notifications` lists what waits and"
                " what was given up)",
                channel,
                masked(" ".join(error.split())),
            )
        self._failures[channel] = self._failures.get(channel, 0) + 1

    def worked(self, rule: Mapping[str, Any]) -> None:
        failures = self._failures.pop(self._name(rule), None)
        if failures is not None:
            log.info(
                "notification channel %s works again after %s",
                self._name(rule),
                counted(failures, "failure"),
            )

    @staticmethod
    def _name(rule: Mapping[str, Any]) -> str:
        return shown(rule)


def shown(rule: Mapping[str, Any]) -> str:
    """``rule``'s channel as a log line names it (:func:`describe`, a password in its URL and
    any secret's value masked)."""
    return masked(redact_url(describe(rule)))


Runs = dict[str, tuple[list[dict[str, Any]], str]]
"""Run id → (its rules, its flow): read once per pass."""


class Deliverer:
    """Sends what the outbox holds. ``consumer``: a name stable across restarts of one process
    (the scheduler service's), so what it was sending when it died is sent first when it comes
    back; ``clock`` gives the time used for backoff and for how long an entry waited (default:
    the Redis server's, which every sender shares; tests pass their own); ``senders``: the
    channels it has (default: all)."""

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
        recheck_after: float = RECHECK_AFTER,
        give_up_after: float = GIVE_UP_AFTER,
        clock: Callable[[], float] | None = None,
        senders: Mapping[str, Any] | None = None,
    ) -> None:
        # Any: redis-py's reply types are unions this module reads as the server sends them.
        self.redis: Any = client.engine.redis
        self.engine = client.engine
        self.keys = Keys(client.engine.key_prefix)
        self.secrets = secrets or Secrets()
        self.dashboard = dashboard
        self.consumer = consumer or default_consumer()
        if self.consumer == PARKED:
            raise ValueError(f"{PARKED!r} is the group's own consumer")
        if not claim_after > 0:
            raise ValueError(f"claim_after must be a number of seconds above 0, not {claim_after}")
        self.max_attempts = max_attempts
        self.base_backoff = base_backoff
        self.claim_after = claim_after
        self.recheck_after = recheck_after
        self.give_up_after = give_up_after
        self.clock = clock or client.engine.server_time
        self.senders = dict(senders or SENDERS)
        self.released: set[str] = set()
        """The entries this deliverer released (it could not send some channel of them)."""
        self.failing = Failing()
        self._group_ready = False
        self._read_at: dict[str, float] = {}
        """Entry id → when this deliverer last read it or made sure it still holds it (its
        own monotonic clock): see :meth:`_still_held`."""

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
        read_at = time.monotonic()
        for _, items in reply or ():
            entries.extend((entry_id, fields or None) for entry_id, fields in items)
        self._read_at.update((entry_id, read_at) for entry_id, _ in entries)
        return entries

    def _still_held(self, entry_id: str) -> bool:
        """Whether this deliverer still holds ``entry_id``. A page of entries is read at once
        and sent one by one: behind slow receivers, an entry's turn (or its next channel's)
        may come after ``claim_after``, when another deliverer may have claimed it and sent
        it. Past half that time, this is a compare-and-set on the entry's idle time, as a
        claim is: claimed by another since this deliverer read it, the entry has been idle at
        most (the time since) - ``claim_after``; not claimed, it is taken again (its idle time
        starts again) and kept."""
        since = self._read_at.get(entry_id)
        if since is None:
            return True
        if time.monotonic() - since < self.claim_after / 2:
            return True
        return self._renew(entry_id)

    def _renew(self, entry_id: str, ended: threading.Event | None = None) -> bool:
        """Take ``entry_id`` again (its idle time on the server starts again) if this deliverer
        still holds it, by the compare-and-set of :meth:`_still_held`: whether it did. Nothing
        once ``ended`` is set (the send it renewed for is over: what follows is the sender's),
        nor after, when it was set meanwhile."""
        if ended is not None and ended.is_set():
            return False
        since = self._read_at.get(entry_id, time.monotonic())
        elapsed = time.monotonic() - since
        idle = max(0, int((elapsed - self.claim_after / 2) * 1000))
        got = self.redis.xclaim(
            self.keys.outbox, GROUP, self.consumer, idle, [entry_id], justid=True
        )
        if ended is not None and ended.is_set():
            return False
        if got:
            self._read_at[entry_id] = time.monotonic()
            return True
        self._read_at.pop(entry_id, None)
        log.info("notification %s was taken by another sender meanwhile: left to it", entry_id)
        return False

    def _held(self) -> Iterator[tuple[str, dict[str, str] | None]]:
        """The entries this consumer holds, page by page (reading one marks it as being
        worked on: nobody claims it while this deliverer keeps reading it)."""
        start = "0"
        while True:
            page = self._read(start)
            yield from page
            if len(page) < BATCH:
                return
            start = page[-1][0]

    def _claim(self, now: float) -> None:
        """Take the entries idle for ``claim_after`` that this deliverer should look at: those
        a deliverer took and left (it died), and those released to :data:`PARKED` that it did
        not find it cannot send. The claim is a compare-and-set on the idle time: of two
        deliverers claiming one entry, one gets it."""
        idle = int(self.claim_after * 1000)
        start = "-"
        claimed = 0
        for _ in range(CLAIM_PAGES):
            rows = self.redis.xpending_range(
                self.keys.outbox, GROUP, min=start, max="+", count=BATCH, idle=idle
            )
            ids = [str(r["message_id"]) for r in rows if r["consumer"] != self.consumer]
            if ids:
                states = self.redis.hmget(self.keys.tries, ids)
                wanted = [i for i, raw in zip(ids, states, strict=True) if self._wants(raw, now)]
                if wanted:
                    got = self.redis.xclaim(
                        self.keys.outbox, GROUP, self.consumer, idle, wanted, justid=True
                    )
                    claimed += len(got or ())
                    self.released.difference_update(str(i) for i in got or ())
            if len(rows) < BATCH or claimed >= BATCH:
                return
            start = "(" + str(rows[-1]["message_id"])

    def _wants(self, raw: str | None, now: float) -> bool:
        """Whether to claim an idle entry: one its holder left (it died) always; a released one
        when a channel still open is due and this deliverer did not find, in the last
        ``recheck_after``, that it cannot send it; or when a channel is to be given up."""
        tries = Tries.loads(raw)
        if not tries.released:
            return True
        for channel in tries.channels.values():
            if self._spent(channel):
                continue
            if self._stranded_out(channel, now):
                return True  # to be given up
            mine = channel.unable.get(self.consumer)
            if channel.due <= now and (mine is None or now - mine[1] >= self.recheck_after):
                return True
        return False

    def pending(self, now: float | None = None) -> Iterator[tuple[str, dict[str, str] | None]]:
        """This consumer's entries first (taken before and not yet done, claimed), then new
        ones."""
        self._ensure_group()
        try:
            self._claim(self.clock() if now is None else now)
        except redis.ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            # The server lost the group since it was made (restarted empty, a failover to a
            # replica that never had it, flushed): made again, as at the start.
            log.warning("the notifications' consumer group was gone from the server: made again")
            self._group_ready = False
            self._ensure_group()
            self._claim(self.clock() if now is None else now)
        yield from self._held()
        yield from self._read(">")

    # -- delivering ---------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> int:
        """One pass at ``now`` (default: the clock): every channel due is tried, by this
        deliverer if it can send it. Returns how many sends succeeded. A fault of the server
        is raised as an engine call raises it (:mod:`scheduler.engine.faults`: where, as
        whom), not in redis-py's words: this reads the streams itself."""
        try:
            return self._tick(now)
        except redis.RedisError as error:
            fault = self.engine.fault(error)
            if fault is error:
                raise
            raise fault from None

    def _tick(self, now: float | None) -> int:
        now = self.clock() if now is None else now
        sent = 0
        runs: Runs = {}
        seen: set[str] = set()
        self._read_at.clear()
        for entry_id, fields in self.pending(now):
            if entry_id in seen or not self._still_held(entry_id):
                continue
            seen.add(entry_id)
            if fields is None:  # deleted while pending: nothing left to send
                self._finish(entry_id)
                continue
            sent += self._deliver(Event.from_entry(entry_id, fields), runs, now)
        return sent

    def _run(self, run_id: str, runs: Runs) -> tuple[list[dict[str, Any]], str]:
        if run_id not in runs:
            runs[run_id] = rules_of(self.redis, self.keys, run_id)
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

    def _spent(self, channel: Channel) -> bool:
        """Delivered, or given up (its attempts ran out, or no deliverer could send it): not
        tried again. (A channel whose attempts ran out before give-ups were recorded has only
        its count to say so.)"""
        return channel.delivered or channel.given_up or channel.attempts >= self.max_attempts

    def _stranded_out(self, channel: Channel, now: float) -> bool:
        return channel.stranded is not None and now - channel.stranded >= self.give_up_after

    def cannot(self, rule: Mapping[str, Any]) -> str | None:
        """Why this deliverer cannot send by ``rule``'s channel (None: it can try): it lacks
        the channel, or a secret the channel names is found nowhere it looks."""
        found = channel_of(rule)
        if found is None:
            return None  # a rule without a channel fails where it is tried, whoever tries it
        name, config = found
        if name not in self.senders:
            return f"no {name} channel here"
        for secret in secret_names(name, config):
            try:
                self.secrets.resolve(secret)
            except MissingSecret as error:
                return str(error)
        return None

    def problem(self, rule: Mapping[str, Any]) -> str | None:
        """Why this deliverer can never send by ``rule``'s channel as things are, found without
        sending (None: it can try): :meth:`cannot`, or a URL kept in a secret that is none."""
        reason = self.cannot(rule)
        found = channel_of(rule)
        if reason is None and found is not None:
            reason = url_problem(found[0], found[1], self.secrets)
        return reason

    def _deliver(self, event: Event, runs: Runs, now: float) -> int:
        """Try each channel of ``event`` that is due and this deliverer can send, then keep
        the entry, release it for another deliverer, finish it or give it up."""
        raw = self.redis.hget(self.keys.tries, event.id)
        tries = Tries.loads(raw)
        rules, flow = self._run(event.run, runs)
        targets = concerned(event, rules)
        contexts: list[Context] = []  # read once, and only when something is sent
        sent = 0
        for index, name in targets:
            channel = tries.channel(index)
            if self._spent(channel):
                continue
            reason = self.cannot(rules[index])
            if reason is not None:
                if self._stranded_out(channel, now):
                    self._abandon(event, name, rules[index], channel, now)
                else:
                    self._leave(event, name, rules[index], channel, reason, now)
                continue
            channel.unable.clear()  # this one can: nothing is stranded
            channel.stranded = None
            if channel.due > now:
                continue
            if not self._still_held(event.id):
                return sent  # another sender has it now, and what this one sent is saved
            contexts = contexts or [self._context(event, flow)]
            if self._attempt(event, name, rules[index], tries, channel, contexts[0], now):
                sent += 1
        open_channels = [c for i, _ in targets if not self._spent(c := tries.channel(i))]
        if not open_channels:
            if all(tries.channel(i).delivered for i, _ in targets):
                self._finish(event.id)
            else:
                self._give_up(event, rules, targets, tries, now)
        elif any(c.unable for c in open_channels):
            self._release(event.id, tries)  # another deliverer may send what this one cannot
        else:
            tries.released = False
            if tries.dumps() != raw:  # nothing was due: nothing is written
                self._save(event.id, tries)
        return sent

    def _leave(
        self,
        event: Event,
        name: str,
        rule: Mapping[str, Any],
        channel: Channel,
        reason: str,
        now: float,
    ) -> None:
        """Note that this deliverer cannot send ``channel`` (logged once per reason)."""
        self.failing.left(rule, self.consumer, reason, self.give_up_after)
        if channel.unable.get(self.consumer, ("",))[0] != reason:
            self._log(event, name, rule, LEFT, channel.attempts, reason, now)
        channel.unable[self.consumer] = (reason, now)
        if channel.stranded is None:
            channel.stranded = now

    def _abandon(
        self, event: Event, name: str, rule: Mapping[str, Any], channel: Channel, now: float
    ) -> None:
        """Give ``channel`` up: no deliverer that took the entry could send it in time."""
        minutes = self.give_up_after / 60
        channel.given_up, channel.due = True, 0.0
        channel.error = f"no sender could send it in {minutes:g} min ({channel.unable_reason()})"
        self._log(event, name, rule, FAILED, channel.attempts, channel.error, now)

    def _attempt(
        self,
        event: Event,
        name: str,
        rule: Mapping[str, Any],
        tries: Tries,
        channel: Channel,
        context: Context,
        now: float,
    ) -> bool:
        """One attempt at ``channel``, one of ``tries``: whether the receiver took it (else
        it is due again after the backoff, or given up when it was its last attempt)."""
        channel.attempts += 1
        with self._holding(event.id):
            error, final = self._send(rule, event, name, context)
        if error is None:
            self.failing.worked(rule)
            channel.delivered, channel.error, channel.due = True, "", 0.0
            # Recorded at once: a crash after this send does not repeat it.
            self._save(event.id, tries)
            self._log(event, name, rule, DELIVERED, channel.attempts, "", now)
            return True
        channel.error = error
        self.failing.failed(rule, error)
        if final or channel.attempts >= self.max_attempts:
            channel.given_up, channel.due = True, 0.0
            self._log(event, name, rule, FAILED, channel.attempts, error, now)
        else:
            channel.due = now + backoff(channel.attempts, self.base_backoff)
            self._log(event, name, rule, RETRYING, channel.attempts, error, now)
        return False

    @contextlib.contextmanager
    def _holding(self, entry_id: str) -> Iterator[None]:
        """Keep holding ``entry_id`` while it is sent: a send may take longer than a claim
        needs (a receiver that answers late, a slow mail server), and another deliverer that
        claimed it then would send it too. Every :data:`RENEW_SHARE` of ``claim_after`` a
        thread takes it again (:meth:`_renew`), so its idle time on the server never reaches
        ``claim_after`` while this deliverer lives; one killed mid-send renews nothing, and
        another claims the entry ``claim_after`` later and sends it (at least once).

        Once the send is over the thread is waited for :data:`RENEW_WAIT` at most: a renewal
        stuck until its connection times out (redis-py's 5 s by default; without a timeout,
        for ever) does not hold the sender up, and renews nothing once it returns
        (:meth:`_renew`). Only a command
        already on its way to the server when the send ended may still land after it: of an
        entry done it does nothing; an entry released meanwhile it takes back to this
        deliverer, whose next pass (or, ``claim_after`` later, another deliverer) looks at it
        again."""
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.claim_after * RENEW_SHARE):
                try:
                    held = self._renew(entry_id, done)
                except redis.RedisError as error:
                    if not done.is_set():
                        log.warning(
                            "notification %s: could not renew its claim: %s", entry_id, error
                        )
                    continue
                if not held:
                    return

        renewer = threading.Thread(
            target=carrying_given(renew), name=f"notify-hold-{entry_id}", daemon=True
        )
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join(RENEW_WAIT)

    def _send(
        self, rule: Mapping[str, Any], event: Event, name: str, context: Context
    ) -> tuple[str | None, bool]:
        """Send by the rule's channel: (None, False) when the receiver took it, else the error
        and whether it is final (:class:`DeliveryError`'s ``final``: not worth a retry)."""
        found = channel_of(rule)
        try:
            if found is None:
                raise DeliveryError("the rule names no channel")
            self.senders[found[0]](found[1], event, name, context, self.secrets)
        except DeliveryError as error:
            return str(error), error.final
        except Exception as error:
            return f"{type(error).__name__}: {error}", False
        return None, False

    def _save(self, entry_id: str, tries: Tries) -> None:
        self.redis.hset(self.keys.tries, entry_id, tries.dumps())

    def _release(self, entry_id: str, tries: Tries) -> None:
        """Hand the entry to :data:`PARKED`, idle as long as a claim needs: the next deliverer
        that may send it claims it (its state is written first, in the same transaction)."""
        tries.released = True
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.keys.tries, entry_id, tries.dumps())
        pipe.xclaim(
            self.keys.outbox,
            GROUP,
            PARKED,
            0,
            [entry_id],
            idle=int(self.claim_after * 1000),
            justid=True,
        )
        pipe.execute()
        self.released.add(entry_id)

    def _finish(self, entry_id: str) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.xack(self.keys.outbox, GROUP, entry_id)
        pipe.xdel(self.keys.outbox, entry_id)
        pipe.hdel(self.keys.tries, entry_id)
        pipe.execute()
        self.released.discard(entry_id)

    def _give_up(
        self,
        event: Event,
        rules: Sequence[Mapping[str, Any]],
        targets: Sequence[tuple[int, str]],
        tries: Tries,
        now: float,
    ) -> None:
        channels = []
        for index, name in targets:
            channel = tries.channel(index)
            channel.given_up = not channel.delivered
            channels.append(channel_document(index, name, describe(rules[index]), channel))
        undelivered = [
            {k: c[k] for k in ("rule", "event", "channel", "error")}
            for c in channels
            if c["status"] != DELIVERED
        ]
        record: dict[str, Any] = {
            "id": event.id,
            "kind": event.kind,  # the engine's: what is sent again if it is retried
            "run": event.run,
            "jid": event.jid,
            "at": event.at,
            "exhausted": event.exhausted,
            "attempts": max((c["attempts"] for c in channels), default=0),
            "failed_at": now,
            "channels": channels,
            "undelivered": undelivered,
        }
        if event.rules is not None:
            record["rules"] = list(event.rules)
        if event.retry_of:
            record["retry_of"] = event.retry_of
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.keys.failed, event.id, json.dumps(record))
        pipe.xack(self.keys.outbox, GROUP, event.id)
        pipe.xdel(self.keys.outbox, event.id)
        pipe.hdel(self.keys.tries, event.id)
        pipe.execute()
        self.released.discard(event.id)
        log.warning(
            "notification %s of run %s undelivered: %s; `flows notifications --retry %s` sends"
            " it again",
            event.id,
            event.run,
            "; ".join(f"{u['channel']}: {u['error']}" for u in undelivered),
            event.id,
        )

    def _log(
        self,
        event: Event,
        name: str,
        rule: Mapping[str, Any],
        status: str,
        attempt: int,
        error: str,
        now: float,
    ) -> None:
        fields: dict[str, Any] = {
            "id": event.id,
            "event": name,
            "run": event.run,
            "jid": event.jid,
            "channel": describe(rule),
            "status": status,
            "attempt": attempt,
            "error": error,
            "at": f"{now:.3f}",
            "by": self.consumer,
        }
        if event.retry_of:
            fields["retry_of"] = event.retry_of
        self.redis.xadd(self.keys.log, fields, maxlen=LOG_LENGTH, approximate=True)

    def drain(self, timeout: float, interval: float = 0.2) -> bool:
        """Deliver until nothing is due (backoffs aside) or ``timeout`` passed: whether the
        outbox's due entries were all sent, and none this deliverer could not send waits."""
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            if not self.due() or time.monotonic() >= deadline:
                return not self.due() and not self.left()
            time.sleep(interval)

    def left(self) -> list[str]:
        """The entries this deliverer released that are still in the outbox (another sender
        is to send them)."""
        ids = sorted(self.released)
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for entry_id in ids:
            pipe.xrange(self.keys.outbox, min=entry_id, max=entry_id, count=1)
        return [i for i, found in zip(ids, pipe.execute(), strict=True) if found]

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
        one whose next attempt is due, or a released one it would claim."""
        self._ensure_group()
        group = next(
            (g for g in self.redis.xinfo_groups(self.keys.outbox) if g.get("name") == GROUP), None
        )
        last = str(group.get("last-delivered-id", "0-0")) if group else "0-0"
        if self.redis.xrange(self.keys.outbox, min="(" + last, count=1):
            return True
        now = self.clock()
        for _, raw in self.redis.hscan_iter(self.keys.tries):
            tries = Tries.loads(raw)
            if tries.released:
                if self._wants(raw, now):
                    return True
                continue
            due = tries.next_due()
            if due is not None and due <= now:
                return True
        return False


def rules_of(r: Any, keys: Keys, run_id: str) -> tuple[list[dict[str, Any]], str]:
    """A run's notify rules and its flow's name (no rules: a run without, or gone)."""
    raw, flow = r.hmget(keys.run(run_id), "notify", "flow")
    try:
        rules = json.loads(raw) if raw else []
    except ValueError:
        rules = []
    return (rules if isinstance(rules, list) else [], flow or "")


# -- reading what was sent, for `flows notifications` and the API -------------------------------
# Each returns the documents of :mod:`scheduler.notify.documents`: one shape wherever shown.


def recent(client: Client, count: int = 50) -> list[SendDocument]:
    """The newest sends (delivered, an attempt that failed, a channel given up or left),
    newest first."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    return [
        send_document(entry_id, fields) for entry_id, fields in r.xrevrange(keys.log, count=count)
    ]


def _records(r: Any, keys: Keys) -> list[dict[str, Any]]:
    records = []
    for raw in r.hvals(keys.failed):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def failed(client: Client) -> list[EventDocument]:
    """Deliveries given up, oldest first, each with its channels: ``delivered`` or
    ``failed`` (with the last error)."""
    records = _records(client.engine.redis, Keys(client.engine.key_prefix))
    documents = [given_up_document(record) for record in records]
    return sorted(documents, key=lambda d: _order(d["id"]))


def _order(entry_id: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in entry_id.split("-"))
    except ValueError:
        return (0,)


def waiting(client: Client, count: int = 1000) -> list[EventDocument]:
    """Events not delivered yet: in the outbox, with their attempts so far and each channel's
    status (``delivered``, ``pending``, ``retrying``, ``failed`` when given up while another
    channel is still tried, or ``left``: no sender that took it could send it yet, ``error``
    says who and why)."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    entries = r.xrange(keys.outbox, count=count)
    states = r.hmget(keys.tries, [entry_id for entry_id, _ in entries]) if entries else []
    runs: Runs = {}
    out = []
    for (entry_id, fields), raw in zip(entries, states, strict=True):
        tries = Tries.loads(raw)
        event = Event.from_entry(entry_id, fields)
        if event.run not in runs:
            runs[event.run] = rules_of(r, keys, event.run)
        rules = runs[event.run][0]
        channels = [
            channel_document(
                index, name, describe(rules[index]), tries.channels.get(index) or Channel()
            )
            for index, name in concerned(event, rules)
        ]
        out.append(event_document(event, channels))
    return out


EVENT_ID: Final = r"^\d+-\d+$"
"""What an event's id looks like: its outbox entry's (``1795832000123-0``)."""


def id_problem(event_id: str) -> str | None:
    """Why ``event_id`` is no event's id, said without the value (a caller quotes it as its
    reader can see it); None when it is one."""
    return (
        None if re.match(EVENT_ID, event_id) else "is not a notification id (like 1795832000123-0)"
    )


def retry_failed(client: Client, event_id: str) -> str | None:
    """Put a given-up event back in the outbox (a new entry: a new id, its ``retry_of`` this
    one), for another round, to the channels that did not take it only (``rules``: their
    indexes in the run's list). The new entry's id; None when ``event_id`` is not given up."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    # Watched: two retries of one event at once (two operators, a double click) put it back
    # once; the one that finds the event gone since it read it answers None.
    with r.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(keys.failed)
                raw = pipe.hget(keys.failed, event_id)
                if raw is None:
                    return None
                record = json.loads(raw)
                pipe.multi()
                pipe.xadd(keys.outbox, _sent_again(event_id, record))
                pipe.hdel(keys.failed, event_id)
                new_id, _ = pipe.execute()
                return str(new_id)
            except redis.WatchError:
                continue  # the given-up events changed meanwhile: read this one again


def _sent_again(event_id: str, record: Mapping[str, Any]) -> dict[str, str]:
    """The outbox entry of given-up event ``event_id`` (``record``) sent again."""
    fields = {k: str(record[k]) for k in ("kind", "run", "jid", "at") if record.get(k) is not None}
    if record.get("exhausted"):
        fields["exhausted"] = str(record["exhausted"])
    fields["rules"] = " ".join(str(int(u["rule"])) for u in record.get("undelivered", ()))
    fields["retry_of"] = event_id
    return fields


class Retried(TypedDict):
    """What a retry answers: the given-up event's id and the new entry's."""

    id: str
    retried: bool
    retried_as: str


def retried(event_id: str, new_id: str) -> Retried:
    return {"id": event_id, "retried": True, "retried_as": new_id}


SENT_AGAIN_WAITING: Final = "waiting"
SENT_AGAIN_GIVEN_UP: Final = "given up"
SENT_AGAIN_DONE: Final = "done"


def sent_again_as(client: Client, event_id: str) -> tuple[str, str] | None:
    """What became of a given-up event sent again: the newest entry of its line (each one's
    ``retry_of`` the one before it) and where that is: :data:`SENT_AGAIN_GIVEN_UP`,
    :data:`SENT_AGAIN_WAITING` (in the outbox) or :data:`SENT_AGAIN_DONE` (its channels took
    it). An event never given up that is still in the outbox is itself, waiting. None:
    ``event_id`` was never sent again (or its line's latest sends are gone from the capped
    log). Reads the outbox, the given-up events and the latest sends: for an answer
    to a mistaken retry, not for a hot path."""
    keys = Keys(client.engine.key_prefix)
    r: Any = client.engine.redis
    given_up = {str(rec.get("id")): str(rec.get("retry_of") or "") for rec in _records(r, keys)}
    queued: dict[str, str] = {}
    start = "-"
    while True:
        page = r.xrange(keys.outbox, min=start, count=1000)
        queued.update((entry_id, fields.get("retry_of", "")) for entry_id, fields in page)
        if len(page) < 1000:
            break
        start = "(" + page[-1][0]
    successor: dict[str, str] = {}
    for _, fields in r.xrevrange(keys.log, count=LOG_LENGTH * 2):
        if fields.get("retry_of"):
            successor.setdefault(fields["retry_of"], fields.get("id", ""))
    for entry_id, retry_of in (*given_up.items(), *queued.items()):
        if retry_of:
            successor[retry_of] = entry_id
    current, seen = event_id, {event_id}
    while successor.get(current) and successor[current] not in seen:
        current = successor[current]
        seen.add(current)
    if current == event_id and event_id not in queued:
        return None
    if current in given_up:
        return current, SENT_AGAIN_GIVEN_UP
    if current in queued:
        return current, SENT_AGAIN_WAITING
    return current, SENT_AGAIN_DONE


def not_given_up(client: Client, event_id: str) -> str:
    """Why ``event_id`` cannot be sent again: it is not a given-up event, or it was sent again
    already (then which entry it is now, and where)."""
    found = sent_again_as(client, event_id)
    if found is None:
        return f"no given-up notification {event_id}"
    latest, where = found
    if latest == event_id:
        return f"notification {event_id} is waiting to be sent: it was not given up"
    said = f"notification {event_id} was sent again already, as {latest}"
    if where == SENT_AGAIN_GIVEN_UP:
        return f"{said}, given up in turn: retry {latest}"
    if where == SENT_AGAIN_WAITING:
        return f"{said}, which is waiting to be sent"
    return f"{said}, which is neither waiting nor given up any more (see its latest sends)"
