"""Built-in job functions.

``flows.runtime.tasks.shell`` runs a flow's ``run:`` step: data ``{"command": str, "cwd": str |
None, "env": {str: str}}``. The command runs under ``/bin/sh`` in its own process group (so stopping
the job kills everything it started), in ``cwd`` (default: the job's sandbox), with the
environment plus ``env``, ``FLOWS_JID``, ``FLOWS_SANDBOX`` and ``FLOWS_OUTPUT``: a file where the
step may write ``key=value`` lines, which become its outputs (the job's result;
:func:`flows.flowfile.job_data.parse_output_file` reads them). Exit code 0 completes the job; any
other code N fails it in group ``exit-code-N`` (after its retries), its message the exit code and
the last lines the command wrote, in order. A command that can never start fails at once, in
one line, not retried: ``bad-command`` for a NUL character in the command, ``bad-value`` for one
in the working directory or a variable (or a variable of an arithmetic expansion that holds no
integer), ``bad-cwd`` for a working directory that is missing or
may not be entered (:func:`_unrunnable`). Outputs that cannot be read fail it the same way, in
``bad-output`` (:func:`read_output_file`, and a line that is not ``key=value``).

The command's stdout and stderr are one pipe, as a terminal shows them and as CI systems log a
step: every line goes to the job's step log in the order the command wrote it (two pipes read
by two readers have no order between them). The pipe is read in bounded chunks
(:mod:`scheduler.worker.pipes`): a line longer than the engine keeps is stored cut, with the
bytes cut counted, so the worker's memory does not follow the longest line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
from collections import deque
from pathlib import Path
from typing import Any

from flows.flowfile.job_data import (
    NUMBER_ENV_PREFIX,
    FlowsMeta,
    number_problem,
    parse_output_file,
)
from scheduler import secrets
from scheduler.engine import limits
from scheduler.worker import FailJob, JobContext, sessions
from scheduler.worker.outcomes import RetryJob
from scheduler.worker.pipes import read_lines

OUTPUT_TAIL_LINES = 60
MAX_OUTPUT_BYTES = limits.MAX_PAYLOAD_BYTES
"""The largest ``$FLOWS_OUTPUT`` read: its outputs are the job's result, which the engine keeps
to this size."""
KILL_GRACE_SECONDS = 5.0


class ShellError(RetryJob):
    """A shell step exited with a non-zero code: retried as any failure (group ``exit-code-N``),
    its message the code and the tail of the output, never a traceback of the worker's."""

    def __init__(self, code: int, tail: str) -> None:
        message = f"command exited with code {code}" + (f"\n{tail}" if tail else "")
        super().__init__(message, group=f"exit-code-{code}")
        self.code = code


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the command: SIGTERM to its process group, SIGKILL if its shell is still there after
    :data:`KILL_GRACE_SECONDS`."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill_group_now(process: subprocess.Popen[bytes]) -> None:
    """Stop the command now (the job is stopped with no grace): SIGKILL to its process group."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _unrunnable(command: str, cwd: str, env: dict[str, str]) -> FailJob | None:
    """Why the command can never start, the same way on every attempt, as a failure; None when
    it can. A NUL character cannot be carried by a command line, a path or a variable (`flows
    validate` reports one written in the flow file: this one came with a job put by hand or
    with a value of the run), nor can a variable's name hold ``=``."""
    if "\0" in command:
        return FailJob(
            "bad-command", "the command contains a NUL character, which no shell can run"
        )
    if "\0" in cwd:
        return FailJob(
            "bad-value", "the working directory contains a NUL character, which no path can hold"
        )
    if not os.path.isdir(cwd):  # a chdir refused would otherwise be a traceback, retried
        return FailJob("bad-cwd", f"the working directory {cwd} does not exist or is no folder")
    if not os.access(cwd, os.X_OK):
        return FailJob("bad-cwd", f"the working directory {cwd} may not be entered by this worker")
    for name, value in env.items():
        if "\0" in name or "=" in name:
            return FailJob("bad-value", f"{name!r} cannot name a variable: it holds NUL or '='")
        if "\0" in value:
            return FailJob("bad-value", f"${name} holds a NUL character: no variable can carry one")
    return None


def _not_numbers(env: dict[str, str]) -> FailJob | None:
    """A value that stands in an arithmetic expansion and is no integer, as a failure: the
    shell would evaluate it there (bash runs the command of ``a[$(cmd)]``)."""
    for name, value in env.items():
        if name.startswith(NUMBER_ENV_PREFIX):
            problem = number_problem(name, value)
            if problem is not None:
                return FailJob("bad-value", problem)
    return None


def output_tail(lines: deque[str]) -> str:
    """The last lines the command wrote, in order."""
    return "\n".join(lines)


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
    given = {str(k): str(v) for k, v in (job.data.get("env") or {}).items()}
    env.update(given)
    meta = FlowsMeta.from_data(job.job.data)  # the job's own data: job.data is resolved
    if meta is not None and meta.secrets:
        env.update(secrets.resolve(meta.secrets))  # in the environment only, never in data
    env.update(FLOWS_JID=job.jid, FLOWS_SANDBOX=str(job.sandbox), FLOWS_OUTPUT=str(output_file))
    unrunnable = _unrunnable(command, str(cwd), env) or _not_numbers(given)
    if unrunnable is not None:  # the same on every attempt: failed, not retried
        raise unrunnable
    with sessions.starting():  # a worker ending at once waits to kill it too
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one pipe: the lines stay in the order they were written
            start_new_session=True,
        )
        sessions.started(process.pid)  # killed with the worker if it ends at once
    try:
        job.on_kill(lambda: _kill_group_now(process))
        job.on_stop(lambda: _kill_group(process))
        tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        assert process.stdout is not None
        with process.stdout:  # closed even when the job is stopped (no leaked pipe)
            for line in read_lines(process.stdout.fileno()):
                # A line cut through a secret ends with its start: masked here, as in the log.
                tail.append(secrets.masked_cut(line.text) if line.cut else line.text)
                job.log_line(line.text, "stdout", cut=line.cut)
        code = process.wait()
    finally:
        if process.poll() is None:  # left by an error here: it must not run on unseen
            _kill_group(process)
        sessions.ended(process.pid)  # reaped: its pid may be another's from now on
    if code != 0:  # when the worker stopped the job, it reports lost or timeout instead
        raise ShellError(code, output_tail(tail))
    try:
        return parse_output_file(read_output_file(output_file))
    except ValueError as error:  # a line that is not key=value, say
        raise FailJob("bad-output", f"$FLOWS_OUTPUT {error}") from None


def read_output_file(path: Path) -> str:
    """The text of ``$FLOWS_OUTPUT`` once the command ended ("" when it removed it). Raises
    :class:`FailJob` (``bad-output``) for a file that is not UTF-8 text, is larger than a job's
    result may be, or is no longer a regular file (``/dev/zero`` or a named pipe would be read
    for ever): the worker reads at most :data:`MAX_OUTPUT_BYTES`, whatever is there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a named pipe's writer is not awaited
    except FileNotFoundError:
        return ""
    except OSError as error:  # one it may not read
        raise FailJob("bad-output", f"$FLOWS_OUTPUT cannot be read: {error.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise FailJob("bad-output", "$FLOWS_OUTPUT is no longer a regular file")
        if status.st_size > MAX_OUTPUT_BYTES:
            raise FailJob(
                "bad-output",
                f"$FLOWS_OUTPUT holds {status.st_size} bytes: a step's outputs may hold "
                f"{MAX_OUTPUT_BYTES} at most",
            )
        written = file.read(MAX_OUTPUT_BYTES + 1)
    if len(written) > MAX_OUTPUT_BYTES:  # it grew meanwhile (a process left behind writes on)
        raise FailJob("bad-output", f"$FLOWS_OUTPUT holds more than {MAX_OUTPUT_BYTES} bytes")
    try:
        return written.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FailJob(
            "bad-output", f"$FLOWS_OUTPUT is not UTF-8 text (byte {error.start} of the file)"
        ) from None
