"""What a job function receives: :class:`JobContext`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.worker.envelope import JobOptions

if TYPE_CHECKING:
    from scheduler.engine.job import Job


class LineSink(Protocol):
    """Where a run's step log lines go: what a context needs of the worker's capture
    (:class:`scheduler.worker.capture.JobOutput`), so the two modules do not import each other."""

    def line(self, text: str, stream: str = "stdout", level: str = "", cut: int = 0) -> None: ...


_MAKING_EVENTS = threading.Lock()


@dataclass
class JobContext:
    """One run of one job.

    ``data`` is the job's data without the worker's envelope (and, in a flow, with upstream
    outputs resolved). ``sandbox`` is an empty directory for this run (its slot's, emptied
    between runs). ``stopped`` (an Event) is set when the worker wants the job to stop (lock
    lost, timeout, shutdown): long-running jobs may poll it, or ``stopping``, or wait on it;
    callbacks registered with :meth:`on_stop` run then (the shell task ends its process group:
    SIGTERM, then SIGKILL after a grace). A stop *now* (``request_stop(..., now=True)``, as on a
    second Ctrl-C) first runs the :meth:`on_kill` callbacks, which end what the job started with
    no grace (the shell task SIGKILLs its process group). Then the worker raises an exception
    inside the job's thread, unless the job set ``interrupt_thread`` to False: it stops on its
    own when told (the shell task does, since an exception raised at any point could land
    between starting a process and registering the callback that kills it).
    """

    job: Job
    data: dict[str, Any]
    options: JobOptions
    sandbox: Path
    stop_reason: str = ""
    thread_id: int | None = None
    interrupt_thread: bool = True
    # Where this run's step log lines go (None: the worker stores none), see log_line.
    output: LineSink | None = None
    _on_stop: list[Callable[[], None]] = field(default_factory=list)
    _on_kill: list[Callable[[], None]] = field(default_factory=list)
    _killed: bool = False
    # Made on first use: most runs are never stopped, and an Event costs more to make than the
    # rest of a job's context (a worker makes one context per job it runs).
    _stopped: threading.Event | None = field(default=None, repr=False)

    @property
    def stopped(self) -> threading.Event:
        """Set when the worker wants the job to stop (see the class's docstring)."""
        event = self._stopped
        if event is None:
            with _MAKING_EVENTS:  # the job's thread and the worker's may both ask first
                if self._stopped is None:
                    self._stopped = threading.Event()
                event = self._stopped
        return event

    @property
    def stopping(self) -> bool:
        """Whether the worker wants the job to stop (``stopped.is_set()``, made cheaper)."""
        return self._stopped is not None and self._stopped.is_set()

    @property
    def jid(self) -> str:
        """The job's id."""
        return self.job.jid

    @property
    def klass(self) -> str:
        """The dotted path the worker resolved to the function running now."""
        return self.job.klass

    @property
    def queue(self) -> str:
        """The queue the job was popped from."""
        return self.job.queue

    @property
    def worker(self) -> str:
        """The name of the worker running the job."""
        return self.job.worker

    @property
    def attempt(self) -> int:
        """1 for the first run, 2 for the next (a retry, or a run after a lost worker), ..."""
        return self.job.retries - self.job.remaining + self.job.lost + 1

    @property
    def log_attempt(self) -> int:
        """The attempt this run's step log is stored under: every start of the job counts (a
        release, a shutdown's hand-back, a resumed run's retry), so runs never share a log."""
        return self.job.runs or self.attempt

    @property
    def envelope(self) -> dict[str, Any]:
        """What the worker itself reads of the job's data (``data._flows``: its timeout, the
        flow run and step it belongs to, ...), kept out of :attr:`data`."""
        return self.options.envelope

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the worker stops this job (at once if it already has)."""
        self._on_stop.append(callback)
        if self.stopped.is_set():
            callback()

    def on_kill(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the worker stops this job now, with no grace (at once if it
        already has)."""
        self._on_kill.append(callback)
        if self._killed:
            callback()

    def request_stop(self, reason: str, *, now: bool = False) -> None:
        """Tell the job to stop (``reason``: ``shutdown``, ``timeout``, a lost lock...) and run
        the :meth:`on_stop` callbacks, once. ``now`` runs the :meth:`on_kill` callbacks first,
        once, a job told to stop already included (a stop being waited for becomes one at
        once); ``stopped`` is set before them, so that the job sees a stop, not a failure, when
        its process dies."""
        first = not self.stopped.is_set()
        if first:
            self.stop_reason = reason
            self.stopped.set()
        if now and not self._killed:
            self._killed = True  # before the callbacks are read: see on_kill
            _run_all(self._on_kill)
        if first:
            _run_all(self._on_stop)

    def heartbeat(self, data: dict[str, Any] | None = None) -> float:
        """Renew the lock now (the worker also does this on its own)."""
        return self.job.heartbeat(data)

    def log_line(self, text: str, stream: str = "stdout", *, cut: int = 0) -> None:
        """Add a line to this attempt's step log (``flows logs``); ``print`` does the same
        from the job's own thread. ``stream``: ``stdout`` or ``stderr``; ``cut``: bytes the
        caller already cut off the line's end."""
        if self.output is not None:
            self.output.line(text, stream, cut=cut)

    def log(self, message: str, **data: Any) -> None:
        """Add a custom entry to the job's history."""
        self.job.log(message, data or None)


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    for callback in list(callbacks):
        with contextlib.suppress(Exception):  # one broken callback must not stop the rest
            callback()
