"""Built-in job functions.

``flows.tasks.shell`` runs a flow's ``run:`` step: data ``{"command": str, "cwd": str | None,
"env": {str: str}}``. The command runs under ``/bin/sh`` in its own process group (so stopping
the job kills everything it started), in ``cwd`` (default: the job's sandbox), with the
environment plus ``env``, ``FLOWS_JID``, ``FLOWS_SANDBOX`` and ``FLOWS_OUTPUT``: a file where the
step may write ``key=value`` lines, which become its outputs (the job's result;
:func:`flows.outputs.parse_output_file` reads them). Exit code 0
completes the job; any other code N fails it in group ``exit-code-N`` (after its retries), with
the tail of the output as the message: the last lines of stderr and stdout in the order they were
read, stderr's kept first (two pipes read by two threads have no order between them, and a slow
stdout reader must not push the error out of the message). Every line the command writes to
stdout or stderr goes to the job's step log as it comes (``flows logs``).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from flows.outputs import FlowsMeta, parse_output_file
from scheduler import secrets
from scheduler.worker import JobContext

OUTPUT_TAIL_LINES = 60
KILL_GRACE_SECONDS = 5.0


class ShellError(Exception):
    """A shell step exited with a non-zero code; ``group`` is ``exit-code-N``."""

    def __init__(self, code: int, tail: str) -> None:
        super().__init__(f"command exited with code {code}\n{tail}")
        self.group = f"exit-code-{code}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


Tail = deque[tuple[int, str]]
"""One stream's last lines, each with its place in the order both streams were read."""


def _read_lines(
    pipe: IO[bytes], stream: str, job: JobContext, tail: Tail, order: Iterator[int]
) -> None:
    """Read ``pipe`` to its end, each line into the job's step log and the stream's tail."""
    with pipe:  # closed even when the job is stopped (no leaked pipe)
        for raw in pipe:
            line = raw.decode(errors="replace").rstrip("\n")
            tail.append((next(order), line))
            job.log_line(line, stream)


def output_tail(stdout: Tail, stderr: Tail, limit: int = OUTPUT_TAIL_LINES) -> str:
    """The last ``limit`` lines of both streams in read order, every stderr line that fits
    kept before stdout's fill the rest."""
    errors = list(stderr)[-limit:]
    room = limit - len(errors)
    kept = errors + (list(stdout)[-room:] if room else [])
    return "\n".join(line for _, line in sorted(kept))


def shell(job: JobContext) -> dict[str, Any]:
    # Stopped through on_stop (the killed process ends the read below), never by an exception
    # raised in this thread: one landing just after Popen would leave the process running.
    job.interrupt_thread = False
    command = job.data.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("a shell job needs data.command (a non-empty string)")
    cwd = Path(str(job.data.get("cwd") or job.sandbox))
    output_file = job.sandbox / "outputs.env"
    output_file.parent.mkdir(parents=True, exist_ok=True)
    output_file.touch()
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (job.data.get("env") or {}).items()})
    meta = FlowsMeta.from_data(job.job.data)  # the job's own data: job.data is resolved
    if meta is not None and meta.secrets:
        env.update(secrets.resolve(meta.secrets))  # in the environment only, never in data
    env.update(FLOWS_JID=job.jid, FLOWS_SANDBOX=str(job.sandbox), FLOWS_OUTPUT=str(output_file))
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    job.on_stop(lambda: _kill_group(process))
    order = itertools.count()  # next() is atomic under the GIL: one sequence for both readers
    out_tail: Tail = deque(maxlen=OUTPUT_TAIL_LINES)
    err_tail: Tail = deque(maxlen=OUTPUT_TAIL_LINES)
    assert process.stdout is not None and process.stderr is not None
    errors = threading.Thread(
        target=_read_lines, args=(process.stderr, "stderr", job, err_tail, order), daemon=True
    )
    errors.start()
    _read_lines(process.stdout, "stdout", job, out_tail, order)
    errors.join()
    code = process.wait()
    if code != 0:  # when the worker stopped the job, it reports lost or timeout instead
        raise ShellError(code, output_tail(out_tail, err_tail))
    return parse_output_file(output_file.read_text())
