"""The command line's part of the audit log (:mod:`flows.access.audit`): a changing command that
succeeded is recorded with who ran it ($FLOWS_USER, else the login name), from which host, and
its arguments (``--redis`` left out: its URL may hold a password). ``flows run`` records its
submission itself (a run that then fails was still started)."""

from __future__ import annotations

import getpass
import logging
import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from flows.access import audit
from scheduler.engine.limits import line_fault

if TYPE_CHECKING:  # every command passes here: one that opens no client imports no redis
    from scheduler.engine.client import Client

log = logging.getLogger(__name__)

# Commands that change something, by their words (a group's command: two words).
AUDITED: Final = frozenset(
    {
        ("approve",), ("backfill",), ("bury",), ("cancel",), ("delete",), ("kick",),
        ("cache", "clear"), ("doctor",),
        ("rerun",), ("retry",), ("signal",), ("unfail",), ("notifications",),
        ("schedule", "pause"), ("schedule", "remove"), ("schedule", "resume"),
        ("schedule", "trigger"), ("sources", "remove"), ("queue", "drop"), ("queue", "truncate"),
        ("queue", "pause"), ("queue", "unpause"),
        ("throttle", "set"), ("throttle", "unset"), ("user", "add"), ("user", "revoke"),
        ("workers",),
    }
)  # fmt: skip
_HIDDEN_OPTIONS: Final = ("--redis",)
RECORDED: Final = "flows.audited"
"""The key of the command's context meta set once the command was recorded."""
_opened: list[Client] = []


def opened(client: Client) -> Client:
    """Remember the client a command opened: its namespace is where the entry goes."""
    _opened[:] = [client]
    return client


def who() -> str:
    """Who runs this command, as the audit log, a signal and a user's ``by`` name them:
    $FLOWS_USER, else the login name ("unknown" for a uid without one, in a container). A
    usage error when $FLOWS_USER is not one line, as the API's ``by`` is refused."""
    import click

    try:
        user = os.environ.get("FLOWS_USER") or getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid
        return "unknown"
    fault = line_fault(user)
    if fault is not None:
        raise click.UsageError(f"$FLOWS_USER (who runs this command) {fault}")
    return user


def check_who(argv: Sequence[str]) -> None:
    """Refuse, before it changes anything, a command to record whose $FLOWS_USER is not one
    line: recorded at its end, it could no longer be refused."""
    if audited(argv) is not None:
        who()


def record(client: Client, action: str, target: str, detail: str = "") -> None:
    try:
        audit.record(
            client,
            who=who(),
            via="cli",
            action=action,
            target=target,
            address=socket.gethostname(),
            detail=detail,
        )
    except Exception as error:  # the change is made: a lost entry is said, not raised
        log.warning("audit: could not record %s: %s", action, error)


def now() -> None:
    """Record the running command now: it changed things and goes on to work a run here, whose
    end (its exit code) says how the run went, not whether the command changed anything
    (``flows retry RUN``, ``flows rerun``). The command is then not recorded again at its end."""
    import click

    context = click.get_current_context(silent=True)
    if context is None or context.meta.get(RECORDED):
        return
    after(context.meta.get("flows.argv", []))
    context.meta[RECORDED] = True


def unchanged() -> None:
    """The running command changed nothing after all (``flows cache clear`` that found nothing
    to clear, ``flows doctor`` that repaired nothing): it is not recorded at its end."""
    import click

    context = click.get_current_context(silent=True)
    if context is not None:
        context.meta[RECORDED] = True


def changed(done: bool) -> None:
    """Record the running command now if it changed something (``done``), else never: for a
    command whose exit code says what it found, not whether it changed anything (``flows
    doctor --repair`` exits 1 when it found problems, however many it repaired)."""
    if done:
        now()
    else:
        unchanged()


def audited(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The words of the command ``argv`` gives (after ``flows``) when it is one to record."""
    words = [w for w in argv if not w.startswith("-")]
    command = next((tuple(words[:n]) for n in (2, 1) if tuple(words[:n]) in AUDITED), None)
    if command == ("notifications",) and "--retry" not in argv:
        return None  # only --retry changes anything
    if command == ("workers",) and not any(w.startswith("--forget") for w in argv):
        return None  # only --forget changes anything
    if "--dry-run" in argv:
        return None  # it said what it would do, and stored nothing
    return command


def after(argv: Sequence[str]) -> None:
    """A command given ``argv`` (after ``flows``) succeeded: record it when it changes things."""
    command = audited(argv)
    if command is None or not _opened:
        return
    shown: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in _HIDDEN_OPTIONS:
            skip = True
            continue
        if word.startswith(tuple(f"{o}=" for o in _HIDDEN_OPTIONS)):
            continue
        shown.append(word)
    rest = shown[len(command) :] if shown[: len(command)] == list(command) else shown
    record(_opened[0], " ".join(command), " ".join(rest))
