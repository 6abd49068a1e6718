"""Network namespaces joined by a bridge, made and removed by the partition tests (as root).

Every namespace, device and address lives inside namespaces this module creates: the bridge has
its own namespace, each node one more joined to it by a veth pair, and the node's address is a
private one (10.77.0.0/24) on its side of the pair only. Nothing is added to the host's own
namespace, so no address outside the test can be reached or disturbed.

A partition is Jepsen's: packets between two nodes are dropped silently (no RST, no error on
either side), by a static neighbour entry that sends them to an unused MAC address, which the
bridge floods and every receiver drops. Healing removes the entries.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.77.0"
# A locally administered address no veth in the test has: frames sent to it go nowhere.
BLACKHOLE_MAC = "02:00:00:00:de:ad"


def unavailable() -> str | None:
    """Why the partition tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"flows-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns is not available: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Network:
    """Nodes (by name) on one bridge; ``with Network(...) as net:`` removes everything after."""

    names: Sequence[str]
    tag: str = field(default_factory=lambda: f"fl{os.getpid() % 100000}")
    made: list[str] = field(default_factory=list)
    cut: list[tuple[str, str]] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def ns(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return f"{SUBNET}.{list(self.names).index(name) + 1}"

    def __enter__(self) -> Network:
        try:
            bridge = self.ns("br")
            ip("netns", "add", bridge)
            self.made.append(bridge)
            ip("-n", bridge, "link", "add", "br0", "type", "bridge")
            ip("-n", bridge, "link", "set", "br0", "up")
            for index, name in enumerate(self.names, start=1):
                node = self.ns(name)
                ip("netns", "add", node)
                self.made.append(node)
                port = f"v{index}"
                ip("-n", bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                   "netns", node)  # fmt: skip
                ip("-n", bridge, "link", "set", port, "master", "br0", "up")
                ip("-n", node, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
                ip("-n", node, "link", "set", "eth0", "up")
                ip("-n", node, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.made.clear()

    def run(self, name: str, command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        """Start ``command`` inside node ``name``'s namespace, its output to ``log``."""
        with log.open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(name), *command],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.processes.append(process)
        return process

    def partition(self, isolated: str, others: Sequence[str]) -> None:
        """Drop every packet between ``isolated`` and each of ``others``, silently, both ways."""
        for other in others:
            for here, there in ((isolated, other), (other, isolated)):
                ip("-n", self.ns(here), "neigh", "replace", self.address(there), "lladdr",
                   BLACKHOLE_MAC, "nud", "permanent", "dev", "eth0")  # fmt: skip
                self.cut.append((here, there))

    def heal(self) -> None:
        for here, there in self.cut:
            subprocess.run(
                ["ip", "-n", self.ns(here), "neigh", "del", self.address(there), "dev", "eth0"],
                capture_output=True,
            )
        self.cut.clear()
