"""The fault-injection harness: a private server, a realistic load, worker processes, scheduler
services, faults, and the reliability properties (numbered below) checked afterwards.

One :class:`Harness` runs one scenario (see :mod:`chaos_scenarios`):

1. starts its own embedded server (append-only file, ``appendfsync always``) in a temp folder;
2. starts ``size.workers`` worker processes (:mod:`chaos_worker`) and ``services`` scheduler
   services (``python -m scheduler``), restarting any that die;
3. submits ``size.runs`` flow runs (chains, diamonds, fan-outs, a flow with a flaky step, a
   failing step, a blocked dependent and an ``all_done`` cleanup) and registers waves of cron
   schedules with a backlog of missed ticks, in the services' folder and source, that the
   services must fire or skip;
4. runs the scenario's fault injector next to the load;
5. waits (polled, with a deadline) until no schedule has a tick due, stops the services, waits
   until nothing is waiting, running or scheduled, stops everything, and checks:

   1. nothing lost: every accepted job is complete, failed with a group and a message, or
      blocked by a failed dependency (1);
   2. nothing invented: every run in the jobs' log belongs to an accepted job (2);
   3. every duplicate run is explained by a dead worker, a server restart or an expired lock,
      with evidence (the fault log, or the engine's ``timed-out`` history entry) (3);
   4. two runs of one job overlap only after the first one's lock expired, and the result the
      engine kept comes from the last lock holder (stale completes were refused) (4);
   5. a dependent was popped only after its dependencies were done; the dependents of a failed
      job never ran unless their trigger rule says so (5);
   6. every job is in exactly the one index its hash's state names, and every index entry has a
      job in that state (6);
   7. jobs interrupted by a fault ran again within (retries + 1) x (lock + grace) (7);
   8. every tick of every schedule, from its first to the last one due before the services
      stopped, was fired once or recorded as skipped with a reason, and none was fired twice
      (8).

Every wait is a polled condition with a deadline. Faults only ever hit processes this harness
started, and the server listens on a unix socket only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from chaos_tasks import LOG_ENV

from flows.expand.jobs import JobSpec, expand
from flows.runs.build import assemble_run
from flows.runs.service_source import FlowsSource
from flows.runs.submit import submit
from flows.validation.validate import load_flow
from scheduler.cron import missed_ticks, next_fire
from scheduler.embedded import EmbeddedServer
from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError
from scheduler.service.scanning import default_origin
from scheduler.service.schedules import Schedules

HERE = Path(__file__).resolve().parent
QUEUE = "chaos"
#: The skip reasons a catch-up policy gives (scheduler.cron.plan_catchup); any other is a fault.
POLICY_SKIPS = ("catch-up policy", "outside catch-up window", "max_runs", "catch-up cap")
TRANSIENT = (redis.ConnectionError, redis.TimeoutError)
FINAL = ("complete", "failed")


# -- sizes and records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """How big a scenario is. ``short`` fits CI; ``long`` is the full size."""

    runs: int = 40
    workers: int = 4
    threads: int = 4
    submit_seconds: float = 6.0
    fault_seconds: float = 8.0
    lock: float = 2.0
    grace: float = 1.0
    job_ms: tuple[int, int] = (50, 300)
    waves: int = 3
    wave_every: float = 2.0
    schedules_per_wave: int = 4
    backlog_minutes: int = 8
    retries: int = 9
    drain_timeout: float = 120.0


SHORT = Size()
LONG = Size(
    runs=600,
    workers=6,
    threads=6,
    submit_seconds=40.0,
    fault_seconds=60.0,
    lock=3.0,
    grace=1.0,
    job_ms=(30, 300),
    waves=10,
    wave_every=5.0,
    schedules_per_wave=6,
    backlog_minutes=30,
    drain_timeout=600.0,
)


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``kind`` (kill-worker, pause-worker, kill-server, pause-server,
    kill-scheduler, flush-scripts, flush-functions, ...), its target, and when (wall clock)."""

    kind: str
    target: str
    start: float
    end: float


@dataclass(frozen=True)
class Run:
    """One run of one job, from the jobs' own log."""

    jid: str
    worker: str
    attempt: int
    nonce: str
    start: float
    end: float | None
    outcome: str | None


@dataclass
class Report:
    """What a scenario did, and every invariant it broke (``violations``: must be empty)."""

    scenario: str
    mode: str
    seconds: float = 0.0
    accepted: int = 0
    completed: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    blocked: int = 0
    runs: int = 0
    duplicates: Counter[str] = field(default_factory=Counter)
    overlaps: int = 0
    lost: int = 0
    ticks_expected: int = 0
    ticks_fired: int = 0
    ticks_skipped: Counter[str] = field(default_factory=Counter)
    ticks_duplicated: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    recovery: float = 0.0
    recovery_bound: float = 0.0
    stale_refused: int = 0
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def violate(self, message: str) -> None:
        self.violations.append(message)

    @property
    def ok(self) -> bool:
        return not self.violations


# -- flows ---------------------------------------------------------------------------------------


def _step(name: str, ms: int, needs: list[str] | None = None, **extra: Any) -> str:
    data = {"ms": ms, **{k: v for k, v in extra.items() if k in ("fail", "i")}}
    parts = [f"job: chaos_tasks.work, with: {json.dumps(data)}"]
    if needs:
        parts.append(f"needs: [{', '.join(needs)}]")
    if "trigger_rule" in extra:
        parts.append(f"trigger_rule: {extra['trigger_rule']}")
    if "foreach" in extra:
        parts.append(f"foreach: {extra['foreach']}")
    return f"  {name}: {{{', '.join(parts)}}}"


def flow_files(size: Size, rng: random.Random) -> dict[str, str]:
    """The manual flows: chain, diamond, fan-out, and one with a flaky, a failing, a blocked and
    an ``all_done`` step."""

    def ms() -> int:
        return rng.randint(*size.job_ms)

    head = (
        "version: 1\nname: {name}\nqueue: " + QUEUE + "\ndefaults:\n"
        f"  retry: {{attempts: {size.retries + 1}, backoff: fixed, delay: 0.2, jitter: 0}}\n"
        "steps:\n"
    )
    chain = [_step(f"s{i}", ms(), [f"s{i - 1}"] if i else None) for i in range(5)]
    diamond = [
        _step("a", ms()),
        _step("b", ms(), ["a"]),
        _step("c", ms(), ["a"]),
        _step("e", ms(), ["a"]),
        _step("d", ms(), ["b", "c", "e"]),
    ]
    fanout = [
        _step("a", ms()),
        _step("fan", ms(), ["a"], foreach="{items: [0, 1, 2, 3, 4, 5, 6, 7], as: i}"),
        _step("join", ms(), ["fan"]),
    ]
    mixed = [
        _step("a", ms()),
        _step("flaky", ms(), ["a"], fail="first"),
        _step("bad", ms(), ["a"], fail="always"),
        _step("blocked", ms(), ["bad"]),
        _step("cleanup", ms(), ["bad", "flaky"], trigger_rule="all_done"),
    ]
    return {
        name: head.replace("{name}", name) + "\n".join(steps) + "\n"
        for name, steps in (
            ("chain", chain),
            ("diamond", diamond),
            ("fanout", fanout),
            ("mixed", mixed),
        )
    }


def schedule_file(name: str, policy: str) -> str:
    """A flow fired every minute with catch-up ``policy`` over a 2-hour window.

    ``all`` gets ``max_runs`` too, so a service's catch-up stays bounded.
    """
    max_runs = ", max_runs: 500" if policy == "all" else ""
    return (
        f"version: 1\nname: {name}\nqueue: {QUEUE}\n"
        "schedule:\n"
        '  cron: "* * * * *"\n'
        f"  catchup: {{policy: {policy}, window: 2h{max_runs}}}\n"
        "  overlap: allow\n"
        "defaults: {retry: {attempts: 10, backoff: fixed, delay: 0.2, jitter: 0}}\n"
        "steps:\n"
        '  t: {job: chaos_tasks.work, with: {"ms": 20}}\n'
    )


# -- processes -----------------------------------------------------------------------------------


@dataclass
class Proc:
    """A child process the harness supervises (a worker or a scheduler service)."""

    kind: str
    slot: int
    generation: int
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class Harness:
    """Runs one scenario; see the module doc. Use as a context manager (cleans up always)."""

    def __init__(
        self,
        scenario: str,
        size: Size,
        *,
        mode: str = "short",
        services: int = 1,
        skews: tuple[float, ...] = (),
        seed: int = 0,
        keep: bool = False,
    ) -> None:
        self.scenario = scenario
        self.size = size
        self.mode = mode
        self.services_wanted = services
        self.skews = skews
        # Reproducible per scenario (str hashes are salted per process; CRC32 is not).
        self.rng = random.Random(seed or zlib.crc32(scenario.encode()))
        self.keep = keep
        self.dir = Path(tempfile.mkdtemp(prefix=f"chaos-{scenario}-"))
        self.log_path = self.dir / "jobs.log"
        self.server = EmbeddedServer(self.dir / "server", appendfsync="always")
        self.faults: list[Fault] = []
        self.report = Report(scenario, mode)
        self.accepted: dict[str, JobSpec | None] = {}
        self.schedules: dict[str, float] = {}  # name -> first next after registration
        self.procs: dict[tuple[str, int], Proc] = {}
        self.stopping = threading.Event()
        self.supervise = threading.Event()
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []
        self.snapshots: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._client: Client | None = None
        self.flows_dir = self.dir / "flows"
        self.sched_dir = self.dir / "sched"  # the services' folder: the waves' files
        #: Server time by which every due tick was fired or skipped, read before the services
        #: stop (or at their stop, when they never caught up): the checker holds them to it (8).
        self.ticks_horizon = 0.0
        for folder in (self.flows_dir, self.sched_dir):
            folder.mkdir()

    # -- lifetime --------------------------------------------------------------------------

    def __enter__(self) -> Harness:
        self.server.start()
        client = self.client
        client.config["heartbeat"] = self.size.lock
        client.config["grace-period"] = self.size.grace
        client.config["max-job-history"] = 1000
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.supervise.clear()
        for thread in self.threads:
            thread.join(timeout=30)
        for proc in list(self.procs.values()):
            self._terminate(proc, kill=True)
        with contextlib.suppress(Exception):
            self.server.start()  # a scenario may have left it stopped or paused
        self._resume_server()
        with contextlib.suppress(Exception):
            self.server.stop()
        if self._client is not None:
            self._client.close()
        # A failed scenario keeps its folder (jobs' log, every process's log, the server's data).
        if not self.keep and self.report.ok and exc[0] is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.server.url)
        return self._client

    def server_pid(self) -> int:
        pid = self.client.redis.info("server")["process_id"]
        return int(pid)

    def _resume_server(self) -> None:
        pid = self.server._server_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def record(self, kind: str, target: str, start: float, end: float | None = None) -> None:
        with self._lock:
            self.faults.append(Fault(kind, target, start, start if end is None else end))

    def background(self, name: str, target: Callable[[], None]) -> None:
        """Run ``target`` on a thread; an exception in it fails the scenario."""

        def guarded() -> None:
            try:
                target()
            except Exception as error:
                self.errors.append(f"{name}: {type(error).__name__}: {error}")

        thread = threading.Thread(target=guarded, name=f"chaos-{name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    # -- processes -------------------------------------------------------------------------

    def _env(self, skew: float = 0.0) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWS_")}
        env["FLOWS_REDIS_URL"] = self.server.url
        env[LOG_ENV] = str(self.log_path)
        env["FLOWS_CHAOS_SKEW"] = repr(skew)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
        return env

    def _spawn(self, kind: str, slot: int, generation: int) -> Proc:
        name = f"chaos-{kind[0]}{slot}.{generation}"
        log = self.dir / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        if kind == "worker":
            command = [
                sys.executable,
                str(HERE / "chaos_worker.py"),
                "-q",
                QUEUE,
                "--threads",
                str(self.size.threads),
                "--name",
                name,
                "--poll-interval",
                "0.5",
                "--shutdown-grace",
                "2",
            ]
            skew = self.skews[slot % len(self.skews)] if self.skews else 0.0
        else:
            command = [
                sys.executable,
                "-m",
                "scheduler",
                "--flows-dir",
                str(self.sched_dir),
                "--id",
                name,
                "--tick-interval",
                "0.2",
                "--scan-interval",
                "2",
                "--housekeeping-interval",
                "0.5",
            ]
            skew = 0.0
        with open(log, "ab") as out:
            process = subprocess.Popen(
                command,
                env=self._env(skew),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(kind, slot, generation, name, process, log)
        self.procs[(kind, slot)] = proc
        return proc

    def start_processes(self) -> None:
        for slot in range(self.size.workers):
            self._spawn("worker", slot, 0)
        for slot in range(self.services_wanted):
            self._spawn("scheduler", slot, 0)
        self.supervise.set()
        self.background("supervisor", self._supervise)
        names = {p.name for p in self.processes("worker")}

        def registered() -> bool:
            return names <= {str(w["name"]) for w in self.client.workers.counts()}

        self.wait_for(registered, 60.0, "the workers to start")

    def busy_workers(self) -> list[Proc]:
        """Live worker processes holding at least one job (all live ones if none does)."""
        live = self.processes("worker")
        try:
            busy = [p for p in live if self.client.workers.jobs(p.name)["jobs"]]
        except (*TRANSIENT, redis.BusyLoadingError):
            busy = []
        return busy or live

    def _supervise(self) -> None:
        """Start again any child that died (killed by a fault, or crashed)."""
        while not self.stopping.wait(0.1):
            if not self.supervise.is_set():
                continue
            for proc in list(self.procs.values()):
                if proc.process.poll() is not None and self.supervise.is_set():
                    self._spawn(proc.kind, proc.slot, proc.generation + 1)

    def processes(self, kind: str) -> list[Proc]:
        return [p for p in self.procs.values() if p.kind == kind and p.process.poll() is None]

    def _terminate(self, proc: Proc, *, kill: bool = False) -> None:
        if proc.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.process.pid, signal.SIGCONT)
            proc.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.process.kill()
            proc.process.wait(timeout=30)

    def stop_kind(self, kind: str) -> None:
        """SIGTERM every child of ``kind`` and wait for it (no restarts from here on)."""
        for proc in list(self.procs.values()):
            if proc.kind == kind:
                del self.procs[(proc.kind, proc.slot)]
                self._terminate(proc)

    # -- load ------------------------------------------------------------------------------

    def start_load(self, waves: list[dict[Path, str]]) -> None:
        for name, text in flow_files(self.size, self.rng).items():
            (self.flows_dir / f"{name}.yaml").write_text(text)
        self.background("submitter", self._submit_all)
        self.background("waves", lambda: self._register_waves(waves))

    def retrying(self, what: Callable[[], Any], deadline: float = 120.0) -> Any:
        """``what()``, tried again while the server is unreachable (restarting, paused)."""
        end = time.monotonic() + deadline
        while True:
            try:
                return what()
            except (*TRANSIENT, redis.BusyLoadingError):
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)

    def _submit_all(self) -> None:
        flows = [load_flow(path) for path in sorted(self.flows_dir.glob("*.yaml"))]
        logical = datetime.now(UTC)
        pause = self.size.submit_seconds / max(1, self.size.runs)
        client = Client(self.server.url)
        try:
            for i in range(self.size.runs):
                if self.stopping.is_set():
                    return
                flow = flows[i % len(flows)]
                run_id = f"{flow.name}-chaos-{i:05d}"
                requests = expand(
                    flow, run_id=run_id, logical_time=logical, flow_dir=self.flows_dir
                )
                # Idempotent: a submission whose reply was lost is simply sent again.
                self.retrying(
                    lambda f=flow, r=run_id, q=requests: submit(
                        client, assemble_run(r, f.name, q, params={})
                    )
                )
                with self._lock:
                    for request in requests:
                        self.accepted[request.jid] = request
                time.sleep(pause)
        finally:
            client.close()

    def _wave_files(self) -> list[dict[Path, str]]:
        """Each wave's files in the services' folder (path -> the text it gets in its wave),
        there from before the first service starts as files that do not validate.

        The waves are registered as the services' own source (a service fires no other
        source's) from ``backlog_minutes`` ago, so no service may register one from its now
        (no backlog: the file must not validate before its wave), nor unregister one (a
        registration whose file is missing is one whose file went). A file that does not
        validate keeps whatever is registered from its path, and is in every listing.
        """
        waves = []
        for wave in range(self.size.waves):
            texts: dict[Path, str] = {}
            for k in range(self.size.schedules_per_wave):
                policy = ("all", "all", "latest", "none")[k % 4]
                name = f"tick-w{wave}-{k}-{policy}"
                path = self.sched_dir / f"{name}.yaml"
                path.write_text(f"version: 1\nname: {name}\nsteps: not yet its wave\n")
                texts[path] = schedule_file(name, policy)
            waves.append(texts)
        return waves

    def _register_waves(self, waves: list[dict[Path, str]]) -> None:
        """Every ``wave_every`` seconds a wave: its schedules registered from the past, then
        its files replaced by the ones registered."""
        client = Client(self.server.url)
        source = FlowsSource()
        schedules = Schedules(client)
        origin = default_origin(self.sched_dir)
        try:
            for texts in waves:
                if self.stopping.is_set():
                    return
                now = self.retrying(lambda: _server_time(client))
                backdated = now - self.size.backlog_minutes * 60
                for path, text in texts.items():
                    loaded = source.load(path, text, backdated)
                    assert loaded is not None, f"{path} has no schedule"
                    definition = replace(loaded, origin=origin, path=path.name)
                    outcome = self.retrying(
                        lambda d=definition, b=backdated: schedules.register(d, b)
                    )
                    # 'unchanged': a retry after a reply lost to a fault found it registered.
                    if outcome not in ("registered", "unchanged"):
                        raise AssertionError(f"schedule {definition.name}: {outcome}")
                    self.schedules[definition.name] = next_fire(definition.schedule, backdated)
                    _write_atomically(path, text)
                self.stopping.wait(self.size.wave_every)
        finally:
            client.close()

    def ticks_caught_up(self) -> bool:
        """Whether no wave's schedule has a tick due; if so, now is the ticks' horizon."""
        schedules = Schedules(self.client)
        now = _server_time(self.client)
        for name in list(self.schedules):
            registration = schedules.get(name, skips=0)
            if registration is None or (registration.next or math.inf) <= now:
                return False
        self.ticks_horizon = now
        return True

    # -- waiting ---------------------------------------------------------------------------

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str) -> bool:
        """Poll ``done`` until true or ``timeout``; a miss is reported, not raised."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if done():
                    return True
            except (*TRANSIENT, redis.BusyLoadingError):
                pass
            time.sleep(0.25)
        self.report.notes.append(f"gave up waiting for {what} after {timeout:g}s")
        return False

    def counts(self) -> dict[str, int]:
        reply = self.client.queues[QUEUE].counts()
        return {k: int(v) for k, v in reply.items() if isinstance(v, int | float)}

    def drained(self) -> bool:
        counts = self.counts()
        return not any(counts.get(k, 0) for k in ("waiting", "running", "scheduled", "stalled"))

    def wait_threads(self, names: tuple[str, ...], timeout: float) -> None:
        for thread in self.threads:
            if thread.name.removeprefix("chaos-") in names:
                thread.join(timeout=timeout)

    # -- the whole scenario ----------------------------------------------------------------

    def run(self, inject: Callable[[Harness], None] | None = None) -> Report:
        """Load, faults, drain, stop, check: the report (its ``violations`` must be empty)."""
        started = time.monotonic()
        phases: list[str] = []

        def phase(name: str) -> None:
            phases.append(f"{name} {time.monotonic() - started:.0f}s")

        waves = self._wave_files()  # before any service scans the folder
        self.start_processes()
        phase("workers up")
        self.start_load(waves)
        if inject is not None:
            self.background("faults", lambda: inject(self))
        self.wait_threads(("submitter", "waves", "faults"), self.size.drain_timeout)
        phase("load and faults done")
        if not self.wait_for(self.ticks_caught_up, self.size.drain_timeout, "the due ticks"):
            self.ticks_horizon = self.retrying(lambda: _server_time(self.client))
        phase("ticks handled")
        self.supervise.clear()
        self.stop_kind("scheduler")  # ticks are counted against the final scores
        self._resume_server()
        phase("services stopped")
        stable = [0]

        def quiet() -> bool:
            stable[0] = stable[0] + 1 if self.drained() else 0
            return stable[0] >= 3

        self.wait_for(quiet, self.size.drain_timeout, "the jobs to drain")
        phase("drained")
        self.stop_kind("worker")
        phase("workers stopped")
        self.report.seconds = time.monotonic() - started
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)
        self.report.violations += [f"harness thread {e}" for e in self.errors]
        Checker(self).check()
        phase("checked")
        self.report.notes.append("phases: " + ", ".join(phases))
        if not self.report.ok or self.keep:
            self.report.notes.append(f"folder kept: {self.dir}")
        return self.report


def _server_time(client: Client) -> float:
    seconds, micros = client.redis.time()
    return float(seconds) + float(micros) / 1e6


def _write_atomically(path: Path, text: str) -> None:
    """A scan reads the old file or the new one, never half of one (the temp file is hidden
    from scans)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


# -- checking ------------------------------------------------------------------------------------


def _batches(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def read_log(path: Path) -> dict[str, list[Run]]:
    """The jobs' log as runs per jid, in start order."""
    starts: dict[str, dict[str, Any]] = {}
    ends: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            (starts if record["e"] == "start" else ends)[record["n"]] = record
    runs: dict[str, list[Run]] = defaultdict(list)
    for nonce, s in starts.items():
        e = ends.get(nonce)
        runs[s["jid"]].append(
            Run(
                s["jid"],
                s["w"],
                int(s["a"]),
                nonce,
                float(s["t"]),
                None if e is None else float(e["t"]),
                None if e is None else str(e["o"]),
            )
        )
    for jid in runs:
        runs[jid].sort(key=lambda r: r.start)
    return runs


def job_result(job: dict[str, Any]) -> Any:
    """A job's result, decoded (the engine's job JSON carries it as JSON text)."""
    result = job.get("result")
    if isinstance(result, str) and result:
        with contextlib.suppress(ValueError):
            return json.loads(result)
    return result


def _history(job: dict[str, Any], what: str) -> list[dict[str, Any]]:
    history = job.get("history") or []
    return [h for h in history if isinstance(h, dict) and h.get("what") == what]


class Checker:
    """The invariants, from the engine's state, the jobs' log and the fault log."""

    def __init__(self, harness: Harness) -> None:
        self.h = harness
        self.report = harness.report
        self.client = harness.client
        self.jobs: dict[str, dict[str, Any]] = {}

    def check(self) -> None:
        h = self.h
        self._accept_scheduled_runs()
        self._load_jobs()
        runs = read_log(h.log_path)
        self.report.accepted = len(h.accepted)
        self.report.runs = sum(len(r) for r in runs.values())
        self.report.faults = Counter(f.kind for f in h.faults)
        self._final_states()
        self._invented(runs)
        self._duplicates(runs)
        self._completions(runs)
        self._dependencies()
        self._indexes()
        self._ticks()
        self._snapshots()
        self.report.stale_refused = _count_in_logs(h.dir / "logs", "lock lost, outcome")

    # -- load ------------------------------------------------------------------------------

    def _accept_scheduled_runs(self) -> None:
        """The jobs of runs the services fired were accepted too (run records name them)."""
        records = json.loads(self.client.engine.call("runs", "", 0, 100_000))
        for record in records if isinstance(records, list) else []:
            if not str(record.get("flow", "")).startswith("tick-"):
                continue
            run = json.loads(self.client.engine.call("run.get", record["id"]))
            for jid in run.get("jids") or []:
                self.h.accepted.setdefault(jid, None)

    def _load_jobs(self) -> None:
        for batch in _batches(sorted(self.h.accepted)):
            for raw in json.loads(self.client.engine.call("multiget", *batch) or "[]") or []:
                self.jobs[raw["jid"]] = raw

    # -- invariants ------------------------------------------------------------------------

    def _blocked(self, jid: str, seen: set[str] | None = None) -> bool:
        """Whether ``jid`` waits for good: some dependency (transitively) failed."""
        request = self.h.accepted.get(jid)
        if request is None:
            return False
        seen = seen or set()
        for dependency in request.depends:
            if dependency in seen:
                continue
            seen.add(dependency)
            state = self.jobs.get(dependency, {}).get("state")
            if state == "failed" or (state == "depends" and self._blocked(dependency, seen)):
                return True
        return False

    def _final_states(self) -> None:
        lost = []
        for jid in self.h.accepted:
            job = self.jobs.get(jid)
            state = None if job is None else job.get("state")
            if state == "complete":
                self.report.completed += 1
            elif state == "failed" and job is not None:
                failure = job.get("failure") or {}
                group, message = failure.get("group"), failure.get("message")
                self.report.failed[str(group)] += 1
                if not group or not message:
                    self.report.violate(f"{jid} failed without a group and message: {failure}")
            elif state == "depends" and self._blocked(jid):
                self.report.blocked += 1
            else:
                lost.append(f"{jid} ({state})")
        self.report.lost = len(lost)
        if lost:
            self.report.violate(f"{len(lost)} jobs lost (1): {', '.join(lost[:10])}")

    def _invented(self, runs: dict[str, list[Run]]) -> None:
        invented = sorted(set(runs) - set(self.h.accepted))
        if invented:
            self.report.violate(f"runs of jobs never put (2): {invented[:10]}")

    def _explain(self, previous: Run, current: Run, job: dict[str, Any]) -> str | None:
        """Why ``current`` ran again after ``previous``: a cause with evidence, or None."""
        for fault in self.h.faults:
            mine = fault.kind == "kill-worker" and fault.target == previous.worker
            if mine and previous.start - 1 <= fault.start <= current.start:
                return "dead worker"
        for fault in self.h.faults:
            if fault.kind == "kill-server" and previous.start - 1 <= fault.start <= current.start:
                return "server restart"
        timed_out = [
            h
            for h in _history(job, "timed-out")
            if h.get("worker") == previous.worker and float(h["when"]) >= previous.start - 1
        ]
        if timed_out:
            return "expired lock"
        # The worker's liveness lease lapsed (it was paused): its jobs were taken back at once.
        reclaimed = [
            h
            for h in _history(job, "reclaimed")
            if h.get("worker") == previous.worker and float(h["when"]) >= previous.start - 1
        ]
        if reclaimed:
            return "lapsed lease"
        return None

    def _duplicates(self, runs: dict[str, list[Run]]) -> None:
        bound = (self.h.size.retries + 1) * (self.h.size.lock + self.h.size.grace)
        self.report.recovery_bound = bound
        unexplained = []
        for jid, job_runs in runs.items():
            job = self.jobs.get(jid, {})
            for previous, current in itertools.pairwise(job_runs):
                if previous.outcome == "raise":
                    continue  # a retry the job asked for, not a duplicate
                cause = self._explain(previous, current, job)
                if cause is None:
                    # With the job's history, so a failure says what the engine recorded.
                    told = [
                        f"{h.get('what')}@{float(h.get('when', 0)) - previous.start:+.2f}s"
                        f"/{h.get('worker', '')}"
                        for h in job.get("history") or []
                        if isinstance(h, dict)
                    ]
                    unexplained.append(
                        f"{jid}: {previous.worker} then {current.worker}"
                        f" (started {current.start - previous.start:.2f}s apart; history {told})"
                    )
                    continue
                self.report.duplicates[cause] += 1
                if previous.end is not None and previous.end > current.start:
                    self.report.overlaps += 1
                fault_times = [
                    f.end for f in self.h.faults if previous.start - 1 <= f.end <= current.start
                ]
                since = max([previous.start, *fault_times])
                self.report.recovery = max(self.report.recovery, current.start - since)
        if unexplained:
            self.report.violate(
                f"{len(unexplained)} unexplained duplicate runs (3, 4): {unexplained[:10]}"
            )
        if self.report.recovery > bound:
            self.report.violate(
                f"a job interrupted by a fault ran again only after {self.report.recovery:.1f}s,"
                f" more than (retries + 1) x (lock + grace) = {bound:.1f}s (7)"
            )

    def _completions(self, runs: dict[str, list[Run]]) -> None:
        """The result the engine kept is from the last lock holder's last run (4)."""
        for jid, job in self.jobs.items():
            if job.get("state") != "complete" or not _history(job, "done"):
                continue
            result = job_result(job)
            popped = _history(job, "popped")
            if not isinstance(result, dict) or not popped:
                self.report.violate(f"{jid}: complete without a result or a pop")
                continue
            holder = popped[-1].get("worker")
            mine = [r for r in runs.get(jid, []) if r.worker == holder]
            if result.get("w") != holder or not mine or mine[-1].nonce != result.get("n"):
                self.report.violate(
                    f"{jid}: the kept result {result} is not from the last holder {holder} (4)"
                )

    def _dependencies(self) -> None:
        """Dependents popped only after their dependencies were done (5)."""
        for jid, request in self.h.accepted.items():
            if request is None or not request.depends:
                continue
            job = self.jobs.get(jid, {})
            popped = [float(h["when"]) for h in _history(job, "popped")]
            if not popped:
                continue
            first = min(popped)
            for dependency in request.depends:
                dep = self.jobs.get(dependency, {})
                done = [float(h["when"]) for h in _history(dep, "done")]
                failed = [float(h["when"]) for h in _history(dep, "failed")]
                if dep.get("state") == "failed" and request.trigger == "all_success":
                    self.report.violate(f"{jid} ran although {dependency} failed (5)")
                ended = done or failed
                if not ended or first < min(ended):
                    self.report.violate(f"{jid} was popped before {dependency} was done (5)")

    def _indexes(self) -> None:
        """Each job in exactly the index its state names, and no stray index entries (6); and
        the project's consistency check (``flows doctor``, deep) finds nothing to repair."""
        for problem in index_problems(self.client)[:10]:
            self.report.violate(f"index (6): {problem}")
        try:
            from scheduler.engine.doctor import check as doctor_check
        except ImportError:
            self.report.notes.append("consistency check (scheduler.engine.doctor) not available")
            return
        try:
            found = doctor_check(self.client, deep=True)
        except EngineError as error:  # an engine without the doctor commands
            self.report.notes.append(f"consistency check unavailable: {error}")
            return
        if not found.clean:
            self.report.violate(f"the consistency check found (6): {found.summary()[:500]}")
        else:
            self.report.notes.append("flows doctor (deep): clean")

    def _ticks(self) -> None:
        """Every expected tick fired once or skipped with a reason (8)."""
        schedules = Schedules(self.client)
        for name, first in sorted(self.h.schedules.items()):
            registration = schedules.get(name, skips=100)
            if registration is None:
                self.report.violate(f"schedule {name} vanished (8)")
                continue
            final = registration.next
            # Up to the score the services left, and at least to the horizon: a tick due before
            # they stopped that they never handled is missing, not unexpected.
            until = max((final or first) - 1, self.h.ticks_horizon)
            expected = missed_ticks(
                registration.definition.schedule, first - 1, until, limit=100_000
            )
            records = json.loads(self.client.engine.call("runs", name, 0, 100_000))
            ticks = [float(r["tick"]) for r in records if r.get("tick") is not None]
            fired = set(ticks)
            skipped: set[float] = set()
            for skip in registration.skips:
                covered = [t for t in expected if skip.first <= t <= skip.last]
                skipped.update(covered)
                self.report.ticks_skipped[skip.reason] += skip.count or len(covered)
                if not skip.reason.startswith(POLICY_SKIPS):
                    # Valid flows and a healthy engine: only the catch-up policy may skip.
                    self.report.violate(f"schedule {name}: ticks skipped because {skip.reason}")
            both = fired & skipped
            missing = [t for t in expected if t not in fired and t not in skipped]
            self.report.ticks_expected += len(expected)
            self.report.ticks_fired += len(fired)
            # Fires the engine counted beyond the run records (a second record of a tick is
            # counted once, as a record).
            overcounted = max(0, registration.fired - len(ticks))
            duplicated = len(ticks) - len(fired) + len(both) + overcounted
            self.report.ticks_duplicated += duplicated
            if duplicated:
                self.report.violate(f"schedule {name}: {duplicated} ticks fired twice (8)")
            if missing:
                self.report.violate(
                    f"schedule {name}: ticks neither fired nor skipped (8): {missing[:5]}"
                )
            extra = fired - set(expected)
            if extra:
                self.report.violate(
                    f"schedule {name}: unexpected ticks fired (8): {sorted(extra)[:5]}"
                )

    def _snapshots(self) -> None:
        """What was complete before a server kill is still complete with the same result."""
        lost = 0
        for snapshot in self.h.snapshots:
            for jid, nonce in snapshot.items():
                result = job_result(self.jobs.get(jid, {}))
                if not isinstance(result, dict) or result.get("n") != nonce:
                    lost += 1
        if lost:
            self.report.violate(f"{lost} acknowledged completions lost in a server restart (1)")


def _count_in_logs(folder: Path, text: str) -> int:
    if not folder.exists():
        return 0
    return sum(p.read_text(errors="replace").count(text) for p in folder.glob("*.log"))


# -- the index check (6) ---------------------------------------------------------------------------

_STATE_INDEX = {
    "waiting": "work",
    "running": "locks",
    "scheduled": "scheduled",
    "depends": "depends",
}
_SUFFIXES = ("-history", "-dependencies", "-dependents")


def _index_members(client: Client) -> dict[str, set[str]]:
    """jid -> the names of the state indexes it is in."""
    r = client.redis
    prefix = client.prefix
    members: dict[str, set[str]] = defaultdict(set)  # jid -> index names it is in
    queues = r.zrange(f"{prefix}queues", 0, -1)
    for queue in queues:
        for index in ("work", "locks", "scheduled", "depends"):
            for jid in r.zrange(f"{prefix}q:{queue}-{index}", 0, -1):
                members[jid].add(f"{queue}:{index}")
        # The waiting jobs of priority 0 (lua/include/work.lua): work too.
        for jid in r.lrange(f"{prefix}q:{queue}-fifo", 0, -1):
            members[jid].add(f"{queue}:work")
    for jid in r.zrange(f"{prefix}completed", 0, -1):
        members[jid].add("completed")
    for group in r.smembers(f"{prefix}failures"):
        for jid in r.lrange(f"{prefix}f:{group}", 0, -1):
            members[jid].add(f"failed:{group}")
    return members


def index_problems(client: Client) -> list[str]:
    """Jobs whose state disagrees with the indexes they are in, and index entries without such a
    job. An empty list is a namespace a consistency check would find nothing to repair in."""
    r = client.redis
    prefix = client.prefix
    keys = [k for k in r.scan_iter(match=f"{prefix}j:*", count=1000) if not k.endswith(_SUFFIXES)]
    jobs: dict[str, tuple[str, str, str]] = {}
    for batch in _batches(keys):
        pipe = r.pipeline(transaction=False)
        for key in batch:
            pipe.hmget(key, "state", "queue", "failure", "klass")
        for key, (state, queue, failure, klass) in zip(batch, pipe.execute(), strict=True):
            # A job put waiting stores no state (lua/README.md, key layout).
            state = state or ("waiting" if klass else None)
            group = ""
            if state == "failed":
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    group = json.loads(failure or "{}").get("group") or ""
            jobs[key.removeprefix(f"{prefix}j:")] = (state or "", queue or "", group)
    members = _index_members(client)
    problems = []
    for jid, (state, queue, group) in jobs.items():
        if state == "complete":
            want = "completed"
        elif state == "failed":
            want = f"failed:{group}"
        else:
            want = f"{queue}:{_STATE_INDEX.get(state, state)}"
        found = members.pop(jid, set())
        if found != {want}:
            problems.append(f"{jid} is {state} but in {sorted(found) or 'no index'}")
    for jid, found in members.items():
        problems.append(f"{sorted(found)} holds {jid}, which has no job")
    return problems


# -- reporting -----------------------------------------------------------------------------------

COLUMNS = (
    "scenario",
    "accepted",
    "completed",
    "failed (by group)",
    "blocked",
    "duplicates (why)",
    "lost",
    "ticks exp/fired",
    "ticks skipped (why)",
    "tick dups",
    "ok",
    "s",
)


def _fmt_counter(counter: Counter[str], short: Callable[[str], str] = lambda s: s) -> str:
    return ", ".join(f"{short(k)} {v}" for k, v in sorted(counter.items())) or "0"


def _short_reason(reason: str) -> str:
    return reason.replace("catch-up policy ", "").replace(" (superseded by a newer run)", "")


def table(reports: list[Report]) -> str:
    """The scenario reports as a plain-text table (and each report's faults and notes)."""
    rows = [
        (
            r.scenario,
            str(r.accepted),
            str(r.completed),
            _fmt_counter(r.failed),
            str(r.blocked),
            _fmt_counter(r.duplicates),
            str(r.lost),
            f"{r.ticks_expected}/{r.ticks_fired}",
            _fmt_counter(r.ticks_skipped, _short_reason),
            str(r.ticks_duplicated),
            "yes" if r.ok else f"NO ({len(r.violations)})",
            f"{r.seconds:.0f}",
        )
        for r in reports
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(COLUMNS)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    for r in reports:
        extra = [
            f"faults: {_fmt_counter(r.faults)}",
            f"runs logged {r.runs}, overlapping {r.overlaps}, stale outcomes refused "
            f"{r.stale_refused}, slowest recovery {r.recovery:.1f}s "
            f"(bound {r.recovery_bound:.0f}s)",
            *r.notes,
            *(f"VIOLATION {v[:300]}" for v in r.violations[:10]),
            *([f"... {len(r.violations) - 10} more violations"] if len(r.violations) > 10 else []),
        ]
        lines.append(f"  {r.scenario}: " + "; ".join(extra))
    return "\n".join(lines)
