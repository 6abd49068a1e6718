"""Several namespaces in one ``flows worker`` or ``flows scheduler``: a child process for each.

Each child is the same command with one namespace (``$FLOWS_NAMESPACE``), so a namespace's
worker or service is exactly the single-namespace one, and the namespaces of a cluster's shards
are served in parallel. The first SIGTERM/SIGINT is passed on (each child finishes what it runs,
however many copies of it reach it), a second one tells them to stop at once; the command exits
0 when every child did.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import click

from scheduler import stop_signals
from scheduler.worker.supervision import terminate_with_parent

CHILD = "import sys; from flows.cli import main; sys.exit(main(prog_name='flows'))"


def namespaces_of(value: str | None) -> list[str]:
    """The namespaces in a comma-separated ``--namespace`` (one, or none, for most commands)."""
    if value is None or "," not in value:
        return [] if value is None else [value]
    names = [name.strip() for name in value.split(",")]
    if any(not name for name in names) or len(set(names)) != len(names):
        raise click.BadParameter(
            f"give distinct, non-empty namespaces separated by commas: {value!r}",
            param_hint="'--namespace'",
        )
    return names


def _without_namespace(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--namespace":
            skip = True
        elif not arg.startswith("--namespace="):
            out.append(arg)
    return out


def run_per_namespace(namespaces: list[str], argv: list[str] | None = None) -> int:
    """Run this command once per namespace, in parallel child processes, until they all end."""
    args = _without_namespace(sys.argv[1:] if argv is None else argv)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *args],
            env={**os.environ, "FLOWS_NAMESPACE": namespace, **stop_signals.child_env()},
            # Own sessions: a terminal's Ctrl-C reaches only this process, which passes it on.
            # Under systemd it reaches them too: they take it as the same request.
            start_new_session=True,
            # This process killed (kill -9 included): each child stops as on SIGTERM.
            preexec_fn=terminate_with_parent(os.getpid()),
        )
        for namespace in namespaces
    ]

    def tell(signum: int) -> None:
        for child in children:
            # Its poll takes its lock only if free (wait() below holds it): safe in a handler.
            if child.poll() is None:
                child.send_signal(signum)

    def first(signum: int) -> None:
        tell(signum)
        # Said once the request is taken: a second signal from now on stops them at once.
        # (Signals do not queue: a second sent before the first was taken is the same one.)
        click.echo(
            f"flows[{os.getpid()}]: {signal.Signals(signum).name}, passed on to the process of"
            " each namespace (again to stop at once)",
            err=True,
        )

    stop_signals.install(first, lambda signum, count: tell(stop_signals.NOW))
    return combined([child.wait() for child in children])


def combined(codes: list[int]) -> int:
    """The exit status of a command whose processes ended with ``codes``: 0 when all did,
    :data:`~scheduler.engine.backoff.EXIT_CONFIG` when one stopped over what no restart mends
    (a supervisor restarting the command would do so for ever), else 1."""
    from scheduler.engine.backoff import EXIT_CONFIG

    if all(code == 0 for code in codes):
        return 0
    return EXIT_CONFIG if EXIT_CONFIG in codes else 1
