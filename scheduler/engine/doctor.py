"""The consistency check (``flows doctor``): find and repair jobs the engine's indexes disagree on.

Each job must be in exactly one state index, the one its hash names. A
bug, a hand-edited key or a half-applied restore can break that; this module finds where, in two
depths (after Redis Work Queue's light and deep cleaning):

* **light** -- the running set: every known queue's locks and every active worker's jobs. Cost
  grows with the number of running jobs only; meant to run about as often as the shortest lock
  time (``ScheduledCheck``, or ``light_check`` as a service
  :data:`~scheduler.service.housekeeping.Check`).
* **deep** -- everything: one ``SCAN`` of the namespace (never ``KEYS``), every job's hash checked
  against its index and its dependency edges, and every index (queues' work, fifo, parked,
  scheduled, depends, locks and buried; workers' jobs; completed, expired, awaiting; failed
  lists) checked entry by entry, every run's job list, tag's jobs and the tracked set for
  entries that are no jid, and every run's kept counts (``run-counts``, lua/README.md) against
  its jobs. Slow on a big namespace; run it rarely.

Every engine call is one bounded page (``lua/commands/doctor.lua``): at most ``page`` entries or
jobs. Each finding names a kind (:data:`KINDS`), the job, and the index it was seen in. With
``repair=True`` each finding is repaired by one ``doctor.repair`` call, which checks it again
first, so a job that moved on meanwhile is left alone. Findings inferred across several calls
(a failed job missing from its group's list, a list naming a job twice) are checked again before
they are reported at all.

``check(client, deep=False, repair=False) -> Report``; ``report.clean`` is True when nothing was
found.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from scheduler.engine.errors import EngineError, counted
from scheduler.engine.replies import as_bool, as_dict, as_list

if TYPE_CHECKING:
    from scheduler.engine.client import Client

log = logging.getLogger("flows.doctor")

#: Entries or jobs per engine call (the engine accepts at most 1000).
PAGE = 500

#: Every kind of finding, in the order repairs apply: index entries first, then jobs, then keys.
KINDS: tuple[str, ...] = (
    "bad-id",
    "missing-job",
    "stray-entry",
    "duplicate-entry",
    "orphan-lock",
    "bad-state",
    "unindexed",
    "dangling-dependency",
    "half-edge",
    "dangling-dependent",
    "stuck-depends",
    "orphan-key",
    "failure-group",
    "run-counts",
)

#: What each kind means (``flows doctor`` prints it).
MEANINGS: dict[str, str] = {
    "bad-id": (
        "an index, a run's job list, a tag's jobs or the tracked set holds an entry that is no"
        " jid (written from outside)"
    ),
    "missing-job": "an index lists a job that does not exist",
    "stray-entry": "an index lists a job whose hash says otherwise (state, queue, worker, group)",
    "duplicate-entry": "a failed list names a job more than once",
    "orphan-lock": "a running job is missing from its worker's jobs",
    "bad-state": "a job hash without a usable state (no state, no queue, no failure group)",
    "unindexed": "a job that no index lists",
    "dangling-dependency": "a job waits for a job that does not exist",
    "half-edge": "a job waits for a job that does not list it as a dependent",
    "dangling-dependent": "a job lists a dependent that does not exist or does not wait for it",
    "stuck-depends": "a job waits for dependencies but has none left",
    "orphan-key": "keys left by a job or a worker that no longer exists",
    "failure-group": "a failure group missing from, or left over in, the list of groups",
    "run-counts": "a run's kept counts of its jobs per status differ from its jobs",
}

_QUEUE_INDEXES = ("work", "fifo", "parked", "scheduled", "depends", "locks", "buried")
_QUEUE_KEY = re.compile(
    r"^q:(?P<name>.+)-(?P<index>work|fifo|parked|scheduled|depends|locks|buried)$", re.S
)
_JOB_KEY = re.compile(r"^j:(?P<jid>.+?)(?:-history|-dependencies|-dependents)?$", re.S)
_WORKER_KEY = re.compile(r"^w:(?P<name>.+):(?:jobs|info)$", re.S)
_FAILED_KEY = re.compile(r"^f:(?P<name>.+)$", re.S)
_TAG_KEY = re.compile(r"^t:(?P<name>.+)$", re.S)
_MAX_ID_BYTES = 256
_RESERVED_SUFFIXES = ("-history", "-dependencies", "-dependents")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: its kind, the job (``""`` when it is about a group or a worker), the index it
    was seen in (``work``, ``fifo``, ``parked``, ``scheduled``, ``depends``, ``locks``, ``buried``,
    ``worker``, ``completed``, ``expired``, ``awaiting``, ``failed``, ``job``, ``worker-info``,
    ``failures``, ``run``, ``run-jobs``, ``tag``, ``tracked``), that index's name (a queue,
    worker, group, run or tag; for edges, the other job) and a sentence saying what is wrong."""

    kind: str
    jid: str
    index: str
    name: str
    detail: str

    @classmethod
    def from_engine(cls, raw: dict[str, Any]) -> Finding:
        return cls(
            str(raw["kind"]),
            str(raw.get("jid") or ""),
            str(raw.get("index") or ""),
            str(raw.get("name") or ""),
            str(raw.get("detail") or ""),
        )

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.kind, self.index, self.name, self.jid)

    @property
    def where(self) -> str:
        """The index in words: ``locks of queue q``, ``jobs of worker w``, ``failed list g``."""
        if self.index in _QUEUE_INDEXES:
            return f"{self.index} of queue {self.name}"
        if self.index == "worker":
            return f"jobs of worker {self.name}"
        if self.index == "failed":
            return f"failed list {self.name}"
        if self.index == "worker-info":
            return f"registration of worker {self.name}"
        if self.index == "failures":
            return f"failure group {self.name}"
        if self.index == "run":
            return f"counts of run {self.name}"
        if self.index == "run-jobs":
            return f"jobs of run {self.name}"
        if self.index == "tag":
            return f"jobs tagged {self.name}"
        if self.index == "tracked":
            return "tracked jobs"
        if self.index == "job" and self.name:
            return f"edge to {self.name}"
        return self.index

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "jid": self.jid,
            "index": self.index,
            "name": self.name,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Repair:
    """What repairing a finding did: ``status`` is ``repaired`` (``action`` says how), ``gone``
    (no longer true when checked again), ``skipped`` (left for a person, ``action`` says why) or
    ``error`` (the engine refused; ``action`` holds the error)."""

    finding: Finding
    status: str
    action: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.finding.as_dict(), "status": self.status, "action": self.action}


@dataclass
class Report:
    """What one check found, and (with ``repair``) what it did about it."""

    deep: bool
    repair: bool
    findings: list[Finding] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)
    """How much was read: ``entries`` (index entries), ``jobs``, ``keys`` (scanned), ``skipped``
    (jobs in a state the check does not know), ``unaddressable`` (keys whose name is not a valid
    id)."""

    @property
    def clean(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def by_kind(self) -> dict[str, list[Finding]]:
        """Findings grouped by kind, in :data:`KINDS` order."""
        out: dict[str, list[Finding]] = {}
        for kind in KINDS:
            found = [f for f in self.findings if f.kind == kind]
            if found:
                out[kind] = found
        return out

    @property
    def unrepaired(self) -> list[Finding]:
        """Findings a repair did not settle (skipped or refused); all of them without repair."""
        if not self.repair:
            return list(self.findings)
        return [r.finding for r in self.repairs if r.status not in ("repaired", "gone")]

    def summary(self) -> str:
        depth = "deep" if self.deep else "light"
        if self.clean:
            return f"{depth} check: no problems ({self._read()})"
        kinds = ", ".join(f"{len(found)} {kind}" for kind, found in self.by_kind().items())
        problems = counted(len(self.findings), "problem")
        text = f"{depth} check: {problems}: {kinds} ({self._read()})"
        if self.repair:
            done = Counter(r.status for r in self.repairs)
            text += "; " + ", ".join(f"{n} {status}" for status, n in sorted(done.items()))
        return text

    def _read(self) -> str:
        read = [f"{self.checked['entries']} entries read"]
        read += [
            counted(self.checked[n], n[:-1]) for n in ("jobs", "keys", "runs") if self.checked[n]
        ]
        return ", ".join(read)

    def as_dict(self) -> dict[str, Any]:
        return {
            "deep": self.deep,
            "repair": self.repair,
            "clean": self.clean,
            "checked": dict(self.checked),
            "findings": {
                kind: [f.as_dict() for f in found] for kind, found in self.by_kind().items()
            },
            "repairs": [r.as_dict() for r in self.repairs],
        }


def check(
    client: Client,
    *,
    deep: bool = False,
    repair: bool = False,
    now: float | None = None,
    page: int = PAGE,
) -> Report:
    """Check the namespace of ``client`` (light, or ``deep``); with ``repair``, repair what was
    found. ``now`` (epoch seconds) is the time the engine works at; None: the server's clock."""
    if not 1 <= page <= 1000:
        raise ValueError(f"page must be 1 to 1000, got {page}")
    checker = _Checker(client, now, page)
    report = Report(deep=deep, repair=repair)
    if deep:
        checker.deep()
    else:
        checker.light()
    report.findings = checker.sorted_findings()
    report.checked = checker.checked
    if repair and report.findings:
        report.repairs = checker.repair(report.findings)
    return report


def light_check(client: Client, now: float | None = None) -> Report:
    """A light check that repairs: a :data:`scheduler.service.housekeeping.Check` for the
    service."""
    return _logged(check(client, repair=True, now=now))


def deep_check(client: Client, now: float | None = None) -> Report:
    """A deep check that repairs: a :data:`scheduler.service.housekeeping.Check` for the service."""
    return _logged(check(client, deep=True, repair=True, now=now))


class ScheduledCheck:
    """One :data:`scheduler.service.housekeeping.Check` for the scheduler service: a light check
    on every call and a deep one on every ``deep_every``-th (0: never), repairing when
    ``repair``.

    ``SchedulerService(..., checks=[ScheduledCheck(deep_every=60)], check_interval=60)`` runs the
    light check every minute and the deep one every hour.
    """

    def __init__(self, *, deep_every: int = 12, repair: bool = True, page: int = PAGE) -> None:
        if deep_every < 0:
            raise ValueError("deep_every must be 0 or more")
        self.deep_every = deep_every
        self.repair = repair
        self.page = page
        self.calls = 0
        self.last: Report | None = None

    def __call__(self, client: Client, now: float | None = None) -> Report:
        self.calls += 1
        deep = self.deep_every > 0 and self.calls % self.deep_every == 0
        self.last = _logged(check(client, deep=deep, repair=self.repair, now=now, page=self.page))
        return self.last


def _logged(report: Report) -> Report:
    if report.clean:
        log.debug("%s", report.summary())
    else:
        log.warning("%s", report.summary())
        for finding in report.findings[:20]:
            log.warning(
                "  %s %s (%s): %s", finding.kind, finding.jid, finding.where, finding.detail
            )
    return report


# -- the checker ---------------------------------------------------------------------------------


def _valid_id(text: str) -> bool:
    """What the engine accepts as an id (include/args.lua): 1-256 bytes, no white space or
    control character."""
    return 0 < len(text.encode()) <= _MAX_ID_BYTES and not any(
        c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text
    )


def _valid_jid(text: str) -> bool:
    """What the engine accepts as a jid: an id not ending in a suffix of the key layout."""
    return _valid_id(text) and not text.endswith(_RESERVED_SUFFIXES)


def _glob_escape(text: str) -> str:
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


class _Checker:
    """One check's calls and what they found (findings deduplicated, in the order found)."""

    def __init__(self, client: Client, now: float | None, page: int) -> None:
        self.client = client
        self.engine = client.engine
        self.at: float | str = "" if now is None else now
        self.page = page
        self.found: dict[tuple[str, str, str, str], Finding] = {}
        self.checked: Counter[str] = Counter()

    def call(self, command: str, *args: Any) -> Any:
        return self.engine.call(command, *args, now=self.at)

    def add(self, raw: Iterable[dict[str, Any]]) -> None:
        for item in raw:
            finding = Finding.from_engine(item)
            self.found.setdefault(finding.key, finding)

    def sorted_findings(self) -> list[Finding]:
        order = {kind: i for i, kind in enumerate(KINDS)}
        return sorted(self.found.values(), key=lambda f: order.get(f.kind, len(order)))

    # -- reading ------------------------------------------------------------------------------

    def names(self, what: str) -> list[str]:
        out: list[str] = []
        while True:
            batch = as_list(self.call("doctor.names", what, len(out), self.page))
            out += [str(name) for name in batch]
            if len(batch) < self.page:
                return out

    def indexes(
        self, targets: Iterable[tuple[str, str]], failed: dict[str, list[str]] | None = None
    ) -> None:
        """Check every page of each (index, name), first pages in one round trip; the entries of
        failed lists go to ``failed`` (group -> jids, in list order)."""
        pending = [(index, name, 0) for index, name in targets]
        while pending:
            pipe = self.engine.pipeline()
            for index, name, offset in pending:
                pipe.call("doctor.index", index, name, offset, self.page, now=self.at)
            more = []
            for (index, name, offset), reply in zip(pending, pipe.execute(), strict=True):
                if isinstance(reply, Exception):
                    raise reply
                page = as_dict(reply)
                read = int(page.get("read", 0))
                self.checked["entries"] += read
                self.add(as_list(page.get("findings")))
                if failed is not None and index == "failed":
                    failed.setdefault(name, []).extend(str(j) for j in as_list(page.get("jids")))
                if read >= self.page:
                    more.append((index, name, offset + read))
            pending = more

    def jobs(self, jids: Sequence[str], failed: list[tuple[str, str]]) -> None:
        reply = as_dict(self.call("doctor.jobs", *jids))
        self.checked["jobs"] += len(jids)
        self.checked["skipped"] += int(reply.get("skipped", 0))
        self.add(as_list(reply.get("findings")))
        failed.extend((str(jid), str(group)) for jid, group in as_list(reply.get("failed")))

    def confirmed(self, finding: Finding) -> bool:
        """Whether a finding inferred across calls still holds (a dry run of its repair)."""
        reply = as_dict(
            self.call(
                "doctor.repair", finding.kind, finding.index, finding.name, finding.jid, "dry"
            )
        )
        return reply.get("status") == "found"

    # -- the two depths -----------------------------------------------------------------------

    def light(self) -> None:
        targets = [("locks", queue) for queue in self.names("queues")]
        targets += [("worker", worker) for worker in self.names("workers")]
        self.indexes(targets)

    def deep(self) -> None:
        queues = set(self.names("queues"))
        workers = set(self.names("workers"))
        groups = set(self.names("groups"))
        targets: set[tuple[str, str]] = {
            ("completed", ""),
            ("expired", ""),
            ("awaiting", ""),
            ("tracked", ""),
        }
        failed_jobs: list[tuple[str, str]] = []
        for batch in self._scan(targets, workers, groups):
            self.jobs(batch, failed_jobs)
        targets |= {(index, queue) for queue in queues for index in _QUEUE_INDEXES}
        targets |= {("worker", worker) for worker in workers}
        targets |= {("failed", group) for group in groups}
        lists: dict[str, list[str]] = {}
        self.indexes(sorted(targets), lists)
        self._failed_lists(lists, failed_jobs)
        self._run_counts()

    def _run_counts(self) -> None:
        """Each run's job list, and each run whose kept counts differ from its jobs (one recount
        per run, in the engine; a page of runs in one round trip)."""
        offset = 0
        while True:
            records = as_list(self.call("runs", "", offset, self.page))
            run_ids = [str(as_dict(record).get("id") or "") for record in records]
            self.indexes(("run-jobs", run_id) for run_id in run_ids)
            pipe = self.engine.pipeline()
            for run_id in run_ids:
                # A read (run.counts), so a deep check works where writes are refused.
                pipe.call("run.counts", run_id, now=self.at)
            for run_id, reply in zip(run_ids, pipe.execute() if run_ids else [], strict=True):
                if isinstance(reply, Exception):
                    raise reply
                self.checked["runs"] += 1
                if as_bool(as_dict(reply).get("drifted")):
                    detail = f"the counts kept for run {run_id} differ from a count of its jobs"
                    self.add(
                        [{"kind": "run-counts", "index": "run", "name": run_id, "detail": detail}]
                    )
            if len(records) < self.page:
                return
            offset += self.page

    def _scan(
        self, targets: set[tuple[str, str]], workers: set[str], groups: set[str]
    ) -> Iterator[list[str]]:
        """SCAN the namespace once: jids come back in batches, each once (a job's hash and its
        history or dependency keys may come in different pages), index names are collected."""
        prefix = self.engine.key_prefix
        seen: set[str] = set()
        batch: list[str] = []
        for key in self._keys(_glob_escape(prefix) + "*"):
            self.checked["keys"] += 1
            rest = str(key)[len(prefix) :]
            name = self._classify(rest, targets, workers, groups)
            if name is None or name in seen:
                continue
            seen.add(name)
            batch.append(name)
            if len(batch) >= self.page:
                yield batch
                batch = []
        if batch:
            yield batch

    def _keys(self, pattern: str) -> Iterator[str]:
        """SCAN's keys; a refused SCAN (an ACL without it) is a fault naming it."""
        try:
            # On a cluster only the master owning the namespace's slot has its keys.
            yield from self.engine.route.target().scan_iter(match=pattern, count=self.page)
        except redis.RedisError as error:
            fault = self.engine.fault(error, "scan")
            if fault is error:
                raise
            raise fault from error

    def _classify(
        self, rest: str, targets: set[tuple[str, str]], workers: set[str], groups: set[str]
    ) -> str | None:
        """Note an index key's name; return the jid of a job key (None for other keys)."""
        found: str | None = None
        if match := _JOB_KEY.match(rest):
            found = match["jid"]
        elif match := _QUEUE_KEY.match(rest):
            if _valid_id(match["name"]):
                targets.add((match["index"], match["name"]))
                return None
        elif match := _WORKER_KEY.match(rest):
            if _valid_id(match["name"]):
                workers.add(match["name"])
                return None
        elif match := _FAILED_KEY.match(rest):
            if _valid_id(match["name"]):
                groups.add(match["name"])
                return None
        elif match := _TAG_KEY.match(rest):
            if _valid_id(match["name"]):
                targets.add(("tag", match["name"]))
                return None
        else:
            return None
        if found is None or not _valid_jid(found):
            self.checked["unaddressable"] += 1
            return None
        return found

    def _failed_lists(
        self, lists: dict[str, list[str]], failed_jobs: list[tuple[str, str]]
    ) -> None:
        """Failed jobs their group's list lacks, and jobs a list names twice (both confirmed);
        an entry that is no jid is a bad-id of its own, however often it is there."""
        lists = {group: [j for j in jids if _valid_jid(j)] for group, jids in lists.items()}
        members = {group: set(jids) for group, jids in lists.items()}
        for jid, group in failed_jobs:
            if jid not in members.get(group, ()):
                finding = Finding(
                    "unindexed",
                    jid,
                    "job",
                    "",
                    f"the job is failed in group {group}, but its group's list does not name it",
                )
                if self.confirmed(finding):
                    self.found.setdefault(finding.key, finding)
        for group, jids in lists.items():
            for jid, count in Counter(jids).items():
                if count > 1:
                    finding = Finding(
                        "duplicate-entry",
                        jid,
                        "failed",
                        group,
                        f"the failed list names the job {count} times",
                    )
                    if self.confirmed(finding):
                        self.found.setdefault(finding.key, finding)

    # -- repairing ----------------------------------------------------------------------------

    def repair(self, findings: Sequence[Finding]) -> list[Repair]:
        """One ``doctor.repair`` call per finding (pipelined a page at a time, in order)."""
        out: list[Repair] = []
        for start in range(0, len(findings), self.page):
            chunk = findings[start : start + self.page]
            pipe = self.engine.pipeline()
            for f in chunk:
                pipe.call("doctor.repair", f.kind, f.index, f.name, f.jid, now=self.at)
            for finding, reply in zip(chunk, pipe.execute(), strict=True):
                if isinstance(reply, EngineError):
                    out.append(Repair(finding, "error", str(reply)))
                elif isinstance(reply, Exception):
                    raise reply
                else:
                    done = as_dict(reply)
                    out.append(
                        Repair(finding, str(done.get("status")), str(done.get("action") or ""))
                    )
        return out


__all__ = [
    "KINDS",
    "MEANINGS",
    "PAGE",
    "Finding",
    "Repair",
    "Report",
    "ScheduledCheck",
    "check",
    "deep_check",
    "light_check",
]
