"""What the deliverers know of one outbox entry, channel by channel. Pure.

An entry concerns some rules of its run (by index in the run's ``notify`` list); each is one
channel, and each is followed on its own: whether it was delivered, how many attempts it took,
when it is due again and its last error, and which deliverers could not send it at all (a
secret they cannot resolve, a channel they do not have), since when none that took the entry
could, and whether it was given up. Stored as JSON in ``P notify:tries`` (entry id →
``{"channels": {index: {...}}, "released": bool}``); a state written before channels were
followed (``{attempts, due, done, errors}``) is read as its channels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

DELIVERED: Final = "delivered"
PENDING: Final = "pending"
RETRYING: Final = "retrying"
LEFT: Final = "left"
"""A channel no deliverer that took the entry could send (it lacks a secret or the channel):
left in the outbox for one that can."""
FAILED: Final = "failed"
"""Given up: its attempts ran out, or no deliverer could send it in time."""


@dataclass
class Channel:
    """One rule's channel for one entry. ``unable``: deliverer → (why it cannot send it, when it
    last found so); ``stranded``: since when no deliverer that took the entry could (None: one
    could, or none looked yet); ``given_up``: its last attempt was its last, or no deliverer
    could send it in time (``error`` says why): it is not tried again."""

    delivered: bool = False
    given_up: bool = False
    attempts: int = 0
    due: float = 0.0
    error: str = ""
    unable: dict[str, tuple[str, float]] = field(default_factory=dict)
    stranded: float | None = None

    def status(self) -> str:
        """``delivered``; ``failed`` once given up; ``retrying`` once tried (by a deliverer that
        could); ``left`` when no deliverer that took the entry could try it yet; else
        ``pending``."""
        if self.delivered:
            return DELIVERED
        if self.given_up:
            return FAILED
        if self.attempts:
            return RETRYING
        return LEFT if self.unable else PENDING

    def last_error(self) -> str:
        """The last attempt's error (or why it was given up); of a channel never tried, who could
        not try it and why."""
        if self.delivered:
            return ""
        return self.error if self.attempts or self.given_up else self.unable_reason()

    def unable_reason(self, limit: int = 5) -> str:
        """``host:src: secret X not found ...; ...``: who could not send it, and why."""
        shown = sorted(self.unable.items(), key=lambda item: item[1][1])[-limit:]
        return "; ".join(f"{who}: {why}" for who, (why, _) in shown)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"attempts": self.attempts}
        if self.delivered:
            out["delivered"] = True
        if self.given_up:
            out["given_up"] = True
        if self.due:
            out["due"] = self.due
        if self.error:
            out["error"] = self.error
        if self.unable:
            out["unable"] = {who: [why, at] for who, (why, at) in self.unable.items()}
        if self.stranded is not None:
            out["stranded"] = self.stranded
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Channel:
        unable: dict[str, tuple[str, float]] = {}
        for who, pair in (raw.get("unable") or {}).items():
            try:
                unable[str(who)] = (str(pair[0]), float(pair[1]))
            except (TypeError, ValueError, IndexError):
                continue
        stranded = raw.get("stranded")
        return cls(
            delivered=bool(raw.get("delivered")),
            given_up=bool(raw.get("given_up")),
            attempts=int(raw.get("attempts") or 0),
            due=float(raw.get("due") or 0),
            error=str(raw.get("error") or ""),
            unable=unable,
            stranded=float(stranded) if isinstance(stranded, int | float) else None,
        )


@dataclass
class Tries:
    """An entry's channels by rule index; ``released``: its last holder left it in the group
    for another deliverer (it could not send some channel)."""

    channels: dict[int, Channel] = field(default_factory=dict)
    released: bool = False

    def channel(self, index: int) -> Channel:
        return self.channels.setdefault(index, Channel())

    @property
    def attempts(self) -> int:
        """The most attempts any channel took (what listings show for the entry)."""
        return max((c.attempts for c in self.channels.values()), default=0)

    def next_due(self) -> float | None:
        """When the next attempt of a channel neither delivered nor given up is due (None: none
        is waiting)."""
        dues = [
            c.due
            for c in self.channels.values()
            if not c.delivered and not c.given_up and c.attempts
        ]
        return min(dues) if dues else None

    def errors(self) -> dict[str, str]:
        """Rule index → last error, for the channels not delivered."""
        out = {}
        for index, channel in sorted(self.channels.items()):
            if channel.last_error():
                out[str(index)] = channel.last_error()
        return out

    def dumps(self) -> str:
        channels = {str(i): c.to_json() for i, c in sorted(self.channels.items())}
        state: dict[str, Any] = {"channels": channels}
        if self.released:
            state["released"] = True
        due = self.next_due()
        if due is not None:
            state["due"] = due  # the listings' and an older reader's "next try"
        return json.dumps(state, separators=(",", ":"))

    @classmethod
    def loads(cls, raw: str | bytes | None) -> Tries:
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            state = {}
        if not isinstance(state, dict):
            return cls()
        if "channels" not in state:
            return cls._legacy(state)
        channels = {}
        for index, value in (state.get("channels") or {}).items():
            if isinstance(value, Mapping) and str(index).isdigit():
                channels[int(index)] = Channel.from_json(value)
        return cls(channels, released=bool(state.get("released")))

    @classmethod
    def _legacy(cls, state: Mapping[str, Any]) -> Tries:
        """``{attempts, due, done, errors}``: the delivered rules, and the others' last error
        with the entry's attempts and due time."""
        tries = cls()
        for index in state.get("done") or ():
            tries.channel(int(index)).delivered = True
        for index, error in (state.get("errors") or {}).items():
            if str(index).isdigit():
                channel = tries.channel(int(index))
                channel.attempts = int(state.get("attempts") or 0)
                channel.due = float(state.get("due") or 0)
                channel.error = str(error)
        return tries
