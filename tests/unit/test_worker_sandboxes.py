"""Worker sandboxes: a worker's own folder is locked while it lives; the folders of dead workers
are removed by the next worker's sweep, whatever killed them (scheduler/worker/sandboxes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from scheduler.worker.sandboxes import OWNER_FILE, PREFIX, Sandbox, sweep

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
