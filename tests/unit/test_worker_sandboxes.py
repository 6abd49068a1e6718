"""Worker sandboxes: a worker's own folder is locked while it lives; the folders of dead workers
are removed by the next worker's sweep, whatever killed them (scheduler/worker/sandboxes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scheduler.worker.sandboxes import OWNER_FILE, PREFIX, Sandbox, SlotFolder, sweep

# A process that makes a sandbox under argv[1], prints its path and waits to be killed.
OWNER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from scheduler.worker.sandboxes import Sandbox\n"
    "box = Sandbox(Path(sys.argv[1]))\n"
    "(box.path / 'work.txt').write_text('left behind')\n"
    "print(box.path, flush=True)\n"
    "time.sleep(60)\n"
)


def owned_by_a_killed_process(parent: Path) -> Path:
    with subprocess.Popen(
        [sys.executable, "-c", OWNER, str(parent)], stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        path = Path(process.stdout.readline().strip())
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    return path


def test_the_sandbox_of_a_killed_worker_is_removed(tmp_path: Path) -> None:
    dead = owned_by_a_killed_process(tmp_path)
    assert (dead / "work.txt").exists()
    assert sweep(tmp_path) == [dead]
    assert not dead.exists()


def test_a_live_worker_s_sandbox_is_kept_until_it_removes_it(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    assert box.path.name.startswith(PREFIX)
    assert sweep(tmp_path) == []
    assert box.path.is_dir()
    box.remove()
    box.remove()  # twice is fine
    assert not box.path.exists()


def test_folders_without_an_owner_file_are_left_alone(tmp_path: Path) -> None:
    """One being created right now, or made by an older worker: it cannot tell."""
    young = tmp_path / f"{PREFIX}abc"
    young.mkdir()
    other = tmp_path / "flows-other"
    other.mkdir()
    (other / OWNER_FILE).write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / f"{PREFIX}link"  # a link to a dead worker's sandbox: not followed
    linked.symlink_to(owned_by_a_killed_process(elsewhere))
    assert sweep(tmp_path) == []
    assert young.is_dir() and other.is_dir() and linked.is_symlink()


# Slot folders: every job starts in an empty one, whether or not its emptying scanned it.

HOUR_NS = 3600 * 10**9


def later(folder: Path) -> SlotFolder:
    """A slot folder whose clock runs an hour ahead: every change is old enough to trust."""
    return SlotFolder(folder, clock=lambda: time.time_ns() + HOUR_NS)


def tick_past(folder: Path) -> None:
    """Wait until the file system's clock has moved past the folder's last change, so that a
    change now gives it other times (coarse clocks tick every few ms; fine ones at once)."""
    marker = folder.parent / "clock"
    status = os.stat(folder)
    last = max(status.st_mtime_ns, status.st_ctime_ns)
    marker.touch()
    while os.stat(marker).st_mtime_ns <= last:
        os.utime(marker)


def litter(folder: Path) -> None:
    (folder / "out.txt").write_text("x")
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "deeper" / "f").write_text("y")
    os.symlink("/", folder / "link")


def test_what_a_job_leaves_in_its_folder_is_removed(tmp_path: Path) -> None:
    folder = later(tmp_path / "slot-1")
    folder.empty()  # nothing to remove: the folder is trusted empty from now on
    assert folder.trusted_empty
    tick_past(folder.path)
    litter(folder.path)
    folder.empty()
    assert list(folder.path.iterdir()) == []
    folder.empty()
    assert list(folder.path.iterdir()) == []


def test_a_change_within_the_same_clock_tick_is_still_found(tmp_path: Path) -> None:
    """A folder that changed just now is not trusted: a file made in the same tick of the file
    system's clock leaves its times alike, and must be found by a scan."""
    folder = SlotFolder(tmp_path / "slot-1", clock=time.time_ns)  # made a moment ago
    folder.empty()
    assert not folder.trusted_empty  # so the next empty() scans
    (folder.path / "out.txt").write_text("x")
    folder.empty()
    assert list(folder.path.iterdir()) == []


def test_a_folder_the_job_removed_or_replaced_is_made_again_empty(tmp_path: Path) -> None:
    folder = later(tmp_path / "slot-1")
    folder.empty()
    folder.path.rmdir()
    folder.empty()
    assert folder.path.is_dir() and list(folder.path.iterdir()) == []
    folder.path.rmdir()
    folder.path.mkdir()
    tick_past(folder.path)
    litter(folder.path)
    folder.empty()
    assert list(folder.path.iterdir()) == []
