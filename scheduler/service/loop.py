"""The scheduler service: fires cron ticks exactly once, follows a folder, keeps house.

::

    service = SchedulerService(client, FlowsSource(), Path("pipelines"))
    service.scan(now)         # register what changed under the folder
    service.tick(now)         # fire (or skip, with a reason) every due tick
    service.run()             # APScheduler drives scan, tick and housekeeping until SIGTERM

Every step takes ``now`` (epoch seconds): tests pass it; the running service reads the Redis
server's clock, so services on machines with skewed clocks agree on what is due.

Exactly once: a tick fires only through ``schedule.fire``, which moves the schedule's score by
compare-and-set in the same Lua call that submits the run (run id ``<flow>@<fire time>``). Any
number of services may run at once; whoever moves a score first fires that tick and the others
get 'conflict'. A service killed before that call leaves the tick due for the next one; killed
after it, the tick is done. Nothing in between exists: the call is atomic on the server.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from scheduler import stop_signals
from scheduler.cron.catchup import DEFAULT_GRACE_SECONDS, MAX_CATCHUP_RUNS, Skip
from scheduler.cron.expression import InvalidSchedule
from scheduler.engine.backoff import CAP, Backoff, Outage, wait_for_server
from scheduler.engine.client import Client
from scheduler.engine.connections import MasterWatch
from scheduler.engine.errors import EngineError, ForeignEngine
from scheduler.engine.faults import access_refused, where
from scheduler.engine.safety import check_eviction_policy
from scheduler.engine.scripts import LIBRARY_CHECK_EVERY
from scheduler.notify.outbox import Deliverer, shown
from scheduler.secrets import masked
from scheduler.service.backfills import AdvanceReport, advance
from scheduler.service.deadlines import sweep_deadlines
from scheduler.service.housekeeping import (
    Check,
    HousekeepingReport,
    RetentionReport,
    apply_retention,
    maintain_queues,
)
from scheduler.service.planning import Decision, decide, start_delay
from scheduler.service.records import (
    LIVE_TICK_AGE,
    BufferedEntry,
    Definition,
    DueEntry,
    FireCall,
    FlowSource,
    RunRequest,
)
from scheduler.service.scanning import Reloader, ScanReport
from scheduler.service.schedules import Schedules

log = logging.getLogger("flows.scheduler")

MAX_UNSENDABLE = 50
"""Notification channels this service cannot send that its health ping lists, at most."""
MAX_PROBLEM = 300
"""Characters of each one's problem the ping keeps."""
# The reason of a tick the engine skipped in its firing call (lua/commands/schedule_fire.lua).
LIMIT_REASON = "max_active_runs"

#: Rounds of one tick: each fires at most one tick per schedule, so a schedule catching up
#: ``all`` its missed ticks needs one round per run.
MAX_ROUNDS = MAX_CATCHUP_RUNS + 10
#: Definitions a service keeps in memory (by name and content hash).
MAX_DEFINITIONS = 200_000


@dataclass(frozen=True, slots=True)
class Fired:
    """A tick (or buffered tick) whose run was submitted: ``outcome`` 'fired', or 'exists'
    when its run id existed already (nothing submitted twice)."""

    name: str
    run_id: str
    tick: float
    trigger: str
    outcome: str


@dataclass
class TickReport:
    """What one tick did: runs fired, ticks skipped (with reasons), ticks buffered, compare-and-
    set races lost to other services, and schedules that could not be handled."""

    now: float
    fired: list[Fired] = field(default_factory=list)
    skipped: list[tuple[str, Skip]] = field(default_factory=list)
    buffered: list[tuple[str, float]] = field(default_factory=list)
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def submitted(self) -> int:
        """Fires that made their tick's run: the health counts, like the schedule's ``fired``,
        count each tick's run once (not a fire whose run existed already)."""
        return sum(1 for f in self.fired if f.outcome == "fired")


@dataclass
class OnceReport:
    scan: ScanReport
    tick: TickReport
    housekeeping: HousekeepingReport
    retention: RetentionReport
    backfills: AdvanceReport = field(default_factory=AdvanceReport)


@dataclass(frozen=True)
class _Pending:
    """A fire call with what the report needs about it."""

    call: FireCall
    trigger: str = "schedule"
    note: str | None = None
    due: bool = True


def unworkable(error: BaseException) -> bool:
    """Whether ``error`` stops the service rather than its step being tried again: a library
    under the engine's name that is not this release's, or the server refusing the service's
    login or a permission (no wait mends those: an operator must). A worker stops over them
    alike (exit 78)."""
    return isinstance(error, ForeignEngine) or access_refused(error)


def default_service_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class _Local:
    """A tick in its schedule's zone, for a log line: formatted only when the line is written
    (the service logs every tick it fires; a flow test's month of ticks logs none)."""

    tick: float
    zone: tzinfo

    def __str__(self) -> str:
        return datetime.fromtimestamp(self.tick, self.zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def _local(tick: float, definition: Definition | None) -> _Local:
    return _Local(tick, definition.zone if definition is not None else UTC)


@dataclass(frozen=True, slots=True)
class ChannelCheck:
    """A loaded flow file's notification rules (kept while its content ``digest`` is the
    same) and the channels of them this service found it cannot send."""

    digest: str
    rules: tuple[Mapping[str, Any], ...]
    found: list[dict[str, str]]


class SchedulerService:
    """One scheduler service over ``client``'s namespace and the flow files under ``flows_dir``.

    It registers those files as source ``origin`` (default: the folder's name) and fires only
    that source's schedules (see :mod:`scheduler.service.scanning`).

    ``source`` loads files and builds runs (:class:`flows.runs.service_source.FlowsSource`).
    Intervals are
    seconds. ``checks`` run every ``check_interval`` (the consistency check's hook). The health
    ping goes with every tick, or at most every ``ping_interval`` seconds of the service's clock
    (a flow test's virtual month needs no health record a minute).
    ``failpoint`` (tests only) names a step at which the service stops dead, so a test can kill
    it exactly there: ``before-fire`` or ``after-fire`` (around the first ``schedule.fire``
    batch). ``deliverer`` sends the notifications' outbox every ``notify_interval`` seconds.
    Without ``log_invalid`` the files a scan cannot load are only in its report (``flows
    scheduler --once`` prints them itself).
    """

    def __init__(
        self,
        client: Client,
        source: FlowSource,
        flows_dir: Path,
        *,
        origin: str | None = None,
        service_id: str | None = None,
        batch: int = 500,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        tick_interval: float = 1.0,
        scan_interval: float = 10.0,
        housekeeping_interval: float = 5.0,
        retention_interval: float = 300.0,
        checks: Sequence[Check] = (),
        check_interval: float = 300.0,
        failpoint: str | None = None,
        deliverer: Deliverer | None = None,
        notify_interval: float = 1.0,
        log_invalid: bool = True,
        ping_interval: float = 0.0,
    ) -> None:
        self.client = client
        watch = MasterWatch.of(client.redis)
        if watch is not None:
            # The service is the one that makes a deposed master a replica (see fencing).
            watch.fence_deposed()
        self.deliverer = deliverer
        self.notify_interval = notify_interval
        self.source = source
        self.flows_dir = flows_dir
        self.schedules = Schedules(client)
        self._stopping = threading.Event()
        # What stopped the service, raised by run(): a library under the engine's name that
        # is not this release's engine, a refused login or permission (no retry mends them: an
        # operator must; see unworkable).
        self.fatal: Exception | None = None
        self.reloader = Reloader(
            self.schedules,
            source,
            flows_dir,
            origin,
            log_invalid=log_invalid,
            settle=self._settle,
            stop=self._stopping,
        )
        self.origin = self.reloader.origin
        self.service_id = service_id or default_service_id()
        self.batch = batch
        self.grace_seconds = grace_seconds
        self.tick_interval = tick_interval
        self.scan_interval = scan_interval
        self.housekeeping_interval = housekeeping_interval
        self.retention_interval = retention_interval
        self.checks = tuple(checks)
        self.check_interval = check_interval
        self.failpoint = failpoint
        self.started = time.time()
        # Added to by the tick loop's thread and by a scan's catch-up tick (_settle) in the
        # scan's thread, and read by either's health ping: only under _totals_lock.
        self.totals = {"fired": 0, "skipped": 0, "conflicts": 0}
        self._totals_lock = threading.Lock()
        self.ping_interval = ping_interval
        self._pinged_at = -math.inf  # the service clock's time of the last health ping
        self._definitions: dict[tuple[str, str], Definition] = {}
        self._files_here: dict[str, bool] = {}  # a file without a source: under flows_dir?
        self._unplannable: dict[str, str] = {}  # name -> hash of a definition said unplannable
        self._lock = threading.Lock()
        # Flow file → its notification rules and the channels of them this service cannot send.
        self._channels: dict[Path, ChannelCheck] = {}
        # Every step meets the same lost connection: said once for them all.
        self._outage = Outage(
            log,
            f"scheduler {self.service_id}",
            where(client.redis, client.engine.key_prefix),
            f"every step waits for it, retrying at most every {CAP:g}s",
        )

    # -- time ------------------------------------------------------------------------------

    def server_time(self) -> float:
        """The Redis server's clock: every service agrees on it."""
        return self.client.engine.server_time()

    def _now(self, now: float | None) -> float:
        return self.server_time() if now is None else now

    # -- the steps -------------------------------------------------------------------------

    def scan(self, now: float | None = None) -> ScanReport:
        """Register what changed under the folder (see :mod:`scheduler.service.scanning`)."""
        report = self.reloader.scan(self._now(now))
        self._remember(self.reloader.definitions())
        self._check_channels()
        return report

    def _check_channels(self) -> None:
        """Say each notification channel of the loaded flow files that this service can never
        send as things are (a secret missing here, a URL kept in a secret that is none): when
        the file is loaded, not when a run's event is given up half an hour later. Looked at
        again at every scan, since a secret may be added or removed without the file changing
        (a few lookups per channel, its rules kept per file); said again only when it changes.
        Its health lists them for `flows notifications`."""
        if self.deliverer is None:
            return
        texts = self.reloader.texts()
        for gone in set(self._channels) - set(texts):
            del self._channels[gone]
        for path, (digest, text) in texts.items():
            kept = self._channels.get(path)
            rules = kept.rules if kept is not None and kept.digest == digest else None
            if rules is None:
                rules = tuple(self.source.channels(path, text))
            said = kept.found if kept is not None else []
            found = self._channel_problems(path, rules)
            for entry in found:
                if entry not in said:
                    self._say_unsendable(path, entry)
            self._channels[path] = ChannelCheck(digest, rules, found)

    def _channel_problems(
        self, path: Path, rules: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, str]]:
        """The channels of ``rules`` (the file at ``path``'s) this service cannot send, once
        each."""
        assert self.deliverer is not None
        found: list[dict[str, str]] = []
        for rule in rules:
            reason = self.deliverer.problem(rule)
            if reason is None:
                continue
            entry = {"file": str(path), "channel": shown(rule), "problem": masked(reason)}
            if entry not in found:
                found.append(entry)
        return found

    @staticmethod
    def _say_unsendable(path: Path, entry: Mapping[str, str]) -> None:
        log.warning(
            "%s: notification channel %s cannot be sent by this service: %s (a sender "
            "that can may send its events; `flows notifications` lists it)",
            path,
            entry["channel"],
            entry["problem"],
        )

    def _unsendable(self) -> list[dict[str, str]]:
        """What :meth:`_check_channels` found, as the health ping carries it (bounded: the
        ping's info is at most 64 KiB)."""
        found = [entry for check in self._channels.values() for entry in check.found]
        return [
            {**entry, "problem": entry["problem"][:MAX_PROBLEM]} for entry in found[:MAX_UNSENDABLE]
        ]

    def tick(self, now: float | None = None, *, only: str | None = None) -> TickReport:
        """Handle every due tick at ``now``: fire, skip or buffer each, exactly once. ``only``:
        the ticks of this schedule alone, read without the others (no health ping)."""
        now = self._now(now)
        report = TickReport(now)
        stuck = 0  # due entries at the head that could not be moved: page past them
        tried: set[str] = set()  # buffered ticks get one attempt per tick
        # Due after the interval, and at once when the clock went back (a failover to a server
        # whose clock is behind): a health record must not wait for the clock to catch up.
        ping = only is None and not 0 <= now - self._pinged_at < self.ping_interval
        pinged = False  # by the last round's fire batch
        for _ in range(MAX_ROUNDS):
            pinged = False
            batch = self.schedules.due(now, offset=stuck, limit=self.batch, name=only)
            # Other sources' schedules are theirs to fire: paged past.
            due = [e for e in batch.due if e.origin in ("", self.origin)]
            stuck += len(batch.due) - len(due)
            ready = [
                e
                for e in batch.buffered
                if e.origin in ("", self.origin) and not e.active and e.name not in tried
            ]
            tried.update(e.name for e in ready)
            self._prefetch([(e.name, e.hash) for e in due] + [(e.name, e.hash) for e in ready])
            calls = [p for p in (self._buffered(e, now) for e in ready) if p is not None]
            firing = {p.call.name for p in calls}
            for entry in due:
                if entry.name in firing:
                    # Its buffered tick fires first in this same batch: the due tick meets that
                    # run (active, the buffer emptied), never the snapshot from before it.
                    entry = dataclasses.replace(entry, active=True, buffered=None)
                pending = self._due(entry, now, report)
                if pending is None:
                    stuck += 1
                else:
                    calls.append(pending)
            if calls:
                conflicts = report.conflicts
                # A round that leaves nothing due is the last: its fire batch carries the
                # health ping (one round trip less per tick that fires).
                settled = _settled(batch.due, batch.buffered, calls, now, self.batch)
                pinged = settled and ping
                stuck += self._send(calls, now, report, pinged)
                if settled and report.conflicts == conflicts:
                    break
            elif len(batch.due) < self.batch:
                break
        if ping and not pinged:  # nothing fired, or a round after the ping's
            self.schedules.ping(self.service_id, self._health(now, report), now)
        if ping:
            self._pinged_at = now
        with self._totals_lock:
            self.totals["fired"] += report.submitted
            self.totals["skipped"] += len(report.skipped)
            self.totals["conflicts"] += report.conflicts
        return report

    def _settle(self, name: str, now: float) -> None:
        """Before a change of when schedule ``name`` fires is registered (a scan found its
        cron, time zone, start or end changed): the ticks due at ``now`` are the registered
        definition's, so they are handled as it has them (fired with its text, or skipped,
        under its catch-up and overlap policies), as a tick just before the scan would have.
        The change applies from the first tick after ``now``: none due is passed over
        silently."""
        self.tick(now, only=name)
        held = self.schedules.get(name, skips=0, now=now)
        if held is not None and held.next is not None and held.next <= now:
            log.warning(
                "schedule %s: its ticks due from %s could not be handled before its new "
                "schedule was registered; the new schedule passes over them",
                name,
                _local(held.next, held.definition),
            )

    def housekeep(self, now: float | None = None) -> HousekeepingReport:
        """Promote due scheduled jobs, spawn recurring ones, reap expired locks, time out
        waits, check deadlines."""
        report = maintain_queues(self.client, now)
        sweep_deadlines(self.client, now)
        if report.busy:
            log.info(
                "housekeeping: %d promoted, %d spawned, %d reclaimed, %d failed (retries used up), "
                "%d waits timed out (%d failed, %d skipped)",
                report.promoted,
                report.spawned,
                report.reclaimed,
                report.failed,
                report.waits_failed + report.waits_skipped,
                report.waits_failed,
                report.waits_skipped,
            )
        return report

    def advance_backfills(self, now: float | None = None) -> AdvanceReport:
        """Submit the next runs of the active backfills as far as their limits allow
        (:mod:`scheduler.service.backfills`): a bounded step, like housekeeping."""
        report = advance(self.client, self.source, now)
        if report.busy:
            log.info(
                "backfills: %d runs submitted, %d canceled runs resumed, %d existed already, "
                "%d could not be submitted",
                len(report.submitted),
                len(report.resumed),
                len(report.existed),
                len(report.failed),
            )
        return report

    def retention(self, now: float | None = None) -> RetentionReport:
        """Drop expired completed jobs and old finished runs."""
        report = apply_retention(self.client, now)
        if report.jobs or report.runs:
            log.info("retention: dropped %d completed jobs, %d runs", report.jobs, report.runs)
        return report

    def deliver(self, now: float | None = None) -> int:
        """Send what the notifications' outbox holds that this service can send (its secrets,
        its channels; the rest is left to another sender: :mod:`scheduler.notify.outbox`).
        Returns how many sends succeeded."""
        if self.deliverer is None:
            return 0
        return self.deliverer.tick(now)

    def run_checks(self, now: float | None = None) -> None:
        for check in self.checks:
            check(self.client, now)

    def once(self, now: float | None = None) -> OnceReport:
        """Scan, tick, housekeeping and retention once (``flows scheduler --once``)."""
        now = self._now(now)
        scan = self.scan(now)
        tick = self.tick(now)
        report = OnceReport(
            scan, tick, self.housekeep(now), self.retention(now), self.advance_backfills(now)
        )
        self.run_checks(now)
        return report

    # -- planning a tick -------------------------------------------------------------------

    def _remember(self, definitions: Sequence[Definition]) -> None:
        with self._lock:
            if len(self._definitions) + len(definitions) > MAX_DEFINITIONS:
                self._definitions.clear()
            for definition in definitions:
                self._definitions[(definition.name, definition.hash)] = definition

    def _definition(self, name: str, digest: str) -> Definition | None:
        """The registered definition (from this service's scans, else fetched once)."""
        with self._lock:
            known = self._definitions.get((name, digest))
        if known is not None:
            return known
        registration = self.schedules.get(name, skips=0)
        if registration is None:
            return None
        self._remember([registration.definition])
        return registration.definition

    def _prefetch(self, names: Sequence[tuple[str, str]]) -> None:
        """Fetch the definitions this service does not know in one round trip (registered by
        another service, or changed since its last scan)."""
        with self._lock:
            missing = sorted(
                {name for name, digest in names if (name, digest) not in self._definitions}
            )
        if missing:
            self._remember(self.schedules.get_many(missing))

    def _mine(self, origin: str, definition: Definition) -> bool:
        """A schedule registered without a source is this one's when its file is here."""
        if origin == self.origin:
            return True
        mine = self._files_here.get(definition.file)
        if mine is None:  # a path test per file, not per tick: the folder never changes
            mine = Path(definition.file).is_relative_to(self.reloader.folder)
            self._files_here[definition.file] = mine
        return mine

    def _due(self, entry: DueEntry, now: float, report: TickReport) -> _Pending | None:
        definition = self._definition(entry.name, entry.hash)
        if definition is None or not self._mine(entry.origin, definition):
            return None  # unregistered meanwhile, or another folder's
        try:
            decision = decide(definition, entry, now, grace_seconds=self.grace_seconds)
        except InvalidSchedule as error:
            # Registered by a version whose cron checks let it through: it stays due (nothing
            # can plan it) until its file is fixed, so the log says so once, not every tick.
            if self._unplannable.get(entry.name) != entry.hash:
                self._unplannable[entry.name] = entry.hash
                log.error(
                    "schedule %s: cannot plan its ticks: %s; fix its file (the next scan "
                    "registers it again)",
                    entry.name,
                    error,
                )
            report.errors.append(f"{entry.name}: {type(error).__name__}: {error}")
            return None
        except Exception as error:  # what the cron arithmetic did not foresee: report, go on
            log.exception("schedule %s: cannot plan its ticks", entry.name)
            report.errors.append(f"{entry.name}: {type(error).__name__}: {error}")
            return None
        return self._pending(definition, entry, decision, now)

    def _pending(
        self, definition: Definition, entry: DueEntry, decision: Decision, now: float
    ) -> _Pending:
        run: RunRequest | str | None = None
        if decision.action == "fire" and decision.tick is not None:
            run = self._build(definition, decision.tick, decision.trigger, now)
        built = run if isinstance(run, RunRequest) else None
        # Made whole at once: a dataclasses.replace() of it costs more than making it.
        call = FireCall(
            entry.name,
            definition.hash,
            entry.next,
            decision.next,
            decision.action,
            decision.tick,
            decision.skips,
            built,
            decision.cancel if built is not None else None,
        )
        if isinstance(run, str):
            call = _skip_instead(call, run)
        return _Pending(call, decision.trigger, decision.note)

    def _buffered(self, entry: BufferedEntry, now: float) -> _Pending | None:
        definition = self._definition(entry.name, entry.hash)
        if definition is None or not self._mine(entry.origin, definition):
            return None
        run = self._build(definition, entry.tick, "buffered", now)
        if isinstance(run, str):
            # A buffered tick whose run cannot be built: nothing else can clear it but firing,
            # so it stays (reported each tick) until the file is fixed.
            log.error("schedule %s: buffered tick: %s", entry.name, run)
            return None
        call = FireCall(
            entry.name, definition.hash, entry.tick, None, "buffered", entry.tick, (), run
        )
        return _Pending(call, "buffered", "its previous run ended", due=False)

    def _build(
        self, definition: Definition, tick: float, trigger: str, now: float
    ) -> RunRequest | str:
        """The tick's run, or why it cannot be built (then the tick is skipped with it)."""
        run_id = self.source.run_id(definition.name, tick)
        try:
            return self.source.build(
                definition, run_id, tick, trigger, start_delay(definition, tick, now)
            )
        except Exception as error:  # expansion, params, a stored flow that no longer loads
            log.error("schedule %s: cannot build the run of %s: %s", definition.name, tick, error)
            return f"cannot build the run: {error}"

    # -- firing ----------------------------------------------------------------------------

    def _send(self, calls: list[_Pending], now: float, report: TickReport, ping: bool) -> int:
        """Fire a batch (with the health ping: ``ping``); returns how many due entries could
        not be moved at all."""
        self._failpoint("before-fire")
        health = (self.service_id, self._health(now, report)) if ping else None
        outcomes = self.schedules.fire_many([p.call for p in calls], now, health)
        self._failpoint("after-fire")
        refused: list[_Pending] = []
        for pending, outcome in zip(calls, outcomes, strict=True):
            if isinstance(outcome, EngineError):
                # The engine refused the run (e.g. a job id taken by hand): skip the tick with
                # the engine's reason instead of retrying it forever.
                log.error("schedule %s: run refused: %s", pending.call.name, outcome)
                if pending.call.run is not None and pending.due:
                    reason = f"run refused by the engine: {outcome}"
                    refused.append(_Pending(_skip_instead(pending.call, reason), pending.trigger))
                else:
                    report.errors.append(f"{pending.call.name}: {outcome}")
            else:
                self._record(pending, outcome, report)
        stuck = 0
        if refused:
            for pending, outcome in zip(
                refused, self.schedules.fire_many([p.call for p in refused], now), strict=True
            ):
                if isinstance(outcome, EngineError):
                    report.errors.append(f"{pending.call.name}: {outcome}")
                    stuck += 1
                else:
                    self._record(pending, outcome, report)
        return stuck

    def _record(self, pending: _Pending, outcome: str, report: TickReport) -> None:
        call = pending.call
        with self._lock:
            definition = self._definitions.get((call.name, call.hash))
        if outcome == "conflict":
            report.conflicts += 1
            log.debug("schedule %s: another service handled it first", call.name)
            return
        for skip in call.skips:
            report.skipped.append((call.name, skip))
            count = "an uncounted number of" if skip.count is None else str(skip.count)
            log.info(
                "skipped %s tick(s) of %s from %s: %s",
                count,
                call.name,
                _local(skip.first, definition),
                skip.reason,
            )
        if outcome == "skipped" and call.run is not None and call.tick is not None:
            # The engine refused the run in the firing call: the flow's max_active_runs.
            limit = Skip(call.tick, call.tick, 1, LIMIT_REASON)
            report.skipped.append((call.name, limit))
            log.info(
                "skipped %s's tick %s: %s", call.name, _local(call.tick, definition), LIMIT_REASON
            )
        if outcome == "buffered" and call.tick is not None:
            report.buffered.append((call.name, call.tick))
            log.info(
                "buffered %s's tick %s: %s", call.name, _local(call.tick, definition), pending.note
            )
        elif outcome in ("fired", "exists") and call.run is not None and call.tick is not None:
            report.fired.append(
                Fired(call.name, call.run.run_id, call.tick, pending.trigger, outcome)
            )
            why = pending.trigger + (f"; {pending.note}" if pending.note else "")
            already = " (the run existed already)" if outcome == "exists" else ""
            log.info(
                "fired %s: run %s for %s (%s)%s",
                call.name,
                call.run.run_id,
                _local(call.tick, definition),
                why,
                already,
            )

    # -- health ----------------------------------------------------------------------------

    def _health(self, now: float, report: TickReport) -> dict[str, object]:
        """What the ping of the tick at ``now`` records: the totals include ``report`` so far
        (a ping sent with a fire batch counts up to the batch before it). Not the tick's time:
        the ping records that apart, and the engine writes the info only when it changed."""
        with self._totals_lock:  # the three of one moment
            fired, skipped, conflicts = (self.totals[k] for k in ("fired", "skipped", "conflicts"))
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "flows_dir": str(self.flows_dir),
            "source": self.origin,
            "started": self.started,
            "fired": fired + report.submitted,
            "skipped": skipped + len(report.skipped),
            "conflicts": conflicts + report.conflicts,
            "unsendable": self._unsendable(),
        }

    def _failpoint(self, name: str) -> None:
        if self.failpoint != name:
            return
        print(f"failpoint {name} reached (pid {os.getpid()})", file=sys.stderr, flush=True)
        while True:  # stopped dead: the test kills us here
            time.sleep(3600)

    # -- running ---------------------------------------------------------------------------

    def _job(self, name: str, step: Callable[[], object]) -> Callable[[], None]:
        # Keep the service alive, and health shows a tick that keeps failing; a failing step is
        # tried again after growing pauses and logged once per fault, not once per interval.
        backoff = Backoff(
            log,
            f"scheduler {self.service_id}: {name}",
            client=self.client.redis,
            outage=self._outage,
        )
        resume = 0.0

        def run() -> None:
            nonlocal resume
            if time.monotonic() < resume:
                return
            try:
                step()
            except Exception as error:
                if unworkable(error):  # e.g. the library swapped, the ACL user gone
                    self._give_up(error)
                    return
                resume = time.monotonic() + backoff.failed(error)
                return
            backoff.succeeded()

        return run

    def _give_up(self, error: Exception) -> None:
        """Stop the service over ``error``, which :meth:`run` raises once stopped."""
        with self._lock:
            if self.fatal is None:
                self.fatal = error
        self.stop()

    def stop(self) -> None:
        """Ask :meth:`run` to finish the steps in progress and return (a scan in progress
        ends at its next file)."""
        self._stopping.set()

    def run(self, *, install_signals: bool = True) -> None:
        """Run until :meth:`stop` (or SIGTERM/SIGINT): APScheduler calls each step on its
        interval, never two of one kind at once; a late step runs once, not once per miss.

        Raises :class:`ForeignEngine` when the Functions library under the engine's name is
        not this release's engine: at the start (nothing is done), or once the steps in
        progress are over when it was swapped while the service runs (looked at every few
        seconds: :meth:`scheduler.engine.scripts.Engine.check_library`). Restarting cannot mend
        that: an operator must (``flows engine load``). Raises the server's refusal of the
        service's login or of a permission (:func:`unworkable`) alike."""
        from apscheduler.schedulers.background import BackgroundScheduler

        if install_signals:
            self._install_signals()
        # Started during a failover or before its server: wait for it, as pool workers do.
        # The engine is loaded (and its library checked) before any step: one that is not this
        # release's stops the service here, not in every step.
        ready = wait_for_server(
            log,
            f"scheduler {self.service_id}: starting",
            self._check_server,
            stop=self._stopping,
            client=self.client.redis,
        )
        if not ready:
            log.info("scheduler %s stopped before its server was reachable", self.service_id)
            return
        log.info(
            "scheduler %s watching %s as source %s", self.service_id, self.flows_dir, self.origin
        )
        # The first scan runs next to the first ticks, not before them: what is registered
        # already fires from Redis while a large folder is still being validated.
        scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        first = datetime.now(UTC)
        steps: list[tuple[str, Callable[[], object], float]] = [
            ("tick", self.tick, self.tick_interval),
            ("scan", self.scan, self.scan_interval),
            ("housekeeping", self.housekeep, self.housekeeping_interval),
            ("backfills", self.advance_backfills, self.housekeeping_interval),
            ("retention", self.retention, self.retention_interval),
            # A library swapped while the service runs stops it (see _job).
            ("engine library", self.client.engine.check_library, LIBRARY_CHECK_EVERY),
        ]
        if self.checks:
            steps.append(("checks", self.run_checks, self.check_interval))
        if self.deliverer is not None:  # the notifications' outbox (scheduler.notify)
            steps.append(("notifications", self.deliver, self.notify_interval))
        for name, step, interval in steps:
            scheduler.add_job(
                self._job(name, step), "interval", seconds=interval, id=name, next_run_time=first
            )
        scheduler.start()
        try:
            while not self._stopping.wait(0.5):
                pass
            log.info("scheduler %s stopping: finishing the steps in progress", self.service_id)
        finally:
            scheduler.shutdown(wait=True)
            try:
                if self.fatal is None:  # else no engine call can run: health says it stopped
                    self.schedules.forget_service(self.service_id)
            except Exception:  # Redis gone: the health entry ages out by itself
                log.warning("could not deregister %s", self.service_id)
        log.info("scheduler %s stopped", self.service_id)
        if self.fatal is not None:
            raise self.fatal

    def _check_server(self) -> None:
        check_eviction_policy(self.client.redis, who=f"scheduler service {self.service_id}")
        self.client.engine.load()

    def _install_signals(self) -> None:
        def first(signum: int) -> None:
            log.info("received %s", signal.Signals(signum).name)
            self.stop()

        def again(signum: int, count: int) -> None:
            os._exit(1)

        stop_signals.install(first, again)


def _settled(
    due: Sequence[DueEntry],
    buffered: Sequence[BufferedEntry],
    calls: Sequence[_Pending],
    now: float,
    batch: int,
) -> bool:
    """Whether a round that fired ``calls`` left nothing due at ``now``: its page held every
    due schedule (not full), none holds a buffered tick, and each call moved its schedule past
    ``now`` (or to its end). Then reading the due index again would find nothing: one round
    trip less per tick, the common case of a service whose schedules are on time."""
    if len(due) >= batch or buffered:
        return False
    return all(
        p.due and p.call.action != "buffer" and (p.call.next is None or p.call.next > now)
        for p in calls
    )


def _skip_instead(call: FireCall, reason: str) -> FireCall:
    """The same compare-and-set, skipping the tick with ``reason`` instead of firing it."""
    assert call.tick is not None
    skips = (*call.skips, Skip(call.tick, call.tick, 1, reason))
    return FireCall(call.name, call.hash, call.expected, call.next, "skip", call.tick, skips)


def check_health(
    schedules: Schedules,
    now: float,
    *,
    service_id: str | None = None,
    source: str | None = None,
    max_age: float = LIVE_TICK_AGE,
) -> tuple[bool, str]:
    """Whether a service (``service_id``, else any of ``source``, else any) ticked within
    ``max_age`` seconds of ``now`` (the server's clock), and a line saying so."""
    services = [
        s for s in schedules.services() if service_id in (None, s.id) and source in (None, s.source)
    ]
    if not services:
        # Parenthesised: a bare second line after `return a, "…"` would be a separate statement.
        if service_id:
            return False, (
                f"unhealthy: scheduler {service_id} has not ticked (not running, or it stopped "
                "cleanly)"
            )
        of = f" of source {source}" if source is not None else ""
        return False, (
            f"unhealthy: no scheduler service{of} has ticked (none runs, or they stopped cleanly)"
        )
    lines = []
    healthy = False
    for service in services:
        age = max(0.0, now - service.last_tick)  # a ping after the clock was read: just now
        ok = service.alive(now, max_age)
        healthy = healthy or ok
        lines.append(f"{service.id}: last tick {age:.1f}s ago{'' if ok else ' (too old)'}")
    state = "healthy" if healthy else "unhealthy"
    return healthy, f"{state}: " + "; ".join(lines)


__all__ = [
    "Fired",
    "OnceReport",
    "SchedulerService",
    "TickReport",
    "check_health",
    "default_service_id",
]
