"""Whether a host name or address can only be reached from this machine."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) can only be reached from this machine: a
    server bound there needs no token to be read, a login sent there crosses no network."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback"]
