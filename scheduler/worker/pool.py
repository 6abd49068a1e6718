"""The supervisor: keeps N worker processes alive (process isolation, the default).

Each child is ``python -m scheduler.worker`` running one :class:`~scheduler.worker.worker.Worker`,
its command line written from the pool's :class:`~scheduler.worker.settings.WorkerSettings`.
A child that dies is started again (with a growing pause if it keeps dying at once). SIGTERM or
SIGINT is passed on to the children, which finish or hand back their jobs; a second signal tells
them to stop at once (:data:`~scheduler.stop_signals.NOW`), a third kills them. The children
take any number of SIGTERM/SIGINT as one request: a signal sent to the whole process group
reaches them as well as this process. With ``burst`` the pool ends when every child has ended
after finding its queues empty.
Children also stop when the supervisor dies without a word (``kill -9``): see
:mod:`scheduler.worker.supervision`. They import job modules from the supervisor's working
directory, then each of ``paths``.
The Redis URL reaches children through the environment, never the command line (no passwords in
process listings).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduler import stop_signals
from scheduler.engine.backoff import EXIT_CONFIG
from scheduler.engine.errors import GIVEN_ENV, given_as, given_now
from scheduler.worker.settings import WorkerSettings
from scheduler.worker.supervision import Lifeline

log = logging.getLogger("flows.worker")


@dataclass
class Child:
    index: int
    process: subprocess.Popen[bytes]
    started: float
    lifeline: Lifeline
    failures: int = 0


#: Worker processes one supervisor keeps at most: a guard against a typo (``--processes 10000``
#: forks until the machine stalls); more processes are more supervisors (``flows worker``).
MAX_PROCESSES = 1024


class WorkerPool:
    """Supervise ``processes`` worker processes, each running ``threads`` jobs at once."""

    def __init__(
        self,
        url: str,
        settings: WorkerSettings | Sequence[str],
        *,
        processes: int = 1,
        namespace: str | None = None,
        **options: Any,
    ) -> None:
        """``settings``: what each child does; or just its queues, with any other
        :class:`~scheduler.worker.settings.WorkerSettings` field as a keyword
        (``WorkerPool(url, ["etl"], threads=4)``). A child's name is ``name.<index>`` when there
        are several (:meth:`~scheduler.worker.settings.WorkerSettings.process_name`); a name
        that suffix makes too long is refused here (a ``SettingError``), before any starts."""
        if not isinstance(url, str):
            raise TypeError(
                f"WorkerPool(): url must be a Redis URL (text), not {type(url).__name__}"
                " (a Client is Worker's first argument)"
            )
        if isinstance(settings, WorkerSettings):
            if options:
                raise TypeError(f"give {', '.join(sorted(options))} in the WorkerSettings")
        else:
            # One text stays one, for the settings to refuse, not a queue per character.
            queues: Any = settings if isinstance(settings, str | bytes) else tuple(settings)
            settings = WorkerSettings(queues=queues, **options)
        # Children start in this working directory, which they put on their import path.
        self.settings = replace(settings, paths=tuple(os.path.abspath(p) for p in settings.paths))
        if processes > MAX_PROCESSES:
            raise ValueError(
                f"processes: {processes} is more than {MAX_PROCESSES}, the most a pool keeps"
            )
        self.settings.check_processes(processes)
        self.url = url
        # How the user gave the URL, where the pool was made: run() may be in another thread.
        self.given = given_now()
        self.processes = max(1, processes)
        self.namespace = namespace
        self._children: dict[int, Child] = {}
        self._stopping = threading.Event()
        self._told = False  # the children were sent SIGTERM (by the main loop only)
        self._now = False  # told to stop at once: no lock, set in a signal handler

    def _command(self, index: int) -> list[str]:
        name = self.settings.process_name(index, self.processes)
        # A child stuck in C code exits, for this pool to start a clean one.
        child = replace(self.settings, name=name, exit_on_stuck=True)
        return [sys.executable, "-m", "scheduler.worker", *child.to_argv()]

    def _spawn(self, index: int, failures: int = 0) -> None:
        env = dict(os.environ, FLOWS_REDIS_URL=self.url, **{GIVEN_ENV: self.given})
        if self.namespace is not None:
            env["FLOWS_NAMESPACE"] = self.namespace
        # The child stops when this process dies, however it dies (worker/supervision.py).
        # Linux sends its parent-death signal when the spawning *thread* ends: spawn from the
        # thread that runs the pool, which lives as long as the children.
        lifeline = Lifeline()
        env.update(lifeline.env)
        env.update(stop_signals.child_env())  # "now" is this process's word alone
        try:
            process = subprocess.Popen(self._command(index), env=env, pass_fds=(lifeline.fd,))
        except BaseException:
            lifeline.close()
            raise
        finally:
            lifeline.started()
        self._children[index] = Child(index, process, time.monotonic(), lifeline, failures)
        log.info("worker process %d started (pid %d)", index, process.pid)

    def run(self) -> int:
        """Run until signalled (or, with burst, until all children are done). Returns 0, 1, or
        :data:`~scheduler.engine.backoff.EXIT_CONFIG` when a process could not work (its
        one-line error says what to fix) and the pool stopped over it.

        Raises :class:`~scheduler.engine.safety.UnsafeServer` before starting any process when the
        server's eviction policy could drop jobs.
        """
        with given_as(self.given):
            self._check_server()
        self._install_signals()
        for index in range(self.processes):
            self._spawn(index)
        status = 0
        while self._children:
            if self._stopping.is_set() or self._now:
                self._stop_children()  # a signal's stop, also of a child started meanwhile
            for index, child in list(self._children.items()):
                code = child.process.poll()
                if code is None:
                    continue
                del self._children[index]
                child.lifeline.close()
                if self._stopping.is_set() or self._now or (self.settings.burst and code == 0):
                    status = status or (0 if code in (0, -signal.SIGTERM) else 1)
                    continue
                if code == EXIT_CONFIG:  # its one-line error says what to fix; waiting won't
                    log.error("worker process %d cannot work (see above); stopping", index)
                    self._stop_children()
                    status = EXIT_CONFIG
                    continue
                # Died on its own: start a fresh one, pausing longer if it keeps dying fast.
                quick = time.monotonic() - child.started < 5
                failures = child.failures + 1 if quick else 0
                log.warning(
                    "worker process %d (pid %d) exited with %s; restarting",
                    index,
                    child.process.pid,
                    code,
                )
                self._stopping.wait(min(30.0, 0.5 * 2**failures) if quick else 0)
                if not (self._stopping.is_set() or self._now):
                    self._spawn(index, failures)
            self._stopping.wait(0.1)
        return status

    def _check_server(self) -> None:
        from scheduler.engine.connections import connect
        from scheduler.engine.safety import check_eviction_policy

        client = connect(self.url)
        try:
            check_eviction_policy(client, who="the worker pool")
        finally:
            client.close()

    def _stop_children(self) -> None:
        """SIGTERM to every child, once (a second would stop them at once). The main loop's
        alone: a child it starts is then either seen here or never started."""
        self._stopping.set()
        if self._told:
            return
        self._told = True
        for child in self._children.values():
            child.process.send_signal(signal.SIGTERM)

    def _install_signals(self) -> None:
        # The first signal only asks (the main loop tells the children); a second tells them to
        # stop at once, a third kills them (a child too stuck to act on the second).
        stop_signals.install(self._on_signal, self._kill_children)

    def _on_signal(self, signum: int) -> None:
        # Said once the request is taken: a second signal from now on stops at once. (Signals
        # do not queue: a second sent before the first was taken is the same one.)
        log.info(
            "worker pool: %s, passed on to its worker processes (%s to stop at once)",
            signal.Signals(signum).name,
            "signal its supervisor again" if stop_signals.supervised() else "again",
        )
        self._stopping.set()

    def _kill_children(self, signum: int, count: int) -> None:
        self._now = True
        for child in list(self._children.values()):
            # Its poll takes its lock only if free: safe in a handler.
            child.process.send_signal(stop_signals.NOW if count == 2 else signal.SIGKILL)
