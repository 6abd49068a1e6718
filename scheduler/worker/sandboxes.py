"""A worker's own sandbox folder (``$TMPDIR/flows-worker-*``), the sweep of dead workers' ones,
and each slot's folder in it, emptied between runs (:class:`SlotFolder`).

A worker that stops cleanly removes its folder; one killed (SIGKILL, OOM) or leaving through the
hard exit for a stuck job cannot. So each worker holds an exclusive ``flock`` on a file in its
folder for as long as it lives; the kernel drops the lock with the process, however it ends. A
worker starting up removes every folder of the pattern, owned by its user, whose lock it can take:
its owner is gone. A folder without the file (one being created right now, or made by an older
version) is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("flows.worker")

PREFIX = "flows-worker-"
OWNER_FILE = ".owner"


class Sandbox:
    """A fresh sandbox folder, locked as its owner's until :meth:`remove`."""

    def __init__(self, parent: Path | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        self._fd: int | None = os.open(self.path / OWNER_FILE, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def remove(self) -> None:
        """Remove the folder and let go of its lock (safe to call twice)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


# A folder's inode, modification and change times: any entry made in it, removed, renamed or
# re-permissioned changes them (the change time cannot be set back). They come from the file
# system's coarse clock, so a change within the same tick as the last one may leave them alike:
# a signature is trusted only once the last change is this much older than the time of looking.
Signature = tuple[int, int, int]
TRUSTED_AFTER_NS = 50_000_000


class SlotFolder:
    """One slot's folder: each job starts in it empty (the job's ``sandbox``)."""

    def __init__(self, path: Path, clock: Callable[[], int] = time.time_ns) -> None:
        self.path = path
        self._clock = clock  # wall-clock nanoseconds, as the file system stamps changes
        self._empty_as: Signature | None = None  # the folder's signature when last seen empty
        path.mkdir(parents=True, exist_ok=True)

    @property
    def trusted_empty(self) -> bool:
        """Whether the next :meth:`empty` skips the scan unless the folder changed."""
        return self._empty_as is not None

    def empty(self) -> None:
        """Leave the folder empty for the next job. Most jobs write nothing there: a folder whose
        signature has not changed since it was last emptied is not scanned (one ``stat``, where
        a scan costs about 10 µs per job)."""
        try:
            if _signature(self.path) == self._empty_as:
                return
            with os.scandir(self.path) as entries:
                leftovers = [entry.path for entry in entries]
        except FileNotFoundError:  # the job removed it
            self.path.mkdir(parents=True, exist_ok=True)
            leftovers = []
        for path in leftovers:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        self._empty_as = None
        with contextlib.suppress(OSError):
            signature = _signature(self.path)
            if self._clock() - max(signature[1], signature[2]) > TRUSTED_AFTER_NS:
                self._empty_as = signature


def _signature(path: Path) -> Signature:
    status = os.stat(path)
    return (status.st_ino, status.st_mtime_ns, status.st_ctime_ns)


def sweep(parent: Path | None = None) -> list[Path]:
    """Remove the sandboxes of dead workers under ``parent`` (the temporary directory by
    default); returns the folders removed."""
    root = Path(parent or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = list(root.glob(PREFIX + "*"))
    except OSError:
        return removed
    for folder in candidates:
        if _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.info("removed %d sandbox(es) of dead workers under %s", len(removed), root)
    return removed


def _abandoned(folder: Path) -> bool:
    """Whether ``folder`` is a sandbox of ours whose owner is gone (its lock can be taken)."""
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return False
        fd = os.open(folder / OWNER_FILE, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:  # no owner file: being created, or not one of ours
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its worker is alive
        return False
    finally:
        os.close(fd)
    return True
