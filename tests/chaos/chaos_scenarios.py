"""The chaos scenarios: each a harness configuration and a fault injector.

``run_scenario(name, mode)`` runs one and returns its :class:`~chaos_harness.Report`; ``mode`` is
``short`` (CI) or ``long`` (full size, ``FLOWS_CHAOS=long``). Every injector stops by itself at
the end of the scenario's fault window, and only ever touches processes the harness started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import redis
from chaos_harness import LONG, SHORT, Harness, Report, Size, job_result

from scheduler.engine.client import Client
from scheduler.engine.errors import EngineError

Injector = Callable[[Harness], None]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    inject: Injector | None = None
    services: int = 1
    skews: tuple[float, ...] = ()
    #: More and bigger waves of schedules with missed ticks (the scheduler scenarios).
    busy_schedules: bool = False


def _window(h: Harness) -> Callable[[], bool]:
    """True while the fault window lasts (and the scenario is not stopping)."""
    end = time.monotonic() + h.size.fault_seconds
    return lambda: time.monotonic() < end and not h.stopping.is_set()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def kill_workers(h: Harness) -> None:
    """kill -9 of a random worker process every 1-2 s (the harness starts a fresh one)."""
    going = _window(h)
    h.stopping.wait(1.0)
    while going():
        workers = h.busy_workers()
        if workers:
            victim = h.rng.choice(workers)
            h.record("kill-worker", victim.name, time.time())
            _kill(victim.process.pid)
        h.stopping.wait(h.rng.uniform(1.0, 2.0))


def kill_server(h: Harness) -> None:
    """kill -9 of the server twice, each time restarted from its append-only file."""
    going = _window(h)
    for share in (0.3, 0.65):
        h.stopping.wait(h.size.fault_seconds * share / 2)
        if not going():
            return
        h.snapshots.append(_completed(h))
        pid = h.server_pid()
        start = time.time()
        _kill(pid)
        _wait_gone(pid)
        h.stopping.wait(0.5)
        h.server.start()  # loads the append-only file
        h.record("kill-server", str(pid), start, time.time())


def _completed(h: Harness) -> dict[str, str]:
    """jid -> result nonce of every accepted job complete right now (a durability witness)."""
    jids = sorted(h.accepted)
    out: dict[str, str] = {}
    for i in range(0, len(jids), 500):
        reply = h.client.engine.call("multiget", *jids[i : i + 500])
        for job in json.loads(reply or "[]") or []:
            result = job_result(job)
            if job.get("state") == "complete" and isinstance(result, dict):
                out[job["jid"]] = str(result.get("n"))
    return out


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[-1].split()[0] == "Z":
                return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} did not die")


def pause_server(h: Harness) -> None:
    """Pause the server longer than a lock (lock + grace + 1.5 s), twice: first with SIGSTOP
    (nothing runs, not even its clock-driven jobs), then with ``CLIENT PAUSE ... ALL`` (the
    server runs but executes no client command)."""
    going = _window(h)
    pause = h.size.lock + h.size.grace + 1.5
    for how in ("sigstop", "client-pause"):
        h.stopping.wait(h.size.fault_seconds / 5)
        if not going():
            return
        pid = h.server_pid()
        start = time.time()
        if how == "client-pause":
            h.client.redis.execute_command("CLIENT", "PAUSE", int(pause * 1000), "ALL")
            _wait_unpaused(h, start + pause)
        else:
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(pause)
            finally:
                os.kill(pid, signal.SIGCONT)
        h.record(f"pause-server-{how}", str(pid), start, time.time())


def _wait_unpaused(h: Harness, until: float) -> None:
    """Sleep out a CLIENT PAUSE, then wait for the server to answer again."""
    time.sleep(max(0.0, until - time.time()))
    h.retrying(lambda: h.client.redis.ping())


def pause_workers(h: Harness) -> None:
    """SIGSTOP a random worker past its lock (lock + grace + 1.5 s), then SIGCONT it."""
    going = _window(h)
    pause = h.size.lock + h.size.grace + 1.5
    h.stopping.wait(1.0)
    while going():
        workers = h.busy_workers()
        if workers:
            victim = h.rng.choice(workers)
            start = time.time()
            os.kill(victim.process.pid, signal.SIGSTOP)
            try:
                time.sleep(pause)
            finally:
                os.kill(victim.process.pid, signal.SIGCONT)
            h.record("pause-worker", victim.name, start, time.time())
        h.stopping.wait(h.rng.uniform(0.5, 1.5))


def replay_completes(h: Harness) -> None:
    """Duplicate and replayed completes, heartbeats, retries and fails, all of which must be
    refused without changing the job: as the worker that completed a job (a duplicate complete),
    and as a worker that never held a running job (a replay from nowhere)."""
    going = _window(h)
    client = Client(h.server.url, worker_name="chaos-replayer")
    sent = refused = 0
    try:
        while going():
            with h._lock:
                jids = list(h.accepted)
            sample = h.rng.sample(jids, min(20, len(jids)))
            if not sample:
                h.stopping.wait(0.2)
                continue
            for job in json.loads(client.engine.call("multiget", *sample) or "[]") or []:
                calls = _replays(job)
                if not calls:
                    continue
                key = f"{client.prefix}j:{job['jid']}"
                before = client.redis.hgetall(key)
                for command, args in calls:
                    sent += 1
                    try:
                        client.engine.call(command, *args)
                    except EngineError:
                        refused += 1
                    else:
                        h.report.violate(f"replayed {command} of {job['jid']} accepted (4)")
                if job["state"] == "complete" and client.redis.hgetall(key) != before:
                    h.report.violate(f"a refused replay changed {job['jid']} (4)")
            h.record("replay", f"{len(sample)} jobs", time.time())
            h.stopping.wait(0.05)
    finally:
        client.close()
        h.report.notes.append(f"replayed calls: {sent} sent, {refused} refused")


def _replays(job: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    jid, queue, data = job["jid"], job["queue"], job.get("data") or "{}"
    result = job_result(job)
    if job["state"] == "complete" and isinstance(result, dict):
        worker = result["w"]
        return [
            ("complete", [jid, worker, queue, data]),
            ("complete", [jid, worker, queue, data, "result", '{"replayed": true}']),
            ("heartbeat", [jid, worker]),
            ("retry", [jid, queue, worker, 0]),
            ("fail.held", [jid, worker, "replayed", "a replayed fail"]),
        ]
    if job["state"] == "running":
        ghost = "chaos-ghost"
        return [
            ("complete", [jid, ghost, queue, data]),
            ("heartbeat", [jid, ghost]),
            ("fail.held", [jid, ghost, "replayed", "a replayed fail"]),
        ]
    return []


def flush_scripts(h: Harness) -> None:
    """SCRIPT FLUSH and FUNCTION FLUSH in turn, every 0.3 s: every client reloads the engine."""
    going = _window(h)
    connection = redis.Redis(unix_socket_path=str(h.server.socket_path))
    try:
        turn = 0
        while going():
            kind = ("flush-scripts", "flush-functions")[turn % 2]
            if kind == "flush-scripts":
                connection.script_flush()
            else:
                connection.function_flush()
            h.record(kind, "server", time.time())
            turn += 1
            h.stopping.wait(0.3)
    finally:
        connection.close()


def kill_schedulers(h: Harness) -> None:
    """kill -9 of a random scheduler service every 0.5-1.5 s, while waves of schedules with
    missed ticks keep them busy firing (the harness starts a fresh one each time)."""
    going = _window(h)
    h.stopping.wait(0.5)
    while going():
        services = h.processes("scheduler")
        if services:
            victim = h.rng.choice(services)
            h.record("kill-scheduler", victim.name, time.time())
            _kill(victim.process.pid)
        h.stopping.wait(h.rng.uniform(0.5, 1.5))


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("baseline", "no fault"),
        Scenario("kill-workers", "kill -9 of a random worker every 1-2 s", kill_workers),
        Scenario("kill-server", "kill -9 of the server, restart from its file", kill_server),
        Scenario(
            "pause-server", "server paused longer than a lock (SIGSTOP, CLIENT PAUSE)", pause_server
        ),
        Scenario("pause-workers", "a worker SIGSTOPped past its lock, then resumed", pause_workers),
        Scenario(
            "clock-skew",
            "workers' clocks off by -1h, -7s, +7s, +1h (the server's clock decides)",
            skews=(-3600.0, -7.0, 7.0, 3600.0),
        ),
        Scenario("replayed-completes", "duplicate and replayed completes", replay_completes),
        Scenario(
            "kill-schedulers",
            "kill -9 of scheduler services while they fire",
            kill_schedulers,
            services=2,
            busy_schedules=True,
        ),
        Scenario(
            "three-schedulers", "three scheduler services at once", services=3, busy_schedules=True
        ),
        Scenario("flush-scripts", "SCRIPT FLUSH and FUNCTION FLUSH mid-run", flush_scripts),
    )
}


def size_for(mode: str, busy_schedules: bool = False) -> Size:
    if mode not in ("short", "long"):
        raise ValueError(f"FLOWS_CHAOS must be 'short' or 'long', not {mode!r}")
    size = LONG if mode == "long" else SHORT
    if busy_schedules:
        size = replace(
            size,
            waves=size.waves + 1,
            schedules_per_wave=size.schedules_per_wave * 2,
            backlog_minutes=size.backlog_minutes * 2,
        )
    return size


def run_scenario(name: str, mode: str = "short", *, keep: bool = False) -> Report:
    """Run one scenario and return its report (check ``report.ok``)."""
    scenario = SCENARIOS[name]
    with Harness(
        name,
        size_for(mode, scenario.busy_schedules),
        mode=mode,
        services=scenario.services,
        skews=scenario.skews,
        keep=keep,
    ) as harness:
        report = harness.run(scenario.inject)
        if name == "clock-skew":
            skew_demo(harness, report)
        return report


# -- clock skew with explicit times --------------------------------------------------------------


def skew_demo(h: Harness, report: Report, trials: int = 5) -> None:
    """What a skewed clock does when a client sends its own ``now``, against the default.

    In a namespace of its own (lock 60 s, so nothing here depends on speed): a worker pops a
    job; a second worker whose clock is an hour ahead pops twice. With explicit times it takes
    the live lock away (the first worker's heartbeat is refused); with the server's clock (the
    default) it gets nothing. A job put with a 60 s delay from a clock an hour behind is
    runnable at once; with the server's clock it is scheduled.
    """
    honest = Client(h.server.url, namespace="skew-demo", worker_name="honest")
    skewed = Client(h.server.url, namespace="skew-demo", worker_name="skewed")
    try:
        honest.config["heartbeat"] = 60
        honest.config["grace-period"] = 1
        stolen = {"explicit": 0, "server": 0}
        for explicit in (True, False):
            for _ in range(trials):
                if _steal(honest, skewed, explicit):
                    stolen["explicit" if explicit else "server"] += 1
        early = {"explicit": 0, "server": 0}
        for explicit in (True, False):
            for _ in range(trials):
                now = _now(honest) - 3600 if explicit else ""
                jid = skewed.queues["later"].put("chaos_tasks.work", {}, delay=60, now=now)
                popped = honest.queues["later"].pop(10)  # by the server's clock
                if any(j.jid == jid for j in popped):
                    early["explicit" if explicit else "server"] += 1
                for job in [*popped, honest.jobs[jid]]:
                    with contextlib.suppress(EngineError):
                        job.cancel()
        report.notes.append(
            f"skew demo ({trials} trials each): live locks taken by a clock 1h ahead: "
            f"explicit now {stolen['explicit']}, server clock {stolen['server']}; delayed jobs "
            f"runnable at once from a clock 1h behind: explicit now {early['explicit']}, "
            f"server clock {early['server']}"
        )
        wanted = {"explicit": trials, "server": 0}
        if stolen != wanted or early != wanted:
            report.violate(f"clock skew demo: stolen {stolen}, early {early}")
    finally:
        honest.close()
        skewed.close()


def _now(client: Client) -> float:
    seconds, micros = client.redis.time()
    return float(seconds) + float(micros) / 1e6


def _steal(honest: Client, skewed: Client, explicit: bool) -> bool:
    """One trial: whether the skewed worker took the honest worker's live lock."""
    jid = honest.queues["demo"].put("chaos_tasks.work", {})
    [job] = [j for j in honest.queues["demo"].pop() if j.jid == jid]
    ahead = _now(honest) + 3600
    skewed.queues["demo"].pop(now=ahead if explicit else "")  # the first pop only warns
    taken = skewed.queues["demo"].pop(now=ahead + 2 if explicit else "")
    try:
        job.heartbeat()
        kept = True
    except EngineError:
        kept = False
    for popped in taken:  # hand everything back so the next trial starts clean
        popped.cancel()
    if kept:
        job.complete()
    return any(j.jid == jid for j in taken) or not kept
