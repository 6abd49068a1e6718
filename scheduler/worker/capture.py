"""Step logs captured in the worker: every line a job writes, stored per job attempt.

What is captured, per slot thread (jobs running side by side in threads never mix their lines):
``print`` and other writes to ``sys.stdout`` / ``sys.stderr`` and to their ``buffer`` (bytes,
decoded as UTF-8 with a replacement character for what is not) (both are replaced, once per
process, by routers that send a thread's writes to the job it runs and everything else where it
went before), the ``logging`` records emitted while the job runs (as far as the logging
configuration lets them through; stream ``log`` with their level), and what a task hands over
with :meth:`JobOutput.line` (the shell task: its process's stdout and stderr). Threads a job
starts itself are not followed.

Every line is masked (:mod:`scheduler.secrets`) before it is queued, with the line before it of
its stream in view: a line whose end may be the start of a secret a line break split is held
back until the next line of its stream, another stream's line or the job's end; else the
shipper's thread lets it go at its first look (every :data:`FLUSH_INTERVAL` seconds) once it was
held :data:`HOLD_LINE` seconds, so at most ``HOLD_LINE + FLUSH_INTERVAL`` (1.2 s) late.

Lines are stored in batches by a :class:`LogShipper`: a ``log.append`` call carries the lines of
every job written since the last, sent every :data:`FLUSH_INTERVAL` seconds, at once when
:data:`FLUSH_LINES` wait, and ahead of a job's outcome (in the same round trip as the batch of
completes, see :mod:`scheduler.worker.batching`), so a job is never reported ended before its
lines are stored. The engine keeps at most ``log-lines`` lines and ``log-bytes`` bytes per
attempt; once an attempt is full (the worker counts its lines against ``log-lines``, read at
start, and the engine says when the bytes ran out), its further lines are only counted, without
a lock or a send: a job writing 100,000 lines sends the budget and no more.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import redis

from scheduler import secrets
from scheduler.engine.errors import EngineError, carrying_given
from scheduler.engine.scripts import Engine, EnginePipeline
from scheduler.secrets import Lines
from scheduler.worker.pipes import MAX_LINE
from scheduler.worker.unsent import Unsent

if TYPE_CHECKING:
    from scheduler.worker.context import JobContext

log = logging.getLogger("flows.worker")

# Seconds between sends while lines wait.
FLUSH_INTERVAL = 0.2
# Lines waiting that make the shipper send at once, and the lines of one engine call.
FLUSH_LINES = 2000
# Lines held unsent at most (the engine is slower than the job): beyond, they are dropped and
# counted, as the engine counts lines beyond an attempt's budget.
MAX_PENDING = 50000
# Characters of a text written at once measured for its bytes in one piece (a 200 MB string
# written by a job is measured piece by piece, never encoded whole).
MEASURE = 1 << 20

# Attempts remembered as full at most (each is forgotten when it ends).
MAX_FULL = 10000
# Seconds a line whose end may be the start of a secret split over two lines is held back,
# waiting for the next line to tell (scheduler.secrets.Lines), before the shipper's thread lets
# it go at its next look: HOLD_LINE + FLUSH_INTERVAL at most.
HOLD_LINE = 1.0

Key = tuple[str, int]  # (jid, attempt)

_current = threading.local()


def _utf8_size(text: str, start: int = 0, end: int | None = None) -> int:
    """The UTF-8 size of ``text[start:end]``, measured :data:`MEASURE` characters at a time."""
    end = len(text) if end is None else end
    size = 0
    for at in range(start, end, MEASURE):
        size += len(text[at : min(at + MEASURE, end)].encode(errors="replace"))
    return size


def _cut(text: str) -> tuple[str, int]:
    """``text`` cut to :data:`MAX_LINE` bytes, and the bytes cut off."""
    if len(text) * 4 <= MAX_LINE:  # cannot be too long, whatever its characters
        return text, 0
    head = text[:MAX_LINE].encode(errors="replace")
    if len(head) <= MAX_LINE and len(text) <= MAX_LINE:
        return text, 0
    kept = head[:MAX_LINE].decode(errors="ignore")
    return kept, len(head) - len(kept.encode(errors="replace")) + _utf8_size(text, MAX_LINE)


class LogShipper:
    """Lines waiting to be stored, by job attempt, and the thread that sends them."""

    def __init__(self, engine: Engine, max_lines: int | None = None) -> None:
        self.engine = engine
        # The engine's `log-lines` (read at start unless given): lines beyond it are only counted.
        self.max_lines = max_lines
        self._pending: dict[Key, list[Any]] = {}  # flat (time, stream, level, text) per line
        self._count = 0
        self._taken: dict[Key, int] = {}  # lines taken per attempt, against max_lines
        self._dropped: dict[Key, int] = {}
        self._full: set[Key] = set()  # attempts the engine keeps no more lines of
        self._ended: set[Key] = set()
        self._holding: set[JobOutput] = set()  # outputs holding a line back (see JobOutput)
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # sends in order: a job's lines never overtake
        self.unsent = Unsent(log, "step log lines", "the lines are lost")
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> bool:
        return bool(self._count or self._dropped)

    def is_full(self, key: Key) -> bool:
        """Whether lines of this attempt are only counted now (read without the lock: a stale
        answer costs one line taken or counted late)."""
        return key in self._full

    def drop(self, key: Key, count: int) -> None:
        """Count lines the attempt wrote after it was full."""
        with self._lock:
            self._dropped[key] = self._dropped.get(key, 0) + count

    def add(self, key: Key, stream: str, text: str, level: str = "", cut: int = 0) -> None:
        """Queue one line of an attempt (cut to the engine's bound; ``cut``: bytes the caller
        cut off already)."""
        text, more = _cut(text)
        if cut or more:  # the engine's level argument carries the bytes cut (commands/log.lua)
            level = f"{level}/{cut + more}"
        with self._lock:
            taken = self._taken.get(key, 0)
            if key in self._full or self._count >= MAX_PENDING or taken == self.max_lines:
                self._dropped[key] = self._dropped.get(key, 0) + 1
                self._full.add(key)
                return
            self._taken[key] = taken + 1
            lines = self._pending.get(key)
            if lines is None:
                lines = self._pending[key] = []
            lines += (time.time(), stream, level, text)
            self._count += 1
            if self._count == FLUSH_LINES:
                self._wake.set()

    def holding(self, output: JobOutput) -> None:
        """``output`` holds a line back: :meth:`_run` lets it go after :data:`HOLD_LINE`."""
        with self._lock:
            self._holding.add(output)

    def _release_held(self, now: float | None = None) -> None:
        """Let the lines held back since :data:`HOLD_LINE` before ``now`` go."""
        with self._lock:
            outputs = list(self._holding)
        now = time.monotonic() if now is None else now
        for output in outputs:
            if not output.release(now - HOLD_LINE):
                with self._lock:
                    if not output.holding:  # held again meanwhile: it stays
                        self._holding.discard(output)

    def ended(self, key: Key) -> None:
        """The attempt writes no more lines: forget it once what it wrote is sent."""
        with self._lock:
            self._ended.add(key)

    # -- sending ---------------------------------------------------------------------------------

    def _take(self) -> tuple[list[tuple[list[Key], list[Any]]], set[Key]]:
        """The waiting lines as ``log.append`` calls (the attempts of each, its arguments), and
        the attempts that ended before them (never to be marked full again)."""
        with self._lock:
            pending, self._pending, self._count = self._pending, {}, 0
            dropped, self._dropped = self._dropped, {}
            ended, self._ended = self._ended, set()
            self._full -= ended
            for key in ended:
                self._taken.pop(key, None)
        calls: list[tuple[list[Key], list[Any]]] = []
        keys: list[Key] = []
        args: list[Any] = []
        lines = 0
        for key in pending.keys() | dropped.keys():
            flat = pending.get(key, [])
            for first in range(0, max(len(flat), 1), FLUSH_LINES * 4):
                chunk = flat[first : first + FLUSH_LINES * 4]
                if lines and lines + len(chunk) // 4 > FLUSH_LINES:
                    calls.append((keys, args))
                    keys, args, lines = [], [], 0
                count = dropped.pop(key, 0) if first + FLUSH_LINES * 4 >= len(flat) else 0
                keys.append(key)
                args += [key[0], key[1], count, len(chunk) // 4, *chunk]
                lines += len(chunk) // 4
        if keys:
            calls.append((keys, args))
        return calls, ended

    def _replied(self, keys: list[Key], reply: Any, ended: set[Key]) -> None:
        if isinstance(reply, Exception):
            for jid in dict.fromkeys(jid for jid, _ in keys):
                self.unsent.failed(jid, reply)
            return
        self.unsent.sent()
        with self._lock:
            if len(self._full) > MAX_FULL:  # attempts that ended while their reply was on its way
                self._full.clear()
            for key, status in zip(keys, json.loads(reply), strict=True):
                if status == "full" and key not in ended and key not in self._ended:
                    self._full.add(key)

    def flush(self) -> None:
        """Send every waiting line now."""
        with self._sending:
            calls, ended = self._take()
            for keys, args in calls:
                try:
                    reply: Any = self.engine.call("log.append", *args)
                except (redis.RedisError, EngineError) as error:
                    reply = error
                self._replied(keys, reply, ended)

    @contextlib.contextmanager
    def into(self, pipe: EnginePipeline) -> Iterator[Queued]:
        """Queue the waiting lines on ``pipe`` (ahead of what the caller adds); the caller hands
        their replies to the yielded object once ``pipe`` was executed. Sends stay in order."""
        with self._sending:
            calls, ended = self._take()
            for _, args in calls:
                pipe.call("log.append", *args)
            yield Queued(self, calls, ended)

    # -- the shipper's thread ---------------------------------------------------------------------

    def start(self) -> None:
        if self.max_lines is None:
            with contextlib.suppress(redis.RedisError, EngineError, TypeError, ValueError):
                self.max_lines = int(self.engine.call("config.get", "log-lines"))
        self._thread = threading.Thread(
            target=carrying_given(self._run), name="flows-logs", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()

    def _run(self) -> None:
        while not self._done.is_set():
            self._wake.wait(FLUSH_INTERVAL)
            self._wake.clear()
            if self._holding:
                self._release_held()
            if self.pending:
                self.flush()


class Queued:
    """Log calls queued on a pipeline: how many, and where their replies go."""

    def __init__(
        self,
        shipper: LogShipper | None = None,
        calls: list[tuple[list[Key], list[Any]]] | None = None,
        ended: set[Key] | None = None,
    ) -> None:
        self.shipper = shipper
        self.calls = calls or []
        self.ended = ended or set()

    def __len__(self) -> int:
        return len(self.calls)

    def replied(self, replies: list[Any] | Exception) -> None:
        if self.shipper is None:
            return
        for i, (keys, _) in enumerate(self.calls):
            reply = replies if isinstance(replies, Exception) else replies[i]
            self.shipper._replied(keys, reply, self.ended)


class JobOutput:
    """The lines of one run of one job (one attempt), handed to the shipper line by line."""

    __slots__ = (
        "_decoders",
        "_dropped",
        "_full",
        "_held_at",
        "_held_by",
        "_held_level",
        "_lines",
        "_lock",
        "_partial",
        "_wrote",
        "key",
        "shipper",
    )

    def __init__(self, shipper: LogShipper, jid: str, attempt: int) -> None:
        self.key: Key = (jid, attempt)
        self.shipper = shipper
        # Per stream, the start of a line still waiting for its newline (at most MAX_LINE
        # characters) and the bytes of it beyond those, only counted.
        self._partial: dict[str, tuple[str, int]] = {}
        self._dropped = 0  # lines written once the attempt was full: counted, sent at close
        self._full = False
        self._wrote = False  # a job that wrote nothing costs the shipper nothing
        # Per stream, bytes written to its buffer: a character may come in two writes.
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        # Per stream, its lines with the one before in view (a secret split over two lines is
        # masked on both sides); the stream of the line held back (one at most), its level,
        # and since when it is held.
        self._lines: dict[str, Lines] = {}
        self._held_by: str | None = None
        self._held_level = ""
        self._held_at = 0.0
        self._lock = threading.Lock()  # the shipper's thread lets a held line go (release)

    def line(self, text: str, stream: str = "stdout", level: str = "", cut: int = 0) -> None:
        """Add one line (without its newline) to the job's log.

        Every line a job writes (print, logging, a shell step's output) passes here, once,
        before it is queued to be sent: the place for whatever must see each line (masking).
        A line whose end may be the start of a secret is held back until the next line of its
        stream (at most :data:`HOLD_LINE` + :data:`FLUSH_INTERVAL` s): together they show
        whether it is one."""
        self._wrote = True
        if not self._lines and not secrets.masking():
            self.shipper.add(self.key, stream, text, level, cut)  # no secret: nothing to mask
            return
        with self._lock:
            held_by = self._held_by
            if held_by is not None and held_by != stream:  # lines keep their order
                self._add(held_by, self._lines[held_by].release(), self._held_level)
                self._held_by = held_by = None
            lines = self._lines.get(stream) or self._lines.setdefault(stream, Lines())
            # A line whose end is cut off is masked at the cut, never held, and no line after
            # it joins it; the line held back is joined with it first, as with any line.
            shown = lines.add_cut(text) if cut else lines.add(text)
            if held_by is not None:
                self._add(stream, shown[:1], self._held_level)
                shown = shown[1:]
            if len(shown) == 1:  # the common case: this line, not held
                self.shipper.add(self.key, stream, shown[0], level, cut)
                self._held_by = None
            elif shown:
                self._add(stream, shown, level)
                self._held_by = None
            else:  # this line is held back now (the one held before went just now)
                self._held_by, self._held_level = stream, level
                self._held_at = time.monotonic()
                self.shipper.holding(self)

    def _add(self, stream: str, shown: list[str], level: str) -> None:
        for text in shown:
            self.shipper.add(self.key, stream, text, level)

    def release(self, before: float = float("inf")) -> bool:
        """Let the lines held back go if held since ``before`` (a monotonic time; default:
        whenever): whether one is still held."""
        with self._lock:
            if self._held_by is None:
                return False
            if self._held_at > before:
                return True
            self._add(self._held_by, self._lines[self._held_by].release(), self._held_level)
            self._held_by = None
            return False

    @property
    def holding(self) -> bool:
        return self._held_by is not None

    def write(self, stream: str, text: str) -> None:
        """Text written to a stream: whole lines are added, the rest waits for its newline
        (bounded: a line longer than the engine keeps is held cut, its rest counted)."""
        if self._full or self.shipper.is_full(self.key):  # a flood: only count, without a lock
            self._full = True
            self._dropped += text.count("\n")
            return
        self._wrote = True
        partial = self._partial
        if stream not in partial and text == "\n":
            self.line("", stream)  # print() writes the newline on its own
            return
        start = 0
        while True:
            end = text.find("\n", start)
            stop = len(text) if end < 0 else end
            head, cut = partial.pop(stream, ("", 0))
            room = MAX_LINE - len(head)
            if stop - start > room:  # keep MAX_LINE characters at most; _cut measures bytes
                cut += _utf8_size(text, start + room, stop)
                head += text[start : start + room]
            else:
                head += text[start:stop]
            if end < 0:
                if head or cut:
                    partial[stream] = (head, cut)
                return
            self.line(head, stream, cut=cut)
            start = end + 1

    def write_bytes(self, stream: str, data: bytes) -> None:
        """Bytes written to a stream's ``buffer``: decoded as UTF-8 (what is not becomes the
        replacement character, as in a shell step's output), then as :meth:`write`."""
        decoder = self._decoders.get(stream)
        if decoder is None:
            decoder = self._decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        if text:
            self.write(stream, text)

    def close(self) -> None:
        for stream, decoder in self._decoders.items():
            rest = decoder.decode(b"", final=True)
            if rest:
                self.write(stream, rest)
        self._decoders.clear()
        if not self._wrote:
            return
        for stream, (rest, cut) in self._partial.items():
            self.line(rest, stream, cut=cut)
        self._partial.clear()
        self.release()
        if self._dropped:
            self.shipper.drop(self.key, self._dropped)
        self.shipper.ended(self.key)


class _Router:
    """Stands in for ``sys.stdout`` / ``sys.stderr``: a slot thread's writes while it runs a job
    go to the job's log, all others to the stream it replaced."""

    def __init__(self, original: TextIO, stream: str) -> None:
        self.original = original
        self.stream = stream
        self.buffer = _BufferRouter(self)

    def write(self, text: str) -> int:
        output: JobOutput | None = getattr(_current, "output", None)
        if output is None:
            return self.original.write(text)
        if output._full:  # a flood past the budget: count its lines here, the cheapest place
            output._dropped += text.count("\n")
        else:
            output.write(self.stream, text)
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for text in lines:
            self.write(text)

    def flush(self) -> None:
        if getattr(_current, "output", None) is None:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty, ...
        return getattr(self.original, name)


class _BufferRouter:
    """Stands in for ``sys.stdout.buffer`` / ``sys.stderr.buffer``: a slot thread's bytes while
    it runs a job go to the job's log (decoded), all others to the buffer of the stream its
    router replaced. Without it, bytes a job wrote there (control sequences included) reached
    the worker's own output as they were."""

    def __init__(self, router: _Router) -> None:
        self.router = router

    def write(self, data: bytes | bytearray | memoryview) -> int:
        output: JobOutput | None = getattr(_current, "output", None)
        if output is None:
            written: int = self.router.original.buffer.write(data)
            return written
        raw = bytes(data)
        if output._full:
            output._dropped += raw.count(b"\n")
        else:
            output.write_bytes(self.router.stream, raw)
        return len(raw)

    def writelines(self, lines: list[bytes]) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if getattr(_current, "output", None) is None:
            self.router.original.buffer.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, raw, ...
        return getattr(self.router.original.buffer, name)


class _RecordHandler(logging.Handler):
    """Adds the logging records a slot thread emits while it runs a job to the job's log."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        output: JobOutput | None = getattr(_current, "output", None)
        if output is None:
            return
        try:
            output.line(self.format(record), "log", record.levelname)
        except Exception:
            self.handleError(record)


_HANDLER = _RecordHandler()
_installed = threading.Lock()


def install() -> None:
    """Route this process's stdout, stderr and logging records through the capture (once)."""
    with _installed:
        if not isinstance(sys.stdout, _Router):
            sys.stdout = _Router(sys.stdout, "stdout")
        if not isinstance(sys.stderr, _Router):
            sys.stderr = _Router(sys.stderr, "stderr")
        root = logging.getLogger()
        if _HANDLER not in root.handlers:
            root.addHandler(_HANDLER)


@contextlib.contextmanager
def capturing(ctx: JobContext, shipper: LogShipper | None) -> Iterator[None]:
    """Capture what the current thread writes while it runs ``ctx``'s job (nothing without a
    shipper)."""
    output = start_capture(ctx, shipper)
    try:
        yield
    finally:
        end_capture(output)


def start_capture(ctx: JobContext, shipper: LogShipper | None) -> JobOutput | None:
    """Capture what the current thread writes from now on as ``ctx``'s job's (nothing without a
    shipper), until :func:`end_capture` of what it returns: :func:`capturing` without a
    generator, for the worker's path to each job's start."""
    if shipper is None:
        return None
    output = JobOutput(shipper, ctx.jid, ctx.log_attempt)
    ctx.output = output
    _current.output = output
    return output


def end_capture(output: JobOutput | None) -> None:
    if output is not None:
        _current.output = None
        output.close()
